/* C reference of causal linear attention: see ref_linear_attention.h and
 * src/ops/linear_attention.h for the definition. The plain recurrence over
 * positions in double; the backward by hand (a forward sweep for dq, a
 * backward sweep for dk and dv). */
#include "ref/ref_linear_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct dims {
    size_t B, n, d, H, D;
} dims;

static dims dims_of(const tmm_linear_attention_desc *desc)
{
    dims s = { desc->batch, desc->n, desc->d, desc->heads ? desc->heads : 1, 0 };
    s.D = s.d / s.H;
    return s;
}

static double *alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        abort(); /* references run in tests only */
    return p;
}

static double phi(double x) { return x > 0 ? x + 1 : exp(x); }
static double dphi(double x) { return x > 0 ? 1 : exp(x); }

/* Head h of row t of batch b of x [B, n, d]. */
#define ROW(x, b, t, h) ((x) + ((b) * s.n + (t)) * s.d + (h) * s.D)

void ref_linear_attention_forward_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                    const double *v, double *y, double *den)
{
    dims s = dims_of(desc);
    double *S = alloc_d(s.D * s.D), *z = alloc_d(s.D), *fq = alloc_d(s.D);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            memset(S, 0, s.D * s.D * sizeof *S);
            memset(z, 0, s.D * sizeof *z);
            for (size_t t = 0; t < s.n; t++) {
                const double *kt = ROW(k, b, t, h), *vt = ROW(v, b, t, h), *qt = ROW(q, b, t, h);
                for (size_t c1 = 0; c1 < s.D; c1++) {
                    double fk = phi(kt[c1]);
                    for (size_t c2 = 0; c2 < s.D; c2++)
                        S[c1 * s.D + c2] += fk * vt[c2];
                    z[c1] += fk;
                    fq[c1] = phi(qt[c1]);
                }
                double bt = TMM_LINATTN_EPS;
                for (size_t c1 = 0; c1 < s.D; c1++)
                    bt += fq[c1] * z[c1];
                double *yt = ROW(y, b, t, h);
                for (size_t c2 = 0; c2 < s.D; c2++) {
                    double a = 0;
                    for (size_t c1 = 0; c1 < s.D; c1++)
                        a += fq[c1] * S[c1 * s.D + c2];
                    yt[c2] = a / bt;
                }
                if (den)
                    den[(b * s.H + h) * s.n + t] = bt;
            }
        }
    free(S);
    free(z);
    free(fq);
}

void ref_linear_attention_backward_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                     const double *v, const double *dy, double *dq, double *dk, double *dv)
{
    dims s = dims_of(desc);
    double *S = alloc_d(s.D * s.D), *z = alloc_d(s.D), *fq = alloc_d(s.D), *fk = alloc_d(s.D);
    double *y = alloc_d(s.D), *da = alloc_d(s.D), *bt = alloc_d(s.n), *dbt = alloc_d(s.n);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            /* forward sweep: y_t, da_t, db_t and dq_t = (S_t da_t + z_t db_t) f'(q_t) */
            memset(S, 0, s.D * s.D * sizeof *S);
            memset(z, 0, s.D * sizeof *z);
            for (size_t t = 0; t < s.n; t++) {
                const double *kt = ROW(k, b, t, h), *vt = ROW(v, b, t, h), *qt = ROW(q, b, t, h);
                const double *gt = ROW(dy, b, t, h);
                for (size_t c1 = 0; c1 < s.D; c1++) {
                    double f = phi(kt[c1]);
                    for (size_t c2 = 0; c2 < s.D; c2++)
                        S[c1 * s.D + c2] += f * vt[c2];
                    z[c1] += f;
                    fq[c1] = phi(qt[c1]);
                }
                bt[t] = TMM_LINATTN_EPS;
                for (size_t c1 = 0; c1 < s.D; c1++)
                    bt[t] += fq[c1] * z[c1];
                double dyy = 0;
                for (size_t c2 = 0; c2 < s.D; c2++) {
                    double a = 0;
                    for (size_t c1 = 0; c1 < s.D; c1++)
                        a += fq[c1] * S[c1 * s.D + c2];
                    y[c2] = a / bt[t];
                    da[c2] = gt[c2] / bt[t];
                    dyy += gt[c2] * y[c2];
                }
                dbt[t] = -dyy / bt[t];
                double *dqt = ROW(dq, b, t, h);
                for (size_t c1 = 0; c1 < s.D; c1++) {
                    double g = z[c1] * dbt[t];
                    for (size_t c2 = 0; c2 < s.D; c2++)
                        g += S[c1 * s.D + c2] * da[c2];
                    dqt[c1] = g * dphi(qt[c1]);
                }
            }
            /* backward sweep: Sb_s = sum_{t>=s} fq_t da_tᵀ, zb_s = sum_{t>=s} fq_t db_t (S, z reused) */
            memset(S, 0, s.D * s.D * sizeof *S);
            memset(z, 0, s.D * sizeof *z);
            for (size_t t = s.n; t-- > 0;) {
                const double *kt = ROW(k, b, t, h), *vt = ROW(v, b, t, h), *qt = ROW(q, b, t, h);
                const double *gt = ROW(dy, b, t, h);
                for (size_t c1 = 0; c1 < s.D; c1++) {
                    double f = phi(qt[c1]);
                    for (size_t c2 = 0; c2 < s.D; c2++)
                        S[c1 * s.D + c2] += f * gt[c2] / bt[t];
                    z[c1] += f * dbt[t];
                    fk[c1] = phi(kt[c1]);
                }
                double *dkt = ROW(dk, b, t, h), *dvt = ROW(dv, b, t, h);
                for (size_t c1 = 0; c1 < s.D; c1++) {
                    double g = z[c1];
                    for (size_t c2 = 0; c2 < s.D; c2++)
                        g += S[c1 * s.D + c2] * vt[c2];
                    dkt[c1] = g * dphi(kt[c1]);
                }
                for (size_t c2 = 0; c2 < s.D; c2++) {
                    double g = 0;
                    for (size_t c1 = 0; c1 < s.D; c1++)
                        g += S[c1 * s.D + c2] * fk[c1];
                    dvt[c2] = g;
                }
            }
        }
    double *all[] = { S, z, fq, fk, y, da, bt, dbt };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

void ref_linear_attention_state_d(const tmm_linear_attention_desc *desc, const uint32_t *len, const double *k,
                                  const double *v, double *S, double *z)
{
    dims s = dims_of(desc);
    memset(S, 0, s.B * s.H * s.D * s.D * sizeof *S);
    memset(z, 0, s.B * s.H * s.D * sizeof *z);
    for (size_t b = 0; b < s.B; b++) {
        size_t end = len[b] < s.n ? len[b] : s.n;
        for (size_t h = 0; h < s.H; h++) {
            double *Sh = S + (b * s.H + h) * s.D * s.D, *zh = z + (b * s.H + h) * s.D;
            for (size_t t = 0; t < end; t++) {
                const double *kt = ROW(k, b, t, h), *vt = ROW(v, b, t, h);
                for (size_t c1 = 0; c1 < s.D; c1++) {
                    double f = phi(kt[c1]);
                    for (size_t c2 = 0; c2 < s.D; c2++)
                        Sh[c1 * s.D + c2] += f * vt[c2];
                    zh[c1] += f;
                }
            }
        }
    }
}

void ref_linear_attention_step_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                 const double *v, double *S, double *z, double *y)
{
    dims s = dims_of(desc);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            const double *qr = q + b * s.d + h * s.D, *kr = k + b * s.d + h * s.D, *vr = v + b * s.d + h * s.D;
            double *Sh = S + (b * s.H + h) * s.D * s.D, *zh = z + (b * s.H + h) * s.D, *yr = y + b * s.d + h * s.D;
            double bt = TMM_LINATTN_EPS;
            for (size_t c1 = 0; c1 < s.D; c1++) {
                double f = phi(kr[c1]);
                for (size_t c2 = 0; c2 < s.D; c2++)
                    Sh[c1 * s.D + c2] += f * vr[c2];
                zh[c1] += f;
                bt += phi(qr[c1]) * zh[c1];
            }
            for (size_t c2 = 0; c2 < s.D; c2++) {
                double a = 0;
                for (size_t c1 = 0; c1 < s.D; c1++)
                    a += phi(qr[c1]) * Sh[c1 * s.D + c2];
                yr[c2] = a / bt;
            }
        }
}

#undef ROW

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

void ref_linear_attention_forward(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                                  const float *v, float *y, float *den)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d, nr = s.B * s.H * s.n;
    double *qd = to_d(q, na), *kd = to_d(k, na), *vd = to_d(v, na), *yd = alloc_d(na), *nd = alloc_d(nr);
    ref_linear_attention_forward_d(desc, qd, kd, vd, yd, nd);
    to_f(yd, y, na);
    if (den)
        to_f(nd, den, nr);
    double *all[] = { qd, kd, vd, yd, nd };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

void ref_linear_attention_backward(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                                   const float *v, const float *dy, float *dq, float *dk, float *dv)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d;
    double *qd = to_d(q, na), *kd = to_d(k, na), *vd = to_d(v, na), *gd = to_d(dy, na);
    double *a = alloc_d(na), *bb = alloc_d(na), *c = alloc_d(na);
    ref_linear_attention_backward_d(desc, qd, kd, vd, gd, a, bb, c);
    to_f(a, dq, na);
    to_f(bb, dk, na);
    to_f(c, dv, na);
    double *all[] = { qd, kd, vd, gd, a, bb, c };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

void ref_linear_attention_state(const tmm_linear_attention_desc *desc, const uint32_t *len, const float *k,
                                const float *v, float *S, float *z)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d, nS = s.B * s.H * s.D * s.D, nz = s.B * s.H * s.D;
    double *kd = to_d(k, na), *vd = to_d(v, na), *Sd = alloc_d(nS), *zd = alloc_d(nz);
    ref_linear_attention_state_d(desc, len, kd, vd, Sd, zd);
    to_f(Sd, S, nS);
    to_f(zd, z, nz);
    double *all[] = { kd, vd, Sd, zd };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

void ref_linear_attention_step(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                               const float *v, float *S, float *z, float *y)
{
    dims s = dims_of(desc);
    size_t nr = s.B * s.d, nS = s.B * s.H * s.D * s.D, nz = s.B * s.H * s.D;
    double *qd = to_d(q, nr), *kd = to_d(k, nr), *vd = to_d(v, nr), *Sd = to_d(S, nS), *zd = to_d(z, nz);
    double *yd = alloc_d(nr);
    ref_linear_attention_step_d(desc, qd, kd, vd, Sd, zd, yd);
    to_f(Sd, S, nS);
    to_f(zd, z, nz);
    to_f(yd, y, nr);
    double *all[] = { qd, kd, vd, Sd, zd, yd };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}
