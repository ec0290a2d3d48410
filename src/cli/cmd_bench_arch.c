/* tmm bench arch: the TMM and the baselines (docs/baselines.md) side by side
 * at matched parameter counts on one device, in one run: training speed,
 * planned training memory and cached decoding time per token against the
 * position. The measuring is bench train's and bench generate's own
 * (bench.h). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "model/arch.h"
#include "model/match.h"
#include "train/trainer.h"

#define N_ARCHS TMM_ARCH_COUNT
#define TMM_EXPANSION 4u       /* the TMM's MLP expansion */
#define DEFAULT_WINDOW 128u    /* swa's (the resolved default), at most n */
#define TRAIN_WARMUP 2u        /* as bench train */

typedef struct arch_row {
    tmm_model_config c;
    uint64_t params;
    tmm_train_memory mem;
    bench_train_result train;
    double decode_ms[BENCH_MAX_POINTS];
} arch_row;

typedef struct arch_opts {
    uint32_t d, n, layers, heads, window, batch, vocab, steps, repeat;
    uint32_t positions[BENCH_MAX_POINTS];
    unsigned np;
    bool selected[N_ARCHS];      /* --archs */
    bool positions_given, json;
    int device;
} arch_opts;

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
           "  --archs A,A,...  the architectures to measure (default all of them)\n"
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
           BENCH_MAX_REPEAT);
}

/* A positive option value up to max; false after a one-line error. */
static bool parse_positive(const char *option, const char *text, unsigned long max, uint32_t *out)
{
    unsigned long v;
    if (!cli_parse_uint(option, text, max, &v))
        return false;
    if (v == 0) {
        cli_fail("%s must be at least 1\n", option);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* Parses the options into o; 0 to go on, else the exit status. */
static int parse(int argc, char **argv, arch_opts *o)
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
    *o = (arch_opts){ .d = 128, .n = 1024, .layers = 4, .heads = 4, .batch = 4, .vocab = 257, .steps = 3,
                      .repeat = 5, .positions = { 1, 100, 1000 }, .np = 3, .device = -1 };
    unsigned long v;
    int opt;
    bool ok = true;
    optind = 1;
    opterr = 0; /* our own messages below */
    while (ok && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (opt) {
        case O_D: ok = parse_positive("--d-model", optarg, TMM_MAX_D_MODEL, &o->d); break;
        case O_N: ok = parse_positive("--n-ctx", optarg, TMM_MAX_N_CTX, &o->n); break;
        case O_L: ok = parse_positive("--layers", optarg, TMM_MAX_LAYERS, &o->layers); break;
        case O_H: ok = parse_positive("--heads", optarg, TMM_MAX_HEADS, &o->heads); break;
        case O_W: ok = bench_parse_window(optarg, &o->window); break;
        case O_B: ok = parse_positive("--batch", optarg, 1u << 20, &o->batch); break;
        case O_V: ok = parse_positive("--vocab", optarg, TMM_MAX_VOCAB, &o->vocab); break;
        case O_STEPS: ok = parse_positive("--steps", optarg, 1u << 20, &o->steps); break;
        case O_POS: ok = bench_parse_list("--positions", optarg, o->positions, &o->np), o->positions_given = true; break;
        case O_REPEAT: ok = parse_positive("--repeat", optarg, BENCH_MAX_REPEAT, &o->repeat); break;
        case O_DEVICE:
            ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v);
            o->device = (int)v;
            break;
        case O_JSON: o->json = true; break;
        case O_ARCHS: ok = bench_parse_archs(optarg, o->selected); break;
        case 'h': usage(); return -1;
        case ':': cli_fail("%s needs a value\n", argv[optind - 1]); return 2;
        default: cli_fail("unknown option '%s'; see 'tmm bench arch --help'\n", argv[optind - 1]); return 2;
        }
    }
    if (!ok)
        return 2;
    bool any = false;
    for (int a = 0; a < N_ARCHS; a++)
        any = any || o->selected[a];
    for (int a = 0; a < N_ARCHS && !any; a++)
        o->selected[a] = true;
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench arch --help'\n", argv[optind]);
        return 2;
    }
    if (o->window && o->window > o->n) {
        cli_fail("--window (%u) must be at most --n-ctx (%u)\n", o->window, o->n);
        return 2;
    }
    if (!o->window)
        o->window = o->n < DEFAULT_WINDOW ? o->n : DEFAULT_WINDOW;
    /* a decoding position needs room for its R steps */
    unsigned k = 0;
    for (unsigned i = 0; i < o->np; i++) {
        if ((uint64_t)o->positions[i] + o->repeat <= o->n)
            o->positions[k++] = o->positions[i];
        else if (o->positions_given) {
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

/* Every model: the TMM as given, each baseline with the knob value whose
 * parameter count is nearest the TMM's (tmm_model_match_params). */
static tmm_status match_models(const arch_opts *o, arch_row rows[N_ARCHS])
{
    for (int a = 0; a < N_ARCHS; a++) {
        tmm_model_config c = tmm_model_config_default();
        c.arch = (tmm_arch)a;
        c.vocab = o->vocab, c.d_model = o->d, c.n_ctx = o->n, c.n_layers = o->layers;
        bench_set_heads(&c, o->heads, false);
        c.expansion = TMM_EXPANSION;
        c.window = tmm_arch_of(c.arch)->default_window ? o->window : 0;
        tmm_model_config_resolve(&c);
        tmm_status s = tmm_model_config_check(&c);
        if (s != TMM_OK) {
            char why[256];
            snprintf(why, sizeof why, "%s", tmm_last_error());
            const char *name = tmm_arch_name(c.arch);
            return strncmp(why, name, strlen(name)) == 0 ? tmm_fail(s, "%s", why)
                                                          : tmm_fail(s, "%s: %s", name, why);
        }
        rows[a].c = c;
        rows[a].params = tmm_model_param_count(&c);
    }
    int subject = 0; /* the TMM: the others are matched to its parameter count */
    while (!tmm_arch_of(rows[subject].c.arch)->toeplitz)
        subject++;
    for (int a = 0; a < N_ARCHS; a++)
        if (a != subject)
            tmm_model_match_params(&rows[a].c, rows[subject].params, &rows[a].params);
    return TMM_OK;
}

/* Training speed and memory, then decoding, of one model. */
static tmm_status measure(tmm_device *dev, const arch_opts *o, arch_row *row)
{
    tmm_train_config tc;
    tmm_train_config_default(&tc);
    tc.model = row->c;
    tc.batch = o->batch;
    tc.accum = 1;
    tmm_status s = tmm_train_memory_plan(dev, &tc, &row->mem);
    if (s == TMM_OK)
        s = bench_train_steps(dev, &tc, TRAIN_WARMUP, o->steps, false, &row->train);
    tmm_train_config_free(&tc);
    bench_gen g = { 0 };
    double warm;
    if (s == TMM_OK)
        s = bench_gen_random(dev, &row->c, TMM_TOEPLITZ_AUTO, o->repeat, &g);
    if (s == TMM_OK)
        s = bench_gen_cached(&g, 1, &warm); /* warm-up: compiles the decoding kernels */
    for (unsigned i = 0; i < o->np && s == TMM_OK; i++)
        s = bench_gen_cached(&g, o->positions[i], &row->decode_ms[i]);
    bench_gen_close(&g);
    return s;
}

static void print_header(const arch_opts *o, const char *device)
{
    printf("device: %s\n"
           "models: d %u, n %u, %u layers, %u heads, vocab %u; the TMM at MLP expansion %u, each baseline at "
           "the expansion (Mamba 2: the layers) that matches its parameters\n"
           "training: batch %u (%u tokens per step), %u steps after %u warm-up; memory: planned for that training "
           "(model and AdamW moments)\n"
           "decoding: one sequence, median ms of %u cached steps after a prefill to position t\n\n",
           device, o->d, o->n, o->layers, o->heads, o->vocab, TMM_EXPANSION, o->batch, o->batch * o->n, o->steps,
           TRAIN_WARMUP, o->repeat);
    printf("%-12s %11s %3s %3s %10s %9s %10s  ms/token at t =", "arch", "params", "e", "L", "tokens/s", "ms/step",
           "memory");
    for (unsigned i = 0; i < o->np; i++)
        printf(" %7u", o->positions[i]);
    printf("\n");
}

static void print_row(const arch_opts *o, const arch_row *r)
{
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

static int print_json(const arch_opts *o, const char *device, const arch_row rows[N_ARCHS])
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", device);
    cJSON_AddNumberToObject(root, "d_model", o->d);
    cJSON_AddNumberToObject(root, "n_ctx", o->n);
    cJSON_AddNumberToObject(root, "n_layers", o->layers);
    cJSON_AddNumberToObject(root, "heads", o->heads);
    cJSON_AddNumberToObject(root, "vocab", o->vocab);
    cJSON_AddNumberToObject(root, "window", o->window);
    cJSON_AddNumberToObject(root, "batch", o->batch);
    cJSON_AddNumberToObject(root, "steps", o->steps);
    cJSON_AddNumberToObject(root, "warmup_steps", TRAIN_WARMUP);
    cJSON_AddNumberToObject(root, "repeat", o->repeat);
    cJSON *arr = cJSON_AddArrayToObject(root, "archs");
    for (int a = 0; a < N_ARCHS; a++) {
        const arch_row *r = &rows[a];
        if (!o->selected[a])
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, e);
        cJSON_AddStringToObject(e, "arch", tmm_arch_name(r->c.arch));
        cJSON_AddNumberToObject(e, "params", (double)r->params);
        if (tmm_arch_of(r->c.arch)->mlp != TMM_MLP_NONE)
            cJSON_AddNumberToObject(e, "expansion", r->c.expansion);
        cJSON_AddNumberToObject(e, "n_layers", r->c.n_layers);
        cJSON_AddNumberToObject(e, "heads", r->c.heads);
        if (tmm_arch_of(r->c.arch)->default_state)
            cJSON_AddNumberToObject(e, "state", r->c.state);
        if (tmm_arch_of(r->c.arch)->default_window)
            cJSON_AddNumberToObject(e, "window", r->c.window);
        cJSON_AddNumberToObject(e, "tokens_per_s", r->train.tokens_per_s);
        cJSON_AddNumberToObject(e, "ms_per_step", r->train.ms_per_step);
        cJSON_AddNumberToObject(e, "cpu_ms_per_step", r->train.cpu_ms_per_step);
        cJSON_AddNumberToObject(e, "memory_bytes", (double)r->mem.total);
        cJSON *m = cJSON_AddObjectToObject(e, "memory");
        cJSON_AddNumberToObject(m, "params", (double)r->mem.model.params);
        cJSON_AddNumberToObject(m, "grads", (double)r->mem.model.grads);
        cJSON_AddNumberToObject(m, "optimizer", (double)r->mem.optimizer);
        cJSON_AddNumberToObject(m, "activations", (double)r->mem.model.activations);
        cJSON_AddNumberToObject(m, "workspace", (double)(r->mem.model.workspace + r->mem.model.fft_plans));
        cJSON *dec = cJSON_AddArrayToObject(e, "decode");
        for (unsigned i = 0; i < o->np; i++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "position", o->positions[i]);
            cJSON_AddNumberToObject(p, "ms_per_token", r->decode_ms[i]);
            cJSON_AddItemToArray(dec, p);
        }
    }
    char *text = cJSON_Print(root);
    int rc = 0;
    if (text)
        printf("%s\n", text);
    else
        cli_fail("out of host memory writing JSON\n"), rc = 1;
    free(text);
    cJSON_Delete(root);
    return rc;
}

int bench_arch(int argc, char **argv)
{
    arch_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    arch_row rows[N_ARCHS];
    memset(rows, 0, sizeof rows);
    tmm_status s = match_models(&o, rows);
    if (s != TMM_OK)
        return cli_error("bad model", s);
    tmm_device *dev;
    if (cli_open_device(o.device, &dev))
        return 1;
    const char *device = tmm_device_get_info(dev)->name;
    if (!o.json)
        print_header(&o, device);
    int a = 0;
    for (; a < N_ARCHS; a++) {
        if (!o.selected[a])
            continue;
        if ((s = measure(dev, &o, &rows[a])) != TMM_OK)
            break;
        if (!o.json)
            print_row(&o, &rows[a]);
    }
    if (s != TMM_OK) {
        char what[48];
        snprintf(what, sizeof what, "measuring %s", tmm_arch_name(rows[a].c.arch));
        rc = cli_error(what, s);
    } else if (o.json) {
        rc = print_json(&o, device, rows);
    }
    tmm_device_destroy(dev);
    return rc;
}
