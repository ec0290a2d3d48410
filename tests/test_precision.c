/* Training with 16-bit activations and recomputation follows fp32 training
 * (docs/model.md "Precision and recomputation"): the loss of every logged
 * step on the copy and text tasks stays within a stated tolerance of the
 * fp32 run's, and fp16 still learns to copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "train/trainer.h"

enum { STEPS = 240, EVERY = 10, POINTS = STEPS / EVERY };

typedef struct curve {
    double loss[POINTS];
    uint32_t n;
} curve;

static void record(const tmm_train_progress *p, void *user)
{
    curve *c = user;
    if (p->step % EVERY == 0 && c->n < POINTS)
        c->loss[c->n++] = p->loss;
}

static void temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/tmm-precision-XXXXXX");
    cr_assert_not_null(mkdtemp(buf));
}

static void copy_task(tmm_train_config *c)
{
    tmm_train_config_default(c);
    c->model.d_model = 32;
    c->model.n_ctx = 32;
    c->model.n_layers = 3;
    c->copy_alphabet = 8;
    c->batch = 8;
}

/* A corpus of random words from ten (as in test_train.c). */
static void text_task(tmm_train_config *c, const char *dir)
{
    char file[128];
    snprintf(file, sizeof file, "%s/corpus.txt", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    static const char *words[] = { "the ", "cat ", "sat ", "on ", "a ", "mat. ", "dog ", "ran ", "to ", "it. " };
    unsigned x = 1;
    for (int i = 0; i < 6000; i++) {
        x = x * 1103515245u + 12345u;
        fputs(words[(x >> 16) % 10], f);
    }
    fclose(f);
    tmm_train_config_default(c);
    c->task = TMM_DATA_TEXT;
    c->text_files[c->text_file_count++] = strdup(file);
    c->model.d_model = 32;
    c->model.n_ctx = 32;
    c->model.n_layers = 3;
    c->model.heads = 2;
    c->batch = 8;
}

/* Trains `setup`'s task at this precision and recomputation into dir/NAME. */
static tmm_train_result train(void (*setup)(tmm_train_config *, const char *), const char *dir, tmm_precision p,
                              tmm_recompute rc, curve *out)
{
    tmm_train_config c;
    setup(&c, dir);
    c.steps = STEPS;
    c.schedule.warmup_steps = 20;
    c.eval_every = STEPS;
    c.eval_batches = 8;
    c.log_every = EVERY;
    c.target_accuracy = 0;
    c.precision = p;
    c.recompute = rc;
    snprintf(c.run_dir, sizeof c.run_dir, "%s/run-%d-%d", dir, (int)p, (int)rc);
    memset(out, 0, sizeof *out);
    tmm_train_hooks hooks = { .on_progress = record, .user = out };
    tmm_train_result r;
    H_OK(tmm_train(h_dev, &c, NULL, &hooks, &r));
    tmm_train_config_free(&c);
    cr_assert_eq(out->n, POINTS);
    return r;
}

static void copy_setup(tmm_train_config *c, const char *dir) { (void)dir, copy_task(c); }

/* Every logged loss within rtol of the fp32 run's (or atol near zero). */
static void follow(const char *what, const curve *ref, const curve *got, double rtol, double atol)
{
    double worst = 0;
    for (uint32_t i = 0; i < POINTS; i++) {
        double d = fabs(got->loss[i] - ref->loss[i]), bound = rtol * ref->loss[i] + atol;
        worst = fmax(worst, d / bound);
        cr_assert(d <= bound, "%s: step %u loss %.6g, fp32 %.6g (bound %.3g)", what, (i + 1) * EVERY,
                  got->loss[i], ref->loss[i], bound);
    }
    printf("  %-28s final loss %.5g (fp32 %.5g); worst |difference| %.3f of the bound\n", what,
           got->loss[POINTS - 1], ref->loss[POINTS - 1], worst);
}

/* The bounds: 16 bits round the weight matrices the matmuls read (the
 * forward moves by about u of the loss) and move each step's gradients by a
 * few u of their scale (test_recompute: up to 14 u), and training compounds
 * it; over these steps a loss stays within 4 u of itself for fp16
 * (u = 2^-11) and 2.5 u for bf16 (2^-8), about 0.2% and 1%; atol covers
 * losses near zero. (Measured: at most 0.36 of these bounds.) */
Test(precision, copy_follows_fp32, .init = h_init, .fini = h_fini, .timeout = 900)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    curve ref, h16, b16;
    tmm_train_result r32 = train(copy_setup, dir, TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE, &ref);
    tmm_train_result r16 = train(copy_setup, dir, TMM_PRECISION_FP16, TMM_RECOMPUTE_BLOCK, &h16);
    train(copy_setup, dir, TMM_PRECISION_BF16, TMM_RECOMPUTE_MIXER, &b16);
    printf("  copy: held-out accuracy fp32 %.4f, fp16 + block recompute %.4f\n", r32.accuracy, r16.accuracy);
    follow("copy fp16 + block recompute", &ref, &h16, 2e-3, 1e-4);
    follow("copy bf16 + mixer recompute", &ref, &b16, 1e-2, 1e-3);
    cr_assert_geq(r16.accuracy, 0.99, "fp16 copy accuracy %g", r16.accuracy);
}

Test(precision, text_follows_fp32, .init = h_init, .fini = h_fini, .timeout = 900)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    curve ref, h16, b16;
    train(text_task, dir, TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE, &ref);
    train(text_task, dir, TMM_PRECISION_FP16, TMM_RECOMPUTE_NONE, &h16);
    train(text_task, dir, TMM_PRECISION_BF16, TMM_RECOMPUTE_BLOCK, &b16);
    follow("text fp16", &ref, &h16, 2e-3, 1e-4);
    follow("text bf16 + block recompute", &ref, &b16, 1e-2, 1e-3);
}
