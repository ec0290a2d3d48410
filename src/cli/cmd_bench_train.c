/* tmm bench train: speed of one training step and where its device time goes. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "buffer.h"
#include "cli.h"
#include "cli_dist.h"
#include "model/arch.h"
#include "model/model.h"
#include "train/optim.h"
#include "train/train_config.h"
#include "train/trainer.h"

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

/* Adds the timestamp regions of the last run to out->ops (by label). */
static void add_op_times(tmm_recorder *r, bench_train_result *out)
{
    for (uint32_t i = 0; out->timed && i < tmm_recorder_regions(r); i++) {
        const char *label;
        double ms;
        if (tmm_recorder_region_time(r, i, &label, &ms) != TMM_OK) {
            out->timed = false;
            return;
        }
        int j = 0;
        while (j < out->n_ops && strcmp(out->ops[j].name, label) != 0)
            j++;
        if (j == out->n_ops && out->n_ops < BENCH_MAX_OPS) {
            snprintf(out->ops[j].name, sizeof out->ops[j].name, "%s", label);
            out->ops[out->n_ops++].ms = 0;
        }
        if (j < out->n_ops)
            out->ops[j].ms += ms;
        out->device_ms += ms;
    }
}

tmm_status bench_train_steps(tmm_device *dev, const tmm_train_config *c, uint32_t warmup, uint32_t steps,
                             bool profile, bench_train_result *out)
{
    return bench_train_steps_dist(dev, c, NULL, warmup, steps, profile, out);
}

/* Records the optimizer, in an "adamw" region when profiling. */
static tmm_status record_adamw(tmm_recorder *r, tmm_optim *o, tmm_model *m, tmm_view grads, bool profile)
{
    if (profile)
        TMM_TRY(tmm_record_region_begin(r, "adamw"));
    TMM_TRY(tmm_optim_record(o, r, tmm_whole(tmm_model_param_buffer(m)), grads));
    return profile ? tmm_record_region_end(r) : TMM_OK;
}

tmm_status bench_train_steps_dist(tmm_device *dev, const tmm_train_config *c, tmm_dist *dist, uint32_t warmup,
                                  uint32_t steps, bool profile, bench_train_result *out)
{
    memset(out, 0, sizeof *out);
    out->timed = profile;
    const bool many = tmm_dist_size(dist) > 1;
    const uint32_t B = c->batch / (uint32_t)tmm_dist_size(dist), rows = B * c->model.n_ctx;
    uint32_t *tok = malloc((size_t)rows * sizeof *tok);
    int32_t *tgt = malloc((size_t)rows * sizeof *tgt);
    tmm_model *m = NULL;
    tmm_optim *o = NULL;
    tmm_recorder *r = NULL, *update = NULL; /* several ranks: [fwd, bwd, grads -> staging], [staging -> grads, adamw] */
    tmm_buffer *staging = NULL;
    tmm_view grads = { 0 };
    tmm_status s = tok && tgt ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK && B == 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a batch of %u does not split over %d ranks", c->batch,
                     tmm_dist_size(dist));
    if (s == TMM_OK) {
        fill_batch(rows, c->model.vocab, tok, tgt);
        const tmm_model_options opts = tmm_train_model_options(c);
        if ((s = tmm_model_create_opts(dev, &c->model, B, &opts, &m)) == TMM_OK &&
            (s = tmm_optim_create(dev, tmm_model_table(m), &c->optim, &o)) == TMM_OK &&
            (s = tmm_model_set_batch(m, tok, tgt)) == TMM_OK && (s = tmm_recorder_create(dev, &r)) == TMM_OK) {
            tmm_model_set_profile(m, profile);
            grads = tmm_sub(tmm_model_grad_buffer(m), 0, tmm_model_table(m)->arena_floats * 4);
            if (many && (s = tmm_buffer_create(dev, grads.size, TMM_MEMORY_HOST, &staging)) == TMM_OK &&
                (s = tmm_recorder_create(dev, &update)) == TMM_OK && (s = tmm_recorder_begin(update)) == TMM_OK &&
                (s = tmm_record_copy(update, tmm_whole(staging), grads)) == TMM_OK &&
                (s = record_adamw(update, o, m, grads, profile)) == TMM_OK)
                s = tmm_recorder_end(update);
            if (s == TMM_OK && (s = tmm_recorder_begin(r)) == TMM_OK && (s = tmm_model_record(m, r, true)) == TMM_OK &&
                (s = many ? tmm_record_copy(r, grads, tmm_whole(staging)) : record_adamw(r, o, m, grads, profile)) ==
                    TMM_OK)
                s = tmm_recorder_end(r);
        }
    }
    double wall = 0, cpu = 0, comm = 0;
    for (uint32_t step = 0; s == TMM_OK && step < warmup + steps; step++) {
        double w0 = cli_now_ms() * 1e-3, c0 = cpu_s(), comm0 = many ? dist->comm_s : 0;
        if ((s = tmm_optim_set_step(o, step + 1, 1e-4)) != TMM_OK || (s = tmm_model_set_batch(m, tok, tgt)) != TMM_OK ||
            (s = tmm_recorder_run(r)) != TMM_OK)
            break;
        if (many && ((s = tmm_dist_sum_f32(dist, tmm_buffer_mapped(staging), grads.size / 4, 4u << 20,
                                           "the gradients")) != TMM_OK ||
                     (s = tmm_recorder_run(update)) != TMM_OK))
            break;
        if (step < warmup)
            continue; /* lavapipe compiles shaders on first use */
        wall += cli_now_ms() * 1e-3 - w0;
        cpu += cpu_s() - c0;
        comm += many ? dist->comm_s - comm0 : 0;
        add_op_times(r, out);
        if (many)
            add_op_times(update, out);
    }
    if (s == TMM_OK)
        tmm_device_memory_budget(dev, &out->heap);
    if (s == TMM_OK && steps) {
        out->ms_per_step = wall / (double)steps * 1e3;
        out->cpu_ms_per_step = cpu / (double)steps * 1e3;
        out->comm_ms_per_step = comm / (double)steps * 1e3;
        out->tokens_per_s = (double)rows * (double)steps / wall;
    }
    tmm_recorder_destroy(update);
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(staging);
    tmm_optim_destroy(o);
    tmm_model_destroy(m);
    free(tok), free(tgt);
    return s;
}

static void usage(void)
{
    printf("usage: tmm bench train [--preset NAME] [--arch A] [--window W]\n"
           "                       [--d-model N --n-ctx N --layers N --heads N]\n"
           "                       [--batch N] [--vocab N] [--steps N] [--device N] [--json]\n\n"
           "Times training steps (forward, backward, clipping and AdamW, recorded once and\n"
           "replayed) on fixed random tokens: tokens/s, ms per step, CPU time per step, the\n"
           "planned device memory of training (the model at the batch, plus AdamW's moments),\n"
           "and the share of device time per op from timestamp queries. Defaults: the\n"
           "tiny-copy model, batch 16, vocab 16, 20 measured steps after 2 warm-up steps.\n\n"
           "options:\n"
           "  --preset NAME     start from a training preset (see tmm train --help)\n"
           "  --arch A          " BENCH_ARCHS " (docs/baselines.md;\n"
           "                    default tmm); without --heads each gets its default heads\n"
           "  --window W        swa only: keys each query attends to (default 128)\n"
           "  --d-model N, --n-ctx N, --layers N, --heads N, --vocab N   the model\n"
           "  --batch N         sequences per step\n"
           "  --steps N         measured steps (at least 1)\n"
           "  --device N        use Vulkan device N (see 'tmm devices')\n"
           "  --json            print one JSON object instead of the table\n"
           "  -h, --help        show this help\n\n"
           "Under mpirun (mpirun -np N tmm bench train ...; builds with MPI): --batch is the global\n"
           "batch, split over the ranks, and every step sums the gradients across ranks as tmm train\n"
           "does; rank 0 prints each rank's tokens/s, their total, and the share of each rank's step\n"
           "time spent in the gradients' allreduce (with the staging copies: the ops' table).\n");
}

int bench_train(int argc, char **argv)
{
    static const struct option longopts[] = {
        BENCH_MODEL_OPTIONS, BENCH_RUN_OPTIONS, { "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 },
    };
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.model.vocab = 16;
    bench_run_flags run = { .steps = 20, .device = -1 };
    int opt;
    optind = 1;
    opterr = 0; /* our own messages below */
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (opt == 'h') {
            usage();
            tmm_train_config_free(&c);
            return 0;
        }
        bool ok = true;
        bench_train_flag(opt, optarg, argv, "train", &c, &run, &ok);
        if (!ok) {
            tmm_train_config_free(&c);
            return 2;
        }
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench train --help'\n", argv[optind]);
        tmm_train_config_free(&c);
        return 2;
    }
    if (run.steps == 0 || c.batch == 0) {
        cli_fail("--%s must be at least 1\n", run.steps == 0 ? "steps" : "batch");
        tmm_train_config_free(&c);
        return 2;
    }
    tmm_dist *dist;
    int rc = cli_dist_open(&dist);
    if (rc) {
        tmm_train_config_free(&c);
        return rc;
    }
    const int ranks = tmm_dist_size(dist);
    if (c.batch % (uint32_t)ranks) {
        cli_fail("--batch %u (the global batch) does not split over %d ranks\n", c.batch, ranks);
        tmm_train_config_free(&c);
        cli_dist_close(dist);
        return 2;
    }
    tmm_device *dev;
    if ((rc = bench_open(&c, cli_dist_device(dist, run.device), &dev)) != 0) {
        tmm_dist_abort(dist, rc);
        cli_dist_close(dist);
        return rc;
    }
    const uint32_t B = c.batch, n = c.model.n_ctx, rows = B * n;
    bench_train_result res;
    tmm_train_memory mem;
    tmm_train_config mine = c; /* this rank's part of the batch */
    mine.batch = c.batch / (uint32_t)ranks;
    tmm_status s = tmm_train_memory_plan(dev, &mine, &mem);
    if (s == TMM_OK)
        s = bench_train_steps_dist(dev, &c, dist, 2, (uint32_t)run.steps, true, &res);
    /* several ranks: every rank's tokens/s and allreduce share, gathered as sums of one-hot rows */
    double *per = calloc(2 * (size_t)ranks, sizeof *per);
    if (s == TMM_OK && !per)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        per[tmm_dist_rank(dist)] = res.tokens_per_s;
        per[ranks + tmm_dist_rank(dist)] = res.ms_per_step > 0 ? res.comm_ms_per_step / res.ms_per_step : 0;
        s = tmm_dist_sum_f64(dist, per, 2 * (size_t)ranks, "the benchmark's results");
    }
    double total = 0;
    for (int i = 0; per && i < ranks; i++)
        total += per[i];
    if (s != TMM_OK) {
        rc = cli_error("benchmark failed", s);
        tmm_dist_abort(dist, rc);
    } else if (!tmm_dist_leader(dist)) {
        /* rank 0 prints */
    } else if (run.json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
        cJSON *mc = cJSON_AddObjectToObject(root, "model");
        cJSON_AddStringToObject(mc, "arch", tmm_arch_name(c.model.arch));
        cJSON_AddNumberToObject(mc, "vocab", c.model.vocab);
        cJSON_AddNumberToObject(mc, "d_model", c.model.d_model);
        cJSON_AddNumberToObject(mc, "n_ctx", c.model.n_ctx);
        cJSON_AddNumberToObject(mc, "n_layers", c.model.n_layers);
        cJSON_AddNumberToObject(mc, "heads", c.model.heads);
        if (tmm_arch_of(c.model.arch)->default_window)
            cJSON_AddNumberToObject(mc, "window", c.model.window);
        cJSON_AddNumberToObject(mc, "params", (double)tmm_model_param_count(&c.model));
        cJSON_AddNumberToObject(root, "batch", B);
        cJSON_AddNumberToObject(root, "steps", (double)run.steps);
        cJSON_AddNumberToObject(root, "tokens_per_s", res.tokens_per_s);
        cJSON_AddNumberToObject(root, "ms_per_step", res.ms_per_step);
        cJSON_AddNumberToObject(root, "cpu_ms_per_step", res.cpu_ms_per_step);
        cJSON_AddNumberToObject(root, "memory_bytes", (double)mem.total);
        if (ranks > 1) {
            cJSON_AddNumberToObject(root, "ranks", ranks);
            cJSON_AddNumberToObject(root, "total_tokens_per_s", total);
            cJSON *pr = cJSON_AddArrayToObject(root, "rank_tokens_per_s");
            cJSON *sh = cJSON_AddArrayToObject(root, "rank_allreduce_share");
            for (int i = 0; i < ranks; i++) {
                cJSON_AddItemToArray(pr, cJSON_CreateNumber(per[i]));
                cJSON_AddItemToArray(sh, cJSON_CreateNumber(per[ranks + i]));
            }
        }
        cJSON *arr = cJSON_AddArrayToObject(root, "ops");
        for (int j = 0; res.timed && j < res.n_ops; j++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "op", res.ops[j].name);
            cJSON_AddNumberToObject(e, "ms_per_step", res.ops[j].ms / (double)run.steps);
            cJSON_AddNumberToObject(e, "share", res.device_ms > 0 ? res.ops[j].ms / res.device_ms : 0);
            cJSON_AddItemToArray(arr, e);
        }
        char *text = cJSON_Print(root);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(root);
    } else {
        char mix[64], t[4][32];
        printf("device: %s\nmodel: %s, d %u, n %u, L %u, %s, vocab %u; batch %u (%u tokens per step)\n",
               tmm_device_get_info(dev)->name, tmm_arch_name(c.model.arch), c.model.d_model, n, c.model.n_layers,
               bench_mixing_desc(&c.model, mix, sizeof mix), c.model.vocab, B, rows);
        printf("parameters: %llu; device memory planned: %s (parameters and gradients %s, AdamW moments %s, "
               "activations and workspace %s)\n",
               (unsigned long long)tmm_model_param_count(&c.model), cli_size(mem.total, t[0], 32),
               cli_size(mem.model.params + mem.model.grads + mem.accumulation, t[1], 32),
               cli_size(mem.optimizer, t[2], 32),
               cli_size(mem.model.activations + mem.model.workspace + mem.model.fft_plans, t[3], 32));
        printf("%.1f tokens/s   %.2f ms per step   %.2f ms CPU per step\n", res.tokens_per_s, res.ms_per_step,
               res.cpu_ms_per_step);
        if (ranks > 1) {
            printf("data parallel: %d ranks, %u sequences each per step; rank 0's numbers above\n", ranks,
                   B / (uint32_t)ranks);
            for (int i = 0; i < ranks; i++)
                printf("  rank %d: %.1f tokens/s, allreduce %.1f%% of its step time\n", i, per[i],
                       100 * per[ranks + i]);
            printf("  total: %.1f tokens/s\n", total);
        }
        if (res.timed) {
            printf("\n%-16s %12s %8s\n", "op", "ms/step", "share");
            for (int j = 0; j < res.n_ops; j++)
                printf("%-16s %12.3f %7.1f%%\n", res.ops[j].name, res.ops[j].ms / (double)run.steps,
                       100 * res.ops[j].ms / res.device_ms);
        } else {
            printf("(no per-op times: the device has no timestamps on its compute queue)\n");
        }
    }
    free(per);
    tmm_device_destroy(dev);
    tmm_train_config_free(&c);
    cli_dist_close(dist);
    return rc;
}
