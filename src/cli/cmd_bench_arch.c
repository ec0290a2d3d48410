/* tmm bench arch: the TMM and the baselines (docs/baselines.md) side by side
 * at matched parameter counts on one device, in one run (measured by the
 * library: tmm_bench_arch). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "model/arch.h"

typedef struct arch_flags {
    bool positions_given, json;
    int device;
} arch_flags;

static void usage(void)
{
    printf("usage: tmm bench arch [--archs A,A,...] [--d-model D] [--n-ctx N] [--layers L] [--heads H]\n"
           "                      [--window W] [--batch B] [--vocab V] [--steps S] [--positions T,T,...]\n"
           "                      [--repeat R] [--device N] [--json]\n\n"
           "Compares the architectures (" BENCH_ARCHS "; docs/baselines.md)\n"
           "at matched parameter counts, on one device in one run. The TMM has H heads, L layers\n"
           "and MLP expansion 4; each baseline has H heads too (Hyena none, Mamba 2 heads of 64\n"
           "inner channels) and the MLP expansion e (1..16) whose parameter count is nearest the\n"
           "TMM's; Mamba 2, which has no MLP, the number of layers (1..4L) instead. Per\n"
           "architecture:\n"
           "  params, e, L     its parameters (all of them, embedding and head included), MLP\n"
           "                   expansion and layers\n"
           "  tokens/s, ms/step  a training step (forward, backward, clipping, AdamW; recorded\n"
           "                   once, replayed) on B random sequences of N tokens: S measured\n"
           "                   steps after 2 warm-up steps, wall-clock time (as bench train)\n"
           "  memory           planned device memory of that training: the model at batch B\n"
           "                   (parameters, gradients, activations, workspace) plus AdamW's moments\n"
           "  ms/token at t    cached decoding of one sequence: a prefill of t tokens, then the\n"
           "                   median of R single steps at t .. t+R-1 (as bench generate)\n\n"
           "options:\n"
           "  --archs A,A,...  the architectures to measure (default all of them; repeatable)\n"
           "  --d-model D      width (default 128)\n"
           "  --n-ctx N        context length (default 1024)\n"
           "  --layers L       blocks (default 4)\n"
           "  --heads H        heads of every model (default 4; d/H even and at most 128)\n"
           "  --window W       swa's window (default 128, at most N)\n"
           "  --batch B        training sequences per step (default 4)\n"
           "  --vocab V        vocabulary (default 257)\n"
           "  --steps S        measured training steps (default 3)\n"
           "  --positions T,.. decoding positions, each with T + R <= N (default 1,100,1000,\n"
           "                   those that fit)\n"
           "  --repeat R       decoding steps timed per position (default 5, at most %u)\n"
           "  --device N       use Vulkan device N (see 'tmm devices')\n"
           "  --json           print one JSON object instead of the table\n"
           "  -h, --help       show this help\n\n"
           "With the defaults it takes a few minutes on lavapipe (2 CPU cores).\n",
           TMM_BENCH_MAX_REPEAT);
}

static int check(tmm_bench_arch_opts *o, const arch_flags *f);

/* Parses the options into o and f; 0 to go on, -1 after --help, else the exit status. */
static int parse(int argc, char **argv, tmm_bench_arch_opts *o, arch_flags *f)
{
    enum { O_D = 256, O_N, O_L, O_H, O_W, O_B, O_V, O_STEPS, O_POS, O_REPEAT, O_DEVICE, O_JSON, O_ARCHS };
    static const struct option longopts[] = {
        { "d-model", required_argument, NULL, O_D },     { "n-ctx", required_argument, NULL, O_N },
        { "layers", required_argument, NULL, O_L },      { "heads", required_argument, NULL, O_H },
        { "window", required_argument, NULL, O_W },      { "batch", required_argument, NULL, O_B },
        { "vocab", required_argument, NULL, O_V },       { "steps", required_argument, NULL, O_STEPS },
        { "positions", required_argument, NULL, O_POS }, { "repeat", required_argument, NULL, O_REPEAT },
        { "device", required_argument, NULL, O_DEVICE }, { "json", no_argument, NULL, O_JSON },
        { "archs", required_argument, NULL, O_ARCHS },   { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    *o = (tmm_bench_arch_opts){ .d = 128, .n = 1024, .layers = 4, .heads = 4, .batch = 4, .vocab = 257, .steps = 3,
                                .repeat = 5, .positions = { 1, 100, 1000 }, .np = 3 };
    *f = (arch_flags){ .device = -1 };
    unsigned long v;
    int opt;
    bool ok = true;
    cli_args args = { .longopts = longopts, .repeatable = (const int[]){ O_ARCHS, 0 } };
    while (ok && (opt = cli_getopt(&args, argc, argv)) != -1) {
        switch (opt) {
        case O_D: ok = cli_parse_positive("--d-model", optarg, TMM_MAX_D_MODEL, &o->d); break;
        case O_N: ok = cli_parse_positive("--n-ctx", optarg, TMM_MAX_N_CTX, &o->n); break;
        case O_L: ok = cli_parse_positive("--layers", optarg, TMM_MAX_LAYERS, &o->layers); break;
        case O_H: ok = cli_parse_positive("--heads", optarg, TMM_MAX_HEADS, &o->heads); break;
        case O_W: ok = bench_parse_window(optarg, &o->window); break;
        case O_B: ok = cli_parse_positive("--batch", optarg, 1u << 20, &o->batch); break;
        case O_V: ok = cli_parse_positive("--vocab", optarg, TMM_MAX_VOCAB, &o->vocab); break;
        case O_STEPS: ok = cli_parse_positive("--steps", optarg, 1u << 20, &o->steps); break;
        case O_POS: ok = bench_parse_list("--positions", optarg, o->positions, &o->np), f->positions_given = true; break;
        case O_REPEAT: ok = cli_parse_positive("--repeat", optarg, TMM_BENCH_MAX_REPEAT, &o->repeat); break;
        case O_DEVICE:
            ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v);
            f->device = (int)v;
            break;
        case O_JSON: f->json = true; break;
        case O_ARCHS: ok = bench_parse_archs(optarg, o->selected); break;
        case 'h': usage(); return -1;
        default: return 2;
        }
    }
    if (ok && optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench arch --help'\n", argv[optind]);
        ok = false;
    }
    return ok ? check(o, f) : 2;
}

/* After the flags: every architecture when none is named, the default
 * window, and the decoding positions that fit. 0, or the exit status. */
static int check(tmm_bench_arch_opts *o, const arch_flags *f)
{
    bool any = false;
    for (int a = 0; a < TMM_N_ARCHS; a++)
        any = any || o->selected[a];
    for (int a = 0; a < TMM_N_ARCHS && !any; a++)
        o->selected[a] = true;
    if (o->window && o->window > o->n) {
        cli_fail("--window (%u) must be at most --n-ctx (%u)\n", o->window, o->n);
        return 2;
    }
    if (!o->window)
        o->window = o->n < TMM_BENCH_ARCH_WINDOW ? o->n : TMM_BENCH_ARCH_WINDOW;
    /* a decoding position needs room for its R steps */
    unsigned k = 0;
    for (unsigned i = 0; i < o->np; i++) {
        if ((uint64_t)o->positions[i] + o->repeat <= o->n)
            o->positions[k++] = o->positions[i];
        else if (f->positions_given) {
            cli_fail("--positions: %u plus --repeat %u steps passes --n-ctx %u\n", o->positions[i], o->repeat,
                     o->n);
            return 2;
        }
    }
    o->np = k;
    if (o->np == 0) {
        cli_fail("no decoding position fits --n-ctx %u with --repeat %u steps; give --positions\n", o->n,
                 o->repeat);
        return 2;
    }
    return 0;
}

static void print_header(const tmm_bench_arch_opts *o, const char *device)
{
    printf("device: %s\n"
           "models: d %u, n %u, %u layers, %u heads, vocab %u; the TMM at MLP expansion %u, each baseline at "
           "the expansion (Mamba 2: the layers) that matches its parameters\n"
           "training: batch %u (%u tokens per step), %u steps after %u warm-up; memory: planned for that training "
           "(model and AdamW moments)\n"
           "decoding: one sequence, median ms of %u cached steps after a prefill to position t\n\n",
           device, o->d, o->n, o->layers, o->heads, o->vocab, TMM_BENCH_ARCH_EXPANSION, o->batch, o->batch * o->n,
           o->steps, TMM_BENCH_TRAIN_WARMUP, o->repeat);
    printf("%-12s %11s %3s %3s %10s %9s %10s  ms/token at t =", "arch", "params", "e", "L", "tokens/s", "ms/step",
           "memory");
    for (unsigned i = 0; i < o->np; i++)
        printf(" %7u", o->positions[i]);
    printf("\n");
}

static void print_row(void *user, const tmm_bench_arch_row *r)
{
    const tmm_bench_arch_opts *o = user;
    char label[32], mem[32], e[8] = "-";
    if (tmm_arch_of(r->c.arch)->mlp != TMM_MLP_NONE)
        snprintf(e, sizeof e, "%u", r->c.expansion);
    printf("%-12s %11llu %3s %3u %10.1f %9.2f %10s  %15s", tmm_arch_label(&r->c, label, sizeof label),
           (unsigned long long)r->params, e, r->c.n_layers, r->train.tokens_per_s, r->train.ms_per_step,
           cli_size(r->mem.total, mem, sizeof mem), "");
    for (unsigned i = 0; i < o->np; i++)
        printf(" %7.3f", r->decode_ms[i]);
    printf("\n");
    fflush(stdout);
}

int bench_arch(int argc, char **argv)
{
    tmm_bench_arch_opts o;
    arch_flags f;
    int rc = parse(argc, argv, &o, &f);
    if (rc)
        return rc < 0 ? 0 : rc;
    tmm_bench_arch_result r;
    tmm_status s = tmm_bench_arch_models(&o, &r);
    if (s != TMM_OK)
        return cli_error("bad model", s);
    tmm_device *dev;
    if (cli_open_device(f.device, &dev))
        return 1;
    const char *device = tmm_device_get_info(dev)->name;
    if (!f.json)
        print_header(&o, device);
    s = tmm_bench_arch(dev, &o, &r, f.json ? NULL : print_row, &o);
    char *text = s == TMM_OK && f.json ? tmm_bench_arch_json(dev, &o, &r) : NULL;
    if (s != TMM_OK || (f.json && !text))
        rc = bench_failed(s);
    else if (f.json)
        printf("%s\n", text);
    free(text);
    tmm_device_destroy(dev);
    return rc;
}
