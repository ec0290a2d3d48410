/* C references of the Hyena / Mamba 2 small ops: see ref_ssm_ops.h and
 * src/ops/ssm_ops.h for the definitions. Plain loops in double. */
#include "ref/ref_ssm_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref/ref_double.h"

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
static double silu(double a) { return a * sigmoid(a); }
static double silu_grad(double a)
{
    double s = sigmoid(a);
    return s + a * s * (1 - s);
}

/* ---- conv1d ------------------------------------------------------------------ */

/* The pre-activation at (b, t, c). */
static double conv_pre(const double *x, const double *w, const double *bias, size_t n, size_t C, size_t K, size_t b,
                       size_t t, size_t c)
{
    double acc = bias[c];
    for (size_t j = 0; j < K; j++)
        if (t + j + 1 >= K)
            acc += w[c * K + j] * x[(b * n + t + j + 1 - K) * C + c];
    return acc;
}

void ref_conv1d_fwd_d(const double *x, const double *w, const double *bias, size_t B, size_t n, size_t C, size_t K,
                      bool act, double *y)
{
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < C; c++) {
                double pre = conv_pre(x, w, bias, n, C, K, b, t, c);
                y[(b * n + t) * C + c] = act ? silu(pre) : pre;
            }
}

void ref_conv1d_bwd_d(const double *x, const double *w, const double *bias, const double *dy, size_t B, size_t n,
                      size_t C, size_t K, bool act, bool accumulate, double *dx, double *dw, double *dbias)
{
    size_t rows = B * n;
    double *g = ref_zalloc(rows * C);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < C; c++) {
                size_t i = (b * n + t) * C + c;
                g[i] = act ? dy[i] * silu_grad(conv_pre(x, w, bias, n, C, K, b, t, c)) : dy[i];
            }
    if (!accumulate) {
        memset(dw, 0, C * K * sizeof *dw);
        memset(dbias, 0, C * sizeof *dbias);
    }
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < C; c++) {
                double gi = g[(b * n + t) * C + c];
                dbias[c] += gi;
                for (size_t j = 0; j < K; j++)
                    if (t + j + 1 >= K)
                        dw[c * K + j] += gi * x[(b * n + t + j + 1 - K) * C + c];
            }
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < n; t++)
            for (size_t c = 0; c < C; c++) {
                double acc = 0;
                for (size_t j = 0; j < K; j++)
                    if (t + K - 1 - j < n)
                        acc += w[c * K + j] * g[(b * n + t + K - 1 - j) * C + c];
                dx[(b * n + t) * C + c] = acc;
            }
    free(g);
}

void ref_conv1d_step_d(const double *x, const double *w, const double *bias, const uint32_t *pos, size_t batch,
                       size_t C, size_t K, bool act, double *window, double *y)
{
    size_t Wn = K - 1;
    for (size_t b = 0; b < batch; b++)
        for (size_t c = 0; c < C; c++) {
            double v[8] = { 0 }; /* K <= 8: the window's K-1 values and the new input */
            for (size_t j = 0; j < Wn; j++)
                v[j] = j + pos[b] >= Wn ? window[(b * Wn + j) * C + c] : 0.0;
            v[Wn] = x[b * C + c];
            double acc = bias[c];
            for (size_t j = 0; j < K; j++)
                acc += w[c * K + j] * v[j];
            for (size_t j = 0; j < Wn; j++)
                window[(b * Wn + j) * C + c] = v[j + 1];
            y[b * C + c] = act ? silu(acc) : acc;
        }
}

void ref_conv1d_fill_d(const double *x, const uint32_t *len, size_t B, size_t n, size_t C, size_t K, double *window)
{
    size_t Wn = K - 1;
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < Wn; j++) {
            /* position len - (K-1) + j */
            size_t p = (size_t)len[b] + j;
            bool in = p >= Wn && p - Wn < n;
            for (size_t c = 0; c < C; c++)
                window[(b * Wn + j) * C + c] = in ? x[(b * n + p - Wn) * C + c] : 0.0;
        }
}

/* ---- GELU, softplus ----------------------------------------------------------- */

static double bias_of(const double *b, size_t c) { return b ? b[c] : 0.0; }

static double gelu(double a) { return 0.5 * a * erfc(-a / sqrt(2.0)); }
static double gelu_grad(double a)
{
    return 0.5 * erfc(-a / sqrt(2.0)) + a * exp(-0.5 * a * a) / sqrt(2.0 * 3.14159265358979323846);
}
static double softplus(double a) { return fmax(a, 0.0) + log1p(exp(-fabs(a))); }
static double sigmoid_safe(double a)
{
    double e = exp(-fabs(a));
    return a >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

static void act_fwd(double (*f)(double), const double *x, const double *b, size_t rows, size_t C, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++)
            y[r * C + c] = f(x[r * C + c] + bias_of(b, c));
}

static void act_bwd(double (*fp)(double), const double *x, const double *b, const double *dy, size_t rows, size_t C,
                    bool accumulate, double *dx, double *db)
{
    if (db && !accumulate)
        memset(db, 0, C * sizeof *db);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++) {
            size_t i = r * C + c;
            double g = dy[i] * fp(x[i] + bias_of(b, c));
            dx[i] = g;
            if (db)
                db[c] += g;
        }
}

void ref_gelu_fwd_d(const double *x, const double *b, size_t rows, size_t C, double *y)
{
    act_fwd(gelu, x, b, rows, C, y);
}

void ref_gelu_bwd_d(const double *x, const double *b, const double *dy, size_t rows, size_t C, bool accumulate,
                    double *dx, double *db)
{
    act_bwd(gelu_grad, x, b, dy, rows, C, accumulate, dx, db);
}

void ref_softplus_fwd_d(const double *x, const double *b, size_t rows, size_t C, double *y)
{
    act_fwd(softplus, x, b, rows, C, y);
}

void ref_softplus_bwd_d(const double *x, const double *b, const double *dy, size_t rows, size_t C, bool accumulate,
                        double *dx, double *db)
{
    act_bwd(sigmoid_safe, x, b, dy, rows, C, accumulate, dx, db);
}

/* ---- sine ----------------------------------------------------------------------- */

void ref_sine_fwd_d(const double *x, const double *omega, const double *c, size_t rows, size_t C, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < C; j++)
            y[r * C + j] = sin(omega[j] * (x[r * C + j] + c[j]));
}

void ref_sine_bwd_d(const double *x, const double *omega, const double *c, const double *dy, size_t rows, size_t C,
                    bool accumulate, double *dx, double *domega, double *dc)
{
    if (!accumulate) {
        memset(domega, 0, C * sizeof *domega);
        memset(dc, 0, C * sizeof *dc);
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < C; j++) {
            size_t i = r * C + j;
            double u = x[i] + c[j], g = dy[i] * cos(omega[j] * u);
            dx[i] = g * omega[j];
            domega[j] += g * u;
            dc[j] += g * omega[j];
        }
}

/* ---- gates ----------------------------------------------------------------------- */

void ref_gate_mul_fwd_d(const double *a, const double *b, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

void ref_gate_mul_bwd_d(const double *a, const double *b, const double *dy, size_t n, double *da, double *db)
{
    for (size_t i = 0; i < n; i++) {
        double ga = dy[i] * b[i], gb = dy[i] * a[i];
        if (da)
            da[i] = ga;
        if (db)
            db[i] = gb;
    }
}

void ref_gate_silu_fwd_d(const double *a, const double *z, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] * silu(z[i]);
}

void ref_gate_silu_bwd_d(const double *a, const double *z, const double *dy, size_t n, double *da, double *dz)
{
    for (size_t i = 0; i < n; i++) {
        double ga = dy[i] * silu(z[i]), gz = dy[i] * a[i] * silu_grad(z[i]);
        if (da)
            da[i] = ga;
        if (dz)
            dz[i] = gz;
    }
}

void ref_gate_scale_fwd_d(const double *a, const double *k, size_t rows, size_t C, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++)
            y[r * C + c] = a[r * C + c] * k[c];
}

void ref_gate_scale_bwd_d(const double *a, const double *k, const double *dy, size_t rows, size_t C, bool accumulate,
                          double *da, double *dk)
{
    if (dk && !accumulate)
        memset(dk, 0, C * sizeof *dk);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < C; c++) {
            size_t i = r * C + c;
            double g = dy[i] * a[i];
            if (da)
                da[i] = dy[i] * k[c];
            if (dk)
                dk[c] += g;
        }
}

/* ---- float versions ------------------------------------------------------------- */

/* A double copy of x, or NULL for none. */
static double *in_d(const float *x, size_t n) { return x ? ref_to_double(x, n) : NULL; }

/* Rounds y to out (when out is not NULL) and frees y. */
static void out_f(double *y, float *out, size_t n)
{
    if (out)
        ref_to_float(y, out, n);
    free(y);
}

/* A double copy of an output that is read (accumulated, updated) or NULL. */
static double *io_d(const float *x, size_t n) { return in_d(x, n); }

/* Zeros standing for a written output, NULL when out is NULL. */
static double *new_d(const float *out, size_t n) { return out ? ref_zalloc(n) : NULL; }

/* A double copy of a gradient that is added to, or zeros. */
static double *acc_d(const float *x, size_t n, bool accumulate) { return accumulate ? in_d(x, n) : new_d(x, n); }

void ref_conv1d_fwd(const float *x, const float *w, const float *bias, size_t B, size_t n, size_t C, size_t K,
                    bool act, float *y)
{
    size_t N = B * n * C;
    double *xd = in_d(x, N), *wd = in_d(w, C * K), *bd = in_d(bias, C), *yd = new_d(y, N);
    ref_conv1d_fwd_d(xd, wd, bd, B, n, C, K, act, yd);
    out_f(yd, y, N);
    free(xd), free(wd), free(bd);
}

void ref_conv1d_bwd(const float *x, const float *w, const float *bias, const float *dy, size_t B, size_t n, size_t C,
                    size_t K, bool act, bool accumulate, float *dx, float *dw, float *dbias)
{
    size_t N = B * n * C;
    double *xd = in_d(x, N), *wd = in_d(w, C * K), *bd = in_d(bias, C), *dyd = in_d(dy, N);
    double *dxd = new_d(dx, N), *dwd = acc_d(dw, C * K, accumulate), *dbd = acc_d(dbias, C, accumulate);
    ref_conv1d_bwd_d(xd, wd, bd, dyd, B, n, C, K, act, accumulate, dxd, dwd, dbd);
    out_f(dxd, dx, N), out_f(dwd, dw, C * K), out_f(dbd, dbias, C);
    free(xd), free(wd), free(bd), free(dyd);
}

void ref_conv1d_step(const float *x, const float *w, const float *bias, const uint32_t *pos, size_t batch, size_t C,
                     size_t K, bool act, float *window, float *y)
{
    size_t nw = batch * (K - 1) * C;
    double *xd = in_d(x, batch * C), *wd = in_d(w, C * K), *bd = in_d(bias, C), *wind = io_d(window, nw);
    double *yd = new_d(y, batch * C);
    ref_conv1d_step_d(xd, wd, bd, pos, batch, C, K, act, wind, yd);
    out_f(wind, window, nw), out_f(yd, y, batch * C);
    free(xd), free(wd), free(bd);
}

void ref_conv1d_fill(const float *x, const uint32_t *len, size_t B, size_t n, size_t C, size_t K, float *window)
{
    size_t nw = B * (K - 1) * C;
    double *xd = in_d(x, B * n * C), *wind = new_d(window, nw);
    ref_conv1d_fill_d(xd, len, B, n, C, K, wind);
    out_f(wind, window, nw);
    free(xd);
}

void ref_gelu_fwd(const float *x, const float *b, size_t rows, size_t C, float *y)
{
    double *xd = in_d(x, rows * C), *bd = in_d(b, C), *yd = new_d(y, rows * C);
    ref_gelu_fwd_d(xd, bd, rows, C, yd);
    out_f(yd, y, rows * C);
    free(xd), free(bd);
}

void ref_gelu_bwd(const float *x, const float *b, const float *dy, size_t rows, size_t C, bool accumulate, float *dx,
                  float *db)
{
    size_t N = rows * C;
    double *xd = in_d(x, N), *bd = in_d(b, C), *dyd = in_d(dy, N), *dxd = new_d(dx, N), *dbd = acc_d(db, C, accumulate);
    ref_gelu_bwd_d(xd, bd, dyd, rows, C, accumulate, dxd, dbd);
    out_f(dxd, dx, N), out_f(dbd, db, C);
    free(xd), free(bd), free(dyd);
}

void ref_sine_fwd(const float *x, const float *omega, const float *c, size_t rows, size_t C, float *y)
{
    double *xd = in_d(x, rows * C), *od = in_d(omega, C), *cd = in_d(c, C), *yd = new_d(y, rows * C);
    ref_sine_fwd_d(xd, od, cd, rows, C, yd);
    out_f(yd, y, rows * C);
    free(xd), free(od), free(cd);
}

void ref_sine_bwd(const float *x, const float *omega, const float *c, const float *dy, size_t rows, size_t C,
                  bool accumulate, float *dx, float *domega, float *dc)
{
    size_t N = rows * C;
    double *xd = in_d(x, N), *od = in_d(omega, C), *cd = in_d(c, C), *dyd = in_d(dy, N);
    double *dxd = new_d(dx, N), *dod = acc_d(domega, C, accumulate), *dcd = acc_d(dc, C, accumulate);
    ref_sine_bwd_d(xd, od, cd, dyd, rows, C, accumulate, dxd, dod, dcd);
    out_f(dxd, dx, N), out_f(dod, domega, C), out_f(dcd, dc, C);
    free(xd), free(od), free(cd), free(dyd);
}

void ref_softplus_fwd(const float *x, const float *b, size_t rows, size_t C, float *y)
{
    double *xd = in_d(x, rows * C), *bd = in_d(b, C), *yd = new_d(y, rows * C);
    ref_softplus_fwd_d(xd, bd, rows, C, yd);
    out_f(yd, y, rows * C);
    free(xd), free(bd);
}

void ref_softplus_bwd(const float *x, const float *b, const float *dy, size_t rows, size_t C, bool accumulate,
                      float *dx, float *db)
{
    size_t N = rows * C;
    double *xd = in_d(x, N), *bd = in_d(b, C), *dyd = in_d(dy, N), *dxd = new_d(dx, N), *dbd = acc_d(db, C, accumulate);
    ref_softplus_bwd_d(xd, bd, dyd, rows, C, accumulate, dxd, dbd);
    out_f(dxd, dx, N), out_f(dbd, db, C);
    free(xd), free(bd), free(dyd);
}

void ref_gate_mul_fwd(const float *a, const float *b, size_t n, float *y)
{
    double *ad = in_d(a, n), *bd = in_d(b, n), *yd = new_d(y, n);
    ref_gate_mul_fwd_d(ad, bd, n, yd);
    out_f(yd, y, n);
    free(ad), free(bd);
}

void ref_gate_mul_bwd(const float *a, const float *b, const float *dy, size_t n, float *da, float *db)
{
    double *ad = in_d(a, n), *bd = in_d(b, n), *dyd = in_d(dy, n), *dad = new_d(da, n), *dbd = new_d(db, n);
    ref_gate_mul_bwd_d(ad, bd, dyd, n, dad, dbd);
    out_f(dad, da, n), out_f(dbd, db, n);
    free(ad), free(bd), free(dyd);
}

void ref_gate_silu_fwd(const float *a, const float *z, size_t n, float *y)
{
    double *ad = in_d(a, n), *zd = in_d(z, n), *yd = new_d(y, n);
    ref_gate_silu_fwd_d(ad, zd, n, yd);
    out_f(yd, y, n);
    free(ad), free(zd);
}

void ref_gate_silu_bwd(const float *a, const float *z, const float *dy, size_t n, float *da, float *dz)
{
    double *ad = in_d(a, n), *zd = in_d(z, n), *dyd = in_d(dy, n), *dad = new_d(da, n), *dzd = new_d(dz, n);
    ref_gate_silu_bwd_d(ad, zd, dyd, n, dad, dzd);
    out_f(dad, da, n), out_f(dzd, dz, n);
    free(ad), free(zd), free(dyd);
}

void ref_gate_scale_fwd(const float *a, const float *k, size_t rows, size_t C, float *y)
{
    double *ad = in_d(a, rows * C), *kd = in_d(k, C), *yd = new_d(y, rows * C);
    ref_gate_scale_fwd_d(ad, kd, rows, C, yd);
    out_f(yd, y, rows * C);
    free(ad), free(kd);
}

void ref_gate_scale_bwd(const float *a, const float *k, const float *dy, size_t rows, size_t C, bool accumulate,
                        float *da, float *dk)
{
    size_t N = rows * C;
    double *ad = in_d(a, N), *kd = in_d(k, C), *dyd = in_d(dy, N), *dad = new_d(da, N), *dkd = acc_d(dk, C, accumulate);
    ref_gate_scale_bwd_d(ad, kd, dyd, rows, C, accumulate, dad, dkd);
    out_f(dad, da, N), out_f(dkd, dk, C);
    free(ad), free(kd), free(dyd);
}
