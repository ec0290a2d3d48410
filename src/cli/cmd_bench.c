/* tmm bench: kernel benchmarks, one per subcommand (tmm bench matmul). Device
 * time comes from the recorder's timestamp regions: one warm-up run, then R
 * timed runs, and the median is reported. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "buffer.h"
#include "cli.h"
#include "model/arch.h"
#include "ops/ops.h"

#define MAX_REPEAT 10000u
#define MAX_SIDE (1u << 20) /* keeps m*k*4 and friends far from overflowing */
/* Without --repeat: enough timed runs for about this much device time. */
#define TARGET_MS 1500.0
#define MIN_AUTO_REPEAT 3u
#define MAX_AUTO_REPEAT 200u

/* ---- matmul ------------------------------------------------------------- */

typedef struct mm_result {
    tmm_matmul_variant variant;
    uint32_t repeat;
    double ms;
    double max_error;   /* of the spot check against a double dot product */
    bool host_timed;    /* no timestamps on this queue: wall-clock time instead */
} mm_result;

typedef struct mm_setup {
    tmm_device *dev;
    tmm_matmul_desc desc;
    tmm_buffer *a, *b, *c;
    float *ha, *hb;
    unsigned long repeat;   /* 0: automatic */
} mm_setup;

/* One run of the recording: device time of its region (or wall time). */
static tmm_status timed_run(tmm_recorder *rec, double *ms, bool *host_timed)
{
    double t0 = cli_now_ms();
    TMM_TRY(tmm_recorder_run(rec));
    double wall = cli_now_ms() - t0;
    tmm_status s = tmm_recorder_region_time(rec, 0, NULL, ms);
    if (s == TMM_ERR_UNSUPPORTED) {
        *ms = wall;
        *host_timed = true;
        return TMM_OK;
    }
    return s;
}

/* Compares a few entries of C with double-precision dot products. */
static tmm_status spot_check(const mm_setup *st, double *max_error)
{
    const tmm_matmul_desc *d = &st->desc;
    float *row = malloc(d->n * sizeof *row);
    if (!row)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    *max_error = 0;
    tmm_status s = TMM_OK;
    for (uint32_t t = 0; t < 8 && s == TMM_OK; t++) {
        uint32_t i = (uint32_t)(((uint64_t)t * 2654435761u + 7) % d->m);
        s = tmm_buffer_read(st->c, (uint64_t)i * d->n * sizeof(float), row, d->n * sizeof(float));
        for (uint32_t u = 0; u < 4 && s == TMM_OK; u++) {
            uint32_t j = (uint32_t)(((uint64_t)(t * 4 + u) * 40503u + 3) % d->n);
            double sum = 0;
            for (uint64_t p = 0; p < d->k; p++) {
                double x = d->trans_a ? st->ha[p * d->m + i] : st->ha[(uint64_t)i * d->k + p];
                double y = d->trans_b ? st->hb[(uint64_t)j * d->k + p] : st->hb[p * d->n + j];
                sum += x * y;
            }
            double err = fabs(row[j] - sum);
            if (!(err <= *max_error)) /* catches NaN too */
                *max_error = err;
        }
    }
    free(row);
    return s;
}

static tmm_status record_matmul(const mm_setup *st, const tmm_matmul_desc *desc, tmm_recorder *rec)
{
    TMM_TRY(tmm_recorder_begin(rec));
    TMM_TRY(tmm_record_region_begin(rec, "matmul"));
    TMM_TRY(tmm_op_matmul(rec, desc, tmm_whole(st->a), tmm_whole(st->b), (tmm_view){ 0 }, tmm_whole(st->c)));
    TMM_TRY(tmm_record_region_end(rec));
    return tmm_recorder_end(rec);
}

/* The warm-up run also pays for compiling the kernel (llvmpipe compiles at
 * the first dispatch); without --repeat a second run sizes R. */
static tmm_status repeat_count(const mm_setup *st, tmm_recorder *rec, mm_result *res, uint32_t *repeat)
{
    double warm;
    TMM_TRY(timed_run(rec, &warm, &res->host_timed));
    *repeat = (uint32_t)st->repeat;
    if (!*repeat) {
        TMM_TRY(timed_run(rec, &warm, &res->host_timed));
        double want = warm > 0 ? ceil(TARGET_MS / warm) : MAX_AUTO_REPEAT;
        *repeat = want < MIN_AUTO_REPEAT ? MIN_AUTO_REPEAT : want > MAX_AUTO_REPEAT ? MAX_AUTO_REPEAT : (uint32_t)want;
    }
    return TMM_OK;
}

static tmm_status bench_variant(const mm_setup *st, tmm_matmul_variant variant, mm_result *res)
{
    memset(res, 0, sizeof *res);
    res->variant = variant;
    tmm_matmul_desc desc = st->desc;
    desc.variant = variant;
    tmm_recorder *rec;
    TMM_TRY(tmm_recorder_create(st->dev, &rec));
    double *times = NULL;
    uint32_t repeat = 0;
    tmm_status s = record_matmul(st, &desc, rec);
    if (s == TMM_OK)
        s = repeat_count(st, rec, res, &repeat);
    if (s == TMM_OK && !(times = malloc(repeat * sizeof *times)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < repeat && s == TMM_OK; i++)
        s = timed_run(rec, &times[i], &res->host_timed);
    if (s == TMM_OK) {
        res->repeat = repeat;
        res->ms = cli_median(times, repeat);
        s = spot_check(st, &res->max_error);
    }
    free(times);
    tmm_recorder_destroy(rec);
    return s;
}

/* Random matrices in [-1, 1) from a fixed seed, on the host and the device. */
static tmm_status setup_matrices(mm_setup *st)
{
    const uint64_t m = st->desc.m, n = st->desc.n, k = st->desc.k;
    size_t na = (size_t)(m * k), nb = (size_t)(k * n), nc = (size_t)(m * n);
    st->ha = malloc(na * sizeof(float));
    st->hb = malloc(nb * sizeof(float));
    if (!st->ha || !st->hb)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %llu x %llu x %llu matrices",
                        (unsigned long long)m, (unsigned long long)n, (unsigned long long)k);
    uint64_t seed = 0x1234567u;
    for (size_t i = 0; i < na; i++)
        st->ha[i] = (float)((seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 40) * 0x1p-24f * 2 - 1;
    for (size_t i = 0; i < nb; i++)
        st->hb[i] = (float)((seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 40) * 0x1p-24f * 2 - 1;
    TMM_TRY(tmm_buffer_create(st->dev, na * sizeof(float), TMM_MEMORY_DEVICE, &st->a));
    TMM_TRY(tmm_buffer_create(st->dev, nb * sizeof(float), TMM_MEMORY_DEVICE, &st->b));
    TMM_TRY(tmm_buffer_create(st->dev, nc * sizeof(float), TMM_MEMORY_DEVICE, &st->c));
    TMM_TRY(tmm_buffer_write(st->a, 0, st->ha, na * sizeof(float)));
    return tmm_buffer_write(st->b, 0, st->hb, nb * sizeof(float));
}

/* Times every variant and checks its result; false (after saying why) on failure. */
static bool measure_variants(const mm_setup *st, const tmm_matmul_variant *variants, int n_variants,
                             mm_result *results)
{
    const tmm_device_info *info = tmm_device_get_info(st->dev);
    /* float32 rounding over k terms of size <= 1: far below this unless wrong */
    const double tolerance = 1e-3 * sqrt((double)st->desc.k) + 1e-4;
    for (int i = 0; i < n_variants; i++) {
        tmm_status s = bench_variant(st, variants[i], &results[i]);
        if (s != TMM_OK) {
            char what[64];
            snprintf(what, sizeof what, "matmul (%s variant)", tmm_matmul_variant_name(variants[i]));
            cli_error(what, s);
            return false;
        }
        if (!(results[i].max_error <= tolerance)) {
            cli_fail("matmul (%s variant) computed wrong results on %s: max |error| %.3g over "
                     "spot-checked entries\n", tmm_matmul_variant_name(variants[i]), info->name,
                     results[i].max_error);
            return false;
        }
    }
    return true;
}

/* Prints the results as a table or JSON; the exit code. */
static int print_matmul(const mm_setup *st, const mm_result *results, int n_variants, bool json)
{
    const uint64_t m = st->desc.m, n = st->desc.n, k = st->desc.k;
    const tmm_device_info *info = tmm_device_get_info(st->dev);
    const char *trans = st->desc.trans_a ? (st->desc.trans_b ? "tt" : "tn") : (st->desc.trans_b ? "nt" : "nn");
    int rc = 0;
    const double flop = 2.0 * (double)m * (double)n * (double)k;
    if (json) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; i < n_variants && arr; i++) {
            const mm_result *r = &results[i];
            cJSON *o = cJSON_CreateObject();
            if (!o)
                break;
            cJSON_AddItemToArray(arr, o);
            cJSON_AddStringToObject(o, "bench", "matmul");
            cJSON_AddStringToObject(o, "variant", tmm_matmul_variant_name(r->variant));
            if (r->variant == TMM_MATMUL_AUTO)
                cJSON_AddStringToObject(o, "resolved",
                                        info->type == TMM_DEVICE_CPU ? "register" : "tiled");
            cJSON_AddNumberToObject(o, "m", (double)m);
            cJSON_AddNumberToObject(o, "n", (double)n);
            cJSON_AddNumberToObject(o, "k", (double)k);
            cJSON_AddBoolToObject(o, "trans_a", st->desc.trans_a);
            cJSON_AddBoolToObject(o, "trans_b", st->desc.trans_b);
            cJSON_AddNumberToObject(o, "repeat", r->repeat);
            cJSON_AddNumberToObject(o, "ms", r->ms);
            cJSON_AddNumberToObject(o, "gflops", r->ms > 0 ? flop / (r->ms * 1e6) : 0);
            cJSON_AddStringToObject(o, "timing", r->host_timed ? "host" : "device");
            cJSON_AddStringToObject(o, "device", info->name);
        }
        char *text = arr ? cJSON_Print(arr) : NULL;
        if (!text) {
            cli_fail("out of host memory writing JSON\n");
            rc = 1;
        } else {
            printf("%s\n", text);
        }
        free(text);
        cJSON_Delete(arr);
    } else {
        printf("matmul on %s (%s), float32, C = %sA * %sB\n", info->name, tmm_device_type_name(info->type),
               st->desc.trans_a ? "transposed " : "", st->desc.trans_b ? "transposed " : "");
        printf("%-10s %6s %6s %6s %5s %7s %10s %9s\n", "variant", "m", "n", "k", "trans", "repeat", "ms",
               "GFLOP/s");
        for (int i = 0; i < n_variants; i++) {
            const mm_result *r = &results[i];
            char name[32];
            if (r->variant == TMM_MATMUL_AUTO)
                snprintf(name, sizeof name, "auto:%s", info->type == TMM_DEVICE_CPU ? "register" : "tiled");
            else
                snprintf(name, sizeof name, "%s", tmm_matmul_variant_name(r->variant));
            printf("%-10s %6llu %6llu %6llu %5s %7u %10.3f %9.2f\n", name, (unsigned long long)m,
                   (unsigned long long)n, (unsigned long long)k, trans, r->repeat, r->ms,
                   r->ms > 0 ? flop / (r->ms * 1e6) : 0.0);
        }
        if (results[0].host_timed)
            printf("(the device has no timestamp queries: times are host wall-clock per submission)\n");
    }
    return rc;
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
            TARGET_MS / 1000, MIN_AUTO_REPEAT, MAX_AUTO_REPEAT);
}

static bool parse_size(const char *option, const char *text, uint32_t *out)
{
    unsigned long v;
    if (!cli_parse_uint(option, text, MAX_SIDE, &v))
        return false;
    if (v == 0) {
        cli_fail("%s must be at least 1\n", option);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

static int bench_matmul(int argc, char **argv)
{
    enum { OPT_M = 256, OPT_N, OPT_K, OPT_VARIANT, OPT_TA, OPT_TB, OPT_REPEAT, OPT_DEVICE, OPT_JSON };
    static const struct option longopts[] = { { "m", required_argument, NULL, OPT_M },
                                              { "n", required_argument, NULL, OPT_N },
                                              { "k", required_argument, NULL, OPT_K },
                                              { "variant", required_argument, NULL, OPT_VARIANT },
                                              { "trans-a", no_argument, NULL, OPT_TA },
                                              { "trans-b", no_argument, NULL, OPT_TB },
                                              { "repeat", required_argument, NULL, OPT_REPEAT },
                                              { "device", required_argument, NULL, OPT_DEVICE },
                                              { "json", no_argument, NULL, OPT_JSON },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0, 0, 0, 0 } };
    mm_setup st = { 0 };
    st.desc = (tmm_matmul_desc){ .m = 1024, .n = 1024, .k = 1024, .batch = 1 };
    tmm_matmul_variant variants[2] = { TMM_MATMUL_REGISTER, TMM_MATMUL_TILED };
    int n_variants = 2, index = -1, c;
    bool json = false;
    unsigned long v;
    optind = 1;
    opterr = 0; /* our own messages below */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_M:
            if (!parse_size("--m", optarg, &st.desc.m))
                return 2;
            break;
        case OPT_N:
            if (!parse_size("--n", optarg, &st.desc.n))
                return 2;
            break;
        case OPT_K:
            if (!parse_size("--k", optarg, &st.desc.k))
                return 2;
            break;
        case OPT_VARIANT:
            if (strcmp(optarg, "all") == 0) {
                n_variants = 2;
            } else {
                n_variants = 1;
                if (strcmp(optarg, "auto") == 0)
                    variants[0] = TMM_MATMUL_AUTO;
                else if (strcmp(optarg, "register") == 0)
                    variants[0] = TMM_MATMUL_REGISTER;
                else if (strcmp(optarg, "tiled") == 0)
                    variants[0] = TMM_MATMUL_TILED;
                else {
                    cli_fail("--variant expects auto, register, tiled or all, got '%s'\n", optarg);
                    return 2;
                }
            }
            break;
        case OPT_TA:
            st.desc.trans_a = true;
            break;
        case OPT_TB:
            st.desc.trans_b = true;
            break;
        case OPT_REPEAT:
            if (!cli_parse_uint("--repeat", optarg, MAX_REPEAT, &st.repeat))
                return 2;
            if (st.repeat == 0) {
                cli_fail("--repeat must be at least 1\n");
                return 2;
            }
            break;
        case OPT_DEVICE:
            if (!cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v))
                return 2;
            index = (int)v;
            break;
        case OPT_JSON:
            json = true;
            break;
        case 'h':
            matmul_usage(stdout);
            return 0;
        case ':':
            cli_fail("%s needs a value\n", argv[optind - 1]);
            return 2;
        default:
            cli_fail("unknown option '%s'; see 'tmm bench matmul --help'\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench matmul --help'\n",
                argv[optind]);
        return 2;
    }

    if (cli_open_device(index, &st.dev))
        return 1;
    int rc = 1;
    mm_result results[2];
    tmm_status s = setup_matrices(&st);
    if (s != TMM_OK)
        cli_error("cannot set up the matrices", s);
    else if (measure_variants(&st, variants, n_variants, results))
        rc = print_matmul(&st, results, n_variants, json);
    tmm_buffer_destroy(st.a);
    tmm_buffer_destroy(st.b);
    tmm_buffer_destroy(st.c);
    free(st.ha);
    free(st.hb);
    tmm_device_destroy(st.dev);
    return rc;
}

/* ---- options the model benchmarks share (bench.h) ------------------------ */

bool bench_model_flag(int opt, const char *arg, tmm_train_config *c, bool *ok)
{
    unsigned long v;
    switch (opt) {
    case 'p': {
        const char *text = tmm_train_preset(arg);
        tmm_status s = text ? tmm_train_config_apply_json(c, text, arg) : TMM_OK;
        if (!text)
            cli_fail("no preset '%s' (see tmm train --help)\n", arg);
        else if (s != TMM_OK)
            cli_error("bad preset", s);
        else if (c->task == TMM_DATA_TEXT)
            c->model.vocab = 257;
        *ok = text && s == TMM_OK;
        return true;
    }
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

void bench_train_flag(int opt, const char *arg, char *const *argv, const char *command, tmm_train_config *c,
                      bench_run_flags *run, bool *ok)
{
    unsigned long v;
    switch (opt) {
    case 'b': *ok = cli_parse_uint("--batch", arg, BENCH_MAX_BATCH, &v), c->batch = (uint32_t)v; return;
    case 's': *ok = cli_parse_uint("--steps", arg, 1 << 20, &run->steps); return;
    case 'D': *ok = cli_parse_uint("--device", arg, TMM_MAX_DEVICE_INDEX, &v), run->device = (int)v; return;
    case 'j': run->json = true; return;
    case ':':
        cli_fail("%s needs a value\n", argv[optind - 1]);
        *ok = false;
        return;
    default:
        if (!bench_model_flag(opt, arg, c, ok)) {
            cli_fail("unknown option '%s'; see 'tmm bench %s --help'\n", argv[optind - 1], command);
            *ok = false;
        }
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
bool bench_parse_archs(const char *text, bool selected[TMM_ARCH_COUNT])
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

void bench_set_heads(tmm_model_config *c, uint32_t heads, bool heads_given)
{
    const tmm_heads_rule rule = tmm_arch_of(c->arch)->heads;
    /* heads of the inner channels: another quantity than the others' default */
    c->heads = rule == TMM_HEADS_NONE || (rule == TMM_HEADS_OF_64_INNER && !heads_given) ? 0 : heads;
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
            *count == BENCH_MAX_POINTS) {
            cli_fail("%s expects up to %d positive numbers separated by commas, got '%s'\n", option,
                     BENCH_MAX_POINTS, text);
            return false;
        }
        out[(*count)++] = (uint32_t)v;
        p = *end ? end + 1 : end;
    }
    if (*count == 0)
        cli_fail("%s expects up to %d positive numbers separated by commas, got '%s'\n", option, BENCH_MAX_POINTS,
                 text);
    return *count > 0;
}

const char *bench_mixing_desc(const tmm_model_config *c, char *buf, size_t size)
{
    tmm_arch_of(c->arch)->mixer->describe(c, buf, size);
    return buf;
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
