/* C reference of the Mamba 2 SSD op: see ref_ssd.h and src/ops/ssd.h for the
 * definition. The recurrence over positions in double; the backward by hand
 * as a reverse loop over the positions with the states of the forward kept:
 *   dS_t = exp(a_{t+1}) dS_{t+1} + dy_t Ct_tᵀ
 *   dxs_t = D dy_t + dt_t dS_t Bt_t,  dBt_t += dt_t dS_tᵀ xs_t,  dCt_t += S_tᵀ dy_t
 *   ddt_t = xs_tᵀ dS_t Bt_t + A exp(a_t) <dS_t, S_{t-1}>
 *   dA += dt_t exp(a_t) <dS_t, S_{t-1}>,  dA_log = A dA,  dD += dy_t·xs_t */
#include "ref/ref_ssd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_double.h"

typedef struct dims {
    size_t B, n, H, P, N, cx, dy;
} dims;

static dims dims_of(const tmm_ssd_desc *desc, size_t n)
{
    dims s = { desc->batch, n, desc->heads, desc->head_dim, desc->state, 0, 0 };
    s.cx = s.H * s.P + 2 * s.N;
    s.dy = s.H * s.P;
    return s;
}

/* The row of position t of sequence b in xbc: xs of head h at X(r, h), Bt at
 * BT(r), Ct at CT(r). */
#define XROW(b, t) (xbc + ((b) * s.n + (t)) * s.cx)
#define X(r, h) ((r) + (h) * s.P)
#define BT(r) ((r) + s.H * s.P)
#define CT(r) ((r) + s.H * s.P + s.N)

/* One position of one head: S = exp(dt A) S + dt xs Btᵀ, then (y != NULL)
 * y = S Ct + D xs. */
static void step_head(const dims *sp, double *S, const double *xs, const double *bt, const double *ct, double dt,
                      double A, double D, double *y)
{
    const dims s = *sp;
    const double decay = exp(dt * A);
    for (size_t p = 0; p < s.P; p++) {
        double acc = 0;
        for (size_t c = 0; c < s.N; c++) {
            double v = decay * S[p * s.N + c] + dt * xs[p] * bt[c];
            S[p * s.N + c] = v;
            acc += v * (ct ? ct[c] : 0);
        }
        if (y)
            y[p] = acc + D * xs[p];
    }
}

void ref_ssd_forward_d(const tmm_ssd_desc *desc, const double *xbc, const double *dt, const double *A_log,
                       const double *D, double *y)
{
    dims s = dims_of(desc, desc->n);
    double *S = ref_zalloc(s.P * s.N);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            memset(S, 0, s.P * s.N * sizeof *S);
            const double A = -exp(A_log[h]);
            for (size_t t = 0; t < s.n; t++) {
                const double *r = XROW(b, t);
                const size_t row = b * s.n + t;
                step_head(&s, S, X(r, h), BT(r), CT(r), dt[row * s.H + h], A, D[h], y + row * s.dy + h * s.P);
            }
        }
    free(S);
}

void ref_ssd_backward_d(const tmm_ssd_desc *desc, const double *xbc, const double *dt, const double *A_log,
                        const double *D, const double *dy, double *dxbc, double *ddt, double *dA_log, double *dD)
{
    dims s = dims_of(desc, desc->n);
    const size_t PN = s.P * s.N;
    double *S = ref_zalloc((s.n + 1) * PN), *dS = ref_zalloc(PN); /* S + (t+1) PN: S_t; S: S_{-1} = 0 */
    memset(dxbc, 0, s.B * s.n * s.cx * sizeof *dxbc);
    for (size_t h = 0; h < s.H; h++) {
        const double A = -exp(A_log[h]);
        double gA = 0, gD = 0;
        for (size_t b = 0; b < s.B; b++) {
            memset(S, 0, PN * sizeof *S);
            for (size_t t = 0; t < s.n; t++) {
                const double *r = XROW(b, t);
                memcpy(S + (t + 1) * PN, S + t * PN, PN * sizeof *S);
                step_head(&s, S + (t + 1) * PN, X(r, h), BT(r), NULL, dt[(b * s.n + t) * s.H + h], A, 0, NULL);
            }
            memset(dS, 0, PN * sizeof *dS);
            for (size_t t = s.n; t-- > 0;) {
                const size_t row = b * s.n + t;
                const double *r = XROW(b, t), *xs = X(r, h), *bt = BT(r), *ct = CT(r), *g = dy + row * s.dy + h * s.P;
                const double *St = S + (t + 1) * PN, *Sm = S + t * PN, d = dt[row * s.H + h], e = exp(d * A);
                double *dr = dxbc + row * s.cx, *dx = X(dr, h), *dbt = BT(dr), *dct = CT(dr);
                for (size_t p = 0; p < s.P; p++)
                    for (size_t c = 0; c < s.N; c++)
                        dS[p * s.N + c] += g[p] * ct[c];
                double u = 0, dss = 0;
                for (size_t p = 0; p < s.P; p++) {
                    double v = 0;
                    for (size_t c = 0; c < s.N; c++) {
                        v += dS[p * s.N + c] * bt[c];
                        dbt[c] += d * dS[p * s.N + c] * xs[p];
                        dct[c] += St[p * s.N + c] * g[p];
                        dss += dS[p * s.N + c] * Sm[p * s.N + c];
                    }
                    dx[p] = D[h] * g[p] + d * v;
                    u += xs[p] * v;
                    gD += g[p] * xs[p];
                }
                ddt[row * s.H + h] = u + A * e * dss;
                gA += d * e * dss;
                for (size_t i = 0; i < PN; i++)
                    dS[i] *= e;
            }
        }
        dA_log[h] = A * gA;
        dD[h] = gD;
    }
    free(S);
    free(dS);
}

void ref_ssd_state_d(const tmm_ssd_desc *desc, const uint32_t *len, const double *xbc, const double *dt,
                     const double *A_log, double *S)
{
    dims s = dims_of(desc, desc->n);
    const size_t PN = s.P * s.N;
    memset(S, 0, s.B * s.H * PN * sizeof *S);
    for (size_t b = 0; b < s.B; b++) {
        const size_t L = len[b] < s.n ? len[b] : s.n;
        for (size_t h = 0; h < s.H; h++)
            for (size_t t = 0; t < L; t++) {
                const double *r = XROW(b, t);
                step_head(&s, S + (b * s.H + h) * PN, X(r, h), BT(r), NULL, dt[(b * s.n + t) * s.H + h],
                          -exp(A_log[h]), 0, NULL);
            }
    }
}

void ref_ssd_step_d(const tmm_ssd_desc *desc, const double *xbc, const double *dt, const double *A_log,
                    const double *D, double *S, double *y)
{
    dims s = dims_of(desc, 1);
    for (size_t b = 0; b < s.B; b++)
        for (size_t h = 0; h < s.H; h++) {
            const double *r = XROW(b, 0);
            step_head(&s, S + (b * s.H + h) * s.P * s.N, X(r, h), BT(r), CT(r), dt[b * s.H + h], -exp(A_log[h]),
                      D[h], y + b * s.dy + h * s.P);
        }
}

#undef XROW
#undef X
#undef BT
#undef CT

void ref_ssd_forward(const tmm_ssd_desc *desc, const float *xbc, const float *dt, const float *A_log,
                     const float *D, float *y)
{
    dims s = dims_of(desc, desc->n);
    const size_t rows = s.B * s.n;
    double *x = ref_to_double(xbc, rows * s.cx), *d = ref_to_double(dt, rows * s.H), *al = ref_to_double(A_log, s.H);
    double *dd = ref_to_double(D, s.H), *yd = ref_zalloc(rows * s.dy);
    ref_ssd_forward_d(desc, x, d, al, dd, yd);
    ref_to_float(yd, y, rows * s.dy);
    double *all[] = { x, d, al, dd, yd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_ssd_backward(const tmm_ssd_desc *desc, const float *xbc, const float *dt, const float *A_log,
                      const float *D, const float *dy, float *dxbc, float *ddt, float *dA_log, float *dD)
{
    dims s = dims_of(desc, desc->n);
    const size_t rows = s.B * s.n;
    double *x = ref_to_double(xbc, rows * s.cx), *d = ref_to_double(dt, rows * s.H), *al = ref_to_double(A_log, s.H);
    double *dd = ref_to_double(D, s.H);
    double *g = ref_to_double(dy, rows * s.dy), *gx = ref_zalloc(rows * s.cx), *gt = ref_zalloc(rows * s.H);
    double *ga = ref_zalloc(s.H), *gd = ref_zalloc(s.H);
    ref_ssd_backward_d(desc, x, d, al, dd, g, gx, gt, ga, gd);
    ref_to_float(gx, dxbc, rows * s.cx);
    ref_to_float(gt, ddt, rows * s.H);
    ref_to_float(ga, dA_log, s.H);
    ref_to_float(gd, dD, s.H);
    double *all[] = { x, d, al, dd, g, gx, gt, ga, gd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_ssd_state(const tmm_ssd_desc *desc, const uint32_t *len, const float *xbc, const float *dt,
                   const float *A_log, float *S)
{
    dims s = dims_of(desc, desc->n);
    const size_t rows = s.B * s.n, nS = s.B * s.H * s.P * s.N;
    double *x = ref_to_double(xbc, rows * s.cx), *d = ref_to_double(dt, rows * s.H), *al = ref_to_double(A_log, s.H);
    double *Sd = ref_zalloc(nS);
    ref_ssd_state_d(desc, len, x, d, al, Sd);
    ref_to_float(Sd, S, nS);
    double *all[] = { x, d, al, Sd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}

void ref_ssd_step(const tmm_ssd_desc *desc, const float *xbc, const float *dt, const float *A_log, const float *D,
                  float *S, float *y)
{
    dims s = dims_of(desc, 1);
    const size_t nS = s.B * s.H * s.P * s.N;
    double *x = ref_to_double(xbc, s.B * s.cx), *d = ref_to_double(dt, s.B * s.H), *al = ref_to_double(A_log, s.H);
    double *dd = ref_to_double(D, s.H), *Sd = ref_to_double(S, nS), *yd = ref_zalloc(s.B * s.dy);
    ref_ssd_step_d(desc, x, d, al, dd, Sd, yd);
    ref_to_float(Sd, S, nS);
    ref_to_float(yd, y, s.B * s.dy);
    double *all[] = { x, d, al, dd, Sd, yd };
    ref_free_all(all, sizeof all / sizeof all[0]);
}
