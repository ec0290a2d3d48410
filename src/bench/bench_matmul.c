/* tmm bench matmul: float32 matrix multiply per kernel variant. Device time
 * comes from the recorder's timestamp regions: one warm-up run, then R timed
 * runs, and the median is reported. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"
#include "buffer.h"

typedef struct mm_setup {
    tmm_device *dev;
    tmm_matmul_desc desc;
    tmm_buffer *a, *b, *c;
    float *ha, *hb;
    uint32_t repeat;   /* 0: automatic */
} mm_setup;

/* One run of the recording: device time of its region (or wall time). */
static tmm_status timed_run(tmm_recorder *rec, double *ms, bool *host_timed)
{
    double t0 = tmm_bench_now_ms();
    TMM_TRY(tmm_recorder_run(rec));
    double wall = tmm_bench_now_ms() - t0;
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
 * the first dispatch); without a repeat count a second run sizes R. */
static tmm_status repeat_count(const mm_setup *st, tmm_recorder *rec, tmm_bench_matmul_row *res, uint32_t *repeat)
{
    double warm;
    TMM_TRY(timed_run(rec, &warm, &res->host_timed));
    *repeat = st->repeat;
    if (!*repeat) {
        TMM_TRY(timed_run(rec, &warm, &res->host_timed));
        double want = warm > 0 ? ceil(TMM_BENCH_MATMUL_TARGET_MS / warm) : TMM_BENCH_MATMUL_MAX_AUTO_REPEAT;
        *repeat = want < TMM_BENCH_MATMUL_MIN_AUTO_REPEAT   ? TMM_BENCH_MATMUL_MIN_AUTO_REPEAT
                  : want > TMM_BENCH_MATMUL_MAX_AUTO_REPEAT ? TMM_BENCH_MATMUL_MAX_AUTO_REPEAT
                                                            : (uint32_t)want;
    }
    return TMM_OK;
}

static tmm_status bench_variant(const mm_setup *st, tmm_matmul_variant variant, tmm_bench_matmul_row *res)
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
        res->ms = tmm_bench_median(times, repeat);
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

/* Times every variant and checks its result. */
static tmm_status measure_variants(const mm_setup *st, const tmm_bench_matmul_opts *o, tmm_bench_matmul_result *out)
{
    /* float32 rounding over k terms of size <= 1: far below this unless wrong */
    const double tolerance = 1e-3 * sqrt((double)st->desc.k) + 1e-4;
    for (int i = 0; i < o->n_variants; i++) {
        const char *name = tmm_matmul_variant_name(o->variants[i]);
        tmm_status s = bench_variant(st, o->variants[i], &out->rows[i]);
        if (s != TMM_OK)
            return tmm_bench_context(s, "matmul (%s variant)", name);
        if (!(out->rows[i].max_error <= tolerance))
            return tmm_fail(TMM_ERR_VULKAN, /* the device's kernel is wrong */
                            "matmul (%s variant) computed wrong results on %s: max |error| %.3g over "
                            "spot-checked entries", name, tmm_device_get_info(st->dev)->name,
                            out->rows[i].max_error);
    }
    return TMM_OK;
}

tmm_status tmm_bench_matmul(tmm_device *dev, const tmm_bench_matmul_opts *o, tmm_bench_matmul_result *out)
{
    memset(out, 0, sizeof *out);
    if (o->n_variants < 1 || o->n_variants > 2 || !o->desc.m || !o->desc.n || !o->desc.k)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "bench matmul: 1 or 2 variants and positive sizes");
    mm_setup st = { .dev = dev, .desc = o->desc, .repeat = o->repeat };
    st.desc.batch = 1;
    tmm_status s = setup_matrices(&st);
    if (s != TMM_OK)
        s = tmm_bench_context(s, "cannot set up the matrices");
    else
        s = measure_variants(&st, o, out);
    tmm_buffer_destroy(st.a);
    tmm_buffer_destroy(st.b);
    tmm_buffer_destroy(st.c);
    free(st.ha);
    free(st.hb);
    return s;
}

const char *tmm_bench_matmul_resolved(const tmm_device *dev)
{
    return tmm_device_get_info(dev)->type == TMM_DEVICE_CPU ? "register" : "tiled";
}

const char *tmm_bench_matmul_label(const tmm_device *dev, tmm_matmul_variant v, char *buf, size_t size)
{
    if (v == TMM_MATMUL_AUTO)
        snprintf(buf, size, "auto:%s", tmm_bench_matmul_resolved(dev));
    else
        snprintf(buf, size, "%s", tmm_matmul_variant_name(v));
    return buf;
}

double tmm_bench_matmul_flop(const tmm_matmul_desc *d)
{
    return 2.0 * (double)d->m * (double)d->n * (double)d->k;
}

char *tmm_bench_matmul_json(const tmm_device *dev, const tmm_bench_matmul_opts *o, const tmm_bench_matmul_result *r)
{
    const tmm_matmul_desc *d = &o->desc;
    const double flop = tmm_bench_matmul_flop(d);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < o->n_variants && arr; i++) {
        const tmm_bench_matmul_row *row = &r->rows[i];
        cJSON *e = cJSON_CreateObject();
        if (!e)
            break;
        cJSON_AddItemToArray(arr, e);
        cJSON_AddStringToObject(e, "bench", "matmul");
        cJSON_AddStringToObject(e, "variant", tmm_matmul_variant_name(row->variant));
        if (row->variant == TMM_MATMUL_AUTO)
            cJSON_AddStringToObject(e, "resolved", tmm_bench_matmul_resolved(dev));
        cJSON_AddNumberToObject(e, "m", (double)d->m);
        cJSON_AddNumberToObject(e, "n", (double)d->n);
        cJSON_AddNumberToObject(e, "k", (double)d->k);
        cJSON_AddBoolToObject(e, "trans_a", d->trans_a);
        cJSON_AddBoolToObject(e, "trans_b", d->trans_b);
        cJSON_AddNumberToObject(e, "repeat", row->repeat);
        cJSON_AddNumberToObject(e, "ms", row->ms);
        cJSON_AddNumberToObject(e, "gflops", row->ms > 0 ? flop / (row->ms * 1e6) : 0);
        cJSON_AddStringToObject(e, "timing", row->host_timed ? "host" : "device");
        cJSON_AddStringToObject(e, "device", tmm_device_get_info(dev)->name);
    }
    return tmm_bench_json_text(arr);
}
