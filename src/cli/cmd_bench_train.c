/* tmm bench train: speed of one training step and where its device time
 * goes (measured by the library: tmm_bench_train). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "cli_dist.h"
#include "model/arch.h"
#include "train/dist.h"

static void usage(void)
{
    printf("usage: tmm bench train [--preset NAME] [--arch A] [--window W]\n"
           "                       [--d-model N --n-ctx N --layers N --heads N]\n"
           "                       [--batch N] [--vocab N] [--steps N] [--device N] [--json]\n\n"
           "Times training steps (forward, backward, clipping and AdamW, recorded once and\n"
           "replayed) on fixed random tokens: tokens/s, ms per step, CPU time per step, the\n"
           "planned device memory of training (the model at the batch, plus AdamW's moments),\n"
           "and the share of device time per op from timestamp queries. Per op, a roofline:\n"
           "its commands (dispatches, copies, fills), the bytes of the views they bind, the\n"
           "FLOPs its ops declare, the rates reached, and the share of the roofline they\n"
           "reach against the device's measured copy bandwidth and matmul rate (1024^3);\n"
           "and the commands per step. Defaults: the tiny-copy model, batch 16, vocab 16,\n"
           "20 measured steps after 2 warm-up steps.\n\n"
           "options:\n"
           "  --preset NAME     start from a training preset (see tmm train --help); the other\n"
           "                    model flags change it, wherever they stand\n"
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

/* The options of bench train into c and run: 0 to go on, -1 after --help,
 * else the exit status (c is then freed). */
static int parse(int argc, char **argv, tmm_train_config *c, bench_run_flags *run)
{
    static const struct option longopts[] = {
        BENCH_MODEL_OPTIONS, BENCH_RUN_OPTIONS, { "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 },
    };
    int opt, rc = bench_model_base(argc, argv, longopts, 0, c) ? 0 : 2;
    cli_args args = { .longopts = longopts };
    while (rc == 0 && (opt = cli_getopt(&args, argc, argv)) != -1) {
        bool ok = true;
        if (opt == 'h') {
            usage();
            rc = -1;
            continue;
        }
        bench_train_flag(opt, optarg, c, run, &ok);
        if (!ok)
            rc = 2;
    }
    if (rc == 0 && optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench train --help'\n", argv[optind]);
        rc = 2;
    }
    if (rc == 0 && (run->steps == 0 || c->batch == 0)) {
        cli_fail("--%s must be at least 1\n", run->steps == 0 ? "steps" : "batch");
        rc = 2;
    }
    if (rc)
        tmm_train_config_free(c);
    return rc;
}

static void print_table(const tmm_device *dev, const tmm_train_config *c, const tmm_bench_train_report *r)
{
    const tmm_bench_train_result *res = &r->res;
    const tmm_train_memory *mem = &r->mem;
    const uint32_t B = c->batch, n = c->model.n_ctx;
    char mix[64], t[4][32];
    printf("device: %s\nmodel: %s, d %u, n %u, L %u, %s, vocab %u; batch %u (%u tokens per step)\n",
           tmm_device_get_info(dev)->name, tmm_arch_name(c->model.arch), c->model.d_model, n, c->model.n_layers,
           tmm_bench_mixing_desc(&c->model, mix, sizeof mix), c->model.vocab, B, B * n);
    printf("parameters: %llu; device memory planned: %s (parameters and gradients %s, AdamW moments %s, "
           "activations and workspace %s)\n",
           (unsigned long long)tmm_model_param_count(&c->model), cli_size(mem->total, t[0], 32),
           cli_size(mem->model.params + mem->model.grads + mem->accumulation, t[1], 32),
           cli_size(mem->optimizer, t[2], 32),
           cli_size(mem->model.activations + mem->model.workspace + mem->model.fft_plans, t[3], 32));
    printf("%.1f tokens/s   %.2f ms per step   %.2f ms CPU per step\n", res->tokens_per_s, res->ms_per_step,
           res->cpu_ms_per_step);
    if (r->ranks > 1) {
        printf("data parallel: %d ranks, %u sequences each per step; rank 0's numbers above\n", r->ranks,
               B / (uint32_t)r->ranks);
        for (int i = 0; i < r->ranks; i++)
            printf("  rank %d: %.1f tokens/s, allreduce %.1f%% of its step time\n", i, r->rank_tokens_per_s[i],
                   100 * r->rank_allreduce_share[i]);
        printf("  total: %.1f tokens/s\n", r->total_tokens_per_s);
    }
    if (res->timed) {
        const tmm_bench_peaks_result *pk = &r->peaks;
        printf("%u commands per step; roofline ceilings: copy %.1f GB/s, matmul %.1f GFLOP/s\n",
               res->commands_per_step, pk->copy_gbs, pk->matmul_gflops);
        printf("\n%-16s %10s %7s %6s %9s %8s %8s %8s %6s\n", "op", "ms/step", "share", "cmds", "MB", "GFLOP",
               "GB/s", "GFLOP/s", "roof");
        for (int j = 0; j < res->n_ops; j++) {
            const tmm_bench_op_time *o = &res->ops[j];
            const double ms = o->ms / (double)r->steps;
            printf("%-16s %10.3f %6.1f%% %6u %9.1f %8.3f %8.1f %8.2f %5.0f%%%s\n", o->name, ms,
                   100 * o->ms / res->device_ms, o->commands, o->bytes / 1e6, o->flops / 1e9,
                   ms > 0 ? o->bytes / (ms * 1e6) : 0, ms > 0 ? o->flops / (ms * 1e6) : 0,
                   100 * tmm_bench_roofline(pk, ms, o->bytes, o->flops), o->externals ? "  (+FFT, not counted)" : "");
        }
        printf("(MB: the bytes of the views its commands bind, an upper bound of its traffic; roof: the time those "
               "bytes take at the copy bandwidth, or its FLOPs at the matmul rate, whichever is longer, over its "
               "time)\n");
    } else {
        printf("(no per-op times: the device has no timestamps on its compute queue)\n");
    }
}

/* Rank 0 prints the table or the JSON; the exit status. */
static int print(const tmm_device *dev, const tmm_train_config *c, const tmm_bench_train_report *r, bool json)
{
    if (!json) {
        print_table(dev, c, r);
        return 0;
    }
    char *text = tmm_bench_train_json(dev, c, r);
    if (!text)
        return bench_failed(TMM_ERR_OUT_OF_HOST_MEMORY);
    printf("%s\n", text);
    free(text);
    return 0;
}

int bench_train(int argc, char **argv)
{
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.model.vocab = 16;
    bench_run_flags run = { .steps = 20, .device = -1 };
    int rc = parse(argc, argv, &c, &run);
    if (rc)
        return rc < 0 ? 0 : rc;
    tmm_dist *dist;
    if ((rc = cli_dist_open(&dist)) != 0) {
        tmm_train_config_free(&c);
        return rc;
    }
    const int ranks = tmm_dist_size(dist);
    tmm_device *dev = NULL;
    if (c.batch % (uint32_t)ranks) {
        cli_fail("--batch %u (the global batch) does not split over %d ranks\n", c.batch, ranks);
        tmm_train_config_free(&c);
        rc = 2;
    } else if ((rc = bench_open(&c, cli_dist_device(dist, run.device), &dev)) != 0) {
        tmm_dist_abort(dist, rc);
    }
    if (rc) {
        cli_dist_close(dist);
        return rc;
    }
    tmm_bench_train_report r;
    tmm_status s = tmm_bench_train(dev, &c, dist, (uint32_t)run.steps, &r);
    if (s != TMM_OK) {
        rc = cli_error("benchmark failed", s);
        tmm_dist_abort(dist, rc);
    } else if (tmm_dist_leader(dist)) {
        rc = print(dev, &c, &r, run.json);
    }
    tmm_bench_train_report_free(&r);
    tmm_device_destroy(dev);
    tmm_train_config_free(&c);
    cli_dist_close(dist);
    return rc;
}
