/* tmm bench mixer: Toeplitz mixing (direct, FFT, auto) against causal
 * attention, sliding-window attention and causal linear attention, over
 * sequence lengths: device time, peak memory, scaling. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "buffer.h"
#include "cli.h"
#include "ops/attention.h"
#include "ops/linear_attention.h"
#include "ops/toeplitz.h"
#include "ops/toeplitz_fft.h"
#include "mixer/toeplitz_select.h"
#include "tmm/model.h"

enum { IMPL_DIRECT, IMPL_FFT, IMPL_AUTO, IMPL_ATTENTION, IMPL_SWA, IMPL_LINEAR, N_IMPLS };
static const char *const impl_names[N_IMPLS] = { "direct", "fft", "auto", "attention", "swa", "linear" };
/* expected growth of time with n, to skip runs that would pass the cap */
static const double impl_exponent[N_IMPLS] = { 2.0, 1.2, 2.0, 2.0, 1.0, 1.0 };
#define IMPL_LIST "direct, fft, auto, attention, swa, linear"

typedef struct row {
    int impl;
    uint32_t n;
    double fwd_ms, fwd_bwd_ms;
    uint64_t peak_bytes;
} row;

typedef struct shape {
    uint32_t d, heads, batch;
    uint32_t window;    /* swa's keys per query */
} shape;

#define MAX_BUFS 12
#define MAX_REPEAT 15

typedef struct bufs {
    tmm_buffer *b[MAX_BUFS];
    int count;
} bufs;

static tmm_status make(tmm_device *dev, bufs *set, uint64_t floats, tmm_view *out)
{
    tmm_buffer *b;
    TMM_TRY(tmm_buffer_create(dev, (floats ? floats : 1) * 4, TMM_MEMORY_DEVICE, &b));
    set->b[set->count++] = b;
    *out = tmm_whole(b);
    return TMM_OK;
}

static void release(bufs *set)
{
    for (int i = 0; i < set->count; i++)
        tmm_buffer_destroy(set->b[i]);
    set->count = 0;
}

/* Records the op (forward, or forward then backward) into r. */
static tmm_attention_desc attention_desc(int impl, const shape *sh, uint32_t n)
{
    return (tmm_attention_desc){ sh->batch, n, sh->d, sh->heads, TMM_ATTENTION_MEMORY_EFFICIENT,
                                 impl == IMPL_SWA ? sh->window : 0 };
}

static tmm_linear_attention_desc linear_desc(const shape *sh, uint32_t n)
{
    return (tmm_linear_attention_desc){ sh->batch, n, sh->d, sh->heads, 0 };
}

static tmm_status record(tmm_recorder *r, int impl, const shape *sh, uint32_t n, bool backward, tmm_view *v,
                         tmm_toeplitz_fft *fft)
{
    if (impl == IMPL_LINEAR) {
        tmm_linear_attention_desc ld = linear_desc(sh, n);
        TMM_TRY(tmm_op_linear_attention_forward(r, &ld, v[0], v[1], v[2], v[3], v[4]));
        return backward
                   ? tmm_op_linear_attention_backward(r, &ld, v[0], v[1], v[2], v[4], v[5], v[9], v[6], v[7], v[8])
                   : TMM_OK;
    }
    if (impl == IMPL_ATTENTION || impl == IMPL_SWA) {
        tmm_attention_desc ad = attention_desc(impl, sh, n);
        TMM_TRY(tmm_op_attention_forward(r, &ad, v[0], v[1], v[2], v[3], v[4]));
        return backward ? tmm_op_attention_backward(r, &ad, v[0], v[1], v[2], v[3], v[4], v[5], v[9], v[6], v[7], v[8])
                        : TMM_OK;
    }
    tmm_toeplitz_desc td = { sh->batch, n, sh->d, sh->heads, 1,
                             impl == IMPL_DIRECT ? TMM_TOEPLITZ_DIRECT : TMM_TOEPLITZ_AUTO };
    if (fft) {
        TMM_TRY(tmm_toeplitz_fft_record_forward(r, fft, v[0], v[1], v[2], v[3]));
        return backward ? tmm_toeplitz_fft_record_backward(r, fft, 0, v[0], v[1], v[4], v[5], v[6], v[7]) : TMM_OK;
    }
    TMM_TRY(tmm_op_toeplitz_forward(r, &td, v[0], v[1], v[2], v[3]));
    return backward ? tmm_op_toeplitz_backward(r, &td, 0, v[0], v[1], v[4], v[8], v[5], v[6], v[7]) : TMM_OK;
}

/* Device time of one run of the recording: median of `repeat` after a warm-up. */
static tmm_status time_recording(tmm_recorder *r, int repeat, double *ms)
{
    double t[MAX_REPEAT];
    TMM_TRY(tmm_recorder_run(r)); /* warm-up: lavapipe compiles at first dispatch */
    for (int i = 0; i < repeat; i++) {
        TMM_TRY(tmm_recorder_run(r));
        TMM_TRY(tmm_recorder_region_time(r, 0, NULL, &t[i]));
    }
    for (int i = 1; i < repeat; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    *ms = t[repeat / 2];
    return TMM_OK;
}

static tmm_status measure(tmm_device *dev, int impl, const shape *sh, uint32_t n, int repeat, row *out)
{
    const uint64_t act = (uint64_t)sh->batch * n * sh->d, G = sh->heads ? sh->heads : 1;
    bufs set = { .count = 0 };
    tmm_view v[10];
    tmm_toeplitz_fft *fft = NULL;
    tmm_recorder *r = NULL;
    tmm_memory_stats before, after;
    tmm_device_memory_stats(dev, &before);
    tmm_status s = TMM_OK;
    if (impl == IMPL_ATTENTION || impl == IMPL_SWA) {
        tmm_attention_desc ad = attention_desc(impl, sh, n);
        /* q, k, v, o, saved, dout, dq, dk, dv, scratch */
        uint64_t sizes[10] = { act, act, act, act, tmm_op_attention_saved(&ad), act, act, act, act,
                               tmm_op_attention_backward_scratch(&ad) };
        for (int i = 0; i < 10 && s == TMM_OK; i++)
            s = make(dev, &set, sizes[i], &v[i]);
    } else if (impl == IMPL_LINEAR) {
        tmm_linear_attention_desc ld = linear_desc(sh, n);
        s = tmm_linear_attention_check(NULL, &ld);
        /* q, k, v, y, saved, dy, dq, dk, dv, scratch */
        uint64_t sizes[10] = { act, act, act, act, tmm_op_linear_attention_saved(&ld), act, act, act, act,
                               tmm_op_linear_attention_backward_scratch(&ld) };
        for (int i = 0; i < 10 && s == TMM_OK; i++)
            s = make(dev, &set, sizes[i], &v[i]);
    } else {
        tmm_toeplitz_desc td = { sh->batch, n, sh->d, sh->heads, 1, TMM_TOEPLITZ_DIRECT };
        bool use_fft = impl == IMPL_FFT;
        if (impl == IMPL_AUTO) {
            tmm_toeplitz_impl chosen;
            s = tmm_toeplitz_resolve(dev, TMM_TOEPLITZ_AUTO, n, (uint64_t)sh->batch * sh->d, &chosen);
            use_fft = chosen == TMM_TOEPLITZ_FFT;
        }
        /* u, w, beta, y, gy, du, dw, dbeta, and the direct path's scratch */
        uint64_t sizes[9] = { act, G * n, G * n, act, act, act, G * n, G * n,
                              use_fft ? 0 : tmm_op_toeplitz_backward_scratch(dev, &td, 0) };
        for (int i = 0; i < 9 && s == TMM_OK; i++)
            s = make(dev, &set, sizes[i], &v[i]);
        if (s == TMM_OK && use_fft)
            s = tmm_toeplitz_fft_create(dev, &td, &fft);
    }
    for (int pass = 0; pass < 2 && s == TMM_OK; pass++) {
        bool backward = pass == 1;
        if (!r)
            s = tmm_recorder_create(dev, &r);
        if (s == TMM_OK)
            s = tmm_recorder_begin(r);
        if (s == TMM_OK)
            s = tmm_record_region_begin(r, "mixer");
        if (s == TMM_OK)
            s = record(r, impl, sh, n, backward, v, fft);
        if (s == TMM_OK)
            s = tmm_record_region_end(r);
        if (s == TMM_OK)
            s = tmm_recorder_end(r);
        if (s == TMM_OK)
            s = time_recording(r, repeat, backward ? &out->fwd_bwd_ms : &out->fwd_ms);
    }
    tmm_device_memory_stats(dev, &after);
    out->impl = impl;
    out->n = n;
    out->peak_bytes = after.used_bytes - before.used_bytes;
    tmm_recorder_destroy(r);
    tmm_toeplitz_fft_destroy(fft);
    release(&set);
    return s;
}

/* Least-squares slope of log time against log n over the points with
 * n >= fit_from, or over the upper half of the measured points when
 * fit_from is 0. */
static double exponent(const row *rows, int count, int impl, unsigned long fit_from)
{
    double x[32], y[32];
    int m = 0;
    for (int i = 0; i < count; i++)
        if (rows[i].impl == impl && rows[i].n >= fit_from && m < 32) {
            x[m] = log((double)rows[i].n);
            y[m++] = log(rows[i].fwd_bwd_ms);
        }
    int from = fit_from ? 0 : m / 2;
    if (m - from < 2)
        return NAN;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, k = m - from;
    for (int i = from; i < m; i++) {
        sx += x[i], sy += y[i], sxx += x[i] * x[i], sxy += x[i] * y[i];
    }
    return (k * sxy - sx * sy) / (k * sxx - sx * sx);
}

static void write_svg(const char *path, const row *rows, int count, const shape *sh)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        cli_fail("cannot write %s\n", path);
        return;
    }
    double lx0 = INFINITY, lx1 = -INFINITY, ly0 = INFINITY, ly1 = -INFINITY;
    for (int i = 0; i < count; i++) {
        lx0 = fmin(lx0, log10(rows[i].n)), lx1 = fmax(lx1, log10(rows[i].n));
        ly0 = fmin(ly0, log10(rows[i].fwd_bwd_ms)), ly1 = fmax(ly1, log10(rows[i].fwd_bwd_ms));
    }
    if (lx1 <= lx0)
        lx0 -= 0.5, lx1 += 0.5;
    if (ly1 <= ly0)
        ly0 -= 0.5, ly1 += 0.5;
    const double W = 640, H = 420, L = 70, R = 150, T = 40, Bm = 50;
    static const char *const colors[N_IMPLS] = { "#d62728", "#1f77b4", "#2ca02c", "#7f7f7f", "#9467bd", "#ff7f0e" };
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"20\">forward+backward time vs n (d %u, heads %u, batch %u, swa window %u), "
               "log-log</text>\n", L, sh->d, sh->heads, sh->batch, sh->window);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T,
            W - L - R, H - T - Bm);
    for (int e = (int)floor(lx0); e <= (int)ceil(lx1); e++)
        if (e >= lx0 && e <= lx1)
            fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">1e%d</text>\n",
                    L + (e - lx0) / (lx1 - lx0) * (W - L - R), H - Bm + 16, e);
    for (int e = (int)floor(ly0); e <= (int)ceil(ly1); e++)
        if (e >= ly0 && e <= ly1)
            fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">1e%d ms</text>\n", L - 4,
                    H - Bm - (e - ly0) / (ly1 - ly0) * (H - T - Bm) + 4, e);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">sequence length n</text>\n", (L + W - R) / 2,
            H - 12);
    for (int impl = 0; impl < N_IMPLS; impl++) {
        int pts = 0;
        for (int i = 0; i < count; i++)
            if (rows[i].impl == impl) {
                double px = L + (log10(rows[i].n) - lx0) / (lx1 - lx0) * (W - L - R);
                double py = H - Bm - (log10(rows[i].fwd_bwd_ms) - ly0) / (ly1 - ly0) * (H - T - Bm);
                fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "<polyline fill=\"none\" stroke-width=\"2\" points=\"", px, py);
            }
        if (pts) {
            fprintf(f, "\" stroke=\"%s\"/>\n", colors[impl]);
            fprintf(f, "<text x=\"%.0f\" y=\"%d\" fill=\"%s\">%s</text>\n", W - R + 10, 60 + 18 * impl, colors[impl],
                    impl_names[impl]);
        }
    }
    fputs("</svg>\n", f);
    fclose(f);
}

/* --impls: a comma-separated subset of impl_names. */
static bool parse_impls(const char *text, bool wanted[N_IMPLS])
{
    bool any = false;
    for (int i = 0; i < N_IMPLS; i++)
        wanted[i] = false;
    while (*text) {
        size_t len = strcspn(text, ",");
        int found = -1;
        for (int i = 0; i < N_IMPLS; i++)
            if (strlen(impl_names[i]) == len && strncmp(text, impl_names[i], len) == 0)
                found = i;
        if (found < 0) {
            cli_fail("--impls: unknown implementation '%.*s' (" IMPL_LIST ")\n", (int)len, text);
            return false;
        }
        wanted[found] = any = true;
        text += len + (text[len] == ',');
    }
    if (!any)
        cli_fail("--impls: name at least one of " IMPL_LIST "\n");
    return any;
}

int bench_mixer(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "n", required_argument, NULL, 'n' },          { "d", required_argument, NULL, 'd' },
        { "heads", required_argument, NULL, 'H' },      { "batch", required_argument, NULL, 'b' },
        { "max-n", required_argument, NULL, 'm' },      { "time-cap", required_argument, NULL, 't' },
        { "svg", required_argument, NULL, 's' },        { "device", required_argument, NULL, 'D' },
        { "json", no_argument, NULL, 'j' },             { "help", no_argument, NULL, 'h' },
        { "impls", required_argument, NULL, 'i' },      { "fit-from", required_argument, NULL, 'f' },
        { "repeat", required_argument, NULL, 'r' },     { "window", required_argument, NULL, 'w' },
        { 0, 0, 0, 0 },
    };
    shape sh = { 256, 4, 1, 128 };
    unsigned long v, only_n = 0, max_n = 65536, cap_s = 20, fit_from = 0, repeat = 3;
    bool wanted[N_IMPLS] = { true, true, true, true, true, true };
    const char *svg = "bench-mixer.svg";
    int opt, device = -1;
    bool json = false, cap_given = false, window_given = false;
    optind = 1;
    opterr = 0; /* our own messages below */
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'n':
            ok = cli_parse_uint("--n", optarg, 1 << 20, &only_n);
            if (ok && only_n == 0) {
                cli_fail("--n must be at least 1\n");
                ok = false;
            }
            break;
        case 'd': ok = cli_parse_uint("--d", optarg, 1 << 16, &v), sh.d = (uint32_t)v; break;
        case 'H': ok = cli_parse_uint("--heads", optarg, TMM_MAX_HEADS, &v), sh.heads = (uint32_t)v; break;
        case 'b': ok = cli_parse_uint("--batch", optarg, 1 << 16, &v), sh.batch = (uint32_t)v; break;
        case 'm': ok = cli_parse_uint("--max-n", optarg, 1 << 20, &max_n); break;
        case 't': ok = cli_parse_uint("--time-cap", optarg, 86400, &cap_s), cap_given = true; break;
        case 's': svg = optarg; break;
        case 'D': ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v), device = (int)v; break;
        case 'j': json = true; break;
        case 'i': ok = parse_impls(optarg, wanted); break;
        case 'f': ok = cli_parse_uint("--fit-from", optarg, 1 << 20, &fit_from); break;
        case 'r':
            ok = cli_parse_uint("--repeat", optarg, MAX_REPEAT, &repeat);
            if (ok && repeat == 0) {
                cli_fail("--repeat must be from 1 to %d\n", MAX_REPEAT);
                ok = false;
            }
            break;
        case 'w': ok = bench_parse_window(optarg, &sh.window), window_given = true; break;
        case 'h':
            printf("usage: tmm bench mixer [--n N | --max-n N] [--d D] [--heads H] [--batch B]\n"
                   "                       [--impls LIST] [--window W] [--time-cap SECONDS] [--repeat R]\n"
                   "                       [--fit-from N] [--svg FILE] [--device N] [--json]\n\n"
                   "Times causal token mixing alone (the op on [B, n, d] inputs, no projections),\n"
                   "forward and forward+backward, for n = 256, 512, ... up to --max-n (default 65536),\n"
                   "or one length with --n: Toeplitz mixing computed directly (O(n^2)), by FFT\n"
                   "(O(n log n)) and as auto chooses (FFT from the crossover length measured on the\n"
                   "device for this B*d), beside causal softmax attention (memory-efficient, O(n^2)),\n"
                   "swa: softmax attention over a sliding window of --window keys (default 128; O(n W);\n"
                   "a window of n or more is full attention) and linear: causal linear attention\n"
                   "(chunked, O(n)); the attention ops use --heads heads of d/H <= 128 channels.\n"
                   "--impls picks some of direct,fft,auto,attention,swa,linear (comma-separated,\n"
                   "default all). Reports device time (median of --repeat runs, default 3, after a\n"
                   "warm-up), peak device memory of the op's buffers, tokens/s, and the fitted exponent\n"
                   "of time against n over n >= --fit-from (default: the upper half of each curve's\n"
                   "points). A run predicted to take longer than --time-cap (default 20 s) from the\n"
                   "previous length is skipped with a note (so the cap needs a series: not with --n). Writes a log-log plot to --svg (default\n"
                   "bench-mixer.svg). Defaults: d 256, heads 4, batch 1.\n");
            return 0;
        case ':':
        default:
            cli_fail(opt == ':' ? "%s needs a value\n" : "unknown option '%s'; see 'tmm bench mixer --help'\n",
                     argv[optind - 1]);
            return 2;
        }
        if (!ok)
            return 2;
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench mixer --help'\n", argv[optind]);
        return 2;
    }
    if (cap_given && only_n) {
        cli_fail("--time-cap skips lengths predicted from the previous one: with a single --n there is none; "
                 "use --max-n for a series\n");
        return 2;
    }
    if (window_given && !wanted[IMPL_SWA]) {
        cli_fail("--window is for the swa rows: add swa to --impls\n");
        return 2;
    }
    if (sh.d == 0 || sh.batch == 0 || (sh.heads && sh.d % sh.heads)) {
        cli_fail("--d must be a positive multiple of --heads, --batch positive\n");
        return 2;
    }
    tmm_device *dev;
    if (cli_open_device(device, &dev))
        return 1;
    row rows[N_IMPLS * 32];
    int count = 0, rc = 0;
    double last_ms[N_IMPLS] = { 0 };
    uint32_t last_n[N_IMPLS] = { 0 };
    for (uint32_t n = only_n ? (uint32_t)only_n : 256; n <= (only_n ? only_n : max_n) && rc == 0; n *= 2) {
        for (int impl = 0; impl < N_IMPLS && rc == 0; impl++) {
            if (!wanted[impl])
                continue;
            if (last_ms[impl] > 0) {
                double predicted =
                    2 * last_ms[impl] * pow((double)n / last_n[impl], impl_exponent[impl]) * (repeat + 1) / 1e3;
                if (predicted > (double)cap_s) {
                    if (!json)
                        printf("%-9s n=%-6u skipped: about %.0f s predicted, over the %lu s cap\n", impl_names[impl],
                               n, predicted, cap_s);
                    continue;
                }
            } else if (last_n[impl]) {
                continue; /* an earlier length was skipped or failed */
            }
            row r;
            tmm_status s = measure(dev, impl, &sh, n, (int)repeat, &r);
            last_n[impl] = n;
            if (s != TMM_OK) {
                if (!json)
                    printf("%-9s n=%-6u not measured: %s\n", impl_names[impl], n, tmm_last_error());
                last_ms[impl] = 0;
                continue;
            }
            last_ms[impl] = r.fwd_bwd_ms;
            rows[count++] = r;
            if (!json)
                printf("%-9s n=%-6u fwd %10.3f ms  fwd+bwd %10.3f ms  peak %8.1f MiB  %10.0f tokens/s\n",
                       impl_names[impl], n, r.fwd_ms, r.fwd_bwd_ms, (double)r.peak_bytes / (1 << 20),
                       (double)sh.batch * n / (r.fwd_bwd_ms * 1e-3));
            fflush(stdout);
        }
    }
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
        cJSON_AddNumberToObject(root, "d", sh.d);
        cJSON_AddNumberToObject(root, "heads", sh.heads);
        cJSON_AddNumberToObject(root, "batch", sh.batch);
        if (wanted[IMPL_SWA])
            cJSON_AddNumberToObject(root, "window", sh.window);
        cJSON *arr = cJSON_AddArrayToObject(root, "rows");
        for (int i = 0; i < count; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "impl", impl_names[rows[i].impl]);
            cJSON_AddNumberToObject(e, "n", rows[i].n);
            cJSON_AddNumberToObject(e, "fwd_ms", rows[i].fwd_ms);
            cJSON_AddNumberToObject(e, "fwd_bwd_ms", rows[i].fwd_bwd_ms);
            cJSON_AddNumberToObject(e, "peak_bytes", (double)rows[i].peak_bytes);
            cJSON_AddItemToArray(arr, e);
        }
        cJSON_AddNumberToObject(root, "fit_from", (double)fit_from);
        cJSON *ex = cJSON_AddObjectToObject(root, "exponents");
        for (int impl = 0; impl < N_IMPLS; impl++) {
            double e = exponent(rows, count, impl, fit_from);
            if (isfinite(e))
                cJSON_AddNumberToObject(ex, impl_names[impl], e);
        }
        char *text = cJSON_Print(root);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(root);
    } else {
        if (fit_from)
            printf("\nscaling exponent of fwd+bwd time over n >= %lu:", fit_from);
        else
            printf("\nscaling exponent of fwd+bwd time over the upper half of each curve:");
        for (int impl = 0; impl < N_IMPLS; impl++) {
            double e = exponent(rows, count, impl, fit_from);
            if (isfinite(e))
                printf("  %s %.2f", impl_names[impl], e);
        }
        printf("\n");
    }
    if (count)
        write_svg(svg, rows, count, &sh);
    if (!json && count)
        printf("plot: %s\n", svg);
    tmm_device_destroy(dev);
    return rc;
}
