/* C reference of causal softmax attention, windowed or full, and of its
 * cached-decoding step: see ref_attention.h, src/ops/attention.h and
 * src/ops/attention_step.h for the definition. Plain loops in double. */
#include "ref/ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_double.h"

typedef struct dims {
    size_t B, n, d, H, dh;
    size_t W; /* window: keys t-W < s <= t (W = n: full) */
    double scale;
} dims;

static dims dims_of(const tmm_attention_desc *desc)
{
    dims s = { desc->batch, desc->n, desc->d, desc->heads ? desc->heads : 1, 0, 0, 0 };
    s.W = desc->window && desc->window < desc->n ? desc->window : desc->n;
    s.dh = s.d / s.H;
    s.scale = 1.0 / sqrt((double)s.dh);
    return s;
}

/* The first key of query t's window. */
static size_t first_key(const dims *s, size_t t) { return t + 1 > s->W ? t + 1 - s->W : 0; }

/* P[t, s] (0 outside t's window) of one (b, h) into p[n*n], lse[n] optional. */
static void probs(const dims *s, const double *q, const double *k, size_t b, size_t h, double *p, double *lse)
{
    for (size_t t = 0; t < s->n; t++) {
        const double *qt = q + (b * s->n + t) * s->d + h * s->dh;
        double *row = p + t * s->n;
        const size_t j0 = first_key(s, t);
        double m = -INFINITY;
        for (size_t j = 0; j < j0; j++)
            row[j] = 0;
        for (size_t j = j0; j <= t; j++) {
            const double *kj = k + (b * s->n + j) * s->d + h * s->dh;
            double acc = 0;
            for (size_t c = 0; c < s->dh; c++)
                acc += qt[c] * kj[c];
            row[j] = acc * s->scale;
            if (row[j] > m)
                m = row[j];
        }
        double l = 0;
        for (size_t j = j0; j <= t; j++) {
            row[j] = exp(row[j] - m);
            l += row[j];
        }
        for (size_t j = j0; j <= t; j++)
            row[j] /= l;
        for (size_t j = t + 1; j < s->n; j++)
            row[j] = 0;
        if (lse)
            lse[t] = m + log(l);
    }
}

void ref_attention_forward_d(const tmm_attention_desc *desc, const double *q, const double *k, const double *v,
                             double *o, double *lse)
{
    dims s = dims_of(desc);
    double *p = ref_zalloc(s.n * s.n);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            probs(&s, q, k, b, h, p, lse ? lse + (b * s.H + h) * s.n : NULL);
            for (size_t t = 0; t < s.n; t++)
                for (size_t c = 0; c < s.dh; c++) {
                    double acc = 0;
                    for (size_t j = first_key(&s, t); j <= t; j++)
                        acc += p[t * s.n + j] * v[(b * s.n + j) * s.d + h * s.dh + c];
                    o[(b * s.n + t) * s.d + h * s.dh + c] = acc;
                }
        }
    free(p);
}

void ref_attention_backward_d(const tmm_attention_desc *desc, const double *q, const double *k, const double *v,
                              const double *dout, double *dq, double *dk, double *dv)
{
    dims s = dims_of(desc);
    double *p = ref_zalloc(s.n * s.n), *ds = ref_zalloc(s.n * s.n);
    size_t na = s.B * s.n * s.d;
    memset(dq, 0, na * sizeof *dq);
    memset(dk, 0, na * sizeof *dk);
    memset(dv, 0, na * sizeof *dv);
#define AT(x, b, t, h, c) (x)[((b) * s.n + (t)) * s.d + (h) * s.dh + (c)]
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            probs(&s, q, k, b, h, p, NULL);
            /* dP[t, j] = dout_t . v_j; dS = P (dP - sum_j P dP) */
            for (size_t t = 0; t < s.n; t++) {
                double delta = 0;
                for (size_t j = first_key(&s, t); j <= t; j++) {
                    double dp = 0;
                    for (size_t c = 0; c < s.dh; c++)
                        dp += AT(dout, b, t, h, c) * AT(v, b, j, h, c);
                    ds[t * s.n + j] = dp;
                    delta += p[t * s.n + j] * dp;
                }
                for (size_t j = first_key(&s, t); j <= t; j++)
                    ds[t * s.n + j] = p[t * s.n + j] * (ds[t * s.n + j] - delta);
            }
            for (size_t t = 0; t < s.n; t++)
                for (size_t j = first_key(&s, t); j <= t; j++)
                    for (size_t c = 0; c < s.dh; c++) {
                        AT(dq, b, t, h, c) += s.scale * ds[t * s.n + j] * AT(k, b, j, h, c);
                        AT(dk, b, j, h, c) += s.scale * ds[t * s.n + j] * AT(q, b, t, h, c);
                        AT(dv, b, j, h, c) += p[t * s.n + j] * AT(dout, b, t, h, c);
                    }
        }
#undef AT
    free(p);
    free(ds);
}

void ref_attention_forward(const tmm_attention_desc *desc, const float *q, const float *k, const float *v, float *o,
                           float *lse)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d, nl = s.B * s.H * s.n;
    double *qd = ref_to_double(q, na), *kd = ref_to_double(k, na), *vd = ref_to_double(v, na);
    double *od = ref_zalloc(na), *ld = ref_zalloc(nl);
    ref_attention_forward_d(desc, qd, kd, vd, od, ld);
    ref_to_float(od, o, na);
    if (lse)
        ref_to_float(ld, lse, nl);
    double *all[] = { qd, kd, vd, od, ld };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_attention_backward(const tmm_attention_desc *desc, const float *q, const float *k, const float *v,
                            const float *dout, float *dq, float *dk, float *dv)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d;
    double *qd = ref_to_double(q, na), *kd = ref_to_double(k, na), *vd = ref_to_double(v, na);
    double *gd = ref_to_double(dout, na), *dqd = ref_zalloc(na), *dkd = ref_zalloc(na), *dvd = ref_zalloc(na);
    ref_attention_backward_d(desc, qd, kd, vd, gd, dqd, dkd, dvd);
    ref_to_float(dqd, dq, na);
    ref_to_float(dkd, dk, na);
    ref_to_float(dvd, dv, na);
    double *all[] = { qd, kd, vd, gd, dqd, dkd, dvd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

/* ---- cached decoding --------------------------------------------------- */

void ref_attention_cache_write(const tmm_attention_step_desc *desc, const uint32_t *pos, const float *k,
                               const float *v, float *kcache, float *vcache)
{
    const size_t d = desc->d, C = desc->capacity;
    for (size_t b = 0; b < desc->batch; b++) {
        size_t at = (b * C + pos[b] % C) * d;
        memcpy(kcache + at, k + b * d, d * sizeof *k);
        memcpy(vcache + at, v + b * d, d * sizeof *v);
    }
}

void ref_attention_cache_fill(const tmm_attention_step_desc *desc, uint32_t n, const uint32_t *len, const float *k,
                              const float *v, float *kcache, float *vcache)
{
    const size_t d = desc->d, C = desc->capacity;
    for (size_t b = 0; b < desc->batch; b++) {
        size_t L = len[b] < n ? len[b] : n;
        for (size_t s = L > C ? L - C : 0; s < L; s++) {
            size_t at = (b * C + s % C) * d, from = (b * n + s) * d;
            memcpy(kcache + at, k + from, d * sizeof *k);
            memcpy(vcache + at, v + from, d * sizeof *v);
        }
    }
}

void ref_attention_step_d(const tmm_attention_step_desc *desc, const uint32_t *pos, const double *q,
                          const double *kcache, const double *vcache, double *o)
{
    const size_t B = desc->batch, d = desc->d, H = desc->heads ? desc->heads : 1, dh = d / H, C = desc->capacity;
    const double scale = 1.0 / sqrt((double)dh);
    for (size_t b = 0; b < B; b++) {
        const size_t t = pos[b], W = desc->window;
        const size_t lo = W && t + 1 > W ? t + 1 - W : 0, len = t + 1 - lo;
        double *sc = ref_zalloc(len);
        for (size_t h = 0; h < H; h++) {
            const double *qh = q + b * d + h * dh;
            double m = -INFINITY, l = 0;
            for (size_t i = 0; i < len; i++) {
                const double *ks = kcache + (b * C + (lo + i) % C) * d + h * dh;
                double acc = 0;
                for (size_t c = 0; c < dh; c++)
                    acc += qh[c] * ks[c];
                sc[i] = acc * scale;
                if (sc[i] > m)
                    m = sc[i];
            }
            for (size_t i = 0; i < len; i++) {
                sc[i] = exp(sc[i] - m);
                l += sc[i];
            }
            for (size_t c = 0; c < dh; c++) {
                double acc = 0;
                for (size_t i = 0; i < len; i++)
                    acc += sc[i] * vcache[(b * C + (lo + i) % C) * d + h * dh + c];
                o[b * d + h * dh + c] = acc / l;
            }
        }
        free(sc);
    }
}

void ref_attention_step(const tmm_attention_step_desc *desc, const uint32_t *pos, const float *q,
                        const float *kcache, const float *vcache, float *o)
{
    const size_t nq = (size_t)desc->batch * desc->d, nc = nq * desc->capacity;
    double *qd = ref_to_double(q, nq), *kd = ref_to_double(kcache, nc), *vd = ref_to_double(vcache, nc);
    double *od = ref_zalloc(nq);
    ref_attention_step_d(desc, pos, qd, kd, vd, od);
    ref_to_float(od, o, nq);
    double *all[] = { qd, kd, vd, od };
    ref_free_all(all, sizeof all / sizeof all[0]);
}
