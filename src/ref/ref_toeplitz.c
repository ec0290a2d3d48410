/* Reference of the causal Toeplitz mixing op, written straight from the
 * definitions in src/ops/toeplitz.h (each gradient from its own formula, not
 * by transposing the forward's loops, so the finite-difference check tests
 * them). Every sum is accumulated in double; the loops are instantiated for
 * double and for float storage. */
#include "ref/ref_toeplitz.h"

typedef struct shape {
    size_t B, n, d, G, K, dg;
} shape;

static shape shape_of(const tmm_toeplitz_desc *desc)
{
    shape s = { desc->batch, desc->n, desc->d, desc->groups ? desc->groups : 1, desc->taps ? desc->taps : 1, 0 };
    s.dg = s.d / s.G;
    return s;
}

/* y[b, t, c] = beta[g, t] + sum_a sum_{s<=t} w[g, a, t-s] u[b, s, c-(K-1)+a],
 * input channels below group g's first (g*dg) counting as zero */
#define REF_FORWARD(NAME, T)                                                                        \
    void NAME(const tmm_toeplitz_desc *desc, const T *u, const T *w, const T *beta, T *y)           \
    {                                                                                               \
        shape S = shape_of(desc);                                                                   \
        for (size_t b = 0; b < S.B; b++)                                                            \
            for (size_t t = 0; t < S.n; t++)                                                        \
                for (size_t c = 0; c < S.d; c++) {                                                  \
                    size_t g = c / S.dg;                                                            \
                    double acc = beta[g * S.n + t];                                                 \
                    for (size_t a = 0; a < S.K; a++) {                                              \
                        if (c + a < g * S.dg + S.K - 1)                                             \
                            continue; /* input channel below the group's first */                   \
                        size_t ci = c + a - (S.K - 1);                                              \
                        const T *wr = w + (g * S.K + a) * S.n;                                      \
                        for (size_t s = 0; s <= t; s++)                                             \
                            acc += (double)wr[t - s] * u[(b * S.n + s) * S.d + ci];                 \
                    }                                                                               \
                    y[(b * S.n + t) * S.d + c] = (T)acc;                                            \
                }                                                                                   \
    }

/* du[b, s, c'] = sum_a sum_{t>=s} w[g, a, t-s] gy[b, t, c], c = c'+(K-1)-a, g = g(c'),
 *                over the c inside group g
 * dw[g, a, k]  = sum_b sum_{c in g} sum_{t>=k} gy[b, t, c] u[b, t-k, c-(K-1)+a],
 *                over the input channels c-(K-1)+a inside group g
 * dbeta[g, t]  = sum_b sum_{c in g} gy[b, t, c] */
#define REF_BACKWARD(NAME, T)                                                                       \
    void NAME(const tmm_toeplitz_desc *desc, const T *u, const T *w, const T *gy, T *du, T *dw,     \
              T *dbeta)                                                                             \
    {                                                                                               \
        shape S = shape_of(desc);                                                                   \
        if (du)                                                                                     \
            for (size_t b = 0; b < S.B; b++)                                                        \
                for (size_t s = 0; s < S.n; s++)                                                    \
                    for (size_t ci = 0; ci < S.d; ci++) {                                           \
                        double acc = 0;                                                             \
                        for (size_t a = 0; a < S.K; a++) {                                          \
                            size_t c = ci + (S.K - 1) - a, g = ci / S.dg;                           \
                            if (c >= (g + 1) * S.dg)                                                \
                                continue; /* output channel past the group's last */               \
                            const T *wr = w + (g * S.K + a) * S.n;                                  \
                            for (size_t t = s; t < S.n; t++)                                        \
                                acc += (double)wr[t - s] * gy[(b * S.n + t) * S.d + c];             \
                        }                                                                           \
                        du[(b * S.n + s) * S.d + ci] = (T)acc;                                      \
                    }                                                                               \
        if (dw)                                                                                     \
            for (size_t g = 0; g < S.G; g++)                                                        \
                for (size_t a = 0; a < S.K; a++)                                                    \
                    for (size_t k = 0; k < S.n; k++) {                                              \
                        double acc = 0;                                                             \
                        for (size_t b = 0; b < S.B; b++)                                            \
                            for (size_t c = g * S.dg; c < (g + 1) * S.dg; c++) {                    \
                                if (c + a < g * S.dg + S.K - 1)                                     \
                                    continue;                                                       \
                                size_t ci = c + a - (S.K - 1);                                      \
                                for (size_t t = k; t < S.n; t++)                                    \
                                    acc += (double)gy[(b * S.n + t) * S.d + c] *                    \
                                           u[(b * S.n + t - k) * S.d + ci];                         \
                            }                                                                       \
                        dw[(g * S.K + a) * S.n + k] = (T)acc;                                       \
                    }                                                                               \
        if (dbeta)                                                                                  \
            for (size_t g = 0; g < S.G; g++)                                                        \
                for (size_t t = 0; t < S.n; t++) {                                                  \
                    double acc = 0;                                                                 \
                    for (size_t b = 0; b < S.B; b++)                                                \
                        for (size_t c = g * S.dg; c < (g + 1) * S.dg; c++)                          \
                            acc += gy[(b * S.n + t) * S.d + c];                                     \
                    dbeta[g * S.n + t] = (T)acc;                                                    \
                }                                                                                   \
    }

REF_FORWARD(ref_toeplitz_forward_d, double)
REF_FORWARD(ref_toeplitz_forward, float)
REF_BACKWARD(ref_toeplitz_backward_d, double)
REF_BACKWARD(ref_toeplitz_backward, float)
