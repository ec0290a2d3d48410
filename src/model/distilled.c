/* distill.safetensors: write and read with every check (distilled.h). */
#include "model/distilled.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

#define DISTILL_FORMAT "tmm-distill"
#define DISTILL_VERSION "2" /* 2: table_fnv1a64 (1: without; still read) */
#define MAX_EXTRA 16

uint64_t tmm_distilled_weights_hash(const tmm_param_table *t, const float *params)
{
    uint64_t h = tmm_fnv1a64(NULL, 0);
    for (uint32_t i = 0; i < t->count; i++)
        if (t->params[i].kind == TMM_PARAM_TOEPLITZ_W)
            h = tmm_fnv1a64_more(h, params + t->params[i].offset, t->params[i].numel * sizeof *params);
    return h;
}

const tmm_distilled_tensor *tmm_distilled_find(const tmm_distilled *d, int param)
{
    for (uint32_t i = 0; i < d->count; i++)
        if (d->t[i].param == param)
            return &d->t[i];
    return NULL;
}

void tmm_distilled_free(tmm_distilled *d)
{
    for (uint32_t i = 0; d->t && i < d->count; i++)
        free(d->t[i].data);
    free(d->t);
    memset(d, 0, sizeof *d);
}

static void tensor_name(const tmm_param *p, char *buf, size_t size) { snprintf(buf, size, "%s.modes", p->name); }

tmm_status tmm_distilled_write(const char *path, const tmm_param_table *t, const float *params,
                               const tmm_distilled *d, const tmm_st_meta *extra, uint32_t n_extra)
{
    if (n_extra > MAX_EXTRA)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "distill file: too many metadata keys");
    tmm_st_tensor *ts = calloc(d->count ? d->count : 1, sizeof *ts);
    char (*names)[TMM_PARAM_NAME_MAX + 8] = calloc(d->count ? d->count : 1, sizeof *names);
    tmm_status s = ts && names ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint64_t data_hash = tmm_fnv1a64(NULL, 0);
    for (uint32_t i = 0; i < d->count && s == TMM_OK; i++) {
        const tmm_param *p = &t->params[d->t[i].param];
        tensor_name(p, names[i], sizeof names[i]);
        ts[i] = (tmm_st_tensor){ .name = names[i], .dtype = TMM_ST_F32, .ndim = 4,
                                 .shape = { p->shape[0], p->shape[1], d->t[i].modes, 4 }, .data = d->t[i].data };
        data_hash = tmm_fnv1a64_more(data_hash, d->t[i].data, tmm_st_numel(&ts[i]) * sizeof(float));
    }
    char head[16], weights[24], data[24], table[24];
    snprintf(head, sizeof head, "%u", d->head);
    snprintf(weights, sizeof weights, "%016" PRIx64, tmm_distilled_weights_hash(t, params));
    snprintf(data, sizeof data, "%016" PRIx64, data_hash);
    uint64_t table_hash = 0;
    if (s == TMM_OK)
        s = tmm_st_table_hash(TMM_FNV1A64_BASIS, ts, d->count, &table_hash);
    snprintf(table, sizeof table, "%016" PRIx64, table_hash);
    tmm_st_meta meta[MAX_EXTRA + 6] = { { "format", DISTILL_FORMAT }, { "format_version", DISTILL_VERSION },
                                        { "head", head }, { "weights_fnv1a64", weights }, { "data_fnv1a64", data },
                                        { "table_fnv1a64", table } };
    for (uint32_t i = 0; i < n_extra; i++)
        meta[6 + i] = extra[i];
    if (s == TMM_OK)
        s = tmm_safetensors_write(path, ts, d->count, meta, 6 + n_extra);
    free(ts), free(names);
    return s;
}

/* The modes of Toeplitz tensor p from the file, checked. */
static tmm_status read_tensor(const char *path, const tmm_safetensors *st, const tmm_param *p,
                              tmm_distilled_tensor *out)
{
    char name[TMM_PARAM_NAME_MAX + 8];
    tensor_name(p, name, sizeof name);
    const tmm_st_tensor *x = tmm_safetensors_find(st, name);
    if (!x)
        return tmm_fail(TMM_ERR_IO, "%s: no tensor %s (every Toeplitz vector needs its modes)", path, name);
    if (x->dtype != TMM_ST_F32 || x->ndim != 4 || x->shape[0] != p->shape[0] || x->shape[1] != p->shape[1] ||
        x->shape[3] != 4 || x->shape[2] > TMM_DISTILL_MAX_MODES)
        return tmm_fail(TMM_ERR_IO, "%s: tensor %s must be F32 [%u, %u, M <= %u, 4]", path, name, p->shape[0],
                        p->shape[1], TMM_DISTILL_MAX_MODES);
    const uint64_t count = tmm_st_numel(x);
    out->modes = (uint32_t)x->shape[2];
    if (!(out->data = malloc((count ? count : 1) * sizeof *out->data)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    memcpy(out->data, x->data, count * sizeof *out->data);
    for (uint64_t i = 0; i < count; i += 4) {
        const float *m = out->data + i;
        if (!isfinite(m[0]) || !isfinite(m[1]) || !isfinite(m[2]) || !isfinite(m[3]))
            return tmm_fail(TMM_ERR_IO, "%s: tensor %s holds a value that is not finite", path, name);
        if (hypot(m[0], m[1]) >= 1.0)
            return tmm_fail(TMM_ERR_IO, "%s: tensor %s has an unstable pole (modulus %.9g >= 1)", path, name,
                            hypot(m[0], m[1]));
    }
    return TMM_OK;
}

tmm_status tmm_distilled_read(const char *path, const tmm_param_table *t, const float *params, tmm_distilled *out)
{
    memset(out, 0, sizeof *out);
    tmm_safetensors *st;
    TMM_TRY(tmm_safetensors_read(path, &st));
    const char *f = tmm_safetensors_meta(st, "format"), *v = tmm_safetensors_meta(st, "format_version");
    const char *head = tmm_safetensors_meta(st, "head"), *wh = tmm_safetensors_meta(st, "weights_fnv1a64");
    const char *dh = tmm_safetensors_meta(st, "data_fnv1a64");
    char want[24], *end = NULL;
    snprintf(want, sizeof want, "%016" PRIx64, tmm_distilled_weights_hash(t, params));
    unsigned long m = head ? strtoul(head, &end, 10) : 0;
    tmm_status s = TMM_OK;
    if (!f || strcmp(f, DISTILL_FORMAT) != 0)
        s = tmm_fail(TMM_ERR_IO, "%s: not a distill file (format '%.32s')", path, f ? f : "(missing)");
    else if (!v || (strcmp(v, DISTILL_VERSION) != 0 && strcmp(v, "1") != 0))
        s = tmm_fail(TMM_ERR_IO, "%s: distill format_version '%.32s' is not 1 or %s", path, v ? v : "(missing)",
                     DISTILL_VERSION);
    else if (!head || !*head || *end || m == 0 || m > t->config.n_ctx)
        s = tmm_fail(TMM_ERR_IO, "%s: bad head '%.32s' (1 to n_ctx %u)", path, head ? head : "(missing)",
                     t->config.n_ctx);
    else if (!wh || strcmp(wh, want) != 0)
        s = tmm_fail(TMM_ERR_IO, "%s: made from other weights than this checkpoint's (weights_fnv1a64 %.20s, "
                     "these are %s): run tmm distill again", path, wh ? wh : "(missing)", want);
    size_t data_size;
    const void *data = tmm_safetensors_data(st, &data_size);
    snprintf(want, sizeof want, "%016" PRIx64, tmm_fnv1a64(data, data_size));
    if (s == TMM_OK && (!dh || strcmp(dh, want) != 0))
        s = tmm_fail(TMM_ERR_IO, "%s: checksum mismatch (data_fnv1a64 %.20s, the data hashes to %s): the file is "
                     "damaged", path, dh ? dh : "(missing)", want);
    /* version 2: which bytes are which tensor's (version 1 files carry no table checksum) */
    const char *th = tmm_safetensors_meta(st, "table_fnv1a64");
    uint64_t table_hash = 0;
    if (s == TMM_OK && strcmp(v, "1") != 0)
        s = tmm_safetensors_table_hash(st, TMM_FNV1A64_BASIS, &table_hash);
    if (s == TMM_OK && strcmp(v, "1") != 0) {
        snprintf(want, sizeof want, "%016" PRIx64, table_hash);
        if (!th || strcmp(th, want) != 0)
            s = tmm_fail(TMM_ERR_IO, "%s: tensor table checksum mismatch (table_fnv1a64 %.20s, the table hashes to "
                         "%s): the header is damaged", path, th ? th : "(missing)", want);
    }
    uint32_t n_tz = 0;
    for (uint32_t i = 0; i < t->count; i++)
        n_tz += t->params[i].kind == TMM_PARAM_TOEPLITZ_W;
    if (s == TMM_OK && tmm_safetensors_count(st) != n_tz)
        s = tmm_fail(TMM_ERR_IO, "%s: %u tensors, the model has %u Toeplitz vector tensors", path,
                     tmm_safetensors_count(st), n_tz);
    if (s == TMM_OK && !(out->t = calloc(n_tz ? n_tz : 1, sizeof *out->t)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    out->head = (uint32_t)m;
    for (uint32_t i = 0; i < t->count && s == TMM_OK; i++)
        if (t->params[i].kind == TMM_PARAM_TOEPLITZ_W) {
            out->t[out->count].param = (int)i;
            s = read_tensor(path, st, &t->params[i], &out->t[out->count++]);
        }
    tmm_safetensors_free(st);
    if (s != TMM_OK)
        tmm_distilled_free(out);
    return s;
}

tmm_status tmm_distilled_load_dir(const char *dir, unsigned load_flags, const tmm_param_table *t,
                                  const float *params, tmm_distilled *out, bool *found)
{
    memset(out, 0, sizeof *out);
    *found = false;
    char path[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(path, sizeof path, dir, TMM_DISTILL_FILE));
    const bool exists = tmm_path_exists(path);
    if (load_flags & TMM_LOAD_EXACT)
        return exists ? TMM_OK
                      : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "--exact: %s is not distilled (no %s; tmm distill makes "
                                 "one), so it is already exact: drop --exact", dir, TMM_DISTILL_FILE);
    *found = exists;
    return exists ? tmm_distilled_read(path, t, params, out) : TMM_OK;
}

void tmm_mode_accumulate(double pole_re, double pole_im, double res_re, double res_im, uint32_t len, double *out)
{
    double zr = 1, zi = 0; /* pole^j */
    for (uint32_t j = 0; j < len; j++) {
        out[j] += res_re * zr - res_im * zi;
        const double r = pole_re * zr - pole_im * zi;
        zi = pole_re * zi + pole_im * zr, zr = r;
    }
}

tmm_status tmm_distilled_apply(const tmm_distilled *d, const tmm_param_table *t, float *params)
{
    const uint32_t n = t->config.n_ctx, L = n - d->head;
    double *tail = malloc((L ? L : 1) * sizeof *tail);
    if (!tail)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < d->count; i++) {
        const tmm_param *p = &t->params[d->t[i].param];
        const uint32_t M = d->t[i].modes, vectors = p->shape[0] * p->shape[1];
        for (uint32_t v = 0; v < vectors; v++) {
            memset(tail, 0, L * sizeof *tail);
            for (uint32_t j = 0; j < M; j++) {
                const float *md = d->t[i].data + ((uint64_t)v * M + j) * 4;
                tmm_mode_accumulate(md[0], md[1], md[2], md[3], L, tail);
            }
            float *w = params + p->offset + (uint64_t)v * n + d->head;
            for (uint32_t k = 0; k < L; k++)
                w[k] = (float)tail[k];
        }
    }
    free(tail);
    return TMM_OK;
}
