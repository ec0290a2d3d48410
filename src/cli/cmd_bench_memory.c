/* tmm bench memory: one model trained with each precision and recomputation
 * side by side (measured by the library: tmm_bench_memory). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "model/arch.h"

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
           "  --preset NAME     start from a training preset (see tmm train --help); the other\n"
           "                    model flags change it, wherever they stand\n"
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

/* A size for the table: the sign of a heap delta kept. */
static const char *signed_size(int64_t bytes, char *buf, size_t size)
{
    if (bytes >= 0)
        return cli_size((uint64_t)bytes, buf, size);
    buf[0] = '-';
    cli_size((uint64_t)-bytes, buf + 1, size - 1);
    return buf;
}

static void print_table(const tmm_device *dev, const tmm_bench_memory_opts *o,
                        const tmm_bench_memory_result *res)
{
    const tmm_train_config *c = o->config;
    const uint64_t limit = o->limit;
    const uint32_t steps = o->steps;
    const tmm_bench_memory_row *rows = res->rows;
    char mix[64], t[8][32];
    printf("device: %s\nmodel: %s, d %u, n %u, L %u, %s, vocab %u, %llu parameters; batch %u; limit %s\n\n",
           tmm_device_get_info(dev)->name, tmm_arch_name(c->model.arch), c->model.d_model, c->model.n_ctx,
           c->model.n_layers, tmm_bench_mixing_desc(&c->model, mix, sizeof mix), c->model.vocab,
           (unsigned long long)tmm_model_param_count(&c->model), c->batch, cli_size(limit, t[0], 32));
    printf("%-15s %12s %11s %11s %11s %11s %6s %11s %11s %9s %10s %6s\n", "options", "params+grads", "optimizer",
           "activations", "workspace", "planned", "ratio", "measured", "heap delta", "max batch", "tokens/s",
           "ratio");
    const tmm_bench_memory_row *ref = &rows[0];
    for (int i = 0; i < TMM_BENCH_MEMORY_ROWS; i++) {
        const tmm_bench_memory_row *r = &rows[i];
        char name[32];
        snprintf(name, sizeof name, "%s/%s", tmm_bench_precision_name(tmm_bench_memory_settings[i].precision),
                 tmm_bench_recompute_name(tmm_bench_memory_settings[i].recompute));
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

/* The options of bench memory into c, run and *limit_gib: 0 to go on, -1
 * after --help, else the exit status (c is then freed). */
static int parse(int argc, char **argv, tmm_train_config *c, bench_run_flags *run, double *limit_gib)
{
    enum { O_LIMIT = BENCH_OPT_FIRST_FREE, O_CONFIG };
    static const struct option longopts[] = {
        BENCH_MODEL_OPTIONS,
        BENCH_RUN_OPTIONS,
        { "config", required_argument, NULL, O_CONFIG }, { "limit", required_argument, NULL, O_LIMIT },
        { "help", no_argument, NULL, 'h' },              { 0, 0, 0, 0 },
    };
    bool ok = bench_model_base(argc, argv, longopts, O_CONFIG, c);
    int opt, rc = 0;
    cli_args args = { .longopts = longopts };
    while (ok && rc == 0 && (opt = cli_getopt(&args, argc, argv)) != -1) {
        switch (opt) {
        case O_CONFIG: break; /* applied by bench_model_base */
        case O_LIMIT: ok = parse_gib(optarg, limit_gib); break;
        case 'h': usage(); rc = -1; break;
        default: bench_train_flag(opt, optarg, c, run, &ok);
        }
    }
    if (ok && rc == 0 && optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench memory --help'\n", argv[optind]);
        ok = false;
    }
    if (ok && rc == 0 && c->batch == 0) {
        cli_fail("--batch must be at least 1\n");
        ok = false;
    }
    if (!ok)
        rc = 2;
    if (rc)
        tmm_train_config_free(c);
    return rc;
}

int bench_memory(int argc, char **argv)
{
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.model.vocab = 16;
    bench_run_flags run = { .steps = 2, .device = -1 };
    double limit_gib = 4;
    int rc = parse(argc, argv, &c, &run, &limit_gib);
    if (rc)
        return rc < 0 ? 0 : rc;
    tmm_device *dev;
    if ((rc = bench_open(&c, run.device, &dev)) != 0)
        return rc;
    const tmm_bench_memory_opts o = { .config = &c, .steps = (uint32_t)run.steps,
                                      .limit = (uint64_t)llround(limit_gib * (double)(1ull << 30)) };
    tmm_bench_memory_result *r = malloc(sizeof *r);
    tmm_status s = r ? tmm_bench_memory(dev, &o, r) : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    char *text = s == TMM_OK && run.json ? tmm_bench_memory_json(dev, &o, r) : NULL;
    if (s != TMM_OK)
        rc = cli_error("benchmark failed", s);
    else if (run.json && !text)
        rc = bench_failed(s);
    else if (run.json)
        printf("%s\n", text);
    else
        print_table(dev, &o, r);
    free(text);
    free(r);
    tmm_device_destroy(dev);
    tmm_train_config_free(&c);
    return rc;
}
