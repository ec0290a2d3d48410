/* The parameter table, initialization, and the reference model's backward
 * checked by central finite differences in double precision, per variant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mixer/hyena_mixer.h"
#include "mixer/mamba2_mixer.h"
#include "model/model.h"
#include "model/params.h"
#include "model/rng.h"
#include "ref/ref_model.h"

#define PI 3.14159265358979323846

static tmm_model_config tiny(uint32_t heads, uint32_t kernel, bool expanded, bool frozen)
{
    tmm_model_config c = { .vocab = 7, .d_model = 6, .n_ctx = 5, .n_layers = 2, .heads = heads,
                           .expansion = 2, .kernel = kernel, .expanded = expanded, .frozen = frozen, .seed = 42 };
    return c;
}

static tmm_model_config tiny_arch(tmm_arch arch, uint32_t heads, uint32_t window)
{
    tmm_model_config c = tiny(heads, 1, false, false);
    c.arch = arch;
    c.window = window;
    return c;
}

Test(params, baseline_table_names_shapes_and_count)
{
    tmm_model_config c = tiny_arch(TMM_ARCH_TRANSFORMER, 3, 0);
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    const char *present[] = { "embed.weight", "blocks.0.attn_norm.weight", "blocks.0.attn.q.weight",
                              "blocks.1.attn.o.weight", "blocks.1.mlp_norm.weight", "blocks.1.mlp.gate_up.weight",
                              "blocks.1.mlp.down.weight", "final_norm.weight", "lm_head.weight" };
    for (size_t i = 0; i < sizeof present / sizeof present[0]; i++)
        cr_assert_geq(tmm_param_find(&t, present[i]), 0, "%s is missing", present[i]);
    cr_assert_eq(tmm_param_find(&t, "blocks.0.attn_norm.bias"), -1, "RMSNorm has no bias");
    const tmm_param *gu = &t.params[tmm_param_find(&t, "blocks.0.mlp.gate_up.weight")];
    cr_assert(gu->shape[0] == 24 && gu->shape[1] == 6, "gate and up stacked: [2e, d]");
    /* 2Vd + final norm d + per block: 2d (norms) + 4d² (attention) + 2ed + ed (MLP) */
    uint64_t d = 6, e = 12, V = 7;
    cr_assert_eq(tmm_model_param_count(&c), 2 * V * d + d + 2 * (2 * d + 4 * d * d + 3 * e * d));
    tmm_param_table_free(&t);

    c.heads = 0;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "heads"), "%s", tmm_last_error());
    tmm_model_config_resolve(&c);
    cr_assert_eq(c.heads, 1, "d 6: one head");
    c = tiny_arch(TMM_ARCH_SWA, 2, 0);
    tmm_model_config_resolve(&c);
    cr_assert_eq(c.window, 128, "swa's default window");
    c = tiny_arch(TMM_ARCH_TRANSFORMER, 2, 4);
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "a window is swa's");
    c = tiny_arch(TMM_ARCH_TRANSFORMER, 6, 0);
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "odd head width 1");
    c = tiny_arch(TMM_ARCH_TRANSFORMER, 3, 0);
    c.kernel = 2;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "kernel is a TMM variant");
}

/* Hyena: LayerNorm halves (mixer first), the GELU MLP with biases, no final
 * norm; the mixer's 17 tensors. */
static tmm_model_config tiny_hyena(uint32_t n)
{
    tmm_model_config c = { .arch = TMM_ARCH_HYENA, .vocab = 7, .d_model = 6, .n_ctx = n, .n_layers = 2,
                           .expansion = 2, .kernel = 1, .seed = 42 };
    return c;
}

/* Mamba 2 at d 8: d_inner 16, nh 2 heads of P 8, state N 3 */
static tmm_model_config tiny_mamba2(uint32_t heads, uint32_t state)
{
    tmm_model_config c = { .arch = TMM_ARCH_MAMBA2, .vocab = 7, .d_model = 8, .n_ctx = 5, .n_layers = 2,
                           .heads = heads, .state = state, .expansion = 2, .kernel = 1, .seed = 42 };
    return c;
}

static void assert_shape(const tmm_param_table *t, const char *name, uint32_t ndim, uint32_t s0, uint32_t s1)
{
    int i = tmm_param_find(t, name);
    cr_assert_geq(i, 0, "%s is missing", name);
    const tmm_param *p = &t->params[i];
    cr_assert(p->ndim == ndim && p->shape[0] == s0 && (ndim < 2 || p->shape[1] == s1), "%s: [%u, %u], want [%u, %u]",
              name, p->shape[0], ndim > 1 ? p->shape[1] : 0, s0, s1);
    cr_assert(p->trainable, "%s trains", name);
}

Test(params, hyena_table_names_shapes_and_count)
{
    tmm_model_config c = tiny_hyena(5);
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    const uint64_t d = 6, e = 12, V = 7, O = 64;
    const struct { const char *name; uint32_t ndim, s0, s1; } want[] = {
        { "embed.weight", 2, 7, 6 },
        { "blocks.0.ln1.weight", 1, 6, 0 },                 { "blocks.0.ln1.bias", 1, 6, 0 },
        { "blocks.0.hyena.in_proj.weight", 2, 18, 6 },      { "blocks.0.hyena.in_proj.bias", 1, 18, 0 },
        { "blocks.0.hyena.short_conv.weight", 2, 18, 3 },   { "blocks.0.hyena.short_conv.bias", 1, 18, 0 },
        { "blocks.0.hyena.filter.fc1.weight", 2, 64, 3 },   { "blocks.0.hyena.filter.fc1.bias", 1, 64, 0 },
        { "blocks.0.hyena.filter.omega1", 1, 64, 0 },       { "blocks.0.hyena.filter.fc2.weight", 2, 64, 64 },
        { "blocks.0.hyena.filter.fc2.bias", 1, 64, 0 },     { "blocks.0.hyena.filter.omega2", 1, 64, 0 },
        { "blocks.0.hyena.filter.fc3.weight", 2, 64, 64 },  { "blocks.0.hyena.filter.fc3.bias", 1, 64, 0 },
        { "blocks.0.hyena.filter.omega3", 1, 64, 0 },       { "blocks.1.hyena.filter.fc4.weight", 2, 6, 64 },
        { "blocks.1.hyena.D", 1, 6, 0 },                    { "blocks.1.hyena.out_proj.weight", 2, 6, 6 },
        { "blocks.1.hyena.out_proj.bias", 1, 6, 0 },        { "blocks.1.ln2.weight", 1, 6, 0 },
        { "blocks.1.ln2.bias", 1, 6, 0 },                   { "blocks.1.mlp.fc1.weight", 2, 12, 6 },
        { "blocks.1.mlp.fc1.bias", 1, 12, 0 },              { "blocks.1.mlp.fc2.weight", 2, 6, 12 },
        { "blocks.1.mlp.fc2.bias", 1, 6, 0 },               { "lm_head.weight", 2, 7, 6 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_shape(&t, want[i].name, want[i].ndim, want[i].s0, want[i].s1);
    cr_assert_eq(t.final_norm_w, -1, "no final norm");
    cr_assert_eq(tmm_param_find(&t, "final_norm.weight"), -1);
    /* the mixer's half first: its norm and tensors come before the MLP's */
    cr_assert_lt(t.blocks[0].mix[TMM_HY_OUT_B], t.blocks[0].mlp_norm_w);
    cr_assert_eq(t.blocks[0].mix[TMM_HY_IN_W], tmm_param_find(&t, "blocks.0.hyena.in_proj.weight"));
    cr_assert_eq(t.blocks[0].mix[TMM_HY_D], tmm_param_find(&t, "blocks.0.hyena.D"));
    cr_assert_eq(t.count, 2 + 2 * (4 + 4 + TMM_HY_COUNT));
    /* 2Vd + per block: 4d (two LayerNorms) + 2ed + e + d (MLP) + mixer */
    uint64_t mixer = 3 * d * d + 3 * d + 3 * d * 3 + 3 * d + (O * 3 + 2 * O) + 2 * (O * O + 2 * O) + d * O + d +
                     d * d + d;
    cr_assert_eq(tmm_model_param_count(&c), 2 * V * d + 2 * (4 * d + 2 * e * d + e + d + mixer));
    tmm_param_table_free(&t);

    /* the frame's rules for hyena */
    tmm_model_config_resolve(&c);
    cr_assert_eq(c.heads, 0, "hyena has no heads to resolve");
    cr_assert_eq(c.state, 0);
    c.heads = 4; /* a preset's heads: resolving drops them */
    tmm_model_config_resolve(&c);
    cr_assert_eq(c.heads, 0);
    c.heads = 2; /* unresolved: refused */
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "hyena has no heads"), "%s", tmm_last_error());
    c = tiny_hyena(5);
    c.state = 64;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "state"), "%s", tmm_last_error());
    c = tiny_hyena(5);
    c.kernel = 3;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "kernel is a TMM variant");
}

Test(params, mamba2_table_names_shapes_and_count)
{
    tmm_model_config c = tiny_mamba2(2, 3);
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    const uint64_t d = 8, V = 7, di = 16, nh = 2, N = 3, conv = di + 2 * N, in = 2 * di + 2 * N + nh;
    const struct { const char *name; uint32_t ndim, s0, s1; } want[] = {
        { "embed.weight", 2, 7, 8 },                     { "blocks.0.norm.weight", 1, 8, 0 },
        { "blocks.0.mamba.in_proj.weight", 2, 40, 8 },   { "blocks.0.mamba.conv1d.weight", 2, 22, 4 },
        { "blocks.0.mamba.conv1d.bias", 1, 22, 0 },      { "blocks.0.mamba.dt_bias", 1, 2, 0 },
        { "blocks.0.mamba.A_log", 1, 2, 0 },             { "blocks.0.mamba.D", 1, 2, 0 },
        { "blocks.1.mamba.norm.weight", 1, 16, 0 },      { "blocks.1.mamba.out_proj.weight", 2, 8, 16 },
        { "final_norm.weight", 1, 8, 0 },                { "lm_head.weight", 2, 7, 8 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_shape(&t, want[i].name, want[i].ndim, want[i].s0, want[i].s1);
    for (uint32_t l = 0; l < 2; l++) {
        const tmm_block_params *b = &t.blocks[l];
        cr_assert(b->mlp_norm_w == -1 && b->mlp_norm_b == -1 && b->mlp_in_w == -1 && b->mlp_in_b == -1 &&
                      b->mlp_out_w == -1 && b->mlp_out_b == -1, "no MLP");
        cr_assert_eq(b->mix_norm_b, -1, "RMSNorm has no bias");
    }
    cr_assert_eq(tmm_param_find(&t, "blocks.0.mlp.fc1.weight"), -1);
    cr_assert_eq(tmm_param_find(&t, "blocks.0.mlp_norm.weight"), -1);
    cr_assert_eq(t.count, 3 + 2 * (1 + TMM_M2_COUNT));
    cr_assert_eq(t.blocks[1].mix[TMM_M2_A_LOG], tmm_param_find(&t, "blocks.1.mamba.A_log"));
    /* 2Vd + d (final norm) + per block: d (norm) + mixer; the expansion is not used */
    uint64_t block = d + in * d + conv * 4 + conv + 3 * nh + di + d * di;
    cr_assert_eq(tmm_model_param_count(&c), 2 * V * d + d + 2 * block);
    c.expansion = 7;
    cr_assert_eq(tmm_model_param_count(&c), 2 * V * d + d + 2 * block);
    tmm_mamba2_dims m = tmm_mamba2_dims_of(&c);
    cr_assert(m.di == 16 && m.P == 8 && m.heads == 2 && m.N == 3 && m.conv == 22 && m.in == 40);
    tmm_param_table_free(&t);

    /* heads and state resolve to the architecture's defaults */
    c = tiny_mamba2(0, 0);
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "heads 0");
    cr_assert(strstr(tmm_last_error(), "heads"), "%s", tmm_last_error());
    c.heads = 2;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "state 0");
    cr_assert(strstr(tmm_last_error(), "state"), "%s", tmm_last_error());
    c = tiny_mamba2(0, 0);
    tmm_model_config_resolve(&c);
    cr_assert(c.heads == 1 && c.state == 64, "d 8: d_inner 16, one head of 16; N 64 (got %u, %u)", c.heads, c.state);
    c = tiny_mamba2(0, 0);
    c.d_model = 96;
    tmm_model_config_resolve(&c);
    cr_assert_eq(c.heads, 3, "d_inner 192: three heads of 64");
    c = tiny_mamba2(0, 5);
    c.d_model = 64;
    tmm_model_config_resolve(&c);
    cr_assert(c.heads == 2 && c.state == 5, "d_inner 128: two heads of 64; a given state stays");
    /* heads divide the inner width 2d, not d */
    c = tiny_mamba2(16, 3);
    H_OK(tmm_param_table_build(&c, &t));
    cr_assert_eq(tmm_mamba2_dims_of(&c).P, 1);
    tmm_param_table_free(&t);
    c = tiny_mamba2(3, 3);
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "multiple of heads"), "%s", tmm_last_error());
    c = tiny_mamba2(2, TMM_MAX_STATE + 1);
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "state too large");
    c = tiny_mamba2(2, 3);
    c.window = 4;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT, "a window is swa's");
    /* the state is mamba2's alone */
    c = tiny_arch(TMM_ARCH_TRANSFORMER, 3, 0);
    c.state = 3;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "state"), "%s", tmm_last_error());
    c = tiny(0, 1, false, false);
    c.state = 3;
    cr_assert_eq(tmm_param_table_build(&c, &t), TMM_ERR_INVALID_ARGUMENT);
}

Test(params, new_archs_have_names_and_device_plans)
{
    cr_assert_str_eq(tmm_arch_name(TMM_ARCH_HYENA), "hyena");
    cr_assert_str_eq(tmm_arch_name(TMM_ARCH_MAMBA2), "mamba2");
    cr_assert_null(tmm_arch_name((tmm_arch)TMM_ARCH_COUNT));
    /* the device frame plans each model through its mixer */
    tmm_model_memory mem;
    tmm_model_config c = tiny_hyena(5);
    cr_assert_eq(tmm_model_memory_plan(NULL, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_DIRECT }, &mem), TMM_OK, "%s", tmm_last_error());
    cr_assert_gt(mem.activations, 0);
    c = tiny_mamba2(2, 3);
    cr_assert_eq(tmm_model_memory_plan(NULL, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_DIRECT }, &mem), TMM_OK, "%s", tmm_last_error());
    cr_assert_gt(mem.activations, 0);
}

/* Hyena's fixed features and window (hyena_mixer.h), at a few points */
Test(params, hyena_fixed_features_and_window)
{
    double z[3];
    tmm_hyena_features(5, 4, z);
    cr_assert_float_eq(z[0], 1.0, 1e-15, "tt runs 0 .. 1");
    cr_assert_float_eq(z[1], cos(2 * PI * 1e-4 * 4 / 5), 1e-15);
    cr_assert_float_eq(z[2], -sin(2 * PI * 1e-4 * 4 / 5), 1e-15);
    tmm_hyena_features(1, 0, z);
    cr_assert(z[0] == 0.0 && z[1] == 1.0 && z[2] == 0.0, "n = 1: one position at tt 0");
    cr_assert_eq(tmm_hyena_decay(9, 4, 0, 3), 1.0, "no decay at t = 0");
    cr_assert_float_eq(tmm_hyena_decay(9, 4, 8, 0), exp(log(0.01) / 1.5), 1e-15, "the slowest channel");
    cr_assert_float_eq(tmm_hyena_decay(9, 4, 8, 3), exp(log(0.01) / 0.3), 1e-15, "the fastest channel");
    cr_assert_float_eq(tmm_hyena_decay(9, 1, 8, 0), exp(log(0.01) / 1.5), 1e-15, "d = 1: the first delta");
}

Test(params, table_names_shapes_and_count)
{
    tmm_model_config c = tiny(2, 3, true, false);
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    int w = tmm_param_find(&t, "blocks.1.mix.w");
    cr_assert_geq(w, 0);
    cr_assert_eq(t.params[w].ndim, 3);
    cr_assert(t.params[w].shape[0] == 2 && t.params[w].shape[1] == 3 && t.params[w].shape[2] == 5);
    cr_assert_geq(tmm_param_find(&t, "blocks.0.mix.in.weight"), 0);
    cr_assert_geq(tmm_param_find(&t, "blocks.0.mix.beta2"), 0);
    cr_assert_geq(tmm_param_find(&t, "lm_head.weight"), 0);
    cr_assert_eq(tmm_param_find(&t, "blocks.2.ln1.weight"), -1);
    /* V*d (embed) + V*d (head) + per block: 4d (norms) + 2*e*d + e + d (MLP)
     * + d*d + d (in) + d*d + d (out) + 2*(G*k*n + G*n) (mix, expanded) */
    uint64_t d = 6, e = 12, V = 7, G = 2, k = 3, n = 5;
    uint64_t block = 4 * d + 2 * e * d + e + d + 2 * (d * d + d) + 2 * (G * k * n + G * n);
    cr_assert_eq(tmm_model_param_count(&c), 2 * V * d + 2 * block);
    for (uint32_t i = 0; i < t.count; i++)
        cr_assert_eq(t.params[i].offset % TMM_PARAM_ALIGN, 0, "%s is not aligned", t.params[i].name);
    tmm_param_table_free(&t);

    tmm_model_config bad = tiny(4, 1, false, false); /* 6 is not a multiple of 4 */
    cr_assert_eq(tmm_param_table_build(&bad, &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "multiple of heads"), "%s", tmm_last_error());
}

/* The mean and std of an initializer's values (of ln softplus(x) for dt_bias). */
static void init_moments(const tmm_param *p, double *mean, double *std)
{
    const double l16 = log(16.0), lo = log(1e-3), hi = log(1e-1);
    *mean = *std = NAN;
    switch (p->init) {
    case TMM_INIT_ZERO: *mean = 0, *std = 0; return;
    case TMM_INIT_ONE: *mean = 1, *std = 0; return;
    case TMM_INIT_NORMAL: *mean = 0, *std = 1; return;
    case TMM_INIT_KAIMING: *mean = 0, *std = sqrt(2.0 / p->fan_in); return;
    case TMM_INIT_SMALL: *mean = 0, *std = 0.02; return;
    case TMM_INIT_UNIFORM: *mean = 0, *std = 1.0 / sqrt(3.0 * p->fan_in); return;
    case TMM_INIT_A_LOG: { /* ln U, U ~ U(1, 16): E[ln U] and E[ln² U] from the antiderivatives */
        double m1 = (16 * l16 - 15) / 15, m2 = (16 * l16 * l16 - 32 * l16 + 30) / 15;
        *mean = m1, *std = sqrt(m2 - m1 * m1);
        return;
    }
    case TMM_INIT_DT_BIAS: *mean = (lo + hi) / 2, *std = (hi - lo) / sqrt(12.0); return;
    }
}

/* Every tensor's sample mean and std match its initializer. */
static void check_init_stats(const tmm_param_table *t, const float *a)
{
    for (uint32_t i = 0; i < t->count; i++) {
        tmm_param q = t->params[i];
        q.init = tmm_param_init_of(t, &t->params[i]);
        const tmm_param *p = &q;
        double mean = 0, sq = 0;
        for (uint64_t j = 0; j < p->numel; j++) {
            double v = a[p->offset + j];
            if (p->init == TMM_INIT_DT_BIAS) { /* dt0 = softplus(v), log-uniform in [1e-3, 1e-1] */
                double dt0 = log1p(exp(v));
                cr_assert(dt0 >= 1e-3 * (1 - 1e-5) && dt0 <= 1e-1 * (1 + 1e-5), "%s: dt0 %g", p->name, dt0);
                v = log(dt0);
            }
            if (p->init == TMM_INIT_A_LOG)
                cr_assert(v >= 0 && v <= log(16.0) + 1e-6, "%s: A_log %g outside [0, ln 16]", p->name, v);
            if (p->init == TMM_INIT_UNIFORM)
                cr_assert(fabs(v) <= 1.0 / sqrt((double)p->fan_in) + 1e-7, "%s: %g out of bounds", p->name, v);
            mean += v;
            sq += v * v;
        }
        mean /= (double)p->numel;
        double std = sqrt(fmax(sq / (double)p->numel - mean * mean, 0.0)), want_mean, want_std;
        init_moments(p, &want_mean, &want_std);
        /* sampling error of a mean and a std over numel draws: ~ std / sqrt(numel) */
        double tol = 5 * (want_std + 1e-12) / sqrt((double)p->numel);
        cr_assert(fabs(mean - want_mean) <= tol + 1e-6 * fabs(want_mean) + 1e-12, "%s: mean %g, want %g", p->name,
                  mean, want_mean);
        cr_assert(fabs(std - want_std) <= 2 * tol + 1e-12, "%s: std %g, want %g", p->name, std, want_std);
    }
}

Test(params, baseline_init_follows_the_spec)
{
    tmm_model_config c = { .arch = TMM_ARCH_SWA, .window = 16, .vocab = 300, .d_model = 128, .n_ctx = 64, .n_layers = 1,
                           .heads = 2, .expansion = 4, .kernel = 1, .seed = 7 };
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *a = calloc(t.arena_floats, sizeof *a);
    tmm_param_init(&t, a);
    check_init_stats(&t, a);
    cr_assert_eq(t.params[t.embed].init, TMM_INIT_SMALL, "the baselines' embedding is N(0, 0.02²)");
    free(a);
    tmm_param_table_free(&t);
}

Test(params, hyena_init_follows_the_spec)
{
    tmm_model_config c = { .arch = TMM_ARCH_HYENA, .vocab = 300, .d_model = 128, .n_ctx = 64, .n_layers = 1,
                           .expansion = 4, .kernel = 1, .seed = 7 };
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *a = calloc(t.arena_floats, sizeof *a);
    tmm_param_init(&t, a);
    check_init_stats(&t, a);
    const struct { const char *name; tmm_init init; uint32_t fan_in; } want[] = {
        { "embed.weight", TMM_INIT_NORMAL, 0 },
        { "blocks.0.hyena.in_proj.weight", TMM_INIT_KAIMING, 128 },   { "blocks.0.hyena.in_proj.bias", TMM_INIT_ZERO, 0 },
        { "blocks.0.hyena.short_conv.weight", TMM_INIT_UNIFORM, 3 },  { "blocks.0.hyena.short_conv.bias", TMM_INIT_UNIFORM, 3 },
        { "blocks.0.hyena.filter.fc1.weight", TMM_INIT_UNIFORM, 3 },  { "blocks.0.hyena.filter.fc1.bias", TMM_INIT_UNIFORM, 3 },
        { "blocks.0.hyena.filter.fc2.weight", TMM_INIT_UNIFORM, 64 }, { "blocks.0.hyena.filter.fc3.bias", TMM_INIT_UNIFORM, 64 },
        { "blocks.0.hyena.filter.fc4.weight", TMM_INIT_UNIFORM, 64 }, { "blocks.0.hyena.filter.omega2", TMM_INIT_ONE, 0 },
        { "blocks.0.hyena.D", TMM_INIT_NORMAL, 0 },                   { "blocks.0.hyena.out_proj.weight", TMM_INIT_KAIMING, 128 },
        { "blocks.0.hyena.out_proj.bias", TMM_INIT_ZERO, 0 },         { "blocks.0.mlp.fc1.weight", TMM_INIT_KAIMING, 128 },
        { "blocks.0.mlp.fc2.weight", TMM_INIT_KAIMING, 512 },         { "blocks.0.mlp.fc2.bias", TMM_INIT_ZERO, 0 },
        { "blocks.0.ln1.weight", TMM_INIT_ONE, 0 },                   { "lm_head.weight", TMM_INIT_KAIMING, 128 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tmm_param *p = &t.params[tmm_param_find(&t, want[i].name)];
        cr_assert(p->init == want[i].init && p->fan_in == want[i].fan_in, "%s: init %d fan_in %u", p->name, p->init,
                  p->fan_in);
    }
    free(a);
    tmm_param_table_free(&t);
}

Test(params, mamba2_init_follows_the_spec)
{
    tmm_model_config c = { .arch = TMM_ARCH_MAMBA2, .vocab = 300, .d_model = 256, .n_ctx = 64, .n_layers = 1,
                           .heads = 128, .state = 64, .expansion = 4, .kernel = 1, .seed = 7 };
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *a = calloc(t.arena_floats, sizeof *a), *b = calloc(t.arena_floats, sizeof *b);
    tmm_param_init(&t, a);
    tmm_param_init(&t, b);
    cr_assert(memcmp(a, b, t.arena_floats * sizeof *a) == 0, "same seed, different weights");
    check_init_stats(&t, a);
    const struct { const char *name; tmm_init init; uint32_t fan_in; } want[] = {
        { "embed.weight", TMM_INIT_SMALL, 0 },                     { "blocks.0.norm.weight", TMM_INIT_ONE, 0 },
        { "blocks.0.mamba.in_proj.weight", TMM_INIT_UNIFORM, 256 }, { "blocks.0.mamba.conv1d.weight", TMM_INIT_UNIFORM, 4 },
        { "blocks.0.mamba.conv1d.bias", TMM_INIT_UNIFORM, 4 },      { "blocks.0.mamba.dt_bias", TMM_INIT_DT_BIAS, 0 },
        { "blocks.0.mamba.A_log", TMM_INIT_A_LOG, 0 },              { "blocks.0.mamba.D", TMM_INIT_ONE, 0 },
        { "blocks.0.mamba.norm.weight", TMM_INIT_ONE, 0 },          { "blocks.0.mamba.out_proj.weight", TMM_INIT_UNIFORM, 512 },
        { "final_norm.weight", TMM_INIT_ONE, 0 },                   { "lm_head.weight", TMM_INIT_UNIFORM, 256 },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tmm_param *p = &t.params[tmm_param_find(&t, want[i].name)];
        cr_assert(p->init == want[i].init && p->fan_in == want[i].fan_in, "%s: init %d fan_in %u", p->name, p->init,
                  p->fan_in);
    }
    free(a), free(b);
    tmm_param_table_free(&t);
}

Test(params, init_is_seeded_and_follows_the_spec)
{
    tmm_model_config c = { .vocab = 300, .d_model = 128, .n_ctx = 256, .n_layers = 1, .heads = 4,
                           .expansion = 4, .kernel = 1, .seed = 7 };
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *a = calloc(t.arena_floats, sizeof *a), *b = calloc(t.arena_floats, sizeof *b);
    tmm_param_init(&t, a);
    tmm_param_init(&t, b);
    cr_assert(memcmp(a, b, t.arena_floats * sizeof *a) == 0, "same seed, different weights");
    check_init_stats(&t, a);
    c.seed = 8;
    tmm_param_table t2;
    H_OK(tmm_param_table_build(&c, &t2));
    tmm_param_init(&t2, b);
    cr_assert(memcmp(a, b, t.arena_floats * sizeof *a) != 0, "another seed, same weights");
    /* a tensor's values do not depend on the other tensors: the embedding of a
     * model with more layers starts the same */
    c.seed = 7;
    c.n_layers = 3;
    tmm_param_table t3;
    H_OK(tmm_param_table_build(&c, &t3));
    float *x = calloc(t3.arena_floats, sizeof *x);
    tmm_param_init(&t3, x);
    cr_assert(memcmp(a + t.params[t.embed].offset, x + t3.params[t3.embed].offset,
                     t.params[t.embed].numel * sizeof *a) == 0);
    free(a), free(b), free(x);
    tmm_param_table_free(&t), tmm_param_table_free(&t2), tmm_param_table_free(&t3);
}

/* --init torch: every Kaiming and N(0, 0.02²) weight becomes PyTorch's
 * U(±1/sqrt(fan_in)) with the same fan_in, the embedding N(0, 1); the rest
 * as the architecture has it. */
Test(params, torch_init_scheme)
{
    const tmm_model_config cs[] = {
        { .vocab = 300, .d_model = 128, .n_ctx = 256, .n_layers = 1, .heads = 4, .expansion = 4, .kernel = 3,
          .seed = 7, .init = TMM_INIT_SCHEME_TORCH },
        { .arch = TMM_ARCH_TRANSFORMER, .vocab = 300, .d_model = 128, .n_ctx = 64, .n_layers = 1, .heads = 2,
          .expansion = 4, .kernel = 1, .seed = 7, .init = TMM_INIT_SCHEME_TORCH },
        { .arch = TMM_ARCH_MAMBA2, .vocab = 300, .d_model = 256, .n_ctx = 64, .n_layers = 1, .heads = 128,
          .state = 64, .expansion = 4, .kernel = 1, .seed = 7, .init = TMM_INIT_SCHEME_TORCH },
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        tmm_param_table t, ta;
        H_OK(tmm_param_table_build(&cs[k], &t));
        tmm_model_config arch = cs[k];
        arch.init = TMM_INIT_SCHEME_ARCH;
        H_OK(tmm_param_table_build(&arch, &ta));
        float *a = calloc(t.arena_floats, sizeof *a);
        tmm_param_init(&t, a);
        check_init_stats(&t, a);
        for (uint32_t i = 0; i < t.count; i++) {
            const tmm_param *p = &t.params[i];
            tmm_init want = p->kind == TMM_PARAM_EMBED ? TMM_INIT_NORMAL
                            : (p->init == TMM_INIT_KAIMING || p->init == TMM_INIT_SMALL) ? TMM_INIT_UNIFORM
                                                                                        : p->init;
            cr_assert_eq(tmm_param_init_of(&t, p), want, "%s", p->name);
            cr_assert_eq(tmm_param_init_of(&ta, p), p->init, "%s: the arch scheme changed it", p->name);
        }
        int w = tmm_param_find(&t, cs[k].arch == TMM_ARCH_TMM ? "blocks.0.mix.w" : "lm_head.weight");
        cr_assert(w >= 0 && tmm_param_init_of(&t, &t.params[w]) == TMM_INIT_UNIFORM);
        free(a);
        tmm_param_table_free(&t), tmm_param_table_free(&ta);
    }
    tmm_model_config bad = cs[0];
    bad.init = (tmm_init_scheme)2;
    cr_assert_eq(tmm_model_config_check(&bad), TMM_ERR_INVALID_ARGUMENT);
}

Test(params, rng_is_a_pure_function_of_its_counter)
{
    uint64_t k = tmm_rng_key(1, "x");
    cr_assert_eq(tmm_rng_bits(k, 5), tmm_rng_bits(k, 5));
    cr_assert_neq(tmm_rng_bits(k, 5), tmm_rng_bits(k, 6));
    cr_assert_neq(tmm_rng_key(1, "x"), tmm_rng_key(2, "x"));
    cr_assert_neq(tmm_rng_key(1, "x"), tmm_rng_key(1, "y"));
    /* fixed values: the stream must never change, or checkpoints' seeds would mean other weights */
    cr_assert_eq(tmm_rng_bits(0, 0), 0xe220a8397b1dcdafull);
}

/* Random batch with some ignored targets. */
static void batch(uint32_t B, uint32_t n, uint32_t V, uint32_t *tok, int32_t *tgt)
{
    for (uint32_t i = 0; i < B * n; i++) {
        tok[i] = (uint32_t)(tmm_rng_bits(99, i) % V);
        tgt[i] = (i % 4 == 1) ? -100 : (int32_t)(tmm_rng_bits(98, i) % V);
    }
}

/* Central differences of the mean loss for every parameter element, against
 * the analytic gradient. In double, with h = 1e-5 the truncation error is
 * O(h^2 * f''') ~ 1e-10 and rounding ~ 1e-16 / h ~ 1e-11. */
static void fd_check_tweaked(const char *variant, tmm_model_config c,
                             void (*tweak)(const tmm_param_table *t, double *params))
{
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *init = calloc(t.arena_floats, sizeof *init);
    double *p = calloc(t.arena_floats, sizeof *p), *g = calloc(t.arena_floats, sizeof *g);
    tmm_param_init(&t, init);
    /* move every parameter off its initial value (zero biases and unit norms hide bugs) */
    for (uint64_t i = 0; i < t.arena_floats; i++)
        p[i] = init[i] + 0.3 * (tmm_rng_uniform(5, i) - 0.5);
    if (tweak)
        tweak(&t, p);
    const uint32_t B = 2, N = B * c.n_ctx;
    uint32_t tok[64];
    int32_t tgt[64];
    batch(B, c.n_ctx, c.vocab, tok, tgt);
    double loss = ref_model_run(&t, p, B, tok, tgt, NULL, g);
    cr_assert(isfinite(loss) && loss > 0);
    double worst = 0;
    for (uint32_t i = 0; i < t.count; i++) {
        const tmm_param *q = &t.params[i];
        double worst_here = 0;
        for (uint64_t j = 0; j < q->numel; j++) {
            uint64_t at = q->offset + j;
            double keep = p[at], h = 1e-5;
            p[at] = keep + h;
            double up = ref_model_run(&t, p, B, tok, tgt, NULL, NULL);
            p[at] = keep - h;
            double down = ref_model_run(&t, p, B, tok, tgt, NULL, NULL);
            p[at] = keep;
            double fd = q->trainable ? (up - down) / (2 * h) : 0.0;
            double err = fabs(fd - g[at]);
            worst_here = fmax(worst_here, err);
            cr_assert(err <= 1e-7 + 1e-6 * fabs(fd), "%s[%llu]: analytic %.10g, finite difference %.10g", q->name,
                      (unsigned long long)j, g[at], fd);
        }
        worst = fmax(worst, worst_here);
    }
    printf("  reference backward, %-16s N=%u params=%llu: max |analytic - fd| = %.2g\n", variant, N,
           (unsigned long long)tmm_model_param_count(&c), worst);
    free(init), free(p), free(g);
    tmm_param_table_free(&t);
}

static void fd_check(const char *variant, tmm_model_config c) { fd_check_tweaked(variant, c, NULL); }

Test(reference_model, backward_flat) { fd_check("flat", tiny(0, 1, false, false)); }
Test(reference_model, backward_heads) { fd_check("heads 2", tiny(2, 1, false, false)); }
Test(reference_model, backward_kernel3) { fd_check("kernel 3", tiny(0, 3, false, false)); }
Test(reference_model, backward_expanded_heads) { fd_check("expanded, heads 3", tiny(3, 1, true, false)); }
Test(reference_model, backward_kernel2_heads) { fd_check("kernel 2, heads 2", tiny(2, 2, false, false)); }

Test(reference_model, backward_transformer) { fd_check("transformer", tiny_arch(TMM_ARCH_TRANSFORMER, 3, 0)); }
Test(reference_model, backward_swa) { fd_check("swa, window 2", tiny_arch(TMM_ARCH_SWA, 1, 2)); }
Test(reference_model, backward_linear) { fd_check("linear, heads 2", tiny_arch(TMM_ARCH_LINEAR, 2, 0)); }

Test(reference_model, backward_hyena) { fd_check("hyena", tiny_hyena(5)); }
Test(reference_model, backward_hyena_n1) { fd_check("hyena, n 1", tiny_hyena(1)); }
Test(reference_model, backward_mamba2) { fd_check("mamba2 nh 2, N 3", tiny_mamba2(2, 3)); }

/* dt near 1 and A near -1 (exp(dt A) ~ 0.4): the state decays within the
 * sequence, so the recurrence's gradients are not hidden by dt ~ 0.01 */
static void large_steps(const tmm_param_table *t, double *p)
{
    for (uint32_t l = 0; l < t->config.n_layers; l++) {
        const tmm_param *dt = &t->params[t->blocks[l].mix[TMM_M2_DT_BIAS]], *al = &t->params[t->blocks[l].mix[TMM_M2_A_LOG]];
        for (uint64_t j = 0; j < dt->numel; j++) {
            p[dt->offset + j] = 0.5 + 0.3 * (double)j;
            p[al->offset + j] = -0.2 + 0.1 * (double)j;
        }
    }
}

Test(reference_model, backward_mamba2_decaying) { fd_check_tweaked("mamba2 decaying", tiny_mamba2(2, 3), large_steps); }
Test(reference_model, backward_mamba2_one_head) { fd_check("mamba2 nh 1, N 2", tiny_mamba2(1, 2)); }

Test(reference_model, frozen_toeplitz_gets_no_gradient)
{
    tmm_model_config c = tiny(2, 1, true, true);
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    double *p = calloc(t.arena_floats, sizeof *p), *g = calloc(t.arena_floats, sizeof *g);
    float *init = calloc(t.arena_floats, sizeof *init);
    tmm_param_init(&t, init);
    for (uint64_t i = 0; i < t.arena_floats; i++)
        p[i] = init[i];
    uint32_t tok[10];
    int32_t tgt[10];
    batch(2, c.n_ctx, c.vocab, tok, tgt);
    ref_model_run(&t, p, 2, tok, tgt, NULL, g);
    uint32_t frozen = 0;
    for (uint32_t i = 0; i < t.count; i++) {
        const tmm_param *q = &t.params[i];
        if (q->trainable)
            continue;
        frozen++;
        cr_assert(q->kind == TMM_PARAM_TOEPLITZ_W || q->kind == TMM_PARAM_TOEPLITZ_BETA);
        for (uint64_t j = 0; j < q->numel; j++)
            cr_assert_eq(g[q->offset + j], 0.0, "%s has a gradient", q->name);
    }
    cr_assert_eq(frozen, 8, "w, beta, w2, beta2 in 2 layers");
    fd_check("frozen", c); /* the rest still matches finite differences */
    free(p), free(g), free(init);
    tmm_param_table_free(&t);
}
