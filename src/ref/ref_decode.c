#include "ref/ref_decode.h"

#include <stdlib.h>
#include <string.h>

#include "ops/llama_ops.h"
#include "ref/ref_llama.h"
#include "ref/ref_ssm_ops.h"

void ref_cache_write(const tmm_toeplitz_desc *desc, const uint32_t *pos, const float *x, float *cache)
{
    const uint64_t n = desc->n, d = desc->d;
    for (uint64_t b = 0; b < desc->batch; b++)
        memcpy(cache + (b * n + pos[b]) * d, x + b * d, d * sizeof *x);
}

void ref_toeplitz_step(const tmm_toeplitz_desc *desc, const uint32_t *pos, const float *cache, const float *w,
                       const float *beta, float *y)
{
    const uint64_t n = desc->n, d = desc->d;
    const uint32_t G = desc->groups ? desc->groups : 1, K = desc->taps ? desc->taps : 1;
    for (uint64_t b = 0; b < desc->batch; b++) {
        const uint64_t t = pos[b];
        for (uint64_t c = 0; c < d; c++) {
            const uint64_t g = c / (d / G);
            double acc = beta[g * n + t];
            for (uint32_t a = 0; a < K; a++) {
                int64_t ci = (int64_t)c - (int64_t)(K - 1) + a;
                if (ci < (int64_t)(g * (d / G)))
                    continue; /* below the group's first channel */
                for (uint64_t s = 0; s <= t; s++)
                    acc += (double)w[(g * K + a) * n + t - s] * cache[(b * n + s) * d + (uint64_t)ci];
            }
            y[b * d + c] = (float)acc;
        }
    }
}

/* The input channel of tap a for output channel c, or -1 below c's group. */
static int64_t tap_channel(const tmm_toeplitz_desc *td, uint64_t c, uint32_t a)
{
    const uint64_t gc = td->d / (td->groups ? td->groups : 1), K = td->taps ? td->taps : 1;
    const int64_t ci = (int64_t)c - (int64_t)(K - 1) + a;
    return ci < (int64_t)(c / gc * gc) ? -1 : ci;
}

void ref_tz_ssm_step(const tmm_tz_ssm_desc *desc, const uint32_t *pos, const float *x, float *cache, const float *w,
                     const float *beta, const float *modes, float *state, float *y)
{
    const tmm_toeplitz_desc *td = &desc->tz;
    const uint64_t n = td->n, d = td->d, M = desc->modes, m = desc->head;
    const uint32_t G = td->groups ? td->groups : 1, K = td->taps ? td->taps : 1;
    for (uint64_t b = 0; b < td->batch; b++) {
        const uint64_t t = pos[b];
        const float *cb = cache + b * n * d;
        for (uint64_t c = 0; c < d; c++) {
            const uint64_t g = c / (d / G);
            double acc = beta[g * n + t];
            for (uint32_t a = 0; a < K; a++) {
                const int64_t ci = tap_channel(td, c, a);
                if (ci < 0)
                    continue;
                const float *wr = w + (g * K + a) * n;
                for (uint64_t k = 0; k < m && k <= t; k++) /* the exact head */
                    acc += (double)wr[k] * (k == 0 ? x[b * d + (uint64_t)ci] : cb[(t - k) * d + (uint64_t)ci]);
                const float next = t + 1 < m ? 0.0f : m == 1 ? x[b * d + (uint64_t)ci] : cb[(t + 1 - m) * d + (uint64_t)ci];
                for (uint64_t j = 0; j < M; j++) {
                    const float *md = modes + ((g * K + a) * M + j) * 4;
                    float *z = state + (((b * d + c) * K + a) * M + j) * 2;
                    acc += (double)md[2] * z[0] - (double)md[3] * z[1];
                    if (t + 1 >= m) {
                        const double re = (double)md[0] * z[0] - (double)md[1] * z[1] + next;
                        const double im = (double)md[0] * z[1] + (double)md[1] * z[0];
                        z[0] = (float)re, z[1] = (float)im;
                    }
                }
            }
            y[b * d + c] = (float)acc;
        }
        memcpy(cache + (b * n + t) * d, x + b * d, d * sizeof *x);
    }
}

void ref_tz_ssm_prefill(const tmm_tz_ssm_desc *desc, const uint32_t *len, const float *cache, const float *modes,
                        float *state)
{
    const tmm_toeplitz_desc *td = &desc->tz;
    const uint64_t n = td->n, d = td->d, M = desc->modes, m = desc->head;
    const uint32_t G = td->groups ? td->groups : 1, K = td->taps ? td->taps : 1;
    for (uint64_t b = 0; b < td->batch; b++)
        for (uint64_t c = 0; c < d; c++)
            for (uint32_t a = 0; a < K; a++)
                for (uint64_t j = 0; j < M; j++) {
                    const int64_t ci = tap_channel(td, c, a);
                    const float *md = modes + (((c / (d / G)) * K + a) * M + j) * 4;
                    double re = 0, im = 0;
                    /* z = Σ_{s <= len-m} pole^(len-m-s) u[s] by Horner's rule */
                    for (uint64_t s = 0; ci >= 0 && s + m < (uint64_t)len[b] + 1; s++) {
                        const double u = cache[(b * n + s) * d + (uint64_t)ci];
                        const double nr = md[0] * re - md[1] * im + u;
                        im = md[0] * im + md[1] * re;
                        re = nr;
                    }
                    float *z = state + (((b * d + c) * K + a) * M + j) * 2;
                    z[0] = (float)re, z[1] = (float)im;
                }
}

void ref_linear_rows_group(const float *x, size_t rows, size_t in, const ref_row_group *groups, size_t n,
                           const uint32_t *pos, size_t dh, size_t npos)
{
    for (size_t i = 0; i < n; i++) {
        const ref_row_group *g = &groups[i];
        const size_t wr = g->act == TMM_ROW_ACT_SWIGLU ? 2 * g->out : g->out;
        double *a = malloc(rows * wr * sizeof *a), *y = malloc(rows * g->out * sizeof *y);
        if (!a || !y)
            abort();
        for (size_t r = 0; r < rows; r++)
            for (size_t o = 0; o < wr; o++) {
                double acc = g->bias ? g->bias[o] : 0;
                for (size_t k = 0; k < in; k++)
                    acc += (double)x[r * in + k] * g->w[o * in + k];
                a[r * wr + o] = acc;
            }
        if (g->act == TMM_ROW_ACT_SWIGLU)
            ref_swiglu_fwd_d(a, rows, g->out, y);
        else if (g->act == TMM_ROW_ACT_ROPE)
            ref_rope_d(a, rows, g->out, g->out / dh, npos, pos, TMM_ROPE_BASE, false, y);
        else if (g->act == TMM_ROW_ACT_SOFTPLUS)
            ref_softplus_fwd_d(a, NULL, rows, g->out, y);
        else
            memcpy(y, a, rows * g->out * sizeof *y);
        for (size_t k = 0; k < rows * g->out; k++)
            g->y[k] = (float)y[k];
        free(a), free(y);
    }
}

void ref_hyena_conv_step(float *u, const float *w, const float *bias, const uint32_t *pos, size_t B, size_t d,
                         size_t K, float *window)
{
    float *y = malloc(3 * B * d * sizeof *y);
    if (!y)
        abort();
    for (size_t q = 0; q < 3; q++)
        ref_conv1d_step(u + q * B * d, w + q * d * K, bias + q * d, pos, B, d, K, false, window + q * B * (K - 1) * d,
                        y + q * B * d);
    for (size_t i = 0; i < B * d; i++)
        u[i] = y[i], u[2 * B * d + i] = y[2 * B * d + i] * y[B * d + i];
    free(y);
}
