/* The Mamba 2 selective state-space op (SSD, Dao & Gu 2024;
 * /work/shared/baselines-spec.md section 5, docs/baselines.md): one layer's
 * state-space scan for training (the chunked SSD algorithm, forward and
 * backward) and for decoding (the state after a prompt, one step). Its
 * meaning is the C reference in src/ref/ref_ssd.c (the plain recurrence).
 *
 * Shapes (float32, position-major; rows = B*n, row (b, t) = b*n + t; the
 * sequences never mix):
 *   xbc  [rows, Cx], Cx = nh*P + 2N: columns h*P .. h*P+P-1 are xs of head h,
 *        then Bt (N columns), then Ct (N columns)
 *   dt   [rows, nh]  (positive: the model applies softplus before)
 *   A_log, D  [nh]
 *   y, dy [rows, nh*P] (head h: columns h*P .. h*P+P-1)
 * Per sequence and head h, with A_h = -exp(A_log_h), a_t = dt_{t,h} A_h <= 0
 * and the state S_t (P x N), S_{-1} = 0:
 *   S_t = exp(a_t) S_{t-1} + dt_{t,h} xs_{h,t} Bt_tᵀ
 *   y_{h,t} = S_t Ct_t + D_h xs_{h,t}
 *
 * Chunked form (training): positions are cut into NC = ceil(n / Q) chunks of
 * Q = desc->chunk positions (the last may be shorter). With cs_t the
 * cumulative sum of a inside t's chunk (from its first position t0 to t,
 * inclusive; <= 0) and Sp_j the state before chunk j (Sp_0 = 0):
 *   M[t,s] = exp(cs_t - cs_s) dt_s (Ct_t·Bt_s) for t0 <= s <= t (0 for s > t)
 *   y_t = sum_s M[t,s] xs_s + exp(cs_t) Sp_j Ct_t + D xs_t
 *   Sp_{j+1} = exp(cs_last) Sp_j + sum_s exp(cs_last - cs_s) dt_s xs_s Bt_sᵀ
 * Decays are exp of segment sums cs_t - cs_s <= 0 (cs kept as a float pair
 * hi + lo, a compensated sum, so that differences of long sums of large
 * decays stay accurate), never exp of a positive number, never a division.
 *
 * Backward (dy given): dS_t = dL/dS_t = sum_{t'>=t} exp(seg(t',t)) dy_t' Ct_t'ᵀ,
 *   dxs_t = D dy_t + dt_t dS_t Bt_t
 *   dBt_t = sum_h dt_t dS_tᵀ xs_t          dCt_t = sum_h S_tᵀ dy_t
 *   ddt_t = u_t + A da_t,  u_t = xs_tᵀ dS_t Bt_t,  da_t = dL/da_t
 *   dA_log = A sum_{b,t} dt_t da_t,  dD = sum_{b,t} dy_t·xs_t
 * computed chunk by chunk like the forward: G_j = dL/dSp_j passed from the
 * last chunk back (G_{j+1} = exp(cs_last of j+1) G_{j+2} + sum_{t in j+1}
 * exp(cs_t) dy_t Ct_tᵀ); inside chunk j the products
 * K[t,s] = exp(cs_t - cs_s) dy_t·xs_s (s < t). The decays' gradient comes
 * from the chunk-local cumulative sums: a_t moves cs_r for t <= r <= last
 * only, so
 *   da_t = <G_{j+1}, Sp_{j+1}> + sum_{t <= r <= last} (r'_r - dt_r u'_r)
 * with r'_r = dy_r·(y_r - D xs_r) and u'_r = u_r both less their s = t
 * term dt_r (Ct_r·Bt_r)(dy_r·xs_r), which cancels exactly (and is the
 * largest under strong decays); no sum runs over more than one chunk, so
 * no long sums of large terms cancel. The parameters' gradients are sums of
 * per-chunk partial sums in a fixed order.
 *
 * Workspaces (floats; every region starts at a multiple of TMM_SSD_ALIGN):
 *   saved (tmm_ssd_saved_floats): written by the forward, read by the
 *     backward with the same desc and inputs: cs [B, nh, n, 4] (hi, lo,
 *     dt_t exp(cs_last - cs_t), exp(cs_t)); Sp [B, nh, NC, P, N]; the state
 *     after the last position [B, nh, P, N]; M [B, nh, n, Q]. About
 *     B nh n (4 + PN/Q + Q) floats: for P = N = 64, Q = 32 about 2.6 times y.
 *   backward scratch (tmm_ssd_backward_scratch_floats): G_{j+1} per chunk
 *     [B, nh, NC, P, N]; a carry [B, nh, P, N]; K [B, nh, n, Q]; dS_tᵀ xs_t
 *     and S_tᵀ dy_t less their s = t terms [B, nh, n, N] each; (u_t, the
 *     summed part of da_t, dy_t·xs_t) [B, nh, n, 3]; <G_{j+1}, Sp_{j+1}> by
 *     rows [B, nh, NC, P]; partial sums [B, nh, NC, 2]; [nh, 2]. About
 *     B nh n (Q + 2N + PN/Q + P/Q + 3) floats: for these 4.6 times y.
 *   state workspace (tmm_ssd_state_workspace_floats): the first three
 *     regions of saved (cs, Sp, last state); a saved view may be passed.
 *
 * Decoding: a state per sequence, S [B, nh, P, N] (S[b,h,p,c] at
 * ((b*nh + h)*P + p)*N + c). tmm_op_ssd_state sets it from a prompt;
 * tmm_op_ssd_step adds one position: O(nh P N) per token.
 *
 * Loop bound (lavapipe's loop cap, shaders/loop_limit.glsl): the scans over
 * the chunks (forward and backward) and the sums of the parameters'
 * partial sums over (sequence, chunk) run in host-dispatched passes of at
 * most TMM_MAX_LOOP steps (or the device's tuning.loop_budget when lower);
 * every other invocation loops at most max(2Q + 2P + 2BK, Q + N + BK,
 * P + 3N, N + 9 nh) <= 2560 times (BK <= 16). No invocation loops more than 4096 times
 * for any n.
 *
 * Blocking: the chunk products are register-blocked (BK x BK outputs per
 * invocation: rows of a chunk by channels or state columns; BK = 16 on CPU
 * devices, 8 on GPUs, tuning.ssd_block in tests), no shared memory, no
 * barriers.
 *
 * Determinism: no atomics; every sum runs in a fixed order (sums over heads
 * in increasing h): the same inputs give the same bits on every run.
 *
 * Views: any float offset; the sequences are dispatched in groups whose
 * bindings fit in maxStorageBufferRange (one sequence's xbc, M, Sp, ... must
 * fit: else TMM_ERR_UNSUPPORTED). Outputs must not overlap any other
 * argument (checked). */
#ifndef TMM_OPS_SSD_H
#define TMM_OPS_SSD_H

#include <stdbool.h>

#include "recorder.h"

#define TMM_SSD_CHUNK 32u          /* Q when desc->chunk is 0 (faster than 64 on lavapipe) */
#define TMM_SSD_MAX_CHUNK 256u     /* Q */
#define TMM_SSD_MAX_HEAD_DIM 256u  /* P */
#define TMM_SSD_MAX_STATE 256u     /* N */
#define TMM_SSD_MAX_HEADS 256u     /* nh */
#define TMM_SSD_ALIGN 64u          /* floats: workspace regions start at multiples of 256 bytes */

typedef struct tmm_ssd_desc {
    uint32_t batch;    /* B >= 1 (the step: rows) */
    uint32_t n;        /* positions per sequence >= 1 (the step ignores it) */
    uint32_t heads;    /* nh >= 1 */
    uint32_t head_dim; /* P >= 1 */
    uint32_t state;    /* N >= 1 */
    uint32_t chunk;    /* Q, 1..TMM_SSD_MAX_CHUNK; 0: TMM_SSD_CHUNK (the step ignores it) */
} tmm_ssd_desc;

/* Checks a descriptor without recording (r may be NULL: shape checks only;
 * with r, also that one sequence's bindings fit the device). */
tmm_status tmm_ssd_check(const tmm_recorder *r, const tmm_ssd_desc *desc);

/* Floats of the workspaces (see above); 0 for an invalid desc. */
uint64_t tmm_ssd_saved_floats(const tmm_ssd_desc *desc);
uint64_t tmm_ssd_backward_scratch_floats(const tmm_ssd_desc *desc);
uint64_t tmm_ssd_state_workspace_floats(const tmm_ssd_desc *desc);

/* y [rows, nh*P] and saved (both overwritten) from xbc, dt, A_log, D. */
tmm_status tmm_op_ssd_forward(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view xbc, tmm_view dt, tmm_view A_log,
                              tmm_view D, tmm_view y, tmm_view saved);

/* From the forward's inputs and saved and dy [rows, nh*P]: dxbc [rows, Cx]
 * and ddt [rows, nh] are overwritten; dA_log, dD [nh] are added to
 * (accumulate) or overwritten. scratch is overwritten. */
tmm_status tmm_op_ssd_backward(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view xbc, tmm_view dt, tmm_view A_log,
                               tmm_view D, tmm_view saved, tmm_view dy, tmm_view scratch, tmm_view dxbc,
                               tmm_view ddt, tmm_view dA_log, tmm_view dD, bool accumulate);

/* The decoding state after a prompt: S [B, nh, P, N] (overwritten) = the
 * state after positions 0 .. len[b]-1 of sequence b of xbc, dt (zero for
 * len[b] = 0; a value above n counts as n). len: a buffer of B uint32
 * values. work: tmm_ssd_state_workspace_floats floats, overwritten. */
tmm_status tmm_op_ssd_state(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view len, tmm_view xbc, tmm_view dt,
                            tmm_view A_log, tmm_view work, tmm_view S);

/* One decoding step for desc->batch rows: xbc [batch, Cx], dt [batch, nh];
 * S [batch, nh, P, N] updated in place (S = exp(dt A) S + dt xs Btᵀ), then
 * y [batch, nh*P] = S Ct + D xs (overwritten). n and chunk are ignored. */
tmm_status tmm_op_ssd_step(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view xbc, tmm_view dt, tmm_view A_log,
                           tmm_view D, tmm_view S, tmm_view y);

#endif
