/* The parameter table, initialization, and the reference model's backward
 * checked by central finite differences in double precision, per variant. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/params.h"
#include "model/rng.h"
#include "ref/ref_model.h"

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

/* Every tensor's sample mean and std match its initializer. */
static void check_init_stats(const tmm_param_table *t, const float *a)
{
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        double mean = 0, sq = 0;
        for (uint64_t j = 0; j < p->numel; j++) {
            mean += a[p->offset + j];
            sq += (double)a[p->offset + j] * a[p->offset + j];
        }
        mean /= (double)p->numel;
        double std = sqrt(sq / (double)p->numel - mean * mean);
        double want_std = p->init == TMM_INIT_KAIMING  ? sqrt(2.0 / p->fan_in)
                          : p->init == TMM_INIT_NORMAL ? 1.0
                          : p->init == TMM_INIT_SMALL  ? 0.02
                                                       : 0.0;
        double want_mean = p->init == TMM_INIT_ONE ? 1.0 : 0.0;
        /* sampling error of a mean and a std over numel draws: ~ std / sqrt(numel) */
        double tol = 5 * (want_std + 1e-12) / sqrt((double)p->numel);
        cr_assert(fabs(mean - want_mean) <= tol + 1e-12, "%s: mean %g, want %g", p->name, mean, want_mean);
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
static void fd_check(const char *variant, tmm_model_config c)
{
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *init = calloc(t.arena_floats, sizeof *init);
    double *p = calloc(t.arena_floats, sizeof *p), *g = calloc(t.arena_floats, sizeof *g);
    tmm_param_init(&t, init);
    /* move every parameter off its initial value (zero biases and unit norms hide bugs) */
    for (uint64_t i = 0; i < t.arena_floats; i++)
        p[i] = init[i] + 0.3 * (tmm_rng_uniform(5, i) - 0.5);
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

Test(reference_model, backward_flat) { fd_check("flat", tiny(0, 1, false, false)); }
Test(reference_model, backward_heads) { fd_check("heads 2", tiny(2, 1, false, false)); }
Test(reference_model, backward_kernel3) { fd_check("kernel 3", tiny(0, 3, false, false)); }
Test(reference_model, backward_expanded_heads) { fd_check("expanded, heads 3", tiny(3, 1, true, false)); }
Test(reference_model, backward_kernel2_heads) { fd_check("kernel 2, heads 2", tiny(2, 2, false, false)); }

Test(reference_model, backward_transformer) { fd_check("transformer", tiny_arch(TMM_ARCH_TRANSFORMER, 3, 0)); }
Test(reference_model, backward_swa) { fd_check("swa, window 2", tiny_arch(TMM_ARCH_SWA, 1, 2)); }
Test(reference_model, backward_linear) { fd_check("linear, heads 2", tiny_arch(TMM_ARCH_LINEAR, 2, 0)); }

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
