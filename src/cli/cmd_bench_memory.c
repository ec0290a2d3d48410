/* tmm bench memory: one model trained with each precision and recomputation
 * side by side: the planned memory and its parts, the memory measured while
 * the model is made and trained, the largest batch that fits a limit, and
 * the speed. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "buffer.h"
#include "cli.h"
#include "train/trainer.h"

static const struct {
    tmm_precision precision;
    tmm_recompute recompute;
} row_options[] = {
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE },  { TMM_PRECISION_FP16, TMM_RECOMPUTE_NONE },
    { TMM_PRECISION_BF16, TMM_RECOMPUTE_NONE },  { TMM_PRECISION_FP32, TMM_RECOMPUTE_BLOCK },
    { TMM_PRECISION_FP16, TMM_RECOMPUTE_MIXER }, { TMM_PRECISION_FP16, TMM_RECOMPUTE_BLOCK },
};
#define N_ROWS (sizeof row_options / sizeof row_options[0])

typedef struct mem_row {
    tmm_train_memory plan;
    uint64_t peak;             /* measured: the most the device's buffers held above what they held before */
    int64_t heap_delta;        /* the main heap's usage with the model held, less before */
    uint32_t max_batch;        /* the largest batch whose plan fits the limit (0: none) */
    bench_train_result train;
} mem_row;

static const char *precision_name(tmm_precision p) { return tmm_config_field_by_flag("precision")->names[p]; }
static const char *recompute_name(tmm_recompute r) { return tmm_config_field_by_flag("recompute")->names[r]; }

static void usage(void)
{
    printf("usage: tmm bench memory [--preset NAME | --config FILE] [--arch A] [--window W]\n"
           "                        [--d-model N --n-ctx N --layers N --heads N --vocab N] [--batch N]\n"
           "                        [--limit GIB] [--steps N] [--device N] [--json]\n\n"
           "Trains one model with each precision and recomputation side by side: fp32, fp16 and\n"
           "bf16 without recomputation, fp32 with --recompute block, fp16 with mixer and block.\n"
           "Per row:\n"
           "  planned          the device memory tmm train plans (and --max-memory checks): parameters\n"
           "                   and gradients, the optimizer (AdamW moments), activations, workspace\n"
           "                   (with the FFT plan), total, and the total against fp32/none's\n"
           "  measured         the most the device's buffers held while the model and optimizer were\n"
           "                   made and the steps ran (the runtime's peak counter)\n"
           "  heap delta       the change of the device's main heap usage with the model held: the\n"
           "                   driver's (VK_EXT_memory_budget) or, without it, tmm's memory blocks\n"
           "  max batch        the largest batch whose plan fits --limit\n"
           "  tokens/s         training steps as bench train times them, and against fp32/none's\n"
           "Defaults: the tiny-copy model and batch, vocab 16 (257 for a text preset), --limit 4,\n"
           "--steps 2.\n\n"
           "options:\n"
           "  --preset NAME     start from a training preset (see tmm train --help)\n"
           "  --config FILE     start from a training config file (JSON, as tmm train --config)\n"
           "  --arch A          " BENCH_ARCHS "\n"
           "  --window W        swa only: keys each query attends to\n"
           "  --d-model N, --n-ctx N, --layers N, --heads N, --vocab N   the model\n"
           "  --batch N         sequences per step\n"
           "  --limit GIB       the memory the max batch column fits (default 4)\n"
           "  --steps N         timed steps per row after one warm-up step (0: no timing, the\n"
           "                    memory only; a paper-512 step takes seconds on a CPU device)\n"
           "  --device N        use Vulkan device N (see 'tmm devices')\n"
           "  --json            print one JSON object instead of the table\n"
           "  -h, --help        show this help\n");
}

static bool parse_gib(const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v) || v <= 0 || v > (double)(1 << 20)) {
        cli_fail("--limit expects GiB above 0 and at most %d, got '%s'\n", 1 << 20, text);
        return false;
    }
    *out = v;
    return true;
}

/* Whether c's plan at this batch fits the limit. */
static bool batch_fits(tmm_device *dev, const tmm_train_config *c, uint32_t batch, uint64_t limit)
{
    tmm_train_config t = *c;
    t.batch = batch;
    tmm_train_memory m;
    return tmm_train_memory_plan(dev, &t, &m) == TMM_OK && m.total <= limit;
}

/* The largest batch whose plan fits: doubling, then bisection. */
static uint32_t max_batch(tmm_device *dev, const tmm_train_config *c, uint64_t limit)
{
    if (!batch_fits(dev, c, 1, limit))
        return 0;
    uint32_t lo = 1, hi = 2; /* lo fits; hi does not, or is past BENCH_MAX_BATCH */
    while (hi <= BENCH_MAX_BATCH && batch_fits(dev, c, hi, limit))
        lo = hi, hi *= 2;
    if (hi > BENCH_MAX_BATCH && batch_fits(dev, c, BENCH_MAX_BATCH, limit))
        return BENCH_MAX_BATCH;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (batch_fits(dev, c, mid, limit))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* One row: the plan, then the model made (and trained) for what it holds. */
static tmm_status measure(tmm_device *dev, const tmm_train_config *base, uint32_t steps, uint64_t limit, int i,
                          mem_row *row)
{
    tmm_train_config c = *base;
    c.precision = row_options[i].precision;
    c.recompute = row_options[i].recompute;
    memset(row, 0, sizeof *row);
    TMM_TRY(tmm_train_memory_plan(dev, &c, &row->plan));
    row->max_batch = max_batch(dev, &c, limit);
    tmm_memory_stats before;
    tmm_memory_budget heap;
    tmm_device_memory_stats(dev, &before);
    tmm_device_memory_budget(dev, &heap);
    tmm_device_memory_reset_peak(dev);
    TMM_TRY(bench_train_steps(dev, &c, steps ? 1 : 0, steps, false, &row->train));
    tmm_memory_stats after;
    tmm_device_memory_stats(dev, &after);
    row->peak = after.peak_bytes - before.used_bytes;
    row->heap_delta = (int64_t)row->train.heap.usage - (int64_t)heap.usage;
    return TMM_OK;
}

static void print_json(const tmm_device *dev, const tmm_train_config *c, uint64_t limit, uint32_t steps,
                       const mem_row *rows)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
    cJSON_AddBoolToObject(root, "memory_budget", tmm_device_get_info(dev)->memory_budget);
    cJSON *mc = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(mc, "arch", tmm_arch_name(c->model.arch));
    cJSON_AddNumberToObject(mc, "vocab", c->model.vocab);
    cJSON_AddNumberToObject(mc, "d_model", c->model.d_model);
    cJSON_AddNumberToObject(mc, "n_ctx", c->model.n_ctx);
    cJSON_AddNumberToObject(mc, "n_layers", c->model.n_layers);
    cJSON_AddNumberToObject(mc, "heads", c->model.heads);
    cJSON_AddNumberToObject(mc, "params", (double)tmm_model_param_count(&c->model));
    cJSON_AddNumberToObject(root, "batch", c->batch);
    cJSON_AddNumberToObject(root, "limit_bytes", (double)limit);
    cJSON_AddNumberToObject(root, "steps", steps);
    cJSON *arr = cJSON_AddArrayToObject(root, "rows");
    for (size_t i = 0; i < N_ROWS; i++) {
        const mem_row *r = &rows[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "precision", precision_name(row_options[i].precision));
        cJSON_AddStringToObject(e, "recompute", recompute_name(row_options[i].recompute));
        const tmm_train_memory *p = &r->plan;
        cJSON_AddNumberToObject(e, "params_grads", (double)(p->model.params + p->model.grads));
        cJSON_AddNumberToObject(e, "optimizer", (double)p->optimizer);
        cJSON_AddNumberToObject(e, "activations", (double)p->model.activations);
        cJSON_AddNumberToObject(e, "workspace", (double)(p->model.workspace + p->model.fft_plans));
        cJSON_AddNumberToObject(e, "planned_bytes", (double)p->total);
        cJSON_AddNumberToObject(e, "measured_peak_bytes", (double)r->peak);
        cJSON_AddNumberToObject(e, "heap_delta_bytes", (double)r->heap_delta);
        cJSON_AddNumberToObject(e, "max_batch", r->max_batch);
        if (steps)
            cJSON_AddNumberToObject(e, "tokens_per_s", r->train.tokens_per_s);
        cJSON_AddItemToArray(arr, e);
    }
    char *text = cJSON_Print(root);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(root);
}

/* A size for the table: the sign of a heap delta kept. */
static const char *signed_size(int64_t bytes, char *buf, size_t size)
{
    if (bytes >= 0)
        return cli_size((uint64_t)bytes, buf, size);
    buf[0] = '-';
    cli_size((uint64_t)-bytes, buf + 1, size - 1);
    return buf;
}

static void print_table(const tmm_device *dev, const tmm_train_config *c, uint64_t limit, uint32_t steps,
                        const mem_row *rows)
{
    char mix[64], t[8][32];
    printf("device: %s\nmodel: %s, d %u, n %u, L %u, %s, vocab %u, %llu parameters; batch %u; limit %s\n\n",
           tmm_device_get_info(dev)->name, tmm_arch_name(c->model.arch), c->model.d_model, c->model.n_ctx,
           c->model.n_layers, bench_mixing_desc(&c->model, mix, sizeof mix), c->model.vocab,
           (unsigned long long)tmm_model_param_count(&c->model), c->batch, cli_size(limit, t[0], 32));
    printf("%-15s %12s %11s %11s %11s %11s %6s %11s %11s %9s %10s %6s\n", "options", "params+grads", "optimizer",
           "activations", "workspace", "planned", "ratio", "measured", "heap delta", "max batch", "tokens/s",
           "ratio");
    const mem_row *ref = &rows[0];
    for (size_t i = 0; i < N_ROWS; i++) {
        const mem_row *r = &rows[i];
        char name[32];
        snprintf(name, sizeof name, "%s/%s", precision_name(row_options[i].precision),
                 recompute_name(row_options[i].recompute));
        const tmm_train_memory *p = &r->plan;
        printf("%-15s %12s %11s %11s %11s %11s %6.2f %11s %11s %9u", name,
               cli_size(p->model.params + p->model.grads, t[0], 32), cli_size(p->optimizer, t[1], 32),
               cli_size(p->model.activations, t[2], 32), cli_size(p->model.workspace + p->model.fft_plans, t[3], 32),
               cli_size(p->total, t[4], 32), (double)p->total / (double)ref->plan.total,
               cli_size(r->peak, t[5], 32), signed_size(r->heap_delta, t[6], 32), r->max_batch);
        if (steps)
            printf(" %10.1f %6.2f\n", r->train.tokens_per_s,
                   r->train.tokens_per_s / ref->train.tokens_per_s);
        else
            printf(" %10s %6s\n", "-", "-");
    }
    printf("\nratios are against fp32/none; heap delta: %s\n",
           tmm_device_get_info(dev)->memory_budget ? "the driver's usage (VK_EXT_memory_budget)"
                                                   : "tmm's memory blocks (the device has no VK_EXT_memory_budget)");
}

int bench_memory(int argc, char **argv)
{
    enum { O_LIMIT = BENCH_OPT_FIRST_FREE, O_CONFIG };
    static const struct option longopts[] = {
        BENCH_MODEL_OPTIONS,
        BENCH_RUN_OPTIONS,
        { "config", required_argument, NULL, O_CONFIG }, { "limit", required_argument, NULL, O_LIMIT },
        { "help", no_argument, NULL, 'h' },              { 0, 0, 0, 0 },
    };
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.model.vocab = 16;
    bench_run_flags run = { .steps = 2, .device = -1 };
    double limit_gib = 4;
    bool ok = true;
    int opt;
    optind = 1;
    opterr = 0; /* our own messages below */
    while (ok && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_CONFIG:
            ok = cli_load_config(&c, optarg) == 0;
            if (ok && c.task == TMM_DATA_TEXT)
                c.model.vocab = 257;
            break;
        case O_LIMIT: ok = parse_gib(optarg, &limit_gib); break;
        case 'h':
            usage();
            tmm_train_config_free(&c);
            return 0;
        default: bench_train_flag(opt, optarg, argv, "memory", &c, &run, &ok);
        }
    }
    if (ok && optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench memory --help'\n", argv[optind]);
        ok = false;
    }
    if (ok && c.batch == 0) {
        cli_fail("--batch must be at least 1\n");
        ok = false;
    }
    if (!ok) {
        tmm_train_config_free(&c);
        return 2;
    }
    tmm_device *dev;
    int rc = bench_open(&c, run.device, &dev);
    if (rc)
        return rc;
    const uint64_t limit = (uint64_t)llround(limit_gib * (double)(1ull << 30));
    mem_row rows[N_ROWS];
    /* A first upload makes the staging buffer a device without unified
     * memory keeps, so that no row counts it. */
    tmm_buffer *warm = NULL;
    uint32_t zero = 0;
    tmm_status s = tmm_buffer_create(dev, sizeof zero, TMM_MEMORY_DEVICE, &warm);
    if (s == TMM_OK)
        s = tmm_buffer_write(warm, 0, &zero, sizeof zero);
    tmm_buffer_destroy(warm);
    for (size_t i = 0; i < N_ROWS && s == TMM_OK; i++)
        s = measure(dev, &c, (uint32_t)run.steps, limit, (int)i, &rows[i]);
    if (s != TMM_OK)
        rc = cli_error("benchmark failed", s);
    else if (run.json)
        print_json(dev, &c, limit, (uint32_t)run.steps, rows);
    else
        print_table(dev, &c, limit, (uint32_t)run.steps, rows);
    tmm_device_destroy(dev);
    tmm_train_config_free(&c);
    return rc;
}
