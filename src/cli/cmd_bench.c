/* tmm bench: the benchmarks, one per subcommand (tmm bench matmul), measured
 * by the library (src/bench); here their flags and tables, and the flags
 * the model benchmarks share (bench.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "model/arch.h"

#define MAX_REPEAT 10000u
#define MAX_SIDE (1u << 20) /* keeps m*k*4 and friends far from overflowing */

/* ---- matmul ------------------------------------------------------------- */

static void print_matmul(const tmm_device *dev, const tmm_bench_matmul_opts *o, const tmm_bench_matmul_result *r)
{
    const tmm_matmul_desc *d = &o->desc;
    const tmm_device_info *info = tmm_device_get_info(dev);
    const char *trans = d->trans_a ? (d->trans_b ? "tt" : "tn") : (d->trans_b ? "nt" : "nn");
    const double flop = tmm_bench_matmul_flop(d);
    printf("matmul on %s (%s), float32, C = %sA * %sB\n", info->name, tmm_device_type_name(info->type),
           d->trans_a ? "transposed " : "", d->trans_b ? "transposed " : "");
    printf("%-10s %6s %6s %6s %5s %7s %10s %9s\n", "variant", "m", "n", "k", "trans", "repeat", "ms", "GFLOP/s");
    for (int i = 0; i < o->n_variants; i++) {
        const tmm_bench_matmul_row *row = &r->rows[i];
        char name[32];
        printf("%-10s %6llu %6llu %6llu %5s %7u %10.3f %9.2f\n", tmm_bench_matmul_label(dev, row->variant, name, sizeof name),
               (unsigned long long)d->m, (unsigned long long)d->n, (unsigned long long)d->k, trans, row->repeat,
               row->ms, row->ms > 0 ? flop / (row->ms * 1e6) : 0.0);
    }
    if (r->rows[0].host_timed)
        printf("(the device has no timestamp queries: times are host wall-clock per submission)\n");
}

static void matmul_usage(FILE *f)
{
    fprintf(f,
            "usage: tmm bench matmul [--m M] [--n N] [--k K] [--variant auto|register|tiled|all]\n"
            "                        [--trans-a] [--trans-b] [--repeat R] [--device N] [--json]\n\n"
            "Times C[M,N] = A[M,K] * B[K,N] in float32 on the device: one warm-up run, then R\n"
            "timed runs; reports the median device time (timestamp queries) and GFLOP/s\n"
            "(2*M*N*K per run). A few entries of C are checked against a double-precision\n"
            "dot product; a wrong result fails the benchmark.\n\n"
            "options:\n"
            "  --m M, --n N, --k K  matrix sizes (default 1024 each)\n"
            "  --variant V          auto: what tmm picks for the device (register on CPU\n"
            "                       devices, tiled on GPUs); register; tiled; all: register\n"
            "                       and tiled side by side (default all)\n"
            "  --trans-a            A is stored transposed, [K,M]\n"
            "  --trans-b            B is stored transposed, [N,K]\n"
            "  --repeat R           timed runs (default: enough for about %.1f s, %u to %u)\n"
            "  --device N           use Vulkan device N (see 'tmm devices')\n"
            "  --json               print a JSON array of results instead of a table\n"
            "  -h, --help           show this help\n",
            TMM_BENCH_MATMUL_TARGET_MS / 1000, TMM_BENCH_MATMUL_MIN_AUTO_REPEAT, TMM_BENCH_MATMUL_MAX_AUTO_REPEAT);
}

/* --variant auto|register|tiled|all */
static bool parse_variant(const char *text, tmm_bench_matmul_opts *o)
{
    static const struct {
        const char *name;
        tmm_matmul_variant variant;
    } names[] = { { "auto", TMM_MATMUL_AUTO }, { "register", TMM_MATMUL_REGISTER }, { "tiled", TMM_MATMUL_TILED } };
    if (strcmp(text, "all") == 0) {
        o->n_variants = 2;
        return true;
    }
    o->n_variants = 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i].name) == 0) {
            o->variants[0] = names[i].variant;
            return true;
        }
    cli_fail("--variant expects auto, register, tiled or all, got '%s'\n", text);
    return false;
}

/* The options of bench matmul: 0 to go on, -1 after --help, else the exit status. */
static int parse_matmul(int argc, char **argv, tmm_bench_matmul_opts *o, int *device, bool *json)
{
    enum { OPT_M = 256, OPT_N, OPT_K, OPT_VARIANT, OPT_TA, OPT_TB, OPT_REPEAT, OPT_DEVICE, OPT_JSON };
    static const struct option longopts[] = {
        { "m", required_argument, NULL, OPT_M },           { "n", required_argument, NULL, OPT_N },
        { "k", required_argument, NULL, OPT_K },           { "variant", required_argument, NULL, OPT_VARIANT },
        { "trans-a", no_argument, NULL, OPT_TA },          { "trans-b", no_argument, NULL, OPT_TB },
        { "repeat", required_argument, NULL, OPT_REPEAT }, { "device", required_argument, NULL, OPT_DEVICE },
        { "json", no_argument, NULL, OPT_JSON },           { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    unsigned long v;
    bool ok = true;
    int c;
    cli_args args = { .longopts = longopts };
    while (ok && (c = cli_getopt(&args, argc, argv)) != -1) {
        switch (c) {
        case OPT_M: ok = cli_parse_positive("--m", optarg, MAX_SIDE, &o->desc.m); break;
        case OPT_N: ok = cli_parse_positive("--n", optarg, MAX_SIDE, &o->desc.n); break;
        case OPT_K: ok = cli_parse_positive("--k", optarg, MAX_SIDE, &o->desc.k); break;
        case OPT_VARIANT: ok = parse_variant(optarg, o); break;
        case OPT_TA: o->desc.trans_a = true; break;
        case OPT_TB: o->desc.trans_b = true; break;
        case OPT_REPEAT: ok = cli_parse_positive("--repeat", optarg, MAX_REPEAT, &o->repeat); break;
        case OPT_DEVICE:
            ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v);
            *device = (int)v;
            break;
        case OPT_JSON: *json = true; break;
        case 'h': matmul_usage(stdout); return -1;
        default: return 2;
        }
    }
    if (ok && optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench matmul --help'\n", argv[optind]);
        ok = false;
    }
    return ok ? 0 : 2;
}

static int bench_matmul(int argc, char **argv)
{
    tmm_bench_matmul_opts o = { .desc = { .m = 1024, .n = 1024, .k = 1024, .batch = 1 },
                                .variants = { TMM_MATMUL_REGISTER, TMM_MATMUL_TILED },
                                .n_variants = 2 };
    int device = -1;
    bool json = false;
    int rc = parse_matmul(argc, argv, &o, &device, &json);
    if (rc)
        return rc < 0 ? 0 : rc;
    tmm_device *dev;
    if (cli_open_device(device, &dev))
        return 1;
    tmm_bench_matmul_result r;
    tmm_status s = tmm_bench_matmul(dev, &o, &r);
    char *text = s == TMM_OK && json ? tmm_bench_matmul_json(dev, &o, &r) : NULL;
    if (s != TMM_OK || (json && !text))
        rc = bench_failed(s);
    else if (json)
        printf("%s\n", text);
    else
        print_matmul(dev, &o, &r);
    free(text);
    tmm_device_destroy(dev);
    return rc;
}

int bench_failed(tmm_status s)
{
    const char *msg = tmm_last_error();
    cli_fail("%s\n", *msg ? msg : tmm_status_name(s));
    return 1;
}

/* ---- options the model benchmarks share (bench.h) ------------------------ */

bool bench_model_base(int argc, char **argv, const struct option *longopts, int config_opt, tmm_train_config *c)
{
    cli_args args = { .longopts = longopts };
    const char *preset = NULL, *config = NULL;
    int opt;
    while ((opt = cli_getopt(&args, argc, argv)) != -1) {
        if (opt == '?')
            return false;
        if (opt == 'p')
            preset = optarg;
        else if (config_opt && opt == config_opt)
            config = optarg;
    }
    if (preset && config) {
        cli_fail("--preset %s and --config %s both set the whole model: give one\n", preset, config);
        return false;
    }
    if ((config && cli_load_config(c, config) != 0) || (preset && cli_apply_preset(c, preset) != 0))
        return false;
    if ((preset || config) && c->task == TMM_DATA_TEXT)
        c->model.vocab = 257;
    return true;
}

bool bench_model_flag(int opt, const char *arg, tmm_train_config *c, bool *ok)
{
    unsigned long v;
    switch (opt) {
    case 'p': return true; /* applied by bench_model_base */
    case 'd': *ok = cli_parse_uint("--d-model", arg, TMM_MAX_D_MODEL, &v), c->model.d_model = (uint32_t)v; return true;
    case 'n': *ok = cli_parse_uint("--n-ctx", arg, TMM_MAX_N_CTX, &v), c->model.n_ctx = (uint32_t)v; return true;
    case 'l': *ok = cli_parse_uint("--layers", arg, TMM_MAX_LAYERS, &v), c->model.n_layers = (uint32_t)v; return true;
    case 'H': *ok = cli_parse_uint("--heads", arg, TMM_MAX_HEADS, &v), c->model.heads = (uint32_t)v; return true;
    case 'V': *ok = cli_parse_uint("--vocab", arg, TMM_MAX_VOCAB, &v), c->model.vocab = (uint32_t)v; return true;
    case BENCH_OPT_ARCH: *ok = bench_parse_arch(arg, &c->model.arch); return true;
    case BENCH_OPT_WINDOW: *ok = bench_parse_window(arg, &c->model.window); return true;
    default: return false;
    }
}

void bench_train_flag(int opt, const char *arg, tmm_train_config *c, bench_run_flags *run, bool *ok)
{
    unsigned long v;
    switch (opt) {
    case 'b': *ok = cli_parse_uint("--batch", arg, TMM_BENCH_MAX_BATCH, &v), c->batch = (uint32_t)v; return;
    case 's': *ok = cli_parse_uint("--steps", arg, 1 << 20, &run->steps); return;
    case 'D': *ok = cli_parse_uint("--device", arg, TMM_MAX_DEVICE_INDEX, &v), run->device = (int)v; return;
    case 'j': run->json = true; return;
    default: /* '?': cli_getopt said what is wrong */
        if (!bench_model_flag(opt, arg, c, ok))
            *ok = false;
    }
}

int bench_open(tmm_train_config *c, int device, tmm_device **dev)
{
    c->accum = 1;
    tmm_model_config_resolve(&c->model);
    tmm_status s = tmm_model_config_check(&c->model);
    int rc = s != TMM_OK ? cli_error("bad model", s) : cli_open_device(device, dev);
    if (rc)
        tmm_train_config_free(c);
    return rc;
}

bool bench_parse_arch(const char *text, tmm_arch *out)
{
    for (int a = 0; tmm_arch_name((tmm_arch)a); a++)
        if (strcmp(text, tmm_arch_name((tmm_arch)a)) == 0) {
            *out = (tmm_arch)a;
            return true;
        }
    cli_fail("--arch expects " BENCH_ARCHS ", got '%s'\n", text);
    return false;
}

/* --archs tmm,swa: marks each named architecture; false after a one-line error. */
bool bench_parse_archs(const char *text, bool selected[TMM_N_ARCHS])
{
    char name[32];
    for (const char *p = text;;) {
        size_t len = strcspn(p, ",");
        tmm_arch a;
        if (len == 0 || len >= sizeof name) {
            cli_fail("--archs expects names separated by commas (" BENCH_ARCHS "), got '%s'\n", text);
            return false;
        }
        memcpy(name, p, len), name[len] = 0;
        if (!bench_parse_arch(name, &a))
            return false;
        selected[a] = true;
        if (!p[len])
            return true;
        p += len + 1;
    }
}

bool bench_parse_window(const char *text, uint32_t *out)
{
    unsigned long v;
    if (!cli_parse_uint("--window", text, TMM_MAX_N_CTX, &v))
        return false;
    if (v == 0) {
        cli_fail("--window must be at least 1 (keys each query attends to)\n");
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

bool bench_parse_list(const char *option, const char *text, uint32_t *out, unsigned *count)
{
    *count = 0;
    const char *p = text;
    while (*p) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || *p == '-' || *p == '+' || v == 0 || v > 1u << 24 || (*end && *end != ',') ||
            *count == TMM_BENCH_MAX_POINTS) {
            cli_fail("%s expects up to %d positive numbers separated by commas, got '%s'\n", option,
                     TMM_BENCH_MAX_POINTS, text);
            return false;
        }
        out[(*count)++] = (uint32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*count == 0)
        cli_fail("%s expects up to %d positive numbers separated by commas, got '%s'\n", option, TMM_BENCH_MAX_POINTS,
                 text);
    return *count > 0;
}

/* ---- dispatch on the benchmark name -------------------------------------- */

static const struct bench {
    const char *name;
    int (*run)(int, char **);
    const char *summary;
} benches[] = {
    { "matmul", bench_matmul, "float32 matrix multiply, per kernel variant (GFLOP/s)" },
    { "train", bench_train, "training steps of one architecture: tokens/s, ms per step, device time per op" },
    { "mixer", bench_mixer, "token mixing over n: Toeplitz (direct, FFT) against attention, swa, linear" },
    { "generate", bench_generate, "generation: time to first token, cached against naive decoding" },
    { "arch", bench_arch, "every architecture at matched parameters: training, memory, decoding" },
    { "memory", bench_memory, "each precision and recomputation: planned and measured memory, max batch, speed" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tmm bench <benchmark> [options]\n"
               "       tmm bench <benchmark> --help\n\n"
               "Measures kernels on the device (median device time over repeated runs).\n\n"
               "benchmarks:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(f, "  %-8s %s\n", benches[i].name, benches[i].summary);
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        cli_fail("a benchmark name is needed, e.g. 'tmm bench matmul'; see 'tmm bench --help'\n");
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    static char command[32];
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (strcmp(name, benches[i].name) == 0) {
            snprintf(command, sizeof command, "bench %s", benches[i].name);
            cli_command = command;
            return benches[i].run(argc - 1, argv + 1);
        }
    cli_fail("unknown benchmark '%s'; available:", name);
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(stderr, "%s %s", i ? "," : "", benches[i].name);
    fprintf(stderr, " (see 'tmm bench --help')\n");
    return 2;
}
