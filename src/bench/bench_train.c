/* tmm bench train: speed of one training step and where its device time
 * goes; the steps are also what bench arch and bench memory time. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/internal.h"
#include "buffer.h"
#include "model/arch.h"
#include "model/model.h"
#include "train/dist.h"
#include "train/optim.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Deterministic tokens and targets of every measured step. */
static void fill_batch(uint32_t rows, uint32_t vocab, uint32_t *tok, int32_t *tgt)
{
    for (uint32_t i = 0; i < rows; i++) {
        tok[i] = (i * 2654435761u >> 7) % vocab;
        tgt[i] = (int32_t)((i * 40503u + 7) % vocab);
    }
}

/* The entry of out->ops for label (made if new), or -1 when they are full. */
static int op_index(tmm_bench_train_result *out, const char *label)
{
    int j = 0;
    while (j < out->n_ops && strcmp(out->ops[j].name, label) != 0)
        j++;
    if (j == out->n_ops && out->n_ops < TMM_BENCH_MAX_OPS) {
        memset(&out->ops[j], 0, sizeof out->ops[j]);
        snprintf(out->ops[j].name, sizeof out->ops[j].name, "%s", label);
        out->n_ops++;
    }
    return j < out->n_ops ? j : -1;
}

/* Adds what each region of a recording does per step to out->ops, and its commands. */
static void add_op_work(tmm_recorder *r, tmm_bench_train_result *out)
{
    out->commands_per_step += tmm_recorder_commands(r);
    for (uint32_t i = 0; i < tmm_recorder_regions(r); i++) {
        tmm_region_work w;
        int j = tmm_recorder_region_work(r, i, &w) == TMM_OK ? op_index(out, w.label) : -1;
        if (j < 0)
            continue;
        out->ops[j].commands += w.commands;
        out->ops[j].externals += w.externals;
        out->ops[j].bytes += (double)w.bytes;
        out->ops[j].flops += w.flops;
    }
}

/* Adds the timestamp regions of the last run to out->ops (by label). */
static void add_op_times(tmm_recorder *r, tmm_bench_train_result *out)
{
    for (uint32_t i = 0; out->timed && i < tmm_recorder_regions(r); i++) {
        const char *label;
        double ms;
        if (tmm_recorder_region_time(r, i, &label, &ms) != TMM_OK) {
            out->timed = false;
            return;
        }
        int j = op_index(out, label);
        if (j >= 0)
            out->ops[j].ms += ms;
        out->device_ms += ms;
    }
}

tmm_status tmm_bench_train_steps(tmm_device *dev, const tmm_train_config *c, uint32_t warmup, uint32_t steps,
                                 bool profile, tmm_bench_train_result *out)
{
    return tmm_bench_train_steps_dist(dev, c, NULL, warmup, steps, profile, out);
}

/* Records the optimizer, in an "adamw" region when profiling. */
static tmm_status record_adamw(tmm_recorder *r, tmm_optim *o, tmm_model *m, tmm_view grads, bool profile)
{
    if (profile)
        TMM_TRY(tmm_record_region_begin(r, "adamw"));
    TMM_TRY(tmm_optim_record(o, r, tmm_whole(tmm_model_param_buffer(m)), grads));
    return profile ? tmm_record_region_end(r) : TMM_OK;
}

/* What one rank steps: the model and optimizer, the step recorded once
 * (several ranks: [fwd, bwd, grads -> staging] and [staging -> grads,
 * adamw]), fixed tokens. */
typedef struct stepper {
    uint32_t *tok;
    int32_t *tgt;
    tmm_model *m;
    tmm_optim *o;
    tmm_recorder *r, *update;
    tmm_buffer *staging;
    tmm_view grads;
} stepper;

static tmm_status stepper_make(tmm_device *dev, const tmm_train_config *c, uint32_t B, bool many, bool profile,
                               stepper *st)
{
    const uint32_t rows = B * c->model.n_ctx;
    st->tok = malloc((size_t)rows * sizeof *st->tok);
    st->tgt = malloc((size_t)rows * sizeof *st->tgt);
    if (!st->tok || !st->tgt)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    fill_batch(rows, c->model.vocab, st->tok, st->tgt);
    const tmm_model_options opts = tmm_train_model_options(c);
    TMM_TRY(tmm_model_create_opts(dev, &c->model, B, &opts, &st->m));
    TMM_TRY(tmm_optim_create(dev, tmm_model_table(st->m), &c->optim, &st->o));
    TMM_TRY(tmm_model_set_batch(st->m, st->tok, st->tgt));
    TMM_TRY(tmm_recorder_create(dev, &st->r));
    tmm_model_set_profile(st->m, profile);
    st->grads = tmm_sub(tmm_model_grad_buffer(st->m), 0, tmm_model_table(st->m)->arena_floats * 4);
    if (many) {
        TMM_TRY(tmm_buffer_create(dev, st->grads.size, TMM_MEMORY_HOST, &st->staging));
        TMM_TRY(tmm_recorder_create(dev, &st->update));
        TMM_TRY(tmm_recorder_begin(st->update));
        TMM_TRY(tmm_record_copy(st->update, tmm_whole(st->staging), st->grads));
        TMM_TRY(record_adamw(st->update, st->o, st->m, st->grads, profile));
        TMM_TRY(tmm_recorder_end(st->update));
    }
    TMM_TRY(tmm_recorder_begin(st->r));
    TMM_TRY(tmm_model_record(st->m, st->r, true));
    TMM_TRY(many ? tmm_record_copy(st->r, st->grads, tmm_whole(st->staging))
                 : record_adamw(st->r, st->o, st->m, st->grads, profile));
    return tmm_recorder_end(st->r);
}

static void stepper_free(stepper *st)
{
    tmm_recorder_destroy(st->update);
    tmm_recorder_destroy(st->r);
    tmm_buffer_destroy(st->staging);
    tmm_optim_destroy(st->o);
    tmm_model_destroy(st->m);
    free(st->tok), free(st->tgt);
}

/* One step: the batch, the recording, and with several ranks the gradients'
 * sum and the update. */
static tmm_status step_once(stepper *st, tmm_dist *dist, bool many, uint32_t step)
{
    TMM_TRY(tmm_optim_set_step(st->o, step + 1, 1e-4));
    TMM_TRY(tmm_model_set_batch(st->m, st->tok, st->tgt));
    TMM_TRY(tmm_recorder_run(st->r));
    if (!many)
        return TMM_OK;
    TMM_TRY(tmm_dist_sum_f32(dist, tmm_buffer_mapped(st->staging), st->grads.size / 4, 4u << 20, "the gradients"));
    return tmm_recorder_run(st->update);
}

tmm_status tmm_bench_train_steps_dist(tmm_device *dev, const tmm_train_config *c, tmm_dist *dist, uint32_t warmup,
                                      uint32_t steps, bool profile, tmm_bench_train_result *out)
{
    memset(out, 0, sizeof *out);
    out->timed = profile;
    const bool many = tmm_dist_size(dist) > 1;
    const uint32_t B = c->batch / (uint32_t)tmm_dist_size(dist), rows = B * c->model.n_ctx;
    stepper st = { 0 };
    tmm_status s = B ? stepper_make(dev, c, B, many, profile, &st)
                     : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a batch of %u does not split over %d ranks", c->batch,
                                tmm_dist_size(dist));
    if (s == TMM_OK) {
        add_op_work(st.r, out);
        if (many)
            add_op_work(st.update, out);
    }
    double wall = 0, cpu = 0, comm = 0;
    for (uint32_t step = 0; s == TMM_OK && step < warmup + steps; step++) {
        double w0 = tmm_bench_now_ms() * 1e-3, c0 = cpu_s(), comm0 = many ? dist->comm_s : 0;
        if ((s = step_once(&st, dist, many, step)) != TMM_OK || step < warmup)
            continue; /* lavapipe compiles shaders on first use */
        wall += tmm_bench_now_ms() * 1e-3 - w0;
        cpu += cpu_s() - c0;
        comm += many ? dist->comm_s - comm0 : 0;
        add_op_times(st.r, out);
        if (many)
            add_op_times(st.update, out);
    }
    if (s == TMM_OK)
        tmm_device_memory_budget(dev, &out->heap);
    if (s == TMM_OK && steps) {
        out->ms_per_step = wall / (double)steps * 1e3;
        out->cpu_ms_per_step = cpu / (double)steps * 1e3;
        out->comm_ms_per_step = comm / (double)steps * 1e3;
        out->tokens_per_s = (double)rows * (double)steps / wall;
    }
    stepper_free(&st);
    return s;
}

tmm_status tmm_bench_train(tmm_device *dev, const tmm_train_config *c, tmm_dist *dist, uint32_t steps,
                           tmm_bench_train_report *out)
{
    memset(out, 0, sizeof *out);
    const int ranks = tmm_dist_size(dist);
    out->steps = steps;
    out->ranks = ranks;
    tmm_train_config mine = *c; /* this rank's part of the batch */
    mine.batch = c->batch / (uint32_t)ranks;
    tmm_status s = tmm_train_memory_plan(dev, &mine, &out->mem);
    if (s == TMM_OK)
        s = tmm_bench_train_steps_dist(dev, c, dist, TMM_BENCH_TRAIN_WARMUP, steps, true, &out->res);
    if (s == TMM_OK && out->res.timed)
        s = tmm_bench_peaks(dev, &out->peaks);
    /* every rank's tokens/s and allreduce share, gathered as sums of one-hot rows */
    double *per = calloc(2 * (size_t)ranks, sizeof *per);
    if (s == TMM_OK && !per)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        const tmm_bench_train_result *res = &out->res;
        per[tmm_dist_rank(dist)] = res->tokens_per_s;
        per[ranks + tmm_dist_rank(dist)] = res->ms_per_step > 0 ? res->comm_ms_per_step / res->ms_per_step : 0;
        s = tmm_dist_sum_f64(dist, per, 2 * (size_t)ranks, "the benchmark's results");
    }
    out->rank_tokens_per_s = per;
    out->rank_allreduce_share = per ? per + ranks : NULL;
    for (int i = 0; per && i < ranks; i++)
        out->total_tokens_per_s += per[i];
    return s;
}

void tmm_bench_train_report_free(tmm_bench_train_report *r)
{
    free(r->rank_tokens_per_s);
    r->rank_tokens_per_s = r->rank_allreduce_share = NULL;
}

char *tmm_bench_train_json(const tmm_device *dev, const tmm_train_config *c, const tmm_bench_train_report *r)
{
    const tmm_bench_train_result *res = &r->res;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
    tmm_bench_json_model(root, &c->model);
    cJSON_AddNumberToObject(root, "batch", c->batch);
    cJSON_AddNumberToObject(root, "steps", (double)r->steps);
    cJSON_AddNumberToObject(root, "tokens_per_s", res->tokens_per_s);
    cJSON_AddNumberToObject(root, "ms_per_step", res->ms_per_step);
    cJSON_AddNumberToObject(root, "cpu_ms_per_step", res->cpu_ms_per_step);
    cJSON_AddNumberToObject(root, "memory_bytes", (double)r->mem.total);
    if (r->ranks > 1) {
        cJSON_AddNumberToObject(root, "ranks", r->ranks);
        cJSON_AddNumberToObject(root, "total_tokens_per_s", r->total_tokens_per_s);
        cJSON *pr = cJSON_AddArrayToObject(root, "rank_tokens_per_s");
        cJSON *sh = cJSON_AddArrayToObject(root, "rank_allreduce_share");
        for (int i = 0; i < r->ranks; i++) {
            cJSON_AddItemToArray(pr, cJSON_CreateNumber(r->rank_tokens_per_s[i]));
            cJSON_AddItemToArray(sh, cJSON_CreateNumber(r->rank_allreduce_share[i]));
        }
    }
    cJSON_AddNumberToObject(root, "commands_per_step", res->commands_per_step);
    if (res->timed) {
        cJSON_AddNumberToObject(root, "peak_copy_gbs", r->peaks.copy_gbs);
        cJSON_AddNumberToObject(root, "peak_matmul_gflops", r->peaks.matmul_gflops);
    }
    cJSON *arr = cJSON_AddArrayToObject(root, "ops");
    for (int j = 0; res->timed && j < res->n_ops; j++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "op", res->ops[j].name);
        cJSON_AddNumberToObject(e, "ms_per_step", res->ops[j].ms / (double)r->steps);
        cJSON_AddNumberToObject(e, "share", res->device_ms > 0 ? res->ops[j].ms / res->device_ms : 0);
        cJSON_AddNumberToObject(e, "commands", res->ops[j].commands);
        cJSON_AddNumberToObject(e, "bytes", res->ops[j].bytes);
        cJSON_AddNumberToObject(e, "flops", res->ops[j].flops);
        cJSON_AddNumberToObject(e, "externals", res->ops[j].externals);
        cJSON_AddNumberToObject(e, "roofline", tmm_bench_roofline(&r->peaks, res->ops[j].ms / (double)r->steps,
                                                                   res->ops[j].bytes, res->ops[j].flops));
        cJSON_AddItemToArray(arr, e);
    }
    return tmm_bench_json_text(root);
}
