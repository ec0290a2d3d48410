/* C reference of causal softmax attention: see ref_attention.h and
 * src/ops/attention.h for the definition. Plain loops in double. */
#include "ref/ref_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct dims {
    size_t B, n, d, H, dh;
    double scale;
} dims;

static dims dims_of(const tmm_attention_desc *desc)
{
    dims s = { desc->batch, desc->n, desc->d, desc->heads ? desc->heads : 1, 0, 0 };
    s.dh = s.d / s.H;
    s.scale = 1.0 / sqrt((double)s.dh);
    return s;
}

static double *alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        abort(); /* references run in tests only */
    return p;
}

/* P[t, s] (s <= t) of one (b, h) into p[n*n], lse[n] optional. */
static void probs(const dims *s, const double *q, const double *k, size_t b, size_t h, double *p, double *lse)
{
    for (size_t t = 0; t < s->n; t++) {
        const double *qt = q + (b * s->n + t) * s->d + h * s->dh;
        double *row = p + t * s->n;
        double m = -INFINITY;
        for (size_t j = 0; j <= t; j++) {
            const double *kj = k + (b * s->n + j) * s->d + h * s->dh;
            double acc = 0;
            for (size_t c = 0; c < s->dh; c++)
                acc += qt[c] * kj[c];
            row[j] = acc * s->scale;
            if (row[j] > m)
                m = row[j];
        }
        double l = 0;
        for (size_t j = 0; j <= t; j++) {
            row[j] = exp(row[j] - m);
            l += row[j];
        }
        for (size_t j = 0; j <= t; j++)
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
    double *p = alloc_d(s.n * s.n);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            probs(&s, q, k, b, h, p, lse ? lse + (b * s.H + h) * s.n : NULL);
            for (size_t t = 0; t < s.n; t++)
                for (size_t c = 0; c < s.dh; c++) {
                    double acc = 0;
                    for (size_t j = 0; j <= t; j++)
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
    double *p = alloc_d(s.n * s.n), *ds = alloc_d(s.n * s.n);
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
                for (size_t j = 0; j <= t; j++) {
                    double dp = 0;
                    for (size_t c = 0; c < s.dh; c++)
                        dp += AT(dout, b, t, h, c) * AT(v, b, j, h, c);
                    ds[t * s.n + j] = dp;
                    delta += p[t * s.n + j] * dp;
                }
                for (size_t j = 0; j <= t; j++)
                    ds[t * s.n + j] = p[t * s.n + j] * (ds[t * s.n + j] - delta);
            }
            for (size_t t = 0; t < s.n; t++)
                for (size_t j = 0; j <= t; j++)
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

static double *to_d(const float *x, size_t n)
{
    double *y = alloc_d(n);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static void to_f(const double *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)x[i];
}

void ref_attention_forward(const tmm_attention_desc *desc, const float *q, const float *k, const float *v, float *o,
                           float *lse)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d, nl = s.B * s.H * s.n;
    double *qd = to_d(q, na), *kd = to_d(k, na), *vd = to_d(v, na), *od = alloc_d(na), *ld = alloc_d(nl);
    ref_attention_forward_d(desc, qd, kd, vd, od, ld);
    to_f(od, o, na);
    if (lse)
        to_f(ld, lse, nl);
    free(qd);
    free(kd);
    free(vd);
    free(od);
    free(ld);
}

void ref_attention_backward(const tmm_attention_desc *desc, const float *q, const float *k, const float *v,
                            const float *dout, float *dq, float *dk, float *dv)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d;
    double *qd = to_d(q, na), *kd = to_d(k, na), *vd = to_d(v, na), *gd = to_d(dout, na);
    double *a = alloc_d(na), *bb = alloc_d(na), *c = alloc_d(na);
    ref_attention_backward_d(desc, qd, kd, vd, gd, a, bb, c);
    to_f(a, dq, na);
    to_f(bb, dk, na);
    to_f(c, dv, na);
    double *all[] = { qd, kd, vd, gd, a, bb, c };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}
