/* Dynamic loss scaling (train/optim.h): the scaler's rule on the device
 * against its C reference (ref_loss_scale_update) with injected overflows,
 * its floor and cap; exact unscaling (a scaled step updates the weights bit
 * for bit as the unscaled one); whole models of every architecture trained
 * with a growing scale against fp32 training; resuming across an overflow
 * through the optimizer's state; and the trainer's fp16 runs resuming
 * exactly with the scaler's state in the checkpoint. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "model/model.h"
#include "model/rng.h"
#include "ref/ref_optim.h"
#include "model/checkpoint.h"
#include "train/optim.h"
#include "train/trainer.h"

static void same_bits(const char *what, const float *a, const float *b, uint64_t n, uint32_t step)
{
    for (uint64_t i = 0; i < n; i++)
        cr_assert(memcmp(&a[i], &b[i], 4) == 0, "step %u: %s[%llu] is %a, unscaled %a", step, what,
                  (unsigned long long)i, (double)a[i], (double)b[i]);
}

static void read_moments(tmm_optim *o, float *m, float *v, uint64_t n)
{
    H_OK(tmm_buffer_read(tmm_optim_m(o).buffer, tmm_optim_m(o).offset, m, n * 4));
    H_OK(tmm_buffer_read(tmm_optim_v(o).buffer, tmm_optim_v(o).offset, v, n * 4));
}

static void state_is(tmm_optim *o, const tmm_loss_scale *want, uint32_t step)
{
    tmm_loss_scale got;
    H_OK(tmm_optim_read_loss_scale(o, &got));
    cr_assert(got.scale == want->scale && got.good == want->good && got.overflows == want->overflows,
              "step %u: the device's scaler is (%g, good %u, overflows %u), the reference's (%g, %u, %u)", step,
              (double)got.scale, got.good, got.overflows, (double)want->scale, want->good, want->overflows);
}

/* ---- the optimizer alone ------------------------------------------------------- */

/* Two optimizers on one table: unscaled (loss scaling off) and scaled. Each
 * step the scaled one gets the unscaled gradients times its current scale S;
 * on overflow steps both get an inf or a NaN in one trainable float. The
 * scaler follows the reference rule, skipped steps change nothing, and every
 * step leaves both optimizers' parameters and moments with the same bits. */
H_TEST(loss_scale, rules_and_exact_unscaling)
{
    tmm_model_config mc = { .vocab = 11, .d_model = 12, .n_ctx = 7, .n_layers = 2, .heads = 4, .expansion = 2,
                            .kernel = 1, .frozen = true, .seed = 3 };
    tmm_param_table t;
    H_OK(tmm_param_table_build(&mc, &t));
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.weight_decay = 0.1;
    const uint64_t n = t.arena_floats;
    float *p = h_floats(n), *m = h_floats(n), *v = h_floats(n), *g = h_floats(n), *gs = h_floats(n);
    h_rand(p, n, 1, -1, 1);
    h_rand(m, n, 2, -0.1f, 0.1f);
    h_rand(v, n, 3, 0, 0.01f);
    tmm_optim *o[2];
    tmm_buffer *bp[2], *bg[2];
    tmm_recorder *r[2];
    for (int k = 0; k < 2; k++) {
        H_OK(tmm_optim_create(h_dev, &t, &cfg, &o[k]));
        H_OK(tmm_buffer_write(tmm_optim_m(o[k]).buffer, tmm_optim_m(o[k]).offset, m, n * 4));
        H_OK(tmm_buffer_write(tmm_optim_v(o[k]).buffer, tmm_optim_v(o[k]).offset, v, n * 4));
        bp[k] = h_buffer(p, n);
        bg[k] = h_buffer(NULL, n);
        r[k] = h_begin();
        H_OK(tmm_optim_record(o[k], r[k], tmm_whole(bp[k]), tmm_whole(bg[k])));
        H_OK(tmm_recorder_end(r[k]));
    }
    const uint32_t window = 3;
    tmm_loss_scale ref = { .scale = 0x1p10f };
    H_OK(tmm_optim_set_loss_scale(o[1], window, &ref));
    state_is(o[1], &ref, 0);

    float *got[2][3], *before[3];
    for (int j = 0; j < 3; j++) {
        got[0][j] = h_floats(n), got[1][j] = h_floats(n), before[j] = h_floats(n);
    }
    int fc1 = tmm_param_find(&t, "blocks.1.mlp.fc1.weight");
    /* overflows at steps 3 (inf) and 7 (NaN); window 3: S 2^10, 2^10, 2^10 -> 2^9, 2^9, 2^9, 2^9 -> 2^10,
     * 2^10 -> 2^9, ... */
    const uint32_t steps = 11;
    bool grew = false;
    for (uint32_t step = 1; step <= steps; step++) {
        const bool overflow = step == 3 || step == 7;
        const float S = ref.scale;
        /* norms about 30 * spread: clipped (max norm 1) or not */
        h_rand(g, n, 100 + step, step % 2 ? -1.0f : -1e-3f, step % 2 ? 1.0f : 1e-3f);
        if (overflow)
            g[t.params[fc1].offset + 4] = step == 3 ? INFINITY : NAN;
        for (uint64_t i = 0; i < n; i++)
            gs[i] = g[i] * S; /* exact: S is a power of two */
        h_read(bp[1], before[0], n);
        read_moments(o[1], before[1], before[2], n);
        tmm_optim_stats st[2];
        for (int k = 0; k < 2; k++) {
            H_OK(tmm_buffer_write(bg[k], 0, k ? gs : g, n * 4));
            H_OK(tmm_optim_set_step(o[k], step, 1e-2));
            H_OK(tmm_recorder_run(r[k]));
            st[k] = tmm_optim_get_stats(o[k]);
            h_read(bp[k], got[k][0], n);
            read_moments(o[k], got[k][1], got[k][2], n);
        }
        if (step == 2) { /* once against the double reference, from the state before the step */
            ref_optim_result rr = ref_adamw_step(&t, &cfg, step, (float)1e-2, S, before[0], gs, before[1], before[2]);
            float norm = (float)rr.grad_norm;
            h_compare("grad norm of grad / S", &st[1].grad_norm, &norm, 1, 0, 2e-6);
            h_compare("params, loss-scaled step", got[1][0], before[0], n, 1e-6, 2e-7);
            h_compare("m, loss-scaled step", got[1][1], before[1], n, 1e-7, 1e-5);
        }
        ref_loss_scale_update(&ref, window, overflow);
        cr_assert_eq(st[1].skipped, overflow ? 1u : 0u, "step %u", step);
        cr_assert_eq(st[1].loss_scale, S, "step %u ran with %g, not %g", step, (double)st[1].loss_scale, (double)S);
        cr_assert_eq(st[1].overflows, ref.overflows);
        cr_assert_eq(st[0].loss_scale, 1.0f);
        cr_assert_eq(st[0].overflows, 0u);
        state_is(o[1], &ref, step);
        grew |= ref.scale > S;
        if (overflow) {
            cr_assert(memcmp(got[1][0], before[0], n * 4) == 0 && memcmp(got[1][1], before[1], n * 4) == 0 &&
                      memcmp(got[1][2], before[2], n * 4) == 0, "step %u overflowed but changed the state", step);
        } else {
            cr_assert(memcmp(&st[0].grad_norm, &st[1].grad_norm, 4) == 0 &&
                      memcmp(&st[0].clip_scale, &st[1].clip_scale, 4) == 0 && st[0].sumsq == st[1].sumsq,
                      "step %u: norm %a clip %a, unscaled %a %a", step, (double)st[1].grad_norm,
                      (double)st[1].clip_scale, (double)st[0].grad_norm, (double)st[0].clip_scale);
        }
        static const char *names[3] = { "params", "m", "v" };
        for (int j = 0; j < 3; j++)
            same_bits(names[j], got[1][j], got[0][j], n, step);
    }
    cr_assert(grew && ref.overflows == 2, "the steps should cover growth and overflows");

    /* the cap and the floor */
    tmm_loss_scale edge = { .scale = 0x1p23f };
    H_OK(tmm_optim_set_loss_scale(o[1], 1, &edge));
    h_rand(g, n, 7, -1, 1);
    for (uint32_t k = 0; k < 4; k++) {
        const bool overflow = k >= 2;
        if (k == 2) {
            edge = (tmm_loss_scale){ .scale = 0x1p-23f, .good = 5, .overflows = 9 };
            H_OK(tmm_optim_set_loss_scale(o[1], 1, &edge));
            g[t.params[fc1].offset] = INFINITY;
        }
        H_OK(tmm_buffer_write(bg[1], 0, g, n * 4));
        H_OK(tmm_recorder_run(r[1]));
        ref_loss_scale_update(&edge, 1, overflow);
        state_is(o[1], &edge, 100 + k);
    }
    cr_assert_eq(edge.scale, (float)TMM_LOSS_SCALE_MIN);
    cr_assert_eq(edge.overflows, 11u);

    /* bad states; reset turns scaling off */
    static const float bad[] = { 3.0f, 0.0f, 0x1p25f, 0x1p-25f, INFINITY, NAN, -2.0f };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tmm_loss_scale b = { .scale = bad[i] };
        cr_assert_eq(tmm_optim_set_loss_scale(o[1], 4, &b), TMM_ERR_INVALID_ARGUMENT, "scale %g", (double)bad[i]);
        cr_assert(strstr(tmm_last_error(), "power of two"), "%s", tmm_last_error());
    }
    cr_assert_eq(tmm_optim_set_loss_scale(o[1], 0, &ref), TMM_ERR_INVALID_ARGUMENT);
    H_OK(tmm_optim_reset(o[1]));
    tmm_loss_scale off = { .scale = 1.0f };
    state_is(o[1], &off, 200);
    H_OK(tmm_optim_set_step(o[1], 1, 1e-3));
    cr_assert_eq(tmm_optim_get_hyper(o[1]).scale_window, 0u);
    H_OK(tmm_recorder_run(r[1]));
    state_is(o[1], &off, 201); /* an overflow without loss scaling leaves S alone */
    cr_assert_eq(tmm_optim_get_stats(o[1]).skipped, 1u);
    cr_assert_eq(tmm_optim_get_stats(o[1]).loss_scale, 1.0f);

    for (int k = 0; k < 2; k++) {
        tmm_recorder_destroy(r[k]);
        tmm_optim_destroy(o[k]);
        tmm_buffer_destroy(bp[k]);
        tmm_buffer_destroy(bg[k]);
        for (int j = 0; j < 3; j++)
            free(got[k][j]);
    }
    for (int j = 0; j < 3; j++)
        free(before[j]);
    free(p), free(m), free(v), free(g), free(gs);
    tmm_param_table_free(&t);
}

/* ---- models ----------------------------------------------------------------------- */

enum { B = 2 };

typedef struct trainee {
    tmm_model *model;
    tmm_optim *optim;
    tmm_recorder *fb, *opt;  /* forward + backward; the optimizer step */
    bool recorded;
    uint64_t n;
} trainee;

static void trainee_create(trainee *tr, const tmm_model_config *c, bool scaled, uint32_t window,
                           const tmm_loss_scale *state)
{
    tmm_optim_config cfg = tmm_optim_config_default();
    cfg.weight_decay = 0.01;
    memset(tr, 0, sizeof *tr);
    H_OK(tmm_model_create_impl(h_dev, c, B, TMM_TOEPLITZ_DIRECT, &tr->model));
    H_OK(tmm_optim_create(h_dev, tmm_model_table(tr->model), &cfg, &tr->optim));
    tr->n = tmm_model_table(tr->model)->arena_floats;
    if (scaled) {
        H_OK(tmm_optim_set_loss_scale(tr->optim, window, state));
        H_OK(tmm_model_set_loss_scale(tr->model, tmm_optim_loss_scale_view(tr->optim)));
    }
    H_OK(tmm_recorder_create(h_dev, &tr->fb));
    H_OK(tmm_recorder_create(h_dev, &tr->opt));
}

static void trainee_destroy(trainee *tr)
{
    tmm_recorder_destroy(tr->fb);
    tmm_recorder_destroy(tr->opt);
    tmm_optim_destroy(tr->optim);
    tmm_model_destroy(tr->model);
}

/* Step `step` (1-based) on its own batch; `poison`: an inf lands in the
 * gradients between the backward and the optimizer (an overflow). Records
 * on the first call (the batches keep their scored count). */
static float trainee_step(trainee *tr, uint32_t step, bool poison)
{
    const tmm_model_config *c = &tmm_model_table(tr->model)->config;
    const uint32_t N = B * c->n_ctx;
    uint32_t *tok = calloc(N, 4);
    int32_t *tgt = calloc(N, 4);
    for (uint32_t i = 0; i < N; i++) {
        tok[i] = (uint32_t)(tmm_rng_bits(50 + step, i) % c->vocab);
        tgt[i] = i % 4 == 1 ? -100 : (int32_t)(tmm_rng_bits(90 + step, i) % c->vocab);
    }
    H_OK(tmm_model_set_batch(tr->model, tok, tgt));
    if (!tr->recorded) {
        tr->recorded = true;
        tmm_view params = tmm_whole(tmm_model_param_buffer(tr->model));
        tmm_view grads = tmm_whole(tmm_model_grad_buffer(tr->model));
        H_OK(tmm_recorder_begin(tr->fb));
        H_OK(tmm_model_record(tr->model, tr->fb, true));
        H_OK(tmm_recorder_end(tr->fb));
        H_OK(tmm_recorder_begin(tr->opt));
        H_OK(tmm_optim_record(tr->optim, tr->opt, params, grads));
        H_OK(tmm_recorder_end(tr->opt));
    }
    H_OK(tmm_recorder_run(tr->fb));
    tmm_model_mark_run(tr->model, true);
    if (poison) {
        const tmm_param_table *t = tmm_model_table(tr->model);
        const float inf = INFINITY;
        H_OK(tmm_buffer_write(tmm_model_grad_buffer(tr->model), t->params[t->head].offset * 4 + 8, &inf, 4));
    }
    H_OK(tmm_optim_set_step(tr->optim, step, 1e-2));
    H_OK(tmm_recorder_run(tr->opt));
    float loss;
    H_OK(tmm_model_loss(tr->model, &loss));
    free(tok), free(tgt);
    return loss;
}

static void trainee_read(trainee *tr, float *state)
{
    H_OK(tmm_model_read_params(tr->model, state));
    read_moments(tr->optim, state + tr->n, state + 2 * tr->n, tr->n);
}

static tmm_model_config small_model(tmm_arch arch)
{
    tmm_model_config c = { .arch = arch, .vocab = 37, .d_model = 16, .n_ctx = 13, .n_layers = 2, .expansion = 2,
                           .kernel = 1, .seed = 5 };
    c.heads = arch == TMM_ARCH_TMM ? 4 : arch == TMM_ARCH_HYENA ? 0 : 2;
    c.window = arch == TMM_ARCH_SWA ? 4 : 0;
    tmm_model_config_resolve(&c);
    return c;
}

/* Every architecture, 6 steps from the same seed and batches: fp32 without
 * loss scaling, and with a scale from 2^16 that doubles every 2 steps. The
 * losses, norms, weights and moments keep the same bits at every step: the
 * backward is linear in the loss gradient and S a power of two. */
H_TEST(loss_scale, training_matches_unscaled_bit_for_bit)
{
    for (int a = 0; a < TMM_ARCH_COUNT; a++) {
        const tmm_model_config c = small_model((tmm_arch)a);
        const char *name = tmm_arch_name((tmm_arch)a);
        trainee tr[2];
        const tmm_loss_scale start = { .scale = 0x1p16f };
        trainee_create(&tr[0], &c, false, 0, NULL);
        trainee_create(&tr[1], &c, true, 2, &start);
        const uint64_t n = tr[0].n;
        float *s[2] = { h_floats(3 * n), h_floats(3 * n) };
        float last = 0;
        for (uint32_t step = 1; step <= 6; step++) {
            float loss[2];
            tmm_optim_stats st[2];
            for (int k = 0; k < 2; k++) {
                loss[k] = trainee_step(&tr[k], step, false);
                st[k] = tmm_optim_get_stats(tr[k].optim);
                trainee_read(&tr[k], s[k]);
            }
            cr_assert(memcmp(&loss[0], &loss[1], 4) == 0, "%s step %u: loss %a, unscaled %a", name,
                      step, (double)loss[1], (double)loss[0]);
            cr_assert(memcmp(&st[0].grad_norm, &st[1].grad_norm, 4) == 0, "%s step %u: grad norm %a, unscaled %a",
                      name, step, (double)st[1].grad_norm, (double)st[0].grad_norm);
            cr_assert_eq(st[1].skipped, 0u);
            cr_assert_eq(st[1].loss_scale, ldexpf(1.0f, 16 + (int)(step - 1) / 2));
            same_bits(name, s[1], s[0], 3 * n, step);
            last = loss[0];
        }
        printf("  %-12s 6 steps, scale 2^16 .. 2^18: loss %.4f, weights and moments bit-identical to fp32\n",
               name, (double)last);
        for (int k = 0; k < 2; k++) {
            trainee_destroy(&tr[k]);
            free(s[k]);
        }
    }
}

/* 8 steps with overflows at steps 3 and 6, against 4 steps, the state saved
 * (weights, moments, the scaler's state mid-window), everything made anew,
 * restored, and 4 more: the same bits. */
H_TEST(loss_scale, resume_across_an_overflow)
{
    const tmm_model_config c = small_model(TMM_ARCH_TMM);
    const uint32_t window = 2;
    const tmm_loss_scale start = { .scale = 0x1p16f };
    trainee whole, part;
    trainee_create(&whole, &c, true, window, &start);
    const uint64_t n = whole.n;
    for (uint32_t step = 1; step <= 8; step++)
        trainee_step(&whole, step, step == 3 || step == 6);
    float *a = h_floats(3 * n), *b = h_floats(3 * n);
    trainee_read(&whole, a);
    tmm_loss_scale sa;
    H_OK(tmm_optim_read_loss_scale(whole.optim, &sa));
    /* 2^16: good, good -> 2^17, overflow -> 2^16, good (saved here), good -> 2^17, overflow -> 2^16, good, good */
    tmm_loss_scale want = start;
    for (uint32_t step = 1; step <= 8; step++)
        ref_loss_scale_update(&want, window, step == 3 || step == 6);
    cr_assert(sa.scale == want.scale && sa.good == want.good && sa.overflows == 2, "scaler (%g, %u, %u)",
              (double)sa.scale, sa.good, sa.overflows);

    trainee_create(&part, &c, true, window, &start);
    for (uint32_t step = 1; step <= 4; step++)
        trainee_step(&part, step, step == 3);
    tmm_loss_scale saved;
    H_OK(tmm_optim_read_loss_scale(part.optim, &saved));
    cr_assert(saved.good == 1 && saved.overflows == 1, "saved mid-window: good %u, overflows %u", saved.good,
              saved.overflows);
    trainee_read(&part, b);
    trainee_destroy(&part);

    trainee_create(&part, &c, true, window, &saved);
    H_OK(tmm_model_write_params(part.model, b));
    H_OK(tmm_buffer_write(tmm_optim_m(part.optim).buffer, tmm_optim_m(part.optim).offset, b + n, n * 4));
    H_OK(tmm_buffer_write(tmm_optim_v(part.optim).buffer, tmm_optim_v(part.optim).offset, b + 2 * n, n * 4));
    for (uint32_t step = 5; step <= 8; step++)
        trainee_step(&part, step, step == 6);
    trainee_read(&part, b);
    tmm_loss_scale sb;
    H_OK(tmm_optim_read_loss_scale(part.optim, &sb));
    cr_assert(memcmp(&sa, &sb, sizeof sa) == 0, "the scaler after 4 + 4 steps differs from 8 steps");
    same_bits("4 + 4 resumed steps vs 8 (weights, moments)", b, a, 3 * n, 8);
    trainee_destroy(&whole);
    trainee_destroy(&part);
    free(a), free(b);
}

/* ---- the trainer ------------------------------------------------------------------ */

static void fp16_copy(tmm_train_config *c, const char *dir)
{
    tmm_train_config_default(c);
    c->model.d_model = 16;
    c->model.n_ctx = 16;
    c->model.n_layers = 1;
    c->copy_alphabet = 8;
    c->batch = 4;
    c->steps = 10;
    c->schedule.warmup_steps = 2;
    c->eval_every = 0;
    c->log_every = 1;
    c->target_accuracy = 0;
    c->precision = TMM_PRECISION_FP16;
    c->loss_scale = 1024;
    c->loss_scale_window = 3;
    snprintf(c->run_dir, sizeof c->run_dir, "%s", dir);
}

static void temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/tmm-lscale-XXXXXX");
    cr_assert_not_null(mkdtemp(buf));
}

static float *load_state(const char *dir, uint64_t *n, uint64_t *words, uint32_t *n_words)
{
    tmm_checkpoint ck;
    H_OK(tmm_checkpoint_load(dir, NULL, TMM_CHECKPOINT_STATE, &ck));
    *n = ck.table.arena_floats;
    float *s = h_floats(3 * *n);
    memcpy(s, ck.params, *n * 4);
    memcpy(s + *n, ck.state.m, *n * 4);
    memcpy(s + 2 * *n, ck.state.v, *n * 4);
    *n_words = ck.state.n_words;
    memcpy(words, ck.state.words, sizeof ck.state.words);
    tmm_checkpoint_free(&ck);
    return s;
}

typedef struct scales_seen {
    double scale[16];
    uint64_t overflows[16];
} scales_seen;

static void keep_scale(const tmm_train_progress *p, void *user)
{
    scales_seen *s = user;
    if (p->step < 16) {
        s->scale[p->step] = p->loss_scale;
        s->overflows[p->step] = p->overflow_steps;
    }
}

/* An fp16 run of 10 steps against 5, stopped and resumed: the same weights,
 * moments and scaler state (in the checkpoint's words); progress and
 * metrics.jsonl report the scale. Needs a model that accepts --precision fp16. */
H_TEST(loss_scale, trainer_fp16_resume_is_bit_exact)
{
    char a[64], b[64];
    temp_dir(a, sizeof a);
    temp_dir(b, sizeof b);
    tmm_train_config c;
    tmm_train_result r;
    scales_seen seen = { .scale = { 0 } };
    tmm_train_hooks watch = { .on_progress = keep_scale, .user = &seen };
    fp16_copy(&c, a);
    H_OK(tmm_train(h_dev, &c, NULL, &watch, &r));
    for (uint32_t step = 1; step <= 10; step++) {
        printf("  step %u: loss scale %g, overflows %llu\n", step, seen.scale[step],
               (unsigned long long)seen.overflows[step]);
        cr_assert(seen.scale[step] >= 1 && seen.scale[step] <= 0x1p24, "step %u: scale %g", step, seen.scale[step]);
    }

    fp16_copy(&c, b);
    tmm_train_hooks stop = { .stop_after = 5 };
    H_OK(tmm_train(h_dev, &c, NULL, &stop, &r));
    cr_assert_eq(r.step, 5);
    tmm_train_config resumed;
    H_OK(tmm_train_config_from_checkpoint(b, &resumed));
    cr_assert_eq(resumed.precision, TMM_PRECISION_FP16);
    cr_assert_eq(resumed.loss_scale_window, 3u);
    H_OK(tmm_train(h_dev, &resumed, b, NULL, &r));
    cr_assert_eq(r.step, 10);
    tmm_train_config_free(&resumed);

    uint64_t na, nb, wa[TMM_TRAIN_STATE_WORDS], wb[TMM_TRAIN_STATE_WORDS];
    uint32_t nwa, nwb;
    float *sa = load_state(a, &na, wa, &nwa), *sb = load_state(b, &nb, wb, &nwb);
    cr_assert_eq(na, nb);
    cr_assert_eq(nwa, 5u, "an fp16 run's state carries the scaler: %u words", nwa);
    cr_assert(nwa == nwb && memcmp(wa, wb, nwa * sizeof wa[0]) == 0, "the scaler's state differs after resuming");
    same_bits("5 + 5 resumed fp16 steps vs 10 (weights, moments)", sb, sa, 3 * na, 10);
    free(sa), free(sb);

    char path[128], line[512];
    snprintf(path, sizeof path, "%s/metrics.jsonl", b);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        cr_assert(strstr(line, "\"loss_scale\": ") && strstr(line, "\"overflow_steps\": "), "%s", line);
    }
    fclose(f);
    cr_assert_eq(lines, 10);
}

/* ---- the config keys ---------------------------------------------------------------- */

Test(loss_scale, config_keys)
{
    tmm_train_config c;
    tmm_train_config_default(&c);
    cr_assert_eq(c.loss_scale, 65536.0);
    cr_assert_eq(c.loss_scale_window, 1000u);
    c.model.vocab = 18; /* what tmm_train_prepare takes from the task */
    cr_assert_eq(tmm_train_config_check(&c), TMM_OK, "%s", tmm_last_error());
    const tmm_config_field *scale = tmm_config_field_by_flag("loss-scale");
    const tmm_config_field *window = tmm_config_field_by_flag("loss-scale-window");
    cr_assert(scale && window && strcmp(scale->section, "train") == 0 && strcmp(window->key, "loss_scale_window") == 0);
    cr_assert_eq(tmm_config_set_text(&c, scale, "0.5", true), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_config_set_text(&c, scale, "33554432", true), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_config_set_text(&c, window, "0", true), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_config_set_text(&c, scale, "3", true), TMM_OK);
    cr_assert_eq(tmm_train_config_check(&c), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "loss_scale must be a power of two"), "%s", tmm_last_error());
    cr_assert_eq(tmm_train_config_apply_json(&c, "{\"train\": {\"loss_scale\": 16777216, \"loss_scale_window\": 7}}",
                                             "test"), TMM_OK, "%s", tmm_last_error());
    cr_assert_eq(tmm_train_config_check(&c), TMM_OK, "%s", tmm_last_error());
    char *json = tmm_train_config_to_json(&c);
    tmm_train_config back;
    tmm_train_config_default(&back);
    cr_assert_eq(tmm_train_config_apply_json(&back, json, "round trip"), TMM_OK);
    cr_assert(back.loss_scale == 0x1p24 && back.loss_scale_window == 7u);
    free(json);
}
