/* tmm experiment: the paper's comparisons, one command each
 * (src/experiment, docs/experiments.md). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "experiment/experiment.h"

#define MAX_DATA 64
#define DECODE_REPEAT 4u

static void usage(void)
{
    printf("usage: tmm experiment NAME [--preset small|medium|paper] [--archs A,A,...] [--out DIR]\n"
           "                      [--seed N] [--data FILE]... [--ablations] [--lr-sweep] [--lr-grid R,R,...]\n"
           "                      [--device N] [--quiet]\n\n"
           "Reruns one of the paper's comparisons on this device with the trainer: every architecture\n"
           "(" BENCH_ARCHS ") at matched parameter counts, the same\n"
           "data, budget and seed. Writes DIR/NAME/: runs/ (one training run per architecture and\n"
           "setting, each with curve.jsonl), summary.json, SVG plots and report.md, which states the\n"
           "claim, the setup, the measured table and whether the claim held at this scale\n"
           "(docs/experiments.md).\n\n"
           "Resumable: rerun the same command after an interruption (Ctrl-C, SIGTERM, a crash) and it\n"
           "continues from each run's last checkpoint; finished runs are reused, and a run whose\n"
           "settings changed is a new run. The same seed gives the same losses and accuracies.\n\n"
           "experiments:\n");
    for (const tmm_experiment *e = tmm_experiments; e->name; e++) {
        printf("  %-11s %s. Claim: %s.\n", e->name, e->title, e->claim);
        for (int p = 0; p < TMM_EXP_PRESET_COUNT; p++)
            printf("  %11s   --preset %-6s %s\n", "", tmm_exp_preset_name((tmm_exp_preset)p), e->presets[p]);
    }
    printf("\n"
           "options:\n"
           "  --preset P       small (the default: minutes on lavapipe), medium or paper\n"
           "  --archs A,A,...  the architectures to compare (default all six; repeatable)\n"
           "  --out DIR        results root (default results): the experiment writes DIR/NAME\n"
           "  --seed N         model initialization and data (default 1)\n"
           "  --data FILE      efficiency, retention, capacity, index: training text, as tmm train --data\n"
           "                   (repeatable; default: the license texts in /usr/share/common-licenses)\n"
           "  --ablations      efficiency: also the TMM ablations (flat, expanded, kernel 3 and 5, PyTorch init)\n"
           "  --lr-sweep       efficiency, recall: first train each architecture at every rate of a grid for half\n"
           "                   the budget, judged on held-out data that is not the final evaluation's; then run\n"
           "                   the comparison with each at its best rate (the report shows the sweep's table)\n"
           "  --lr-grid R,...  the sweep's peak rates, up to %d (implies --lr-sweep; default: efficiency\n"
           "                   1e-4,3e-4,1e-3,3e-3,1e-2,3e-2,1e-1, recall 1e-3,3e-3,1e-2,3e-2)\n"
           "  --device N       use Vulkan device N (see 'tmm devices')\n"
           "  --quiet          no progress lines\n"
           "  -h, --help       show this help\n", TMM_EXP_MAX_RATES);
}

/* Decoding ms per token, as tmm bench generate measures it. */
static tmm_status decode(tmm_device *dev, const tmm_model_config *c, const uint32_t *positions, uint32_t count,
                         double *ms, void *user)
{
    (void)user;
    tmm_bench_gen g = { 0 };
    double warm;
    tmm_status s = tmm_bench_gen_random(dev, c, TMM_TOEPLITZ_AUTO, DECODE_REPEAT, &g);
    if (s == TMM_OK)
        s = tmm_bench_gen_cached(&g, 1, &warm); /* compiles the decoding kernels */
    for (uint32_t i = 0; i < count && s == TMM_OK; i++)
        s = positions[i] + DECODE_REPEAT <= c->n_ctx ? tmm_bench_gen_cached(&g, positions[i], &ms[i])
                                                     : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "decoding position %u "
                                                                "does not fit n %u", positions[i], c->n_ctx);
    tmm_bench_gen_close(&g);
    return s;
}

int cmd_experiment(int argc, char **argv)
{
    enum { O_PRESET = 256, O_ARCHS, O_OUT, O_SEED, O_DATA, O_ABL, O_SWEEP, O_GRID, O_DEVICE, O_QUIET };
    static const struct option longopts[] = {
        { "preset", required_argument, NULL, O_PRESET }, { "archs", required_argument, NULL, O_ARCHS },
        { "out", required_argument, NULL, O_OUT },       { "seed", required_argument, NULL, O_SEED },
        { "data", required_argument, NULL, O_DATA },     { "ablations", no_argument, NULL, O_ABL },
        { "lr-sweep", no_argument, NULL, O_SWEEP },      { "lr-grid", required_argument, NULL, O_GRID },
        { "device", required_argument, NULL, O_DEVICE }, { "quiet", no_argument, NULL, O_QUIET },
        { "help", no_argument, NULL, 'h' },              { 0, 0, 0, 0 },
    };
    const char *data[MAX_DATA];
    tmm_exp_options o = { .preset = TMM_EXP_SMALL, .out = "results", .seed = 1, .data = data, .stop = &cli_interrupted,
                          .decode = decode };
    int opt, device = -1;
    unsigned long v;
    bool ok = true;
    cli_args args = { .longopts = longopts, .repeatable = (const int[]){ O_ARCHS, O_DATA, 0 } };
    while (ok && (opt = cli_getopt(&args, argc, argv)) != -1) {
        switch (opt) {
        case O_PRESET: {
            tmm_status s = tmm_exp_preset_parse(optarg, &o.preset);
            if (s != TMM_OK)
                cli_fail("--preset: %s\n", tmm_last_error()), ok = false;
            break;
        }
        case O_ARCHS: ok = bench_parse_archs(optarg, o.archs); break;
        case O_OUT: o.out = optarg; break;
        case O_SEED:
            ok = cli_parse_uint("--seed", optarg, ~0ul, &v);
            o.seed = v;
            break;
        case O_DATA:
            if (o.n_data == MAX_DATA)
                cli_fail("--data: at most %d files\n", MAX_DATA), ok = false;
            else
                data[o.n_data++] = optarg;
            break;
        case O_ABL: o.ablations = true; break;
        case O_SWEEP: o.lr_sweep = true; break;
        case O_GRID:
            if (tmm_exp_lr_grid_parse(optarg, o.lr_grid, &o.n_lr_grid) != TMM_OK)
                cli_fail("--lr-grid: %s\n", tmm_last_error()), ok = false;
            o.lr_sweep = true;
            break;
        case O_DEVICE:
            ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v);
            device = (int)v;
            break;
        case O_QUIET: o.quiet = true; break;
        case 'h': usage(); return 0;
        default: return 2;
        }
    }
    if (!ok)
        return 2;
    if (optind >= argc) {
        cli_fail("which experiment? see 'tmm experiment --help'\n");
        return 2;
    }
    if (optind + 1 < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm experiment --help'\n", argv[optind + 1]);
        return 2;
    }
    const tmm_experiment *e = tmm_experiment_find(argv[optind]);
    if (!e) {
        cli_fail("no experiment '%s'; experiments:", argv[optind]);
        for (const tmm_experiment *x = tmm_experiments; x->name; x++)
            fprintf(stderr, " %s", x->name);
        fprintf(stderr, "\n");
        return 2;
    }
    tmm_device *dev;
    if (cli_open_device(device, &dev))
        return 1;
    cli_catch_stop_signals();
    tmm_exp_outcome out;
    tmm_status s = tmm_experiment_run(dev, e, &o, &out);
    tmm_device_destroy(dev);
    if (s != TMM_OK)
        return cli_error(e->name, s);
    if (out.interrupted) {
        printf("interrupted: rerun the same command to continue (%s)\n", out.dir);
        return 128 + (cli_interrupted ? cli_interrupted : SIGTERM);
    }
    printf("%s: %u runs (%u reused); claim %s at this scale; report %s/report.md\n", e->name, out.runs, out.reused,
           out.verdict, out.dir);
    return 0;
}
