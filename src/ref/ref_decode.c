#include "ref/ref_decode.h"

#include <string.h>

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
