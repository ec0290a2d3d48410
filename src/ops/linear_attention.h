/* Causal linear attention (Katharopoulos et al. 2020; docs/baselines.md,
 * section 3): chunked forward and backward for training, the prefill state
 * and the constant-state decoding step. Its meaning is the C reference in
 * src/ref/ref_linear_attention.c (the plain recurrence).
 *
 * Shapes (float32, position-major like ops/attention.h):
 *   q, k, v, y, dy, dq, dk, dv   [B, n, d]   element (b, t, c) at (b*n + t)*d + c
 * H heads of D = dh = d/H contiguous channels (head h: channels h*D .. h*D+D-1).
 * Per (b, h), with f(x) = elu(x) + 1 = (x > 0 ? x + 1 : exp(x)) elementwise on
 * that head's D channels, fq_t = f(q_t), fk_s = f(k_s):
 *   S_t = sum_{s<=t} fk_s v_sᵀ  (D x D)     z_t = sum_{s<=t} fk_s  (D)
 *   a_t = S_tᵀ fq_t,  b_t = fq_t·z_t + eps (eps = TMM_LINATTN_EPS),  y_t = a_t / b_t
 * Backward, with da_t = dy_t / b_t and db_t = -(dy_t·y_t) / b_t:
 *   dfq_t = S_t da_t + z_t db_t
 *   dfk_s = Sb_s v_s + zb_s,  dv_s = Sb_sᵀ fk_s,  Sb_s = sum_{t>=s} fq_t da_tᵀ, zb_s = sum_{t>=s} fq_t db_t
 *   dq = dfq * f'(q), dk = dfk * f'(k),  f'(x) = (x > 0 ? 1 : exp(x)).
 *
 * Chunked form (training): positions are cut into NC = ceil(n / C) chunks of
 * C = desc->chunk positions (the last may be shorter). A row t of chunk j uses
 * the state after chunk j-1 plus the masked quadratic product inside chunk j
 * (fq_t·fk_s for jC <= s <= t): O(n·C·D + n·D²) per head, no n x n matrix.
 * The backward mirrors it with the states summed from the end.
 *
 * saved (tmm_op_linear_attention_saved floats; the forward writes it, the
 * backward reads it with the same desc), four regions, each starting at a
 * multiple of TMM_LINATTN_ALIGN floats:
 *   Sc [B, H, NC, D, D]  Sc[b,h,j] = S_t at the last position t of chunk j
 *   zc [B, H, NC, D]     zc[b,h,j] = z_t likewise
 *   den [B, H, n]        b_t (the denominators, eps included)
 *   W [B, H, n, C]       W[b,h,t,i] = fq_t·fk_s, s = jC + i <= t (entries with s > t unset)
 * about B n d (D/C + C/D) + B H n floats: two activations for C = D.
 * Backward scratch (tmm_op_linear_attention_backward_scratch floats), same
 * alignment: the reverse states at the first position of each chunk,
 * Sb [B, H, NC, D, D] (sum_{t >= jC} fq_t da_tᵀ) and zb [B, H, NC, D]; db
 * [B, H, n]; U [B, H, n, C] (dy_t·v_s inside the chunks); y [B, n, d]
 * recomputed.
 *
 * Decoding: a state per sequence, S [B, H, D, D] (S[b,h,c1,c2] at
 * ((b*H + h)*D + c1)*D + c2) and z [B, H, D]. tmm_op_linear_attention_state
 * sets it from a prefill; tmm_op_linear_attention_step adds one position and
 * writes its output: O(D²) per head whatever the position.
 *
 * Loop bound (lavapipe's loop cap, shaders/loop_limit.glsl): the sums of the
 * states over positions run in host-dispatched passes of at most TMM_MAX_LOOP
 * positions (or the device's tuning.loop_budget when lower); the other
 * kernels loop at most 2 D + C <= 1280 times (per row, over a head's channels
 * and a chunk's positions; a row's output channels are split into blocks of
 * 16 kept in registers). No invocation loops more than 4096 times for any n.
 *
 * Determinism: no atomics; every sum runs in a fixed order (states over
 * positions in increasing order, the backward's in decreasing order): the
 * same inputs give the same bits on every run.
 *
 * Views: every view is bound directly, so it must start at a multiple of the
 * device's minStorageBufferOffsetAlignment (at least 16 bytes), and each
 * tensor must fit in maxStorageBufferRange (else TMM_ERR_UNSUPPORTED).
 * Outputs must not overlap any other argument (checked). */
#ifndef TMM_OPS_LINEAR_ATTENTION_H
#define TMM_OPS_LINEAR_ATTENTION_H

#include "recorder.h"

#define TMM_LINATTN_EPS 1e-6f        /* added to the denominator */
#define TMM_LINATTN_CHUNK 64u        /* C when desc->chunk is 0 */
#define TMM_LINATTN_MAX_CHUNK 1024u  /* 2 D + C loop iterations of a row stay below the loop cap */
#define TMM_LINATTN_MAX_HEAD_DIM 128u /* D = d/H (the step loops D + ceil(D/16) D times) */
#define TMM_LINATTN_ALIGN 64u        /* floats: saved and scratch regions start at multiples of 256 bytes */

typedef struct tmm_linear_attention_desc {
    uint32_t batch; /* B >= 1 */
    uint32_t n;     /* sequence length >= 1 (the step ignores it) */
    uint32_t d;     /* channels >= 1 */
    uint32_t heads; /* H, divides d; 0 counts as 1 */
    uint32_t chunk; /* C, 1..TMM_LINATTN_MAX_CHUNK; 0: TMM_LINATTN_CHUNK (state and step ignore it) */
} tmm_linear_attention_desc;

/* Checks a descriptor without recording (r may be NULL: shape checks only). */
tmm_status tmm_linear_attention_check(const tmm_recorder *r, const tmm_linear_attention_desc *desc);

/* Floats of saved (the forward's output for the backward), and of the
 * backward's scratch (see above); 0 for an invalid desc. */
uint64_t tmm_op_linear_attention_saved(const tmm_linear_attention_desc *desc);
uint64_t tmm_op_linear_attention_backward_scratch(const tmm_linear_attention_desc *desc);

/* y [B, n, d] and saved (both overwritten) from q, k, v [B, n, d]. */
tmm_status tmm_op_linear_attention_forward(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view q,
                                           tmm_view k, tmm_view v, tmm_view y, tmm_view saved);

/* dq, dk, dv [B, n, d] (overwritten) from q, k, v, the forward's saved and
 * dy = dL/dy; scratch is overwritten. */
tmm_status tmm_op_linear_attention_backward(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view q,
                                            tmm_view k, tmm_view v, tmm_view saved, tmm_view dy, tmm_view scratch,
                                            tmm_view dq, tmm_view dk, tmm_view dv);

/* The decoding state after a prefill: S [B, H, D, D] and z [B, H, D]
 * (overwritten) summed over the positions s < len[b] of k, v [B, n, d]; len
 * is a buffer of B uint32 values (a value above n counts as n; 0 gives a zero
 * state). desc->chunk is ignored. */
tmm_status tmm_op_linear_attention_state(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view len,
                                         tmm_view k, tmm_view v, tmm_view S, tmm_view z);

/* One decoding step: q, k, v rows [B, d] of one new position per sequence;
 * S += fk vᵀ, z += fk (updated in place), then y [B, d] = Sᵀfq / (fq·z + eps)
 * (overwritten). desc->n and desc->chunk are ignored. */
tmm_status tmm_op_linear_attention_step(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view q,
                                        tmm_view k, tmm_view v, tmm_view S, tmm_view z, tmm_view y);

#endif
