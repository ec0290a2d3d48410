/* Training end to end on small settings: the copy task is learned (and not
 * with frozen Toeplitz weights), text training beats the unigram entropy,
 * resuming is bit-exact, gradient accumulation and stops work. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "model/checkpoint.h"
#include "train/trainer.h"

static void tiny_copy(tmm_train_config *c, const char *dir)
{
    tmm_train_config_default(c);
    c->model.d_model = 32;
    c->model.n_ctx = 32;
    c->model.n_layers = 2;
    c->model.heads = 0;
    c->copy_alphabet = 8;
    c->batch = 8;
    c->steps = 300;
    c->schedule.warmup_steps = 10;
    c->eval_every = 50;
    c->eval_batches = 4;
    c->log_every = 0;
    c->target_accuracy = 0;
    snprintf(c->run_dir, sizeof c->run_dir, "%s", dir);
}

static void temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/tmm-train-XXXXXX");
    cr_assert_not_null(mkdtemp(buf));
}

H_TEST(train, copy_is_learned_and_frozen_toeplitz_fails)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    tmm_train_config c;
    tiny_copy(&c, dir);
    tmm_train_result r;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &r));
    printf("  copy, 300 steps: held-out accuracy %.4f, loss %.4f\n", r.accuracy, r.loss);
    cr_assert_geq(r.accuracy, 0.99, "copy accuracy %g", r.accuracy);

    tiny_copy(&c, dir);
    c.model.frozen = true;
    /* the directory holds the first run: refused, unless it may be replaced */
    cr_assert_eq(tmm_train(h_dev, &c, NULL, NULL, &r), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "holds another run"), "%s", tmm_last_error());
    tmm_train_hooks replace = { .replace_run = true };
    H_OK(tmm_train(h_dev, &c, NULL, &replace, &r));
    printf("  copy, frozen Toeplitz: held-out accuracy %.4f (chance 0.125)\n", r.accuracy);
    cr_assert_lt(r.accuracy, 0.6, "the frozen ablation copied (accuracy %g)", r.accuracy);
}

static float *load_params(const char *dir, uint64_t *n)
{
    tmm_checkpoint ck;
    H_OK(tmm_checkpoint_load(dir, NULL, TMM_CHECKPOINT_STATE, &ck));
    *n = ck.table.arena_floats;
    float *p = malloc(*n * 4 * 3);
    memcpy(p, ck.params, *n * 4);
    memcpy(p + *n, ck.state.m, *n * 4);
    memcpy(p + 2 * *n, ck.state.v, *n * 4);
    tmm_checkpoint_free(&ck);
    return p;
}

H_TEST(train, resume_is_bit_exact)
{
    char a[64], b[64];
    temp_dir(a, sizeof a);
    temp_dir(b, sizeof b);
    tmm_train_config c;
    tmm_train_result r;
    tiny_copy(&c, a);
    c.steps = 12;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &r));
    cr_assert_eq(r.step, 12);

    tiny_copy(&c, b);
    c.steps = 12;
    tmm_train_hooks stop = { .stop_after = 6 };
    H_OK(tmm_train(h_dev, &c, NULL, &stop, &r));
    cr_assert_eq(r.step, 6);
    tmm_train_config resumed;
    H_OK(tmm_train_config_from_checkpoint(b, &resumed));
    cr_assert_eq(resumed.steps, 12);
    H_OK(tmm_train(h_dev, &resumed, b, NULL, &r));
    cr_assert_eq(r.step, 12);

    uint64_t na, nb;
    float *pa = load_params(a, &na), *pb = load_params(b, &nb);
    cr_assert_eq(na, nb);
    cr_assert(memcmp(pa, pb, na * 4 * 3) == 0, "6 + 6 resumed steps differ from 12 steps (weights or moments)");
    free(pa), free(pb);
    tmm_train_config_free(&resumed);
}

H_TEST(train, text_loss_drops_below_unigram_entropy)
{
    char dir[64], file[96];
    temp_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/corpus.txt", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    static const char *words[] = { "the ", "cat ", "sat ", "on ", "a ", "mat. ", "dog ", "ran ", "to ", "it. " };
    unsigned x = 1;
    for (int i = 0; i < 6000; i++) {
        x = x * 1103515245u + 12345u;
        fputs(words[(x >> 16) % 10], f);
        if (i % 40 == 39)
            fputc('\n', f);
    }
    fclose(f);
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.task = TMM_DATA_TEXT;
    c.text_files[c.text_file_count++] = strdup(file);
    c.model.d_model = 32;
    c.model.n_ctx = 32;
    c.model.n_layers = 2;
    c.model.heads = 2;
    c.batch = 8;
    c.steps = 300;
    c.schedule.warmup_steps = 20;
    c.eval_every = 300;
    c.eval_batches = 8;
    c.log_every = 0;
    c.target_accuracy = 0;
    snprintf(c.run_dir, sizeof c.run_dir, "%s/run", dir);
    tmm_data *data;
    H_OK(tmm_train_prepare(&c, &data));
    double entropy = tmm_data_unigram_entropy(data);
    tmm_data_destroy(data);
    tmm_train_result r;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &r));
    printf("  text: validation loss %.3f nats/token, unigram entropy %.3f\n", r.val_loss, entropy);
    cr_assert_lt(r.val_loss, 0.7 * entropy, "validation loss %g is not well below the unigram entropy %g",
                 r.val_loss, entropy);

    tmm_eval_result e;
    H_OK(tmm_eval_checkpoint(h_dev, c.run_dir, 8, 0, &e));
    cr_assert(fabs(e.loss - r.val_loss) < 1e-6, "tmm eval %g vs the trainer's %g", e.loss, r.val_loss);
    cr_assert(!e.copy && fabs(e.perplexity - exp(e.loss)) < 1e-9);
    tmm_train_config_free(&c);
}

H_TEST(train, accumulation_and_interrupts)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    char dir2[64];
    temp_dir(dir2, sizeof dir2);
    /* two micro-batches of 4 average to the gradient of one batch of 8 (the
     * copy task scores the same number of targets in every row), so the runs
     * agree up to float rounding */
    tmm_train_config c;
    tmm_train_result r, r2;
    tiny_copy(&c, dir);
    c.steps = 5;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &r));
    tiny_copy(&c, dir2);
    c.steps = 5;
    c.accum = 2;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &r2));
    uint64_t n1, n2;
    float *p1 = load_params(dir, &n1), *p2 = load_params(dir2, &n2);
    double worst = 0;
    for (uint64_t i = 0; i < n1; i++)
        worst = fmax(worst, fabs((double)p1[i] - p2[i]));
    printf("  accum 2 vs 1 after 5 steps: loss %.6f vs %.6f, max |dweight| %.2g\n", r2.loss, r.loss, worst);
    /* Adam divides by sqrt(v): for gradients near 0 rounding can change an
     * update by up to lr, so weights agree within the sum of the 5 learning
     * rates (4.5e-3), while the losses agree closely */
    cr_assert_lt(worst, 4.5e-3);
    cr_assert_lt(fabs(r.loss - r2.loss), 1e-5 * (1 + r.loss));
    free(p1), free(p2);

    volatile sig_atomic_t flag = 1; /* as SIGINT sets it */
    tmm_train_hooks hooks = { .stop = &flag, .replace_run = true };
    tiny_copy(&c, dir);
    H_OK(tmm_train(h_dev, &c, NULL, &hooks, &r));
    cr_assert(r.interrupted && r.step == 1, "stopped at step %llu", (unsigned long long)r.step);
    cr_assert(strstr(r.checkpoint, "step-000001"), "no checkpoint on interrupt: %s", r.checkpoint);

    tiny_copy(&c, dir);
    c.batch = 7;
    c.accum = 2;
    cr_assert_eq(tmm_train(h_dev, &c, NULL, NULL, &r), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "multiple of accum"), "%s", tmm_last_error());
}

/* A training run through the FFT path follows the direct one: same data,
 * same initialization, float rounding apart. */
H_TEST(train, fft_and_direct_runs_agree)
{
    char a[64], b[64];
    temp_dir(a, sizeof a);
    temp_dir(b, sizeof b);
    tmm_train_config c;
    tmm_train_result rd, rf;
    tiny_copy(&c, a);
    c.steps = 20;
    c.toeplitz_impl = TMM_TOEPLITZ_DIRECT;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &rd));
    tiny_copy(&c, b);
    c.steps = 20;
    c.toeplitz_impl = TMM_TOEPLITZ_FFT;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &rf));
    uint64_t na, nb;
    float *pa = load_params(a, &na), *pb = load_params(b, &nb);
    double worst = 0;
    for (uint64_t i = 0; i < na; i++)
        worst = fmax(worst, fabs((double)pa[i] - pb[i]));
    printf("  20 steps, direct vs fft: loss %.6f vs %.6f, held-out accuracy %.4f vs %.4f, max |dweight| %.2g\n",
           rd.loss, rf.loss, rd.accuracy, rf.accuracy, worst);
    /* Adam bounds each step's change by about lr: weights agree within the
     * sum of the 20 learning rates (0.036); the losses much closer */
    cr_assert_lt(fabs(rd.loss - rf.loss), 1e-3 * (1 + rd.loss));
    cr_assert_lt(worst, 0.036);
    free(pa), free(pb);
}

static void keep_grad_norm(const tmm_train_progress *p, void *user) { *(double *)user = p->grad_norm; }

/* Gradient accumulation is the same step as one batch in document mode too,
 * where micro-batches score different numbers of targets: the loss is the
 * mean over the whole step's scored targets, not a mean of micro-batch means
 * (which weighed a micro-batch of 3 scored targets like one of 128). */
H_TEST(train, accumulation_weights_by_scored_targets)
{
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/docs.jsonl", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    uint64_t x = 12345;
    for (int d = 0; d < 300; d++) { /* documents of 1 to 100 bytes: rows score 1 to 64 targets */
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int len = 1 + (int)((x >> 33) % 100);
        fputs("{\"text\": \"", f);
        for (int i = 0; i < len; i++)
            fputc("ab"[i % 2], f);
        fputs("\"}\n", f);
    }
    fclose(f);
    double loss[3], norm[3];
    const uint32_t accums[3] = { 1, 2, 4 };
    for (int i = 0; i < 3; i++) {
        char run[128];
        snprintf(run, sizeof run, "%s/run%u", dir, accums[i]);
        tmm_train_config c;
        tmm_train_config_default(&c);
        c.task = TMM_DATA_TEXT;
        c.text_files[c.text_file_count++] = strdup(path);
        c.text_mode = TMM_TEXT_DOCUMENTS;
        c.model.d_model = 32;
        c.model.n_ctx = 64;
        c.model.n_layers = 2;
        c.batch = 4;
        c.accum = accums[i];
        c.steps = 1;
        c.eval_every = 0;
        c.log_every = 1;
        snprintf(c.run_dir, sizeof c.run_dir, "%s", run);
        tmm_train_hooks hooks = { .on_progress = keep_grad_norm, .user = &norm[i] };
        tmm_train_result r;
        H_OK(tmm_train(h_dev, &c, NULL, &hooks, &r));
        loss[i] = r.loss;
        tmm_train_config_free(&c);
    }
    printf("  documents, accum 1 / 2 / 4: step-1 loss %.6f / %.6f / %.6f, grad norm %.5f / %.5f / %.5f\n", loss[0],
           loss[1], loss[2], norm[0], norm[1], norm[2]);
    for (int i = 1; i < 3; i++) {
        cr_assert_lt(fabs(loss[i] - loss[0]), 1e-5 * loss[0], "accum %u: loss %.7f vs %.7f", accums[i], loss[i],
                     loss[0]);
        cr_assert_lt(fabs(norm[i] - norm[0]), 1e-5 * norm[0], "accum %u: grad norm %.7f vs %.7f", accums[i], norm[i],
                     norm[0]);
    }
}
