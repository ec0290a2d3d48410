/* tmm bench mixer: Toeplitz mixing (direct, FFT, auto) against causal
 * attention, sliding-window attention and causal linear attention, over
 * sequence lengths: device time, peak memory, scaling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"
#include "buffer.h"
#include "files.h"
#include "mixer/toeplitz_select.h"
#include "ops/attention.h"
#include "ops/linear_attention.h"
#include "ops/toeplitz.h"
#include "ops/toeplitz_fft.h"

enum { IMPL_DIRECT, IMPL_FFT, IMPL_AUTO, IMPL_ATTENTION, IMPL_SWA, IMPL_LINEAR, N_IMPLS };
const char *const tmm_bench_mixer_impl_names[TMM_BENCH_MIXER_IMPLS] = { "direct", "fft", "auto",
                                                                         "attention", "swa", "linear" };
/* expected growth of time with n, to skip runs that would pass the cap */
static const double impl_exponent[N_IMPLS] = { 2.0, 1.2, 2.0, 2.0, 1.0, 1.0 };

#define MAX_BUFS 12

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

static tmm_attention_desc attention_desc(int impl, const tmm_bench_mixer_opts *sh, uint32_t n)
{
    return (tmm_attention_desc){ sh->batch, n, sh->d, sh->heads, TMM_ATTENTION_MEMORY_EFFICIENT,
                                 impl == IMPL_SWA ? sh->window : 0 };
}

static tmm_linear_attention_desc linear_desc(const tmm_bench_mixer_opts *sh, uint32_t n)
{
    return (tmm_linear_attention_desc){ sh->batch, n, sh->d, sh->heads, 0 };
}

/* Records the op (forward, or forward then backward) into r. */
static tmm_status record(tmm_recorder *r, int impl, const tmm_bench_mixer_opts *sh, uint32_t n, bool backward,
                         tmm_view *v, tmm_toeplitz_fft *fft)
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
static tmm_status time_recording(tmm_recorder *r, uint32_t repeat, double *ms)
{
    double t[TMM_BENCH_MIXER_MAX_REPEAT];
    TMM_TRY(tmm_recorder_run(r)); /* warm-up: lavapipe compiles at first dispatch */
    for (uint32_t i = 0; i < repeat; i++) {
        TMM_TRY(tmm_recorder_run(r));
        TMM_TRY(tmm_recorder_region_time(r, 0, NULL, &t[i]));
    }
    for (uint32_t i = 1; i < repeat; i++)
        for (uint32_t j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    *ms = t[repeat / 2];
    return TMM_OK;
}

/* The op's buffers in set->b / v: the inputs, outputs, saved state, their
 * gradients and scratch (and the FFT plan when the Toeplitz op takes it). */
static tmm_status make_buffers(tmm_device *dev, int impl, const tmm_bench_mixer_opts *sh, uint32_t n, bufs *set,
                               tmm_view *v, tmm_toeplitz_fft **fft)
{
    const uint64_t act = (uint64_t)sh->batch * n * sh->d, G = sh->heads ? sh->heads : 1;
    tmm_status s = TMM_OK;
    if (impl == IMPL_ATTENTION || impl == IMPL_SWA) {
        tmm_attention_desc ad = attention_desc(impl, sh, n);
        /* q, k, v, o, saved, dout, dq, dk, dv, scratch */
        uint64_t sizes[10] = { act, act, act, act, tmm_op_attention_saved(&ad), act, act, act, act,
                               tmm_op_attention_backward_scratch(&ad) };
        for (int i = 0; i < 10 && s == TMM_OK; i++)
            s = make(dev, set, sizes[i], &v[i]);
    } else if (impl == IMPL_LINEAR) {
        tmm_linear_attention_desc ld = linear_desc(sh, n);
        s = tmm_linear_attention_check(NULL, &ld);
        /* q, k, v, y, saved, dy, dq, dk, dv, scratch */
        uint64_t sizes[10] = { act, act, act, act, tmm_op_linear_attention_saved(&ld), act, act, act, act,
                               tmm_op_linear_attention_backward_scratch(&ld) };
        for (int i = 0; i < 10 && s == TMM_OK; i++)
            s = make(dev, set, sizes[i], &v[i]);
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
            s = make(dev, set, sizes[i], &v[i]);
        if (s == TMM_OK && use_fft)
            s = tmm_toeplitz_fft_create(dev, &td, fft);
    }
    return s;
}

static tmm_status measure(tmm_device *dev, int impl, const tmm_bench_mixer_opts *sh, uint32_t n,
                          tmm_bench_mixer_row *out)
{
    bufs set = { .count = 0 };
    tmm_view v[10];
    tmm_toeplitz_fft *fft = NULL;
    tmm_recorder *r = NULL;
    tmm_memory_stats before, after;
    tmm_device_memory_stats(dev, &before);
    tmm_status s = make_buffers(dev, impl, sh, n, &set, v, &fft);
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
            s = time_recording(r, sh->repeat, backward ? &out->fwd_bwd_ms : &out->fwd_ms);
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

/* Where each impl's series stands. */
typedef struct series {
    double last_ms[N_IMPLS];    /* fwd+bwd at last_n; 0: skipped or failed there */
    uint32_t last_n[N_IMPLS];   /* 0: not started */
} series;

static void report(tmm_bench_mixer_progress progress, void *user, tmm_bench_mixer_event e)
{
    if (progress)
        progress(user, &e);
}

/* One impl at one length, unless its series has ended or the run is
 * predicted to pass the cap. */
static void run_one(tmm_device *dev, const tmm_bench_mixer_opts *o, int impl, uint32_t n, series *sr,
                    tmm_bench_mixer_progress progress, void *user, tmm_bench_mixer_result *out)
{
    if (sr->last_ms[impl] > 0) {
        double predicted = 2 * sr->last_ms[impl] * pow((double)n / sr->last_n[impl], impl_exponent[impl]) *
                           (o->repeat + 1) / 1e3;
        if (predicted > (double)o->cap_s) {
            out->skipped++;
            report(progress, user, (tmm_bench_mixer_event){ .kind = TMM_BENCH_MIXER_SKIPPED, .impl = impl, .n = n,
                                                            .predicted_s = predicted });
            return;
        }
    } else if (sr->last_n[impl]) {
        return; /* an earlier length was skipped or failed */
    }
    tmm_bench_mixer_row r;
    tmm_status s = measure(dev, impl, o, n, &r);
    sr->last_n[impl] = n;
    if (s != TMM_OK) {
        out->failed++;
        sr->last_ms[impl] = 0;
        report(progress, user, (tmm_bench_mixer_event){ .kind = TMM_BENCH_MIXER_FAILED, .impl = impl, .n = n,
                                                        .error = tmm_last_error() });
        return;
    }
    sr->last_ms[impl] = r.fwd_bwd_ms;
    out->rows[out->count] = r;
    report(progress, user, (tmm_bench_mixer_event){ .kind = TMM_BENCH_MIXER_MEASURED, .impl = impl, .n = n,
                                                    .row = &out->rows[out->count] });
    out->count++;
}

tmm_status tmm_bench_mixer(tmm_device *dev, const tmm_bench_mixer_opts *o, tmm_bench_mixer_progress progress,
                           void *user, tmm_bench_mixer_result *out)
{
    memset(out, 0, sizeof *out);
    if (o->repeat < 1 || o->repeat > TMM_BENCH_MIXER_MAX_REPEAT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "repeat must be from 1 to %d", TMM_BENCH_MIXER_MAX_REPEAT);
    if (o->d == 0 || o->batch == 0 || (o->heads && o->d % o->heads))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "d must be a positive multiple of heads, batch positive");
    series sr = { { 0 }, { 0 } };
    const uint32_t last = o->only_n ? o->only_n : o->max_n;
    /* 32 lengths per impl at most: 256 doubled to 1 << 20 is 13 */
    for (uint64_t n = o->only_n ? o->only_n : 256; n <= last && out->count + N_IMPLS <= TMM_BENCH_MIXER_MAX_ROWS;
         n *= 2)
        for (int impl = 0; impl < N_IMPLS; impl++)
            if (o->wanted[impl])
                run_one(dev, o, impl, (uint32_t)n, &sr, progress, user, out);
    return TMM_OK;
}

double tmm_bench_mixer_exponent(const tmm_bench_mixer_result *r, int impl, uint32_t fit_from)
{
    double x[32], y[32];
    int m = 0;
    for (int i = 0; i < r->count; i++)
        if (r->rows[i].impl == impl && r->rows[i].n >= fit_from && m < 32) {
            x[m] = log((double)r->rows[i].n);
            y[m++] = log(r->rows[i].fwd_bwd_ms);
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

char *tmm_bench_mixer_json(const tmm_device *dev, const tmm_bench_mixer_opts *o, const tmm_bench_mixer_result *r)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
    cJSON_AddNumberToObject(root, "d", o->d);
    cJSON_AddNumberToObject(root, "heads", o->heads);
    cJSON_AddNumberToObject(root, "batch", o->batch);
    if (o->wanted[IMPL_SWA])
        cJSON_AddNumberToObject(root, "window", o->window);
    cJSON *arr = cJSON_AddArrayToObject(root, "rows");
    for (int i = 0; i < r->count; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "impl", tmm_bench_mixer_impl_names[r->rows[i].impl]);
        cJSON_AddNumberToObject(e, "n", r->rows[i].n);
        cJSON_AddNumberToObject(e, "fwd_ms", r->rows[i].fwd_ms);
        cJSON_AddNumberToObject(e, "fwd_bwd_ms", r->rows[i].fwd_bwd_ms);
        cJSON_AddNumberToObject(e, "peak_bytes", (double)r->rows[i].peak_bytes);
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddNumberToObject(root, "fit_from", (double)o->fit_from);
    cJSON *ex = cJSON_AddObjectToObject(root, "exponents");
    for (int impl = 0; impl < N_IMPLS; impl++) {
        double e = tmm_bench_mixer_exponent(r, impl, o->fit_from);
        if (isfinite(e))
            cJSON_AddNumberToObject(ex, tmm_bench_mixer_impl_names[impl], e);
    }
    return tmm_bench_json_text(root);
}

tmm_status tmm_bench_mixer_svg(const char *path, const tmm_bench_mixer_opts *o, const tmm_bench_mixer_result *r)
{
    const tmm_bench_mixer_row *rows = r->rows;
    const int count = r->count;
    FILE *f;
    TMM_TRY(tmm_open_write(path, "plot", false, &f));
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
               "log-log</text>\n", L, o->d, o->heads, o->batch, o->window);
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
                    tmm_bench_mixer_impl_names[impl]);
        }
    }
    fputs("</svg>\n", f);
    return fclose(f) == 0 ? TMM_OK : tmm_fail(TMM_ERR_IO, "cannot write %s", path);
}
