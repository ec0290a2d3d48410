/* The optimizer (train/optim.h) against its double reference (ref_optim.c):
 * AdamW with global gradient-norm clipping over real parameter tables with
 * frozen, decayed and non-decayed tensors and padding, recorded once and
 * replayed over several steps; determinism; binding in chunks; non-finite
 * gradients; bad input; a recipe's parameter groups. And the learning-rate
 * schedules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/nn_ops.h"
#include "ref/ref_optim.h"
#include "train/optim.h"
#include "train/schedule.h"

static void build_table(tmm_param_table *t, uint32_t vocab, uint32_t d, uint32_t n, uint32_t heads, uint32_t e,
                        bool expanded, bool frozen)
{
    tmm_model_config c = { .vocab = vocab, .d_model = d, .n_ctx = n, .n_layers = 2, .heads = heads,
                           .expansion = e, .kernel = 1, .expanded = expanded, .frozen = frozen, .seed = 3 };
    H_OK(tmm_param_table_build(&c, t));
}

/* 1 for floats of trainable tensors, 0 for frozen tensors and padding. */
static unsigned char *trainable_floats(const tmm_param_table *t)
{
    unsigned char *f = calloc(t->arena_floats, 1);
    cr_assert_not_null(f);
    for (uint32_t i = 0; i < t->count; i++)
        if (t->params[i].trainable)
            memset(f + t->params[i].offset, 1, t->params[i].numel);
    return f;
}

/* Floats outside trainable tensors must keep their exact bits. */
static void assert_untouched(const char *what, const unsigned char *train, const float *got, const float *before,
                             uint64_t n)
{
    uint64_t checked = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (train[i])
            continue;
        checked++;
        cr_assert(memcmp(&got[i], &before[i], sizeof got[i]) == 0, "%s: float %llu outside trainable tensors "
                  "changed from %a to %a", what, (unsigned long long)i, (double)before[i], (double)got[i]);
    }
    cr_assert(checked > 0, "%s: nothing to check", what);
}

typedef struct arenas {
    uint64_t n;
    float *p, *g, *m, *v;      /* host copies: the reference's state */
    tmm_buffer *bp, *bg;
} arenas;

static void arenas_init(arenas *a, const tmm_param_table *t, uint64_t seed)
{
    a->n = t->arena_floats;
    a->p = h_floats(a->n);
    a->g = h_floats(a->n);
    a->m = h_floats(a->n);
    a->v = h_floats(a->n);
    /* every float random, padding and frozen tensors included */
    h_rand(a->p, a->n, seed, -1, 1);
    h_rand(a->m, a->n, seed + 1, -0.1f, 0.1f);
    h_rand(a->v, a->n, seed + 2, 0, 0.01f);
    a->bp = h_buffer(a->p, a->n);
    a->bg = h_buffer(NULL, a->n);
}

static void arenas_free(arenas *a)
{
    tmm_buffer_destroy(a->bp);
    tmm_buffer_destroy(a->bg);
    free(a->p);
    free(a->g);
    free(a->m);
    free(a->v);
}

static void write_moments(tmm_optim *o, const arenas *a)
{
    H_OK(tmm_buffer_write(tmm_optim_m(o).buffer, tmm_optim_m(o).offset, a->m, a->n * 4));
    H_OK(tmm_buffer_write(tmm_optim_v(o).buffer, tmm_optim_v(o).offset, a->v, a->n * 4));
}

static void read_state(tmm_optim *o, const arenas *a, float *p, float *m, float *v)
{
    h_read(a->bp, p, a->n);
    H_OK(tmm_buffer_read(tmm_optim_m(o).buffer, tmm_optim_m(o).offset, m, a->n * 4));
    H_OK(tmm_buffer_read(tmm_optim_v(o).buffer, tmm_optim_v(o).offset, v, a->n * 4));
}

/* Device vs reference over several replays of one recording. Gradient scales
 * per step switch clipping on (norm > max) and off (norm < max). Returns the
 * largest parameter deviation. */
static double run_steps(const tmm_param_table *t, const tmm_optim_config *cfg, const float *grad_scale,
                        uint32_t steps, uint64_t seed)
{
    arenas a;
    arenas_init(&a, t, seed);
    unsigned char *train = trainable_floats(t);
    float *p0 = h_floats(a.n), *m0 = h_floats(a.n), *v0 = h_floats(a.n);
    float *gp = h_floats(a.n), *gm = h_floats(a.n), *gv = h_floats(a.n);
    memcpy(p0, a.p, a.n * 4);
    memcpy(m0, a.m, a.n * 4);
    memcpy(v0, a.v, a.n * 4);

    tmm_optim *o;
    H_OK(tmm_optim_create(h_dev, t, cfg, &o));
    write_moments(o, &a);
    tmm_recorder *r = h_begin();
    H_OK(tmm_optim_record(o, r, tmm_whole(a.bp), tmm_whole(a.bg)));
    H_OK(tmm_recorder_end(r));

    tmm_lr_schedule sched = { TMM_LR_LINEAR, 1e-2, 2, 0 };
    bool clipped = false, unclipped = false;
    double worst = 0;
    for (uint32_t s = 0; s < steps; s++) {
        h_rand(a.g, a.n, seed + 10 + s, -grad_scale[s], grad_scale[s]);
        H_OK(tmm_buffer_write(a.bg, 0, a.g, a.n * 4));
        double lr = tmm_lr_at(&sched, s, steps);
        H_OK(tmm_optim_set_step(o, s + 1, lr));
        H_OK(tmm_recorder_run(r));
        /* the reference gets the learning rate the device got */
        ref_optim_result ref = ref_adamw_step(t, cfg, s + 1, (float)lr, 1.0, a.p, a.g, a.m, a.v);
        tmm_optim_stats st = tmm_optim_get_stats(o);
        cr_assert_eq(st.skipped, 0u);
        cr_assert_eq(st.step, s + 1);
        cr_assert_eq(st.lr, (float)lr);
        cr_assert(st.loss_scale == 1.0f && st.overflows == 0, "no loss scaling: S %g", (double)st.loss_scale);
        float norm = (float)ref.grad_norm, scale = (float)ref.clip_scale;
        h_compare("grad norm", &st.grad_norm, &norm, 1, 0, 2e-6);
        h_compare("clip scale", &st.clip_scale, &scale, 1, 0, 2e-6);
        if (cfg->max_grad_norm > 0 && ref.grad_norm > cfg->max_grad_norm)
            clipped = true;
        else
            unclipped = true;

        read_state(o, &a, gp, gm, gv);
        /* m and v: a few float roundings per step of values of size |g|, |g|^2 */
        double g2 = (double)grad_scale[s] * grad_scale[s] * scale * scale;
        h_compare("m", gm, a.m, a.n, 1e-6 * grad_scale[s] * scale, 1e-5);
        h_compare("v", gv, a.v, a.n, 1e-6 * g2, 1e-5);
        /* parameters: the update is at most about lr / (1 - beta1^t) <= 10 lr in
         * size and computed in float (relative error ~1e-6, more where
         * sqrt(v) is near eps), the parameter itself rounded once */
        double d = h_compare("params", gp, a.p, a.n, 1e-5 * lr + 1e-7, 2e-7);
        worst = d > worst ? d : worst;
        /* continue from the device's state so that float roundings do not pile up */
        memcpy(a.p, gp, a.n * 4);
        memcpy(a.m, gm, a.n * 4);
        memcpy(a.v, gv, a.n * 4);
    }
    if (cfg->max_grad_norm > 0)
        cr_assert(clipped && unclipped, "the steps should cover clipping on and off");

    assert_untouched("params", train, a.p, p0, a.n);
    assert_untouched("m", train, a.m, m0, a.n);
    assert_untouched("v", train, a.v, v0, a.n);
    tmm_recorder_destroy(r);
    tmm_optim_destroy(o);
    arenas_free(&a);
    free(train);
    free(p0);
    free(m0);
    free(v0);
    free(gp);
    free(gm);
    free(gv);
    return worst;
}

H_TEST(optim, adamw_matches_reference_frozen_heads)
{
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 4, 2, false, true);
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.weight_decay = 0.1;
    /* norms about sqrt(n/3) * scale with ~3000 trainable floats: 30 * scale */
    static const float scales[] = { 1, 1e-3f, 2, 1e-2f, 0.5f, 3e-3f };
    run_steps(&t, &cfg, scales, 6, 100);
    tmm_param_table_free(&t);
}

H_TEST(optim, adamw_matches_reference_trainable_expanded_decay_all)
{
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 0, 2, true, false);
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.weight_decay = 0.05;
    cfg.decay_all = true;
    cfg.max_grad_norm = 2.0;
    static const float scales[] = { 5e-3f, 1, 1e-2f, 4 };
    run_steps(&t, &cfg, scales, 4, 200);
    tmm_param_table_free(&t);
}

/* Hyena's original recipe: the filter's own rate (1e-3 over the schedule's
 * peak of 1e-2, so a tenth of every step's rate) and no decay, beside the
 * rest at the run's, over replays with clipping on and off (tests/test_recipe.c
 * checks the rates themselves). */
H_TEST(optim, adamw_matches_reference_recipe_groups)
{
    tmm_model_config c = h_tiny_row(TMM_ARCH_HYENA);
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.recipe = TMM_RECIPE_ORIGINAL;
    cfg.peak_lr = 1e-2;
    cfg.weight_decay = 0.1;
    /* ~24000 trainable floats: norms about 90 * scale */
    static const float scales[] = { 1, 1e-3f, 0.1f, 3e-3f };
    run_steps(&t, &cfg, scales, 4, 300);
    tmm_param_table_free(&t);
}

H_TEST(optim, clipping_off_still_reports_the_norm)
{
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 4, 2, false, false);
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.max_grad_norm = 0;
    static const float scales[] = { 3, 1e-2f, 10 };
    run_steps(&t, &cfg, scales, 3, 300);
    tmm_param_table_free(&t);
}

H_TEST(optim, decay_policy)
{
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 4, 2, true, true);
    static const struct { const char *name; bool decays; } want[] = {
        { "embed.weight", false },           { "blocks.0.ln1.weight", false }, { "blocks.0.ln1.bias", false },
        { "blocks.0.mlp.fc1.weight", true }, { "blocks.0.mlp.fc1.bias", false }, { "blocks.1.mix.in.weight", true },
        { "blocks.1.mix.out.bias", false },  { "blocks.0.mix.w", false /* frozen */ },
        { "blocks.0.mix.beta", false },      { "lm_head.weight", true },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int k = tmm_param_find(&t, want[i].name);
        cr_assert(k >= 0, "%s", want[i].name);
        cr_assert_eq(tmm_optim_param_decays(&t.params[k], false), want[i].decays, "%s", want[i].name);
        cr_assert_eq(tmm_optim_param_decays(&t.params[k], true), t.params[k].trainable, "%s", want[i].name);
    }
    tmm_param_table_free(&t);
    build_table(&t, 11, 12, 7, 4, 2, true, false);
    cr_assert(tmm_optim_param_decays(&t.params[tmm_param_find(&t, "blocks.1.mix.w2")], false));
    cr_assert(!tmm_optim_param_decays(&t.params[tmm_param_find(&t, "blocks.1.mix.beta2")], false));
    tmm_param_table_free(&t);
}

/* Two optimizers on identical inputs give identical bits; so does a run
 * whose arenas are bound in many chunks with split dispatches (chunk starts
 * are multiples of the norm's 4096-float tiles, so even the norm's summation
 * order is unchanged). The arena (~200k floats) has more than 65535 floats,
 * llvmpipe's loop cap. */
H_TEST(optim, deterministic_and_chunked)
{
    tmm_param_table t;
    build_table(&t, 1500, 48, 40, 4, 4, false, true);
    cr_assert(t.arena_floats > 65535 * 2);
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.weight_decay = 0.01;
    const uint64_t n = t.arena_floats;
    float *p = h_floats(n), *g = h_floats(n), *m = h_floats(n), *v = h_floats(n);
    h_rand(p, n, 7, -1, 1);
    h_rand(m, n, 8, -0.1f, 0.1f);
    h_rand(v, n, 9, 0, 0.01f);

    tmm_optim *o[3];
    tmm_buffer *bp[3], *bg[3];
    tmm_recorder *r[3];
    for (int k = 0; k < 3; k++) {
        H_OK(tmm_optim_create(h_dev, &t, &cfg, &o[k]));
        arenas a = { .n = n, .m = m, .v = v };
        write_moments(o[k], &a);
        bp[k] = h_buffer(p, n);
        bg[k] = h_buffer(NULL, n);
        H_OK(tmm_recorder_create(h_dev, &r[k]));
        H_OK(tmm_recorder_begin(r[k]));
    }
    H_OK(tmm_optim_record(o[0], r[0], tmm_whole(bp[0]), tmm_whole(bg[0])));
    H_OK(tmm_optim_record(o[1], r[1], tmm_whole(bp[1]), tmm_whole(bg[1])));
    uint32_t plain_dispatches = tmm_recorder_dispatches(r[1]);
    /* bind at most 64 KiB (16384 floats) and split dispatches into 7 workgroups */
    uint64_t range = h_dev->info.max_storage_buffer_range;
    h_dev->info.max_storage_buffer_range = 64 * 1024;
    tmm_device_set_dispatch_limit(h_dev, 7, 65535, 65535);
    tmm_status s = tmm_optim_record(o[2], r[2], tmm_whole(bp[2]), tmm_whole(bg[2]));
    h_dev->info.max_storage_buffer_range = range;
    tmm_device_set_dispatch_limit(h_dev, 65535, 65535, 65535);
    H_OK(s);
    cr_assert_gt(tmm_recorder_dispatches(r[2]), plain_dispatches + 20, "chunks and splits: %u vs %u dispatches",
                 tmm_recorder_dispatches(r[2]), plain_dispatches);
    for (int k = 0; k < 3; k++)
        H_OK(tmm_recorder_end(r[k]));

    float *got[3][3];
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 3; j++)
            got[k][j] = h_floats(n);
    for (uint32_t step = 1; step <= 3; step++) {
        h_rand(g, n, 50 + step, -0.05f, 0.05f);  /* norm ~ 0.05 * sqrt(n / 3): clipped */
        tmm_optim_stats st[3];
        for (int k = 0; k < 3; k++) {
            H_OK(tmm_buffer_write(bg[k], 0, g, n * 4));
            H_OK(tmm_optim_set_step(o[k], step, 1e-3));
            H_OK(tmm_recorder_run(r[k]));
            st[k] = tmm_optim_get_stats(o[k]);
            arenas a = { .n = n, .bp = bp[k] };
            read_state(o[k], &a, got[k][0], got[k][1], got[k][2]);
        }
        float ref = (float)ref_grad_norm(&t, g);
        h_compare("grad norm (200k floats)", &st[0].grad_norm, &ref, 1, 0, 1e-5);
        cr_assert(st[0].clip_scale < 1);
        for (int k = 1; k < 3; k++) {
            cr_assert(memcmp(&st[0], &st[k], sizeof st[0]) == 0, "stats of run %d differ: norm %a vs %a", k,
                      (double)st[0].grad_norm, (double)st[k].grad_norm);
            for (int j = 0; j < 3; j++)
                cr_assert(memcmp(got[0][j], got[k][j], n * 4) == 0, "run %d: arena %d differs at step %u", k, j,
                          step);
        }
    }
    for (int k = 0; k < 3; k++) {
        tmm_recorder_destroy(r[k]);
        tmm_optim_destroy(o[k]);
        tmm_buffer_destroy(bp[k]);
        tmm_buffer_destroy(bg[k]);
        for (int j = 0; j < 3; j++)
            free(got[k][j]);
    }
    free(p);
    free(g);
    free(m);
    free(v);
    tmm_param_table_free(&t);
}

/* A large chunked run against the reference (the ~200k-float table). */
H_TEST(optim, chunked_matches_reference)
{
    tmm_param_table t;
    build_table(&t, 1500, 48, 40, 0, 4, true, false);
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.weight_decay = 0.1;
    uint64_t range = h_dev->info.max_storage_buffer_range;
    h_dev->info.max_storage_buffer_range = 32 * 1024 + 12;  /* not a multiple of anything */
    /* norms ~ scale * sqrt(200k / 3) ~ 260 * scale */
    static const float scales[] = { 1, 1e-4f };
    run_steps(&t, &cfg, scales, 2, 400);
    h_dev->info.max_storage_buffer_range = range;
    tmm_param_table_free(&t);
}

/* The GPUs' gradient norm (sumsq_partial_sg: each workgroup's partial sums
 * added by subgroups), forced on: frozen tensors and padding masked, and
 * bound in chunks. */
H_TEST(optim, grad_norm_subgroups_match_reference)
{
    if (!tmm_op_row_subgroups_for(tmm_device_get_info(h_dev), 2))
        cr_skip_test("skipped: the device lacks subgroup arithmetic in compute");
    h_dev->tuning.reduce_variant = 2;
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 4, 2, false, true);
    tmm_optim_config cfg = tmm_optim_config_default();
    static const float scales[] = { 1, 1e-3f };
    run_steps(&t, &cfg, scales, 2, 150);
    tmm_param_table_free(&t);

    build_table(&t, 1500, 48, 40, 0, 4, true, false);
    uint64_t range = h_dev->info.max_storage_buffer_range;
    h_dev->info.max_storage_buffer_range = 32 * 1024 + 12;
    static const float big[] = { 1, 1e-4f };
    run_steps(&t, &cfg, big, 2, 450);
    h_dev->info.max_storage_buffer_range = range;
    tmm_param_table_free(&t);
    h_dev->tuning.reduce_variant = 0;
}

H_TEST(optim, nonfinite_gradients)
{
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 4, 2, false, true);
    tmm_optim_config cfg = tmm_optim_config_default();
    arenas a;
    arenas_init(&a, &t, 500);
    h_rand(a.g, a.n, 501, -1, 1);
    tmm_optim *o;
    H_OK(tmm_optim_create(h_dev, &t, &cfg, &o));
    write_moments(o, &a);
    tmm_recorder *r = h_begin();
    H_OK(tmm_optim_record(o, r, tmm_whole(a.bp), tmm_whole(a.bg)));
    H_OK(tmm_recorder_end(r));
    float *gp = h_floats(a.n), *gm = h_floats(a.n), *gv = h_floats(a.n);

    /* never told the step: nothing happens */
    H_OK(tmm_buffer_write(a.bg, 0, a.g, a.n * 4));
    H_OK(tmm_recorder_run(r));
    cr_assert_eq(tmm_optim_get_stats(o).skipped, 2u);
    read_state(o, &a, gp, gm, gv);
    cr_assert(memcmp(gp, a.p, a.n * 4) == 0 && memcmp(gm, a.m, a.n * 4) == 0 && memcmp(gv, a.v, a.n * 4) == 0);

    /* inf in a trainable gradient: skipped, nothing changes */
    int fc1 = tmm_param_find(&t, "blocks.1.mlp.fc1.weight");
    float keep = a.g[t.params[fc1].offset + 5];
    a.g[t.params[fc1].offset + 5] = INFINITY;
    H_OK(tmm_buffer_write(a.bg, 0, a.g, a.n * 4));
    H_OK(tmm_optim_set_step(o, 1, 1e-3));
    H_OK(tmm_recorder_run(r));
    tmm_optim_stats st = tmm_optim_get_stats(o);
    cr_assert_eq(st.skipped, 1u);
    cr_assert(isinf(st.grad_norm), "norm %g", (double)st.grad_norm);
    read_state(o, &a, gp, gm, gv);
    cr_assert(memcmp(gp, a.p, a.n * 4) == 0 && memcmp(gm, a.m, a.n * 4) == 0 && memcmp(gv, a.v, a.n * 4) == 0,
              "a skipped step changed the state");
    ref_optim_result ref = ref_adamw_step(&t, &cfg, 1, 1e-3f, 1.0, a.p, a.g, a.m, a.v);
    cr_assert(ref.skipped);

    /* NaN and inf in frozen tensors and padding: not part of the norm, no effect */
    a.g[t.params[fc1].offset + 5] = keep;
    int w = tmm_param_find(&t, "blocks.0.mix.w");
    cr_assert(!t.params[w].trainable);
    a.g[t.params[w].offset] = NAN;
    a.g[t.params[w].offset + 1] = INFINITY;
    int head = tmm_param_find(&t, "lm_head.weight");
    cr_assert(t.params[head].numel % 64 != 0, "lm_head has padding");
    a.g[t.params[head].offset + t.params[head].numel] = NAN;
    H_OK(tmm_buffer_write(a.bg, 0, a.g, a.n * 4));
    H_OK(tmm_recorder_run(r));
    st = tmm_optim_get_stats(o);
    cr_assert_eq(st.skipped, 0u);
    ref = ref_adamw_step(&t, &cfg, 1, 1e-3f, 1.0, a.p, a.g, a.m, a.v);
    float norm = (float)ref.grad_norm;
    h_compare("grad norm", &st.grad_norm, &norm, 1, 0, 2e-6);
    read_state(o, &a, gp, gm, gv);
    h_compare("params", gp, a.p, a.n, 1e-7, 2e-7);
    h_compare("m", gm, a.m, a.n, 1e-7, 1e-5);
    h_compare("v", gv, a.v, a.n, 1e-9, 1e-5);

    /* skip_nonfinite off: the NaN goes through (PyTorch's behaviour) */
    tmm_optim_destroy(o);
    tmm_recorder_destroy(r);
    cfg.skip_nonfinite = false;
    H_OK(tmm_optim_create(h_dev, &t, &cfg, &o));
    r = h_begin();
    H_OK(tmm_optim_record(o, r, tmm_whole(a.bp), tmm_whole(a.bg)));
    H_OK(tmm_recorder_end(r));
    a.g[t.params[fc1].offset] = NAN;
    H_OK(tmm_buffer_write(a.bg, 0, a.g, a.n * 4));
    H_OK(tmm_optim_set_step(o, 1, 1e-3));
    H_OK(tmm_recorder_run(r));
    st = tmm_optim_get_stats(o);
    cr_assert_eq(st.skipped, 0u);
    cr_assert(isnan(st.grad_norm));
    h_read(a.bp, gp, a.n);
    cr_assert(isnan(gp[t.params[fc1].offset]));

    tmm_recorder_destroy(r);
    tmm_optim_destroy(o);
    arenas_free(&a);
    free(gp);
    free(gm);
    free(gv);
    tmm_param_table_free(&t);
}

H_TEST(optim, reset_and_bad_input)
{
    tmm_param_table t;
    build_table(&t, 11, 12, 7, 0, 2, false, false);
    tmm_optim_config cfg = tmm_optim_config_default();
    tmm_optim *o;
    H_OK(tmm_optim_create(h_dev, &t, &cfg, &o));
    cr_assert_eq(tmm_optim_set_step(o, 0, 1e-3), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_optim_set_step(o, 1, -1), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_optim_set_step(o, 1, NAN), TMM_ERR_INVALID_ARGUMENT);
    H_OK(tmm_optim_set_step(o, 3, 2e-3));
    tmm_optim_hyper h = tmm_optim_get_hyper(o);
    cr_assert_eq(h.step, 3u);
    cr_assert_float_eq(h.bc2_rsqrt, 1 / sqrt(1 - 0.999 * 0.999 * 0.999), 1e-3);

    tmm_buffer *small = h_buffer(NULL, t.arena_floats - 1), *ok = h_buffer(NULL, t.arena_floats);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_optim_record(o, r, tmm_whole(small), tmm_whole(ok)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "params holds"), "%s", tmm_last_error());
    cr_assert_eq(tmm_optim_record(o, r, tmm_whole(ok), tmm_whole(ok)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_optim_record_grad_norm(o, r, tmm_whole(small)), TMM_ERR_INVALID_ARGUMENT);
    /* the gradient norm alone */
    float *g = h_floats(t.arena_floats);
    h_rand(g, t.arena_floats, 9, -1, 1);
    H_OK(tmm_buffer_write(ok, 0, g, t.arena_floats * 4));
    H_OK(tmm_optim_record_grad_norm(o, r, tmm_whole(ok)));
    h_run(r);
    float ref = (float)ref_grad_norm(&t, g);
    tmm_optim_stats st = tmm_optim_get_stats(o);
    h_compare("grad norm", &st.grad_norm, &ref, 1, 0, 2e-6);
    cr_assert_eq(st.step, 3u);

    /* moments written, then reset to zero */
    float *x = h_floats(t.arena_floats);
    H_OK(tmm_buffer_write(tmm_optim_m(o).buffer, 0, g, t.arena_floats * 4));
    H_OK(tmm_optim_reset(o));
    H_OK(tmm_buffer_read(tmm_optim_m(o).buffer, 0, x, t.arena_floats * 4));
    for (uint64_t i = 0; i < t.arena_floats; i++)
        cr_assert(x[i] == 0.0f);
    cr_assert_eq(tmm_optim_get_stats(o).grad_norm, 0.0f);
    cr_assert_gt(tmm_optim_memory(&t), 2 * t.arena_floats * 4);

    tmm_optim_destroy(o);
    tmm_buffer_destroy(small);
    tmm_buffer_destroy(ok);
    free(g);
    free(x);

    tmm_optim_config bad = cfg;
    bad.beta2 = 1;
    cr_assert_eq(tmm_optim_create(h_dev, &t, &bad, &o), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "beta2"), "%s", tmm_last_error());
    cr_assert_null(o);
    bad = cfg;
    bad.eps = 0;
    cr_assert_eq(tmm_optim_config_check(&bad), TMM_ERR_INVALID_ARGUMENT);
    bad = cfg;
    bad.weight_decay = -1;
    cr_assert_eq(tmm_optim_config_check(&bad), TMM_ERR_INVALID_ARGUMENT);
    bad = cfg;
    bad.max_grad_norm = INFINITY;
    cr_assert_eq(tmm_optim_config_check(&bad), TMM_ERR_INVALID_ARGUMENT);
    tmm_param_table_free(&t);
}

/* ---- schedules (no device needed, but the harness is harmless) ---------- */

static void lr_is(const tmm_lr_schedule *s, uint64_t step, uint64_t total, double want)
{
    double got = tmm_lr_at(s, step, total);
    cr_assert(fabs(got - want) <= 1e-15 + 1e-12 * fabs(want), "%s lr(%llu of %llu) = %.17g, want %.17g",
              tmm_lr_kind_name(s->kind), (unsigned long long)step, (unsigned long long)total, got, want);
}

Test(schedule, linear_warmup_then_decay_to_zero)
{
    tmm_lr_schedule s = tmm_lr_schedule_default();
    cr_assert_eq(s.kind, TMM_LR_LINEAR);
    cr_assert_eq(s.warmup_steps, 500u);
    cr_assert_float_eq(s.peak_lr, 5e-4, 0);
    const uint64_t total = 200000;
    cr_assert_eq(tmm_lr_schedule_check(&s, total), TMM_OK);
    lr_is(&s, 0, total, 5e-4 / 500);
    lr_is(&s, 249, total, 5e-4 * 250 / 500);
    lr_is(&s, 499, total, 5e-4);                       /* end of warmup: peak */
    lr_is(&s, 500, total, 5e-4);
    lr_is(&s, 500 + 99750, total, 5e-4 / 2);            /* middle of the decay */
    lr_is(&s, total - 1, total, 5e-4 / 199500);         /* last update */
    lr_is(&s, total, total, 0);
    lr_is(&s, total + 10, total, 0);
    for (uint64_t k = 1; k < total; k += 997)
        if (k < 500)
            cr_assert(tmm_lr_at(&s, k, total) > tmm_lr_at(&s, k - 1, total), "warmup rises at %llu",
                      (unsigned long long)k);
        else
            cr_assert(tmm_lr_at(&s, k, total) <= tmm_lr_at(&s, k - 1, total), "decay falls at %llu",
                      (unsigned long long)k);
}

Test(schedule, cosine_and_constant)
{
    tmm_lr_schedule c = { TMM_LR_COSINE, 1e-3, 10, 1e-4 };
    lr_is(&c, 0, 110, 1e-4);
    lr_is(&c, 9, 110, 1e-3);
    lr_is(&c, 10, 110, 1e-3);
    lr_is(&c, 60, 110, 1e-4 + 0.9e-3 * 0.5);  /* middle: half way between peak and min */
    lr_is(&c, 109, 110, 1e-4 + 0.9e-3 * 0.5 * (1 + cos(3.14159265358979323846 * 99 / 100)));
    lr_is(&c, 110, 110, 1e-4);
    tmm_lr_schedule k = { TMM_LR_CONSTANT, 3e-4, 0, 0 };
    lr_is(&k, 0, 0, 3e-4);
    lr_is(&k, 12345, 100, 3e-4);
    cr_assert_eq(tmm_lr_schedule_check(&k, 0), TMM_OK);
    k.warmup_steps = 4;
    lr_is(&k, 0, 100, 0.75e-4);
    lr_is(&k, 3, 100, 3e-4);
    lr_is(&k, 99, 100, 3e-4);
    /* warmup longer than the run */
    tmm_lr_schedule l = { TMM_LR_LINEAR, 1.0, 10, 0 };
    lr_is(&l, 4, 5, 0.5);
    lr_is(&l, 5, 5, 0);
}

Test(schedule, checks_names_and_scaled_warmup)
{
    tmm_lr_schedule s = tmm_lr_schedule_default();
    cr_assert_eq(tmm_lr_schedule_check(&s, 0), TMM_ERR_INVALID_ARGUMENT);
    s.peak_lr = -1;
    cr_assert_eq(tmm_lr_schedule_check(&s, 10), TMM_ERR_INVALID_ARGUMENT);
    s = tmm_lr_schedule_default();
    s.min_lr = 1;
    cr_assert_eq(tmm_lr_schedule_check(&s, 10), TMM_ERR_INVALID_ARGUMENT);
    s.min_lr = NAN;
    cr_assert_eq(tmm_lr_schedule_check(&s, 10), TMM_ERR_INVALID_ARGUMENT);
    tmm_lr_kind k;
    cr_assert_eq(tmm_lr_kind_parse("cosine", &k), TMM_OK);
    cr_assert_eq(k, TMM_LR_COSINE);
    cr_assert_eq(tmm_lr_kind_parse("constant", &k), TMM_OK);
    cr_assert_eq(k, TMM_LR_CONSTANT);
    cr_assert_eq(tmm_lr_kind_parse("step", &k), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "linear, cosine, constant"), "%s", tmm_last_error());
    cr_assert_eq(tmm_lr_scaled_warmup(200000), 500u);
    cr_assert_eq(tmm_lr_scaled_warmup(20000), 50u);
    cr_assert_eq(tmm_lr_scaled_warmup(100), 1u);
    cr_assert_eq(tmm_lr_scaled_warmup(0), 0u);
}
