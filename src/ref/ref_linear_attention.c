/* C reference of causal linear attention: see ref_linear_attention.h and
 * src/ops/linear_attention.h for the definition. The plain recurrence over
 * positions in double; the backward by hand (a forward sweep for dq, a
 * backward sweep for dk and dv). */
#include "ref/ref_linear_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_double.h"

typedef struct dims {
    size_t B, n, d, H, D;
} dims;

static dims dims_of(const tmm_linear_attention_desc *desc)
{
    dims s = { desc->batch, desc->n, desc->d, desc->heads ? desc->heads : 1, 0 };
    s.D = s.d / s.H;
    return s;
}

static double phi(double x) { return x > 0 ? x + 1 : exp(x); }
static double dphi(double x) { return x > 0 ? 1 : exp(x); }

/* One position of a head's recurrence: S += φ(k_t) v_tᵀ, z += φ(k_t). */
static void add_position(const dims *s, const double *kt, const double *vt, double *S, double *z)
{
    for (size_t c1 = 0; c1 < s->D; c1++) {
        const double f = phi(kt[c1]);
        for (size_t c2 = 0; c2 < s->D; c2++)
            S[c1 * s->D + c2] += f * vt[c2];
        z[c1] += f;
    }
}

/* A head's output at a position from its state: fq = φ(q_t), y_t = fqᵀ S / b_t;
 * returns the denominator b_t = fqᵀ z + eps. */
static double read_out(const dims *s, const double *qt, const double *S, const double *z, double *fq, double *yt)
{
    double bt = TMM_LINATTN_EPS;
    for (size_t c1 = 0; c1 < s->D; c1++) {
        fq[c1] = phi(qt[c1]);
        bt += fq[c1] * z[c1];
    }
    for (size_t c2 = 0; c2 < s->D; c2++) {
        double a = 0;
        for (size_t c1 = 0; c1 < s->D; c1++)
            a += fq[c1] * S[c1 * s->D + c2];
        yt[c2] = a / bt;
    }
    return bt;
}

/* Head h of row t of batch b of x [B, n, d]. */
#define ROW(x, b, t, h) ((x) + ((b) * s.n + (t)) * s.d + (h) * s.D)

void ref_linear_attention_forward_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                    const double *v, double *y, double *den)
{
    dims s = dims_of(desc);
    double *S = ref_zalloc(s.D * s.D), *z = ref_zalloc(s.D), *fq = ref_zalloc(s.D);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            memset(S, 0, s.D * s.D * sizeof *S);
            memset(z, 0, s.D * sizeof *z);
            for (size_t t = 0; t < s.n; t++) {
                add_position(&s, ROW(k, b, t, h), ROW(v, b, t, h), S, z);
                const double bt = read_out(&s, ROW(q, b, t, h), S, z, fq, ROW(y, b, t, h));
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
    double *S = ref_zalloc(s.D * s.D), *z = ref_zalloc(s.D), *fq = ref_zalloc(s.D), *fk = ref_zalloc(s.D);
    double *y = ref_zalloc(s.D), *da = ref_zalloc(s.D), *bt = ref_zalloc(s.n), *dbt = ref_zalloc(s.n);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            /* forward sweep: y_t, da_t, db_t and dq_t = (S_t da_t + z_t db_t) f'(q_t) */
            memset(S, 0, s.D * s.D * sizeof *S);
            memset(z, 0, s.D * sizeof *z);
            for (size_t t = 0; t < s.n; t++) {
                const double *qt = ROW(q, b, t, h), *gt = ROW(dy, b, t, h);
                add_position(&s, ROW(k, b, t, h), ROW(v, b, t, h), S, z);
                bt[t] = read_out(&s, qt, S, z, fq, y);
                double dyy = 0;
                for (size_t c2 = 0; c2 < s.D; c2++) {
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
    ref_free_all(all, sizeof all / sizeof all[0]);
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
            for (size_t t = 0; t < end; t++)
                add_position(&s, ROW(k, b, t, h), ROW(v, b, t, h), Sh, zh);
        }
    }
}

void ref_linear_attention_step_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                 const double *v, double *S, double *z, double *y)
{
    dims s = dims_of(desc);
    double *fq = ref_zalloc(s.D);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            const size_t at = b * s.d + h * s.D;
            double *Sh = S + (b * s.H + h) * s.D * s.D, *zh = z + (b * s.H + h) * s.D;
            add_position(&s, k + at, v + at, Sh, zh);
            read_out(&s, q + at, Sh, zh, fq, y + at);
        }
    free(fq);
}

#undef ROW

void ref_linear_attention_forward(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                                  const float *v, float *y, float *den)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d, nr = s.B * s.H * s.n;
    double *qd = ref_to_double(q, na), *kd = ref_to_double(k, na), *vd = ref_to_double(v, na);
    double *yd = ref_zalloc(na), *nd = ref_zalloc(nr);
    ref_linear_attention_forward_d(desc, qd, kd, vd, yd, nd);
    ref_to_float(yd, y, na);
    if (den)
        ref_to_float(nd, den, nr);
    double *all[] = { qd, kd, vd, yd, nd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_linear_attention_backward(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                                   const float *v, const float *dy, float *dq, float *dk, float *dv)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d;
    double *qd = ref_to_double(q, na), *kd = ref_to_double(k, na), *vd = ref_to_double(v, na);
    double *gd = ref_to_double(dy, na), *dqd = ref_zalloc(na), *dkd = ref_zalloc(na), *dvd = ref_zalloc(na);
    ref_linear_attention_backward_d(desc, qd, kd, vd, gd, dqd, dkd, dvd);
    ref_to_float(dqd, dq, na);
    ref_to_float(dkd, dk, na);
    ref_to_float(dvd, dv, na);
    double *all[] = { qd, kd, vd, gd, dqd, dkd, dvd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_linear_attention_state(const tmm_linear_attention_desc *desc, const uint32_t *len, const float *k,
                                const float *v, float *S, float *z)
{
    dims s = dims_of(desc);
    size_t na = s.B * s.n * s.d, nS = s.B * s.H * s.D * s.D, nz = s.B * s.H * s.D;
    double *kd = ref_to_double(k, na), *vd = ref_to_double(v, na), *Sd = ref_zalloc(nS), *zd = ref_zalloc(nz);
    ref_linear_attention_state_d(desc, len, kd, vd, Sd, zd);
    ref_to_float(Sd, S, nS);
    ref_to_float(zd, z, nz);
    double *all[] = { kd, vd, Sd, zd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_linear_attention_step(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                               const float *v, float *S, float *z, float *y)
{
    dims s = dims_of(desc);
    size_t nr = s.B * s.d, nS = s.B * s.H * s.D * s.D, nz = s.B * s.H * s.D;
    double *qd = ref_to_double(q, nr), *kd = ref_to_double(k, nr), *vd = ref_to_double(v, nr);
    double *Sd = ref_to_double(S, nS), *zd = ref_to_double(z, nz), *yd = ref_zalloc(nr);
    ref_linear_attention_step_d(desc, qd, kd, vd, Sd, zd, yd);
    ref_to_float(Sd, S, nS);
    ref_to_float(zd, z, nz);
    ref_to_float(yd, y, nr);
    double *all[] = { qd, kd, vd, Sd, zd, yd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}
