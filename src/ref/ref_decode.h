/* C reference of the cached-decoding ops (src/ops/decode_ops.h). */
#ifndef TMM_REF_DECODE_H
#define TMM_REF_DECODE_H

#include <stdint.h>

#include "ops/decode_ops.h"
#include "ops/toeplitz.h"
#include "ops/tz_ssm_ops.h"

/* cache[b, pos[b], :] = x[b, :]. */
void ref_cache_write(const tmm_toeplitz_desc *desc, const uint32_t *pos, const float *x, float *cache);

/* y[b, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * cache[b, s, c-(K-1)+a],
 * t = pos[b], summed in double and rounded once. */
void ref_toeplitz_step(const tmm_toeplitz_desc *desc, const uint32_t *pos, const float *cache, const float *w,
                       const float *beta, float *y);

/* Distilled decoding (ops/tz_ssm_ops.h), in double, states and outputs
 * rounded to float: one step at pos[b] (updates state and cache) ... */
void ref_tz_ssm_step(const tmm_tz_ssm_desc *desc, const uint32_t *pos, const float *x, float *cache, const float *w,
                     const float *beta, const float *modes, float *state, float *y);
/* ... and the state after a prefill of len[b] positions (from the cache). */
void ref_tz_ssm_prefill(const tmm_tz_ssm_desc *desc, const uint32_t *len, const float *cache, const float *modes,
                        float *state);

/* One layer of tmm_op_linear_rows_group: W [out, in] ([2 out, in] for
 * SwiGLU), bias [out] or NULL, y [rows, out]. */
typedef struct ref_row_group {
    const float *w, *bias;
    float *y;
    size_t out;
    tmm_row_act act;
} ref_row_group;

/* The groups of tmm_op_linear_rows_group in double, each output rounded
 * once: x [rows, in] · Wᵀ + bias, then the group's activation (SWIGLU as
 * ref_swiglu_fwd_d, ROPE as ref_rope_d at positions pos [rows] of npos, heads
 * of dh channels, base TMM_ROPE_BASE; SOFTPLUS as ref_softplus_fwd_d). */
void ref_linear_rows_group(const float *x, size_t rows, size_t in, const ref_row_group *groups, size_t n,
                           const uint32_t *pos, size_t dh, size_t npos);

/* tmm_op_hyena_conv_step: ref_conv1d_step of each part q < 3 (u [3, B, d],
 * w [3d, K], bias [3d], window [3, B, K-1, d]), then u[0] = y_0 and
 * u[2] = y_2 ⊙ y_1 in float. */
void ref_hyena_conv_step(float *u, const float *w, const float *bias, const uint32_t *pos, size_t B, size_t d,
                         size_t K, float *window);

#endif
