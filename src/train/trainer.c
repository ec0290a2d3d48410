#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer.h"
#include "files.h"
#include "io/limits.h"
#include "model/arch.h"
#include "model/distilled.h"
#include "model/model.h"
#include "ops/ops.h"
#include "text/tokenizer.h"
#include "model/checkpoint.h"
#include "train/data.h"
#include "train/dist.h"
#include "train/optim.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

tmm_status tmm_train_prepare(tmm_train_config *c, tmm_data **out)
{
    *out = NULL;
    tmm_data_config dc;
    tmm_data_config_init(&dc);
    dc.task = c->task;
    dc.seed = c->data_seed;
    dc.n = c->model.n_ctx;
    dc.copy_alphabet = c->copy_alphabet;
    dc.mqar = c->mqar;
    dc.text_paths = (const char *const *)c->text_files;
    dc.text_path_count = c->text_file_count;
    dc.text_mode = c->text_mode;
    dc.val_fraction = c->val_fraction;
    if (c->task == TMM_DATA_TEXT && c->text_file_count == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the text task needs training files: --data FILE");
    tmm_data *data;
    TMM_TRY(tmm_data_create(&dc, &data));
    uint32_t need = tmm_data_vocab(data);
    if (c->model.vocab == 0)
        c->model.vocab = need;
    tmm_model_config_resolve(&c->model);
    if (c->schedule.peak_lr == 0)
        c->schedule.peak_lr = tmm_data_task_generated(c->task) ? TMM_COPY_PEAK_LR : tmm_arch_of(c->model.arch)->default_lr;
    tmm_status s = TMM_OK;
    if (c->model.vocab < need && tmm_data_tokenizer_path(data))
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model vocab %u is smaller than the %u tokens of the shards' tokenizer "
                     "%s: raise --vocab to %u or more (or 0: the tokenizer's)", c->model.vocab, need,
                     tmm_data_tokenizer_path(data), need);
    else if (c->model.vocab < need)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model vocab %u is smaller than the task's %u tokens", c->model.vocab,
                     need);
    if (s == TMM_OK)
        s = tmm_train_config_check(c);
    if (s != TMM_OK) {
        tmm_data_destroy(data);
        return s;
    }
    *out = data;
    return TMM_OK;
}

/* ---- held-out evaluation ---------------------------------------------------- */

typedef struct batch_buf {
    uint32_t *tokens;
    int32_t *targets;
} batch_buf;

static tmm_status evaluate_batch(tmm_model *m, const tmm_data *data, uint64_t index, uint64_t row_limit,
                                 uint32_t *pred, batch_buf *b, double *loss_sum, uint64_t *scored, uint64_t *correct);

/* The mean loss and accuracy over `batches` held-out batches; rows from
 * row_limit on (counting from the first batch's first row) are not scored
 * (0: no limit), so one pass over a split scores each of its rows once.
 * With several ranks (dist), a batch is the ranks' model batches together:
 * rank r evaluates its part, and the sums are added across ranks. */
static tmm_status evaluate(tmm_model *m, const tmm_data *data, uint32_t batches, uint64_t row_limit, uint32_t *pred,
                           batch_buf *b, tmm_dist *dist, double *loss, double *accuracy, uint64_t *scored_out)
{
    const uint64_t ranks = (uint64_t)tmm_dist_size(dist), rank = (uint64_t)tmm_dist_rank(dist);
    double loss_sum = 0;
    uint64_t scored = 0, correct = 0;
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; s == TMM_OK && i < batches; i++)
        s = evaluate_batch(m, data, i * ranks + rank, row_limit, pred, b, &loss_sum, &scored, &correct);
    double sums[3] = { loss_sum, (double)scored, (double)correct }; /* counts: exact below 2^53 */
    s = tmm_dist_agree(dist, s, "evaluate");
    if (s == TMM_OK)
        s = tmm_dist_sum_f64(dist, sums, 3, "the evaluation's sums");
    if (s != TMM_OK)
        return s;
    loss_sum = sums[0], scored = (uint64_t)sums[1], correct = (uint64_t)sums[2];
    if (scored == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the held-out batches hold no scored token to evaluate on");
    *loss = loss_sum / (double)scored;
    *accuracy = (double)correct / (double)scored;
    if (scored_out)
        *scored_out = scored;
    return TMM_OK;
}

/* Adds held-out batch `index` (of the model's batch size) to the sums. */
static tmm_status evaluate_batch(tmm_model *m, const tmm_data *data, uint64_t i, uint64_t row_limit, uint32_t *pred,
                                 batch_buf *b, double *loss_sum, uint64_t *scored, uint64_t *correct)
{
    const uint32_t B = tmm_model_batch(m), n = tmm_model_table(m)->config.n_ctx;
    TMM_TRY(tmm_data_batch(data, TMM_SPLIT_VAL, i, B, n, b->tokens, b->targets));
    for (uint64_t r = 0; row_limit && r < B; r++)
        if (i * B + r >= row_limit)
            for (uint32_t t = 0; t < n; t++)
                b->targets[r * n + t] = TMM_TARGET_IGNORE;
    TMM_TRY(tmm_model_set_batch(m, b->tokens, b->targets));
    TMM_TRY(tmm_model_run(m, false));
    float l;
    TMM_TRY(tmm_model_loss(m, &l));
    TMM_TRY(tmm_model_argmax(m, pred));
    uint32_t here = tmm_model_scored(m);
    *loss_sum += (double)l * here; /* the model's loss is the mean over this batch's scored targets */
    *scored += here;
    for (uint32_t r = 0; r < B * n; r++)
        *correct += b->targets[r] >= 0 && pred[r] == (uint32_t)b->targets[r];
    return TMM_OK;
}

/* ---- the run ---------------------------------------------------------------- */

typedef struct run {
    tmm_device *dev;
    tmm_train_config *c;
    tmm_data *data;
    tmm_model *model;
    tmm_optim *optim;
    /* one recording per model slot: [fwd, bwd, (optimizer | axpy into acc | nothing)] */
    tmm_recorder *step_rec[TMM_MODEL_SLOTS];
    uint32_t recorded_scored[TMM_MODEL_SLOTS];
    bool recorded[TMM_MODEL_SLOTS];
    tmm_recorder *opt_rec;    /* accumulation or several ranks: [(staging -> grads), optimizer, (zero acc)] */
    tmm_buffer *acc;          /* accumulated gradients (accum > 1) */
    /* several ranks: the gradients (grads or acc) go through a host-visible
     * staging buffer (send_rec copies them there) to be summed across ranks */
    tmm_dist *dist;
    uint32_t rank, ranks;
    tmm_buffer *staging;
    tmm_recorder *send_rec;
    uint32_t micro, n;
    batch_buf host[TMM_MODEL_SLOTS], scratch_batch;
    uint32_t *pred;
    FILE *metrics;
    char *config_json;
    tmm_lock *lock;
    bool owns_data;
} run;

/* Records the step of the model's current slot. */
static tmm_status record_step(run *R, uint32_t slot)
{
    const tmm_param_table *t = tmm_model_table(R->model);
    tmm_view params = tmm_whole(tmm_model_param_buffer(R->model));
    tmm_view grads = tmm_whole(tmm_model_grad_buffer(R->model));
    tmm_recorder *r = R->step_rec[slot];
    TMM_TRY(tmm_recorder_begin(r));
    TMM_TRY(tmm_model_record(R->model, r, true));
    if (R->c->accum == 1 && R->ranks == 1) {
        TMM_TRY(tmm_optim_record(R->optim, r, params, grads));
    } else if (R->c->accum > 1) {
        /* each micro-batch's gradient is already divided by the step's scored count: they add up */
        TMM_TRY(tmm_op_axpy(r, 1.0f, grads, tmm_whole(R->acc), (uint32_t)t->arena_floats));
    }
    TMM_TRY(tmm_recorder_end(r));
    R->recorded[slot] = true;
    R->recorded_scored[slot] = tmm_model_loss_denominator(R->model);
    return TMM_OK;
}

/* The gradients the optimizer reads: the model's, or their sum over micro-batches. */
static tmm_view grad_source(run *R)
{
    const uint64_t bytes = tmm_model_table(R->model)->arena_floats * 4;
    return tmm_sub(R->c->accum > 1 ? R->acc : tmm_model_grad_buffer(R->model), 0, bytes);
}

/* Records the update of a step whose gradients are accumulated or summed
 * across ranks: opt_rec = [(staging -> gradients), optimizer, (zero acc)],
 * and with several ranks send_rec = [gradients -> staging]. */
static tmm_status record_update(run *R)
{
    const tmm_param_table *t = tmm_model_table(R->model);
    tmm_view params = tmm_whole(tmm_model_param_buffer(R->model)), g = grad_source(R);
    TMM_TRY(tmm_recorder_create(R->dev, &R->opt_rec));
    TMM_TRY(tmm_recorder_begin(R->opt_rec));
    if (R->staging)
        TMM_TRY(tmm_record_copy(R->opt_rec, tmm_sub(R->staging, 0, g.size), g));
    TMM_TRY(tmm_optim_record(R->optim, R->opt_rec, params, g));
    if (R->c->accum > 1)
        TMM_TRY(tmm_op_fill(R->opt_rec, tmm_whole(R->acc), (uint32_t)t->arena_floats, 0.0f));
    TMM_TRY(tmm_recorder_end(R->opt_rec));
    if (!R->staging)
        return TMM_OK;
    TMM_TRY(tmm_recorder_create(R->dev, &R->send_rec));
    TMM_TRY(tmm_recorder_begin(R->send_rec));
    TMM_TRY(tmm_record_copy(R->send_rec, g, tmm_sub(R->staging, 0, g.size)));
    return tmm_recorder_end(R->send_rec);
}

/* The data's index of micro-batch i (of R->micro rows) of step s on this
 * rank: the ranks' parts of a step follow each other, so N ranks read the
 * rows of one process's step, in its order. */
static uint64_t micro_index(const run *R, uint64_t s, uint32_t i)
{
    return ((s * R->ranks) + R->rank) * R->c->accum + i;
}

/* Generates micro-batch `index` and uploads it into a slot (recording that
 * slot's step again if the loss denominator changed). denominator: the
 * scored targets of the whole step (0: this micro-batch's own). The slot must
 * not be in use by the device. */
static tmm_status prepare(run *R, uint64_t index, uint32_t slot, uint32_t denominator)
{
    batch_buf *b = &R->host[slot];
    TMM_TRY(tmm_data_batch(R->data, TMM_SPLIT_TRAIN, index, R->micro, R->n, b->tokens, b->targets));
    tmm_model_set_slot(R->model, slot);
    TMM_TRY(tmm_model_set_batch(R->model, b->tokens, b->targets));
    if (denominator)
        tmm_model_set_loss_denominator(R->model, denominator);
    if (!R->recorded[slot] || tmm_model_loss_denominator(R->model) != R->recorded_scored[slot])
        TMM_TRY(record_step(R, slot));
    return TMM_OK;
}

/* The scored targets of optimizer step s over all its micro-batches (of
 * every rank: each generates the others' rows to count them, which costs CPU
 * time but no exchange): the denominator of the step's loss (the spec's mean
 * over the whole batch). */
static tmm_status step_scored(run *R, uint64_t s, uint32_t *total)
{
    batch_buf *b = &R->scratch_batch;
    uint64_t sum = 0;
    const uint64_t micros = (uint64_t)R->c->accum * R->ranks;
    for (uint64_t i = 0; i < micros; i++) {
        TMM_TRY(tmm_data_batch(R->data, TMM_SPLIT_TRAIN, s * micros + i, R->micro, R->n, b->tokens,
                               b->targets));
        for (size_t k = 0; k < (size_t)R->micro * R->n; k++)
            sum += b->targets[k] >= 0;
    }
    if (sum > UINT32_MAX)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a step scores %llu targets, more than 2^32: use a smaller batch",
                        (unsigned long long)sum);
    *total = sum ? (uint32_t)sum : 1;
    return TMM_OK;
}

static tmm_status submit(run *R, uint64_t step, uint32_t slot)
{
    if (!R->opt_rec) /* with accumulation or several ranks the optimizer runs in opt_rec */
        TMM_TRY(tmm_optim_set_step(R->optim, (uint32_t)(step + 1), tmm_lr_at(&R->c->schedule, step, R->c->steps)));
    return tmm_recorder_submit(R->step_rec[slot]);
}

/* Waits for the step in a slot and returns its loss. */
static tmm_status finish(run *R, uint32_t slot, double *loss)
{
    TMM_TRY(tmm_recorder_wait(R->step_rec[slot]));
    tmm_model_set_slot(R->model, slot);
    tmm_model_mark_run(R->model, true);
    float l;
    TMM_TRY(tmm_model_loss(R->model, &l));
    *loss = l;
    return TMM_OK;
}

/* fp16 runs scale the loss (train/optim.h); the others keep a fixed scale of 1. */
static bool loss_scaling(const tmm_train_config *c) { return c->precision == TMM_PRECISION_FP16; }

/* The train state's words: the data position and seed, then with loss
 * scaling its state (the scale's float bits, the good count, the overflows). */
enum { WORD_POSITION, WORD_SEED, WORD_SCALE, WORD_GOOD, WORD_OVERFLOWS, WORDS_SCALED };

static tmm_status save(run *R, uint64_t step, tmm_train_result *res)
{
    const tmm_param_table *t = tmm_model_table(R->model);
    const uint64_t floats = t->arena_floats;
    float *params = malloc(floats * 4), *m = malloc(floats * 4), *v = malloc(floats * 4);
    tmm_status s = (params && m && v) ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_view mv = tmm_optim_m(R->optim), vv = tmm_optim_v(R->optim);
    if (s == TMM_OK)
        s = tmm_model_read_params(R->model, params);
    if (s == TMM_OK)
        s = tmm_buffer_read(mv.buffer, mv.offset, m, floats * 4);
    if (s == TMM_OK)
        s = tmm_buffer_read(vv.buffer, vv.offset, v, floats * 4);
    tmm_loss_scale ls = { 0 };
    if (s == TMM_OK && loss_scaling(R->c))
        s = tmm_optim_read_loss_scale(R->optim, &ls);
    if (s == TMM_OK) {
        tmm_train_state st = { .step = step, .m = m, .v = v, .n_words = WORD_SEED + 1,
                               .words = { [WORD_POSITION] = step * R->c->accum, [WORD_SEED] = R->c->data_seed } };
        if (loss_scaling(R->c)) {
            uint32_t bits;
            memcpy(&bits, &ls.scale, sizeof bits);
            st.words[WORD_SCALE] = bits;
            st.words[WORD_GOOD] = ls.good;
            st.words[WORD_OVERFLOWS] = ls.overflows;
            st.n_words = WORDS_SCALED;
        }
        const bool shards = tmm_data_tokenizer_path(R->data) != NULL;
        char fp[20];
        snprintf(fp, sizeof fp, "%016llx", (unsigned long long)tmm_data_tokenizer_fingerprint(R->data));
        tmm_st_meta extra[] = { { "task", tmm_data_task_name(R->c->task) },
                                { "tokenizer", shards ? TMM_RUN_TOKENIZER
                                               : tmm_data_task_generated(R->c->task) ? "copy-symbols" : "bytes" },
                                { "train_config", R->config_json },
                                { "tokenizer_fingerprint", fp } };
        s = tmm_checkpoint_save(R->c->run_dir, step, t, params, &st, extra, shards ? 4 : 3, R->c->keep);
    }
    if (s == TMM_OK)
        tmm_checkpoint_step_dir(R->c->run_dir, step, res->checkpoint, sizeof res->checkpoint);
    free(params), free(m), free(v);
    return s;
}

/* A shard run resumes and evaluates on shards of its own tokenizer only. */
static tmm_status check_tokenizer(const tmm_checkpoint *ck, const tmm_data *data)
{
    const char *fp = tmm_checkpoint_meta(ck, "tokenizer_fingerprint");
    const char *data_tok = tmm_data_tokenizer_path(data);
    if (!fp && !data_tok)
        return TMM_OK;
    char want[20];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)tmm_data_tokenizer_fingerprint(data));
    if (!fp)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s was trained on %s, not on shards of tokenizer %s: train it on "
                        "the data it was trained on", ck->dir, tmm_checkpoint_meta(ck, "tokenizer") ?
                        tmm_checkpoint_meta(ck, "tokenizer") : "bytes", data_tok);
    if (!data_tok)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s was trained on prepared shards (tokenizer %s): give it shards "
                        "of that tokenizer (--data DIR of tmm prepare)", ck->dir, fp);
    if (strcmp(fp, want) != 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards were written with another tokenizer (%s, fingerprint "
                        "%s) than the run's (fingerprint %s, %s): prepare the text with the run's tokenizer.json",
                        data_tok, want, fp, ck->dir);
    return TMM_OK;
}

/* The recipe's init scales on the model's fresh weights (a resumed run's
 * are then replaced by its checkpoint's). */
static tmm_status recipe_init(run *R)
{
    const tmm_param_table *t = tmm_model_table(R->model);
    if (R->c->optim.recipe == TMM_RECIPE_UNIFORM)
        return TMM_OK;
    float *params = malloc(t->arena_floats * sizeof *params);
    tmm_status s = params ? tmm_model_read_params(R->model, params)
                          : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        tmm_recipe_scale_init(t, R->c->optim.recipe, params);
        s = tmm_model_write_params(R->model, params);
    }
    free(params);
    return s;
}

static tmm_status restore(run *R, const char *path, uint64_t *step)
{
    tmm_checkpoint ck;
    TMM_TRY(tmm_checkpoint_load(path, &R->c->model, TMM_CHECKPOINT_STATE, &ck));
    tmm_status s = TMM_OK;
    if (!ck.has_state)
        s = tmm_fail(TMM_ERR_IO, "%s has no training state to resume from", ck.dir);
    const uint64_t bytes = ck.table.arena_floats * 4;
    tmm_view mv = tmm_optim_m(R->optim), vv = tmm_optim_v(R->optim);
    if (s == TMM_OK)
        s = tmm_model_write_params(R->model, ck.params);
    if (s == TMM_OK)
        s = tmm_buffer_write(mv.buffer, mv.offset, ck.state.m, bytes);
    if (s == TMM_OK)
        s = tmm_buffer_write(vv.buffer, vv.offset, ck.state.v, bytes);
    if (s == TMM_OK && ck.state.n_words > WORD_POSITION && ck.state.words[WORD_POSITION] != ck.step * R->c->accum)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s was saved with another accumulation setting", ck.dir);
    /* a checkpoint of a run without loss scaling: the scale starts afresh */
    if (s == TMM_OK && loss_scaling(R->c) && ck.state.n_words >= WORDS_SCALED) {
        const uint64_t *w = ck.state.words;
        uint32_t bits = (uint32_t)w[WORD_SCALE];
        tmm_loss_scale ls = { .good = (uint32_t)w[WORD_GOOD], .overflows = (uint32_t)w[WORD_OVERFLOWS] };
        memcpy(&ls.scale, &bits, sizeof bits);
        if (w[WORD_SCALE] > UINT32_MAX || w[WORD_GOOD] > UINT32_MAX || w[WORD_OVERFLOWS] > UINT32_MAX)
            s = tmm_fail(TMM_ERR_IO, "%s: the loss scale's state in its words is malformed", ck.dir);
        else if ((s = tmm_optim_set_loss_scale(R->optim, R->c->loss_scale_window, &ls)) != TMM_OK)
            s = tmm_fail(TMM_ERR_IO, "%s: the loss scale's state in its words is invalid (%g)", ck.dir,
                         (double)ls.scale);
    }
    if (s == TMM_OK)
        s = check_tokenizer(&ck, R->data);
    *step = ck.step;
    tmm_checkpoint_free(&ck);
    return s;
}

static void write_metrics(run *R, const tmm_train_progress *p)
{
    if (!R->metrics)
        return;
    char norm[32] = "null"; /* a skipped step's norm is inf or NaN, which JSON cannot write */
    if (isfinite(p->grad_norm))
        snprintf(norm, sizeof norm, "%.6g", p->grad_norm);
    fprintf(R->metrics, "{\"step\": %llu, \"loss\": %.6g, \"lr\": %.6g, \"grad_norm\": %s, \"tokens_per_s\": %.6g, "
                        "\"elapsed_s\": %.3f",
            (unsigned long long)p->step, p->loss, p->lr, norm, p->tokens_per_s, p->elapsed_s);
    if (p->loss_scale > 0)
        fprintf(R->metrics, ", \"loss_scale\": %.9g, \"overflow_steps\": %llu", p->loss_scale,
                (unsigned long long)p->overflow_steps);
    if (p->eval) {
        fprintf(R->metrics, ", \"val_loss\": %.6g", p->val_loss);
        fprintf(R->metrics, ", \"%s\": %.6g", tmm_data_accuracy_key(R->c->task), p->accuracy);
    }
    fputs("}\n", R->metrics);
    fflush(R->metrics);
}

static void free_run(run *R)
{
    for (uint32_t k = 0; k < TMM_MODEL_SLOTS; k++) {
        tmm_recorder_destroy(R->step_rec[k]);
        free(R->host[k].tokens), free(R->host[k].targets);
    }
    tmm_recorder_destroy(R->opt_rec);
    tmm_buffer_destroy(R->acc);
    tmm_optim_destroy(R->optim);
    tmm_model_destroy(R->model);
    if (R->owns_data)
        tmm_data_destroy(R->data);
    free(R->scratch_batch.tokens), free(R->scratch_batch.targets), free(R->pred);
    free(R->config_json);
    if (R->metrics)
        fclose(R->metrics);
    tmm_recorder_destroy(R->send_rec);
    tmm_buffer_destroy(R->staging);
    tmm_lock_release(R->lock);
}

/* Floats in one bucket (16 MiB) of the gradients' sum across ranks: buckets
 * are in flight together, so the reduction of one proceeds while the next is
 * sent. */
#define GRAD_BUCKET_FLOATS (4u << 20)

/* One optimizer step with gradient accumulation or several ranks:
 * micro-batches one after the other, then (several ranks) the gradients'
 * sum across ranks, then the optimizer (no overlap with the host). Each
 * micro-batch's loss and gradient are its per-target sums over the step's
 * scored count (of all ranks), so they add up to the same step as one batch
 * of the whole size. *loss: this rank's part of the step's loss. */
static tmm_status accumulated_step(run *R, uint64_t s, double *loss)
{
    uint32_t total = 1;
    TMM_TRY(step_scored(R, s, &total));
    *loss = 0;
    for (uint32_t i = 0; i < R->c->accum; i++) {
        double l;
        TMM_TRY(prepare(R, micro_index(R, s, i), 0, total));
        TMM_TRY(submit(R, s, 0));
        TMM_TRY(finish(R, 0, &l));
        *loss += l;
    }
    if (R->staging) {
        TMM_TRY(tmm_recorder_run(R->send_rec));
        TMM_TRY(tmm_dist_sum_f32(R->dist, tmm_buffer_mapped(R->staging), tmm_model_table(R->model)->arena_floats,
                                 GRAD_BUCKET_FLOATS, "the gradients"));
    }
    TMM_TRY(tmm_optim_set_step(R->optim, (uint32_t)(s + 1), tmm_lr_at(&R->c->schedule, s, R->c->steps)));
    return tmm_recorder_run(R->opt_rec);
}

/* Several ranks: stops the run when the weights differ between ranks. */
static tmm_status check_same_weights(run *R, uint64_t step)
{
    if (R->ranks == 1)
        return TMM_OK;
    const uint64_t floats = tmm_model_table(R->model)->arena_floats;
    float *params = malloc(floats * 4);
    tmm_status s = params ? tmm_model_read_params(R->model, params)
                          : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint64_t sum = s == TMM_OK ? tmm_dist_checksum(params, floats * 4) : 0;
    free(params);
    bool same = true;
    s = tmm_dist_agree(R->dist, s, "read its weights");
    if (s == TMM_OK)
        s = tmm_dist_same_u64(R->dist, sum, &same);
    if (s == TMM_OK && !same)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the weights differ between ranks %s step %llu (rank %u's checksum "
                     "is %016llx): the ranks no longer train one model (a device or driver that computes "
                     "differently, or memory errors); stopping", step ? "after" : "at the start, at",
                     (unsigned long long)step, R->rank, (unsigned long long)sum);
    return s;
}

static bool is_boundary(const tmm_train_config *c, const tmm_train_hooks *hooks, uint64_t done)
{
    return done == c->steps || (c->eval_every && done % c->eval_every == 0) ||
           (c->save_every && done % c->save_every == 0) || (hooks && hooks->stop_after && done >= hooks->stop_after);
}

/* Steps alternate between the model's two slots: while the device runs step s
 * from one slot, the host generates and uploads step s+1 into the other, and
 * submits it as soon as s is done. At evaluations, saves and the end nothing
 * is in flight. */
static tmm_status train_loop(run *R, uint64_t start, const tmm_train_hooks *hooks, tmm_train_result *res)
{
    tmm_train_config *c = R->c;
    const bool overlap = !R->opt_rec;
    const double t0 = now_s();
    double last_log = t0;
    uint64_t tokens_since = 0;
    bool in_flight = false;
    for (uint64_t s = start; s < c->steps; s++) {
        const uint32_t slot = (uint32_t)(s % TMM_MODEL_SLOTS), other = (slot + 1) % TMM_MODEL_SLOTS;
        const uint64_t done = s + 1;
        double loss;
        tmm_optim_stats st;
        if (overlap) {
            if (!in_flight) {
                TMM_TRY(prepare(R, s, slot, 0));
                TMM_TRY(submit(R, s, slot));
            }
            bool chain = done < c->steps && !is_boundary(c, hooks, done) && !(hooks && hooks->stop && *hooks->stop);
            if (chain)
                TMM_TRY(prepare(R, done, other, 0));
            TMM_TRY(finish(R, slot, &loss));
            /* before the next step is submitted: its optimizer overwrites the stats */
            st = tmm_optim_get_stats(R->optim);
            in_flight = chain;
            if (chain)
                TMM_TRY(submit(R, done, other));
        } else {
            TMM_TRY(accumulated_step(R, s, &loss));
            st = tmm_optim_get_stats(R->optim);
        }
        /* several ranks: the step's loss is the sum of the ranks' parts, and
         * one rank's stop request (a signal) stops them all after this step */
        double shared[2] = { loss, hooks && hooks->stop && *hooks->stop };
        TMM_TRY(tmm_dist_sum_f64(R->dist, shared, 2, "the loss"));
        loss = shared[0];
        const bool stop_asked = shared[1] > 0;
        if (c->check_every && (done % c->check_every == 0 || done == c->steps))
            TMM_TRY(check_same_weights(R, done));
        tokens_since += (uint64_t)c->batch * R->n;
        if (st.step != done) /* the stats block is shared by the slots: read it before the next step runs */
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "internal error: the optimizer's stats are of step %u, not "
                            "of step %llu", st.step, (unsigned long long)done);
        res->step = done;
        res->loss = loss;
        if (!isfinite(loss)) {
            if (in_flight)
                tmm_recorder_wait(R->step_rec[other]);
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the loss became %g at step %llu: lower the learning rate "
                            "(--lr) or raise the warmup", loss, (unsigned long long)done);
        }
        bool eval = c->eval_every && (done % c->eval_every == 0 || done == c->steps);
        bool log = eval || (c->log_every && done % c->log_every == 0) || done == c->steps;
        tmm_train_progress p = { .step = done, .steps = c->steps, .loss = loss,
                                 .lr = tmm_lr_at(&c->schedule, s, c->steps), .grad_norm = st.grad_norm,
                                 .elapsed_s = now_s() - t0 };
        if (loss_scaling(c)) {
            p.loss_scale = st.loss_scale;
            p.overflow_steps = st.overflows;
        }
        if (eval) {
            TMM_TRY(evaluate(R->model, R->data, c->eval_batches, 0, R->pred, &R->scratch_batch, R->dist,
                             &p.val_loss, &p.accuracy, NULL));
            p.eval = true;
            res->val_loss = p.val_loss;
            res->accuracy = p.accuracy;
        }
        if (log) {
            double t = now_s();
            p.tokens_per_s = (double)tokens_since / (t - last_log);
            last_log = t;
            tokens_since = 0;
            write_metrics(R, &p);
            if (hooks && hooks->on_progress)
                hooks->on_progress(&p, hooks->user);
        }
        bool target = eval && tmm_data_task_generated(c->task) && c->target_accuracy > 0 && p.accuracy >= c->target_accuracy;
        /* a stop request that arrives while the next step is in flight is
         * honoured after that step, so a checkpoint never races an update */
        bool stop = !in_flight && (stop_asked || (hooks && hooks->stop_after && done >= hooks->stop_after));
        if (target || stop || done == c->steps || (c->save_every && done % c->save_every == 0)) {
            /* rank 0 writes; the others hear whether it could */
            tmm_status saved = R->rank == 0 ? save(R, done, res) : TMM_OK;
            TMM_TRY(tmm_dist_agree(R->dist, saved, "write the checkpoint"));
        }
        if (target) {
            res->reached_target = true;
            break;
        }
        if (stop) {
            res->interrupted = stop_asked;
            break;
        }
    }
    res->seconds = now_s() - t0;
    return TMM_OK;
}

tmm_model_options tmm_train_model_options(const tmm_train_config *c)
{
    return (tmm_model_options){ .impl = c->toeplitz_impl, .precision = c->precision, .recompute = c->recompute };
}

/* The plan of a run without its limit. */
static tmm_status plan_run(tmm_device *dev, const tmm_train_config *c, tmm_train_memory *out)
{
    memset(out, 0, sizeof *out);
    const tmm_model_options opts = tmm_train_model_options(c);
    if (c->accum == 0 || c->batch % c->accum)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "batch (%u) must be a multiple of accum (%u)", c->batch, c->accum);
    TMM_TRY(tmm_model_memory_plan(dev, &c->model, c->batch / c->accum, &opts, &out->model));
    tmm_param_table table;
    TMM_TRY(tmm_param_table_build(&c->model, &table));
    out->optimizer = tmm_optim_memory(&table);
    tmm_param_table_free(&table);
    out->accumulation = c->accum > 1 ? out->model.grads : 0;
    out->total = out->model.total + out->optimizer + out->accumulation;
    return TMM_OK;
}

tmm_status tmm_train_memory_plan(tmm_device *dev, const tmm_train_config *c, tmm_train_memory *out)
{
    TMM_TRY(plan_run(dev, c, out));
    tmm_memory_budget b;
    tmm_device_memory_budget(dev, &b);
    out->limit = b.budget;
    out->limit_source = b.reported ? TMM_LIMIT_BUDGET : TMM_LIMIT_HEAP;
    if (c->max_memory_gib > 0) {
        out->limit = (uint64_t)llround(c->max_memory_gib * (double)(1ull << 30));
        out->limit_source = TMM_LIMIT_MAX_MEMORY;
    }
    return TMM_OK;
}

/* "5.31 GiB", "12.3 MiB" or "104 KiB". */
static const char *size_text(uint64_t bytes, char *buf, size_t size)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, size, "%.2f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, size, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else
        snprintf(buf, size, "%.0f KiB", (double)bytes / 1024.0);
    return buf;
}

const char *tmm_train_memory_limit_text(const tmm_train_memory *m, char *buf, size_t size)
{
    char t[32];
    size_text(m->limit, t, sizeof t);
    if (m->limit_source == TMM_LIMIT_MAX_MEMORY)
        snprintf(buf, size, "--max-memory %.4g GiB", (double)m->limit / (double)(1ull << 30));
    else if (m->limit_source == TMM_LIMIT_BUDGET)
        snprintf(buf, size, "the device's budget of %s", t);
    else
        snprintf(buf, size, "the device's %s heap", t);
    return buf;
}

/* One set of options the advice considers. */
typedef struct mem_choice {
    tmm_precision precision;
    tmm_recompute recompute;
    uint32_t accum;
} mem_choice;

/* The planned total of c with these options; false when it cannot be planned. */
static bool choice_total(tmm_device *dev, const tmm_train_config *c, mem_choice o, uint64_t *total)
{
    tmm_train_config t = *c;
    t.precision = o.precision;
    t.recompute = o.recompute;
    t.accum = o.accum;
    tmm_train_memory m;
    if (plan_run(dev, &t, &m) != TMM_OK)
        return false;
    *total = m.total;
    return true;
}

/* The flags that turn c into o, e.g. "--precision fp16 --recompute block". */
static void choice_flags(const tmm_train_config *c, mem_choice o, char *buf, size_t size)
{
    snprintf(buf, size, "%s%s%s%s", o.precision != c->precision ? " --precision " : "",
             o.precision != c->precision ? tmm_config_field_by_flag("precision")->names[o.precision] : "",
             o.recompute != c->recompute ? " --recompute " : "",
             o.recompute != c->recompute ? tmm_config_field_by_flag("recompute")->names[o.recompute] : "");
    size_t n = strlen(buf);
    if (o.accum != c->accum)
        snprintf(buf + n, size - n, " --accum %u", o.accum);
    memmove(buf, buf + 1, strlen(buf)); /* drops the leading space */
}

void tmm_train_memory_advice(tmm_device *dev, const tmm_train_config *c, uint64_t limit, char *buf, size_t size)
{
    /* the groups in the order they are offered: recomputation, precision, both */
    enum { MAX_CHOICES = 8, GROUPS = 3 };
    mem_choice groups[GROUPS][MAX_CHOICES];
    int count[GROUPS] = { 0 };
    const tmm_precision half[] = { TMM_PRECISION_FP16, TMM_PRECISION_BF16 };
    for (int r = (int)c->recompute + 1; r < TMM_RECOMPUTE_COUNT; r++)
        groups[0][count[0]++] = (mem_choice){ c->precision, (tmm_recompute)r, c->accum };
    for (int i = 0; i < 2 && c->precision == TMM_PRECISION_FP32; i++) {
        groups[1][count[1]++] = (mem_choice){ half[i], c->recompute, c->accum };
        for (int r = (int)c->recompute + 1; r < TMM_RECOMPUTE_COUNT; r++)
            groups[2][count[2]++] = (mem_choice){ half[i], (tmm_recompute)r, c->accum };
    }
    size_t n = 0;
    buf[0] = '\0';
    char flags[96], t[32];
    for (int g = 0; g < GROUPS; g++)
        for (int i = 0; i < count[g]; i++) {
            uint64_t total;
            if (!choice_total(dev, c, groups[g][i], &total) || total > limit)
                continue;
            choice_flags(c, groups[g][i], flags, sizeof flags);
            if (n < size)
                n += (size_t)snprintf(buf + n, size - n, "%s%s%s (%s)", n ? ", or " : "", flags, n ? "" : " fits",
                                      size_text(total, t, sizeof t));
            break;
        }
    /* the largest micro-batch below the current one that fits */
    const uint32_t micro = c->batch / c->accum;
    for (uint32_t m = micro - 1; m >= 1; m--) {
        mem_choice o = { c->precision, c->recompute, c->batch / m };
        uint64_t total;
        if (c->batch % m || !choice_total(dev, c, o, &total) || total > limit)
            continue;
        choice_flags(c, o, flags, sizeof flags);
        if (n < size)
            n += (size_t)snprintf(buf + n, size - n, "%s%s%s (%s, %u sequences per micro-batch)", n ? ", or " : "",
                                  flags, n ? "" : " fits", size_text(total, t, sizeof t), m);
        break;
    }
    if (n)
        return;
    /* nothing fits: the smallest of every choice at one sequence per micro-batch */
    mem_choice best = { c->precision, c->recompute, c->batch };
    uint64_t best_total = UINT64_MAX, total;
    if (choice_total(dev, c, best, &total))
        best_total = total;
    for (int g = 0; g < GROUPS; g++)
        for (int i = 0; i < count[g]; i++) {
            mem_choice o = groups[g][i];
            o.accum = c->batch;
            if (choice_total(dev, c, o, &total) && total < best_total)
                best = o, best_total = total;
        }
    choice_flags(c, best, flags, sizeof flags);
    if (best_total == UINT64_MAX)
        snprintf(buf, size, "nothing fits: use a smaller model");
    else
        snprintf(buf, size, "nothing fits: even %s needs %s; use a smaller model", *flags ? flags : "this run",
                 size_text(best_total, t, sizeof t));
}

/* Refuses, before anything is allocated, a run planned above its limit,
 * saying what would fit. A CPU device's heap is nominal (lavapipe allocates
 * past it from system memory), so there only --max-memory refuses; the
 * device's own size only warns. */
static tmm_status check_memory(tmm_device *dev, const tmm_train_config *c)
{
    tmm_train_memory need;
    TMM_TRY(tmm_train_memory_plan(dev, c, &need));
    if (need.total <= need.limit)
        return TMM_OK;
    char advice[600], limit[64], t[6][32];
    tmm_train_memory_advice(dev, c, need.limit, advice, sizeof advice);
    tmm_train_memory_limit_text(&need, limit, sizeof limit);
    size_text(need.total, t[0], sizeof t[0]);
    if (need.limit_source != TMM_LIMIT_MAX_MEMORY && tmm_device_get_info(dev)->type == TMM_DEVICE_CPU) {
        tmm_warn("this run plans %s of device memory, more than %s; a CPU device takes it from system memory "
                 "(%s)", t[0], limit, advice);
        return TMM_OK;
    }
    return tmm_fail(TMM_ERR_OUT_OF_DEVICE_MEMORY, "this run needs %s of device memory (parameters %s, gradients "
                    "%s, AdamW moments %s, activations %s, workspace %s at %u sequences per micro-batch), more than %s: %s",
                    t[0],
                    size_text(need.model.params, t[1], sizeof t[1]),
                    size_text(need.model.grads + need.accumulation, t[2], sizeof t[2]),
                    size_text(need.optimizer, t[3], sizeof t[3]), size_text(need.model.activations, t[4], sizeof t[4]),
                    size_text(need.model.workspace + need.model.fft_plans, t[5], sizeof t[5]), c->batch / c->accum, limit,
                    advice);
}

/* Creates and locks the run directory and makes sure it holds no other run;
 * *continuing: it is the run of the checkpoint being resumed. */
static tmm_status open_run_dir(run *R, const char *resume, bool replace, bool *continuing)
{
    const char *dir = R->c->run_dir;
    TMM_TRY(tmm_make_dirs(dir));
    char lock_path[TMM_CONFIG_PATH_MAX + 8];
    snprintf(lock_path, sizeof lock_path, "%s/.lock", dir);
    TMM_TRY(tmm_lock_take(lock_path, dir, "tmm train", false, &R->lock));
    char from[TMM_CONFIG_PATH_MAX];
    *continuing = resume && tmm_checkpoint_run_dir(resume, from, sizeof from) == TMM_OK && tmm_same_file(from, dir);
    if (*continuing || !tmm_run_dir_holds_run(dir))
        return TMM_OK;
    if (replace)
        return tmm_run_dir_clear(dir);
    if (!tmm_run_dir_has_checkpoint(dir)) /* stopped before its first checkpoint: nothing to resume */
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s holds another run, which saved no checkpoint: start this one "
                        "in another directory (--run-dir DIR), or replace it with --force", dir);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s holds another run: continue it with --resume %s, start this one "
                    "in another directory (--run-dir DIR), or replace it with --force", dir, dir);
}

/* The run's tokenizer.json (named by the checkpoints' "tokenizer"), written
 * again from the shards' (load and save: a file that does not load is not copied). */
static tmm_status copy_tokenizer(const char *from, const char *run_dir)
{
    char path[TMM_CONFIG_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", run_dir, TMM_RUN_TOKENIZER);
    tmm_tokenizer *tok;
    TMM_TRY(tmm_tokenizer_load(from, &tok));
    tmm_status s = tmm_tokenizer_save(tok, path);
    tmm_tokenizer_free(tok);
    return s;
}

/* metrics.jsonl cut back to the checkpoint being continued (step `start`):
 * the records that the resumed steps will write again, and a line torn by a
 * crash, are dropped, so that every step has exactly one record. */
static tmm_status cut_metrics(const char *path, uint64_t start)
{
    if (!tmm_path_exists(path))
        return TMM_OK;
    void *data;
    size_t size;
    TMM_TRY(tmm_read_file(path, "metrics log", TMM_LIMIT_METRICS, &data, &size));
    char *text = data;
    static const char key[] = "{\"step\": ";
    size_t keep = 0;
    for (size_t i = 0; i < size;) {
        const char *nl = memchr(text + i, '\n', size - i);
        if (!nl)
            break; /* torn */
        size_t len = (size_t)(nl - (text + i)) + 1, j = sizeof key - 1;
        uint64_t step = 0;
        bool ok = len > j && memcmp(text + i, key, j) == 0 && text[i + j] >= '0' && text[i + j] <= '9';
        for (; ok && text[i + j] >= '0' && text[i + j] <= '9'; j++)
            ok = step <= (UINT64_MAX - 9) / 10, step = step * 10 + (uint64_t)(text[i + j] - '0');
        if (ok && step <= start) {
            memmove(text + keep, text + i, len);
            keep += len;
        }
        i += len;
    }
    tmm_status s = keep == size ? TMM_OK : tmm_write_file_atomic(path, text, keep);
    free(data);
    return s;
}

tmm_status tmm_train(tmm_device *dev, tmm_train_config *c, const char *resume, const tmm_train_hooks *hooks,
                     tmm_train_result *res)
{
    memset(res, 0, sizeof *res);
    res->accuracy = -1;
    run R = { .dev = dev, .c = c, .data = hooks ? hooks->data : NULL, .dist = hooks ? hooks->dist : NULL };
    R.rank = (uint32_t)tmm_dist_rank(R.dist);
    R.ranks = (uint32_t)tmm_dist_size(R.dist);
    if (R.ranks > 1)
        R.dist->timeout_s = c->dist_timeout;
    tmm_status s = R.data ? tmm_train_config_check(c) : tmm_train_prepare(c, &R.data);
    if (s != TMM_OK)
        return s;
    R.owns_data = !(hooks && hooks->data);
    if (c->batch % (R.ranks * c->accum)) {
        if (R.owns_data)
            tmm_data_destroy(R.data);
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the batch of %u sequences does not split into %u ranks x %u "
                        "micro-batches: use a batch that is a multiple of %u (--batch is the global batch)",
                        c->batch, R.ranks, c->accum, R.ranks * c->accum);
    }
    R.micro = c->batch / (R.ranks * c->accum);
    R.n = c->model.n_ctx;
    const size_t rows = (size_t)R.micro * R.n;
    bool allocated = true;
    for (uint32_t k = 0; k < TMM_MODEL_SLOTS; k++) {
        R.host[k] = (batch_buf){ malloc(rows * 4), malloc(rows * 4) };
        allocated &= R.host[k].tokens && R.host[k].targets;
    }
    R.scratch_batch = (batch_buf){ malloc(rows * 4), malloc(rows * 4) };
    R.pred = malloc(rows * 4);
    R.config_json = tmm_train_config_to_json(c);
    if (!allocated || !R.scratch_batch.tokens || !R.scratch_batch.targets || !R.pred || !R.config_json)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        tmm_train_config mine = *c; /* this rank's part of the batch */
        mine.batch = c->batch / R.ranks;
        s = check_memory(dev, &mine);
    }
    const tmm_model_options opts = tmm_train_model_options(c);
    if (s == TMM_OK)
        s = tmm_model_create_opts(dev, &c->model, R.micro, &opts, &R.model);
    if (s == TMM_OK)
        s = recipe_init(&R);
    c->optim.peak_lr = c->schedule.peak_lr; /* what a parameter group's own rate is relative to */
    if (s == TMM_OK)
        s = tmm_optim_create(dev, tmm_model_table(R.model), &c->optim, &R.optim);
    if (s == TMM_OK && loss_scaling(c)) {
        const tmm_loss_scale initial = { .scale = (float)c->loss_scale };
        s = tmm_optim_set_loss_scale(R.optim, c->loss_scale_window, &initial);
        if (s == TMM_OK)
            s = tmm_model_set_loss_scale(R.model, tmm_optim_loss_scale_view(R.optim));
    }
    for (uint32_t k = 0; s == TMM_OK && k < TMM_MODEL_SLOTS; k++)
        s = tmm_recorder_create(dev, &R.step_rec[k]);
    if (s == TMM_OK && c->accum > 1) {
        s = tmm_buffer_create(dev, tmm_model_table(R.model)->arena_floats * 4, TMM_MEMORY_DEVICE, &R.acc);
        if (s == TMM_OK) {
            float *zero = calloc(tmm_model_table(R.model)->arena_floats, 4);
            s = zero ? tmm_buffer_write(R.acc, 0, zero, tmm_model_table(R.model)->arena_floats * 4)
                     : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            free(zero);
        }
    }
    if (s == TMM_OK && R.ranks > 1)
        s = tmm_buffer_create(dev, tmm_model_table(R.model)->arena_floats * 4, TMM_MEMORY_HOST, &R.staging);
    if (s == TMM_OK && (c->accum > 1 || R.ranks > 1))
        s = record_update(&R);
    /* Record the first step now, before anything is written: every op checks
     * its shapes and bindings against the device, so a configuration that
     * cannot run is refused here. */
    if (s == TMM_OK && !R.opt_rec)
        s = prepare(&R, 0, 0, 0);
    uint32_t total0 = 1;
    if (s == TMM_OK && R.opt_rec && (s = step_scored(&R, 0, &total0)) == TMM_OK)
        s = prepare(&R, micro_index(&R, 0, 0), 0, total0);
    uint64_t start = 0;
    bool continuing = false;
    /* several ranks: all of them must be ready (rank 0 alone owns the run directory) */
    s = tmm_dist_agree(R.dist, s, "set up its device and model");
    if (s == TMM_OK && R.rank == 0)
        s = open_run_dir(&R, resume, hooks && hooks->replace_run, &continuing);
    s = tmm_dist_agree(R.dist, s, "take the run directory");
    if (s == TMM_OK && resume)
        s = restore(&R, resume, &start);
    s = tmm_dist_agree(R.dist, s, "load the checkpoint");
    if (s == TMM_OK && R.ranks > 1) {
        bool same = true;
        s = tmm_dist_same_u64(R.dist, tmm_dist_checksum(R.config_json, strlen(R.config_json)), &same);
        if (s == TMM_OK && !same)
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the ranks were given different training configs: give every "
                         "rank the same options");
    }
    if (s == TMM_OK)
        s = check_same_weights(&R, start);
    /* every check before the first write: a refused resume leaves the run as it was */
    if (s == TMM_OK && start >= c->steps)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the checkpoint is at step %llu, the run has %llu steps: nothing to "
                     "do (raise --steps to train further)", (unsigned long long)start, (unsigned long long)c->steps);
    if (s == TMM_OK && R.rank == 0) {
        /* the metrics log first: it is the one that can still be refused (a link, not a file), and a
         * refused resume leaves config.json and the tokenizer as they were */
        char path[1200];
        snprintf(path, sizeof path, "%s/metrics.jsonl", c->run_dir);
        if (continuing)
            s = cut_metrics(path, start);
        if (s == TMM_OK)
            s = tmm_open_write(path, "metrics log", continuing, &R.metrics);
        snprintf(path, sizeof path, "%s/config.json", c->run_dir);
        if (s == TMM_OK)
            s = tmm_write_file_atomic(path, R.config_json, strlen(R.config_json));
        if (s == TMM_OK && tmm_data_tokenizer_path(R.data))
            s = copy_tokenizer(tmm_data_tokenizer_path(R.data), c->run_dir);
    }
    s = tmm_dist_agree(R.dist, s, "write the run's config and metrics");
    if (s == TMM_OK)
        s = train_loop(&R, start, hooks, res);
    free_run(&R);
    return s;
}

tmm_status tmm_train_config_from_checkpoint(const char *path, tmm_train_config *c)
{
    tmm_checkpoint ck;
    TMM_TRY(tmm_checkpoint_load(path, NULL, TMM_CHECKPOINT_ALLOW_NONFINITE, &ck)); /* the config only */
    const char *json = tmm_checkpoint_meta(&ck, "train_config");
    tmm_status s = TMM_OK;
    if (!json)
        s = tmm_fail(TMM_ERR_IO, "%s was not written by tmm train (no train_config)", ck.model_path);
    if (s == TMM_OK) {
        tmm_train_config_default(c);
        /* a run saved before recipes trained uniformly: without the key it resumes so */
        c->optim.recipe = TMM_RECIPE_UNIFORM;
        s = tmm_train_config_apply_json(c, json, ck.model_path);
    }
    if (s == TMM_OK && (s = tmm_train_config_check(c)) != TMM_OK) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", tmm_last_error());
        s = tmm_fail(TMM_ERR_IO, "%s: its train_config is invalid: %s", ck.model_path, msg);
    }
    if (s != TMM_OK)
        tmm_train_config_free(c);
    tmm_checkpoint_free(&ck);
    return s;
}

tmm_status tmm_eval_checkpoint(tmm_device *dev, const char *path, uint32_t batches, unsigned load_flags,
                               tmm_eval_result *out)
{
    memset(out, 0, sizeof *out);
    tmm_train_config c;
    TMM_TRY(tmm_train_config_from_checkpoint(path, &c));
    tmm_data *data = NULL;
    tmm_model *m = NULL;
    tmm_checkpoint ck = { 0 };
    uint32_t B = c.batch / c.accum, n = c.model.n_ctx;
    batch_buf b = { malloc((size_t)B * n * 4), malloc((size_t)B * n * 4) };
    uint32_t *pred = malloc((size_t)B * n * 4);
    tmm_status s = (b.tokens && b.targets && pred) ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    if (s == TMM_OK)
        s = tmm_train_prepare(&c, &data);
    if (s == TMM_OK)
        s = tmm_checkpoint_load(path, &c.model, load_flags & ~(unsigned)(TMM_CHECKPOINT_STATE | TMM_LOAD_EXACT), &ck);
    if (s == TMM_OK)
        s = check_tokenizer(&ck, data);
    tmm_distilled set = { 0 };
    if (s == TMM_OK)
        s = tmm_distilled_load_dir(ck.dir, load_flags, &ck.table, ck.params, &set, &out->distilled);
    if (s == TMM_OK && out->distilled) {
        s = tmm_distilled_apply(&set, &ck.table, ck.params);
        out->distill_head = set.head;
    }
    tmm_distilled_free(&set);
    if (s == TMM_OK)
        s = tmm_model_create_impl(dev, &c.model, B, c.toeplitz_impl, &m);
    if (s == TMM_OK)
        s = tmm_model_write_params(m, ck.params);
    if (s == TMM_OK) {
        const tmm_data_info *info = tmm_data_get_info(data);
        out->split_rows = info->val_rows;
        out->split_tokens = tmm_data_task_generated(c.task) ? 0 : info->val_tokens;
        const bool one_pass = !batches && out->split_rows;
        if (!batches) /* one pass over a bounded held-out split */
            batches = one_pass ? (uint32_t)((out->split_rows + B - 1) / B) : c.eval_batches;
        out->batches = batches;
        out->rows = one_pass ? out->split_rows : (uint64_t)batches * B;
        s = evaluate(m, data, batches, one_pass ? out->split_rows : 0, pred, &b, NULL, &out->loss, &out->accuracy,
                     &out->tokens);
    }
    out->perplexity = exp(out->loss);
    if (s == TMM_OK && !isfinite(out->loss))
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the validation loss is %g: the model's outputs are not finite",
                     out->loss);
    out->copy = c.task == TMM_DATA_COPY;
    out->task = c.task;
    tmm_model_destroy(m);
    tmm_data_destroy(data);
    tmm_checkpoint_free(&ck);
    tmm_train_config_free(&c);
    free(b.tokens), free(b.targets), free(pred);
    return s;
}
