/* C reference of the cached-decoding ops (src/ops/decode_ops.h). */
#ifndef TMM_REF_DECODE_H
#define TMM_REF_DECODE_H

#include <stdint.h>

#include "ops/toeplitz.h"

/* cache[b, pos[b], :] = x[b, :]. */
void ref_cache_write(const tmm_toeplitz_desc *desc, const uint32_t *pos, const float *x, float *cache);

/* y[b, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * cache[b, s, c-(K-1)+a],
 * t = pos[b], summed in double and rounded once. */
void ref_toeplitz_step(const tmm_toeplitz_desc *desc, const uint32_t *pos, const float *cache, const float *w,
                       const float *beta, float *y);

#endif
