/* Distilled decoding of a Toeplitz layer (docs/model.md "Distilled
 * decoding"): each Toeplitz vector w[g, a, :] is an exact head of m lags and
 * a tail of M modes (tmm distill), ŵ[m + j] = Σ_i Re(res_i · pole_i^j), so
 * the output of a new position costs O(K·(m + M)) per channel instead of
 * O(K·t). Shapes follow ops/decode_ops.h (cache [B, n, d], x and y [B, d],
 * w [G, K, n], beta [G, n]) plus
 *   modes  [G, K, M] vec4: (pole re, pole im, res re, res im); unused modes 0
 *   state  [B, d, K, M] vec2: per output channel c and tap a, the complex
 *          state z_i = Σ_{s<=t-m} pole_i^(t-m-s) · u[s, c-(K-1)+a] of the
 *          next position t (taps below the group's first channel: 0)
 * pos and len: B uint32 each, pos[b] < n, 1 <= len[b] <= n (the kernels
 * trust them). Meaning: ref_tz_ssm_step / ref_tz_ssm_prefill
 * (src/ref/ref_decode.h). modes, state, w and beta are bound as given. */
#ifndef TMM_OPS_TZ_SSM_H
#define TMM_OPS_TZ_SSM_H

#include "toeplitz.h"

typedef struct tmm_tz_ssm_desc {
    tmm_toeplitz_desc tz;  /* batch, n, d, groups, taps */
    uint32_t head;         /* m: 1 .. n */
    uint32_t modes;        /* M: 0 .. */
} tmm_tz_ssm_desc;

/* Checks a descriptor: the Toeplitz shape, 1 <= head <= n, and the step's
 * loop budget K·(m - 1 + M) <= TMM_MAX_LOOP (TMM_ERR_UNSUPPORTED naming a
 * smaller --order or --head). */
tmm_status tmm_tz_ssm_check(const tmm_tz_ssm_desc *desc);

/* Floats of the state: B·d·K·M·2. */
uint64_t tmm_tz_ssm_state_floats(const tmm_tz_ssm_desc *desc);

/* y[b] = the layer's output at t = pos[b] from x[b] (the input of position
 * t), the cache (positions < t) and the state; then the state moves to t+1
 * and cache[b, t, :] = x[b]. */
tmm_status tmm_op_tz_ssm_step(tmm_recorder *r, const tmm_tz_ssm_desc *desc, tmm_view pos, tmm_view x,
                              tmm_view cache, tmm_view w, tmm_view beta, tmm_view modes, tmm_view state, tmm_view y);

/* The state of position len[b] from the cached inputs of positions < len[b]
 * (a prefill), in passes of TMM_MAX_LOOP positions. */
tmm_status tmm_op_tz_ssm_prefill(tmm_recorder *r, const tmm_tz_ssm_desc *desc, tmm_view len, tmm_view cache,
                                 tmm_view modes, tmm_view state);

#endif
