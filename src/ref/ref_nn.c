#include "ref_nn.h"

#include <math.h>
#include <string.h>

void ref_embedding_fwd_d(const uint32_t *tok, size_t rows, const double *E, size_t vocab, size_t d, double *h)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t c = 0; c < d; c++)
            h[i * d + c] = tok[i] < vocab ? E[(size_t)tok[i] * d + c] : 0.0;
}

void ref_embedding_bwd_d(const uint32_t *tok, size_t rows, const double *dh, size_t vocab, size_t d, bool accumulate,
                         double *dE)
{
    if (!accumulate)
        memset(dE, 0, vocab * d * sizeof *dE);
    for (size_t i = 0; i < rows; i++)
        if (tok[i] < vocab)
            for (size_t c = 0; c < d; c++)
                dE[(size_t)tok[i] * d + c] += dh[i * d + c];
}

static void row_stats(const double *x, size_t d, double eps, double *mean, double *rstd)
{
    double s = 0;
    for (size_t c = 0; c < d; c++)
        s += x[c];
    double m = s / (double)d, v = 0;
    for (size_t c = 0; c < d; c++)
        v += (x[c] - m) * (x[c] - m);
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)d + eps);
}

void ref_layernorm_fwd_d(const double *x, const double *gamma, const double *beta, size_t rows, size_t d, double eps,
                         double *y, double *mean, double *rstd)
{
    for (size_t r = 0; r < rows; r++) {
        double m, rs;
        row_stats(x + r * d, d, eps, &m, &rs);
        for (size_t c = 0; c < d; c++)
            y[r * d + c] = (x[r * d + c] - m) * rs * gamma[c] + beta[c];
        if (mean)
            mean[r] = m;
        if (rstd)
            rstd[r] = rs;
    }
}

void ref_layernorm_bwd_d(const double *x, const double *gamma, const double *dy, size_t rows, size_t d, double eps,
                         bool accumulate, double *dx, double *dgamma, double *dbeta)
{
    if (!accumulate) {
        memset(dgamma, 0, d * sizeof *dgamma);
        memset(dbeta, 0, d * sizeof *dbeta);
    }
    for (size_t r = 0; r < rows; r++) {
        const double *xr = x + r * d, *gr = dy + r * d;
        double m, rs;
        row_stats(xr, d, eps, &m, &rs);
        double sg = 0, sgx = 0;
        for (size_t c = 0; c < d; c++) {
            double xhat = (xr[c] - m) * rs, g = gr[c] * gamma[c];
            sg += g;
            sgx += g * xhat;
            dgamma[c] += gr[c] * xhat;
            dbeta[c] += gr[c];
        }
        for (size_t c = 0; c < d; c++) {
            double xhat = (xr[c] - m) * rs, g = gr[c] * gamma[c];
            dx[r * d + c] = rs * (g - (sg + xhat * sgx) / (double)d);
        }
    }
}

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

void ref_bias_silu_fwd_d(const double *x, const double *b, size_t rows, size_t d, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < d; c++) {
            double a = x[r * d + c] + b[c];
            y[r * d + c] = a * sigmoid(a);
        }
}

void ref_bias_silu_bwd_d(const double *x, const double *b, const double *dy, size_t rows, size_t d, bool accumulate,
                         double *da, double *db)
{
    if (!accumulate)
        memset(db, 0, d * sizeof *db);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < d; c++) {
            double a = x[r * d + c] + b[c], s = sigmoid(a);
            double g = dy[r * d + c] * (s + a * s * (1 - s));
            da[r * d + c] = g;
            db[c] += g;
        }
}

static bool scored(int32_t t, size_t vocab) { return t >= 0 && (size_t)t < vocab; }

size_t ref_count_scored(const int32_t *targets, size_t rows, size_t vocab)
{
    size_t n = 0;
    for (size_t r = 0; r < rows; r++)
        n += scored(targets[r], vocab);
    return n;
}

static double row_lse(const double *x, size_t vocab, size_t *argmax)
{
    size_t am = 0;
    for (size_t j = 1; j < vocab; j++)
        if (x[j] > x[am])
            am = j;
    double s = 0;
    for (size_t j = 0; j < vocab; j++)
        s += exp(x[j] - x[am]);
    *argmax = am;
    return x[am] + log(s);
}

double ref_xent_fwd_d(const double *logits, const int32_t *targets, size_t rows, size_t vocab, double *loss,
                      uint32_t *argmax)
{
    double total = 0;
    size_t n = 0;
    for (size_t r = 0; r < rows; r++) {
        const double *x = logits + r * vocab;
        size_t am;
        double lse = row_lse(x, vocab, &am), l = 0;
        if (scored(targets[r], vocab)) {
            l = lse - x[targets[r]];
            total += l;
            n++;
        }
        if (loss)
            loss[r] = l;
        if (argmax)
            argmax[r] = (uint32_t)am;
    }
    return n ? total / (double)n : 0.0;
}

void ref_xent_bwd_d(const double *logits, const int32_t *targets, size_t rows, size_t vocab, size_t n_scored,
                    double loss_scale, double *dlogits)
{
    for (size_t r = 0; r < rows; r++) {
        const double *x = logits + r * vocab;
        double *g = dlogits + r * vocab;
        if (!scored(targets[r], vocab) || n_scored == 0) {
            memset(g, 0, vocab * sizeof *g);
            continue;
        }
        size_t am;
        double lse = row_lse(x, vocab, &am);
        for (size_t j = 0; j < vocab; j++)
            g[j] = (exp(x[j] - lse) - (j == (size_t)targets[r])) / (double)n_scored * loss_scale;
    }
}
