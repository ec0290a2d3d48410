#include "ref_llama.h"

#include <math.h>
#include <string.h>

static double row_rstd(const double *x, size_t d, double eps)
{
    double ss = 0;
    for (size_t c = 0; c < d; c++)
        ss += x[c] * x[c];
    return 1.0 / sqrt(ss / (double)d + eps);
}

void ref_rmsnorm_fwd_d(const double *x, const double *g, size_t rows, size_t d, double eps, double *y, double *rstd)
{
    for (size_t r = 0; r < rows; r++) {
        double rs = row_rstd(x + r * d, d, eps);
        for (size_t c = 0; c < d; c++)
            y[r * d + c] = x[r * d + c] * rs * g[c];
        if (rstd)
            rstd[r] = rs;
    }
}

void ref_rmsnorm_bwd_d(const double *x, const double *g, const double *dy, size_t rows, size_t d, double eps,
                       bool accumulate, double *dx, double *dg)
{
    if (!accumulate)
        memset(dg, 0, d * sizeof *dg);
    for (size_t r = 0; r < rows; r++) {
        const double *xr = x + r * d, *gr = dy + r * d;
        double rs = row_rstd(xr, d, eps), s = 0;
        for (size_t c = 0; c < d; c++) {
            double xhat = xr[c] * rs;
            s += gr[c] * g[c] * xhat;
            dg[c] += gr[c] * xhat;
        }
        for (size_t c = 0; c < d; c++) /* dx[c] depends on dy[c] only besides s: dx may be dy */
            dx[r * d + c] = rs * (gr[c] * g[c] - xr[c] * rs * s / (double)d);
    }
}

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

void ref_swiglu_fwd_d(const double *gu, size_t rows, size_t f, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < f; j++) {
            double a = gu[r * 2 * f + j], b = gu[r * 2 * f + f + j];
            y[r * f + j] = a * sigmoid(a) * b;
        }
}

void ref_swiglu_bwd_d(const double *gu, const double *dy, size_t rows, size_t f, double *dgu)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < f; j++) {
            double a = gu[r * 2 * f + j], b = gu[r * 2 * f + f + j], s = sigmoid(a), g = dy[r * f + j];
            dgu[r * 2 * f + j] = g * b * (s + a * s * (1 - s));
            dgu[r * 2 * f + f + j] = g * a * s;
        }
}

void ref_rope_d(const double *x, size_t rows, size_t d, size_t heads, size_t n, const uint32_t *pos, double base,
                bool inverse, double *y)
{
    size_t dh = d / heads, half = dh / 2;
    for (size_t r = 0; r < rows; r++) {
        double t = pos ? (double)pos[r] : (double)(r % n);
        for (size_t h = 0; h < heads; h++)
            for (size_t i = 0; i < half; i++) {
                double theta = t * pow(base, -2.0 * (double)i / (double)dh);
                double c = cos(theta), s = inverse ? -sin(theta) : sin(theta);
                size_t c0 = r * d + h * dh + i, c1 = c0 + half;
                double x0 = x[c0], x1 = x[c1];
                y[c0] = x0 * c - x1 * s;
                y[c1] = x0 * s + x1 * c;
            }
    }
}
