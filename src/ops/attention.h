/* Causal softmax attention, multi-head, optionally over a sliding window,
 * forward and backward, behind one interface with a choice of implementation
 * (for the benchmark against Toeplitz mixing and the transformer baselines,
 * docs/baselines.md). Its meaning is the C reference in
 * src/ref/ref_attention.c. Cached decoding: ops/attention_step.h.
 *
 * Shapes (float32, row-major, position-major like the Toeplitz op):
 *   q, k, v, o, dout, dq, dk, dv   [B, n, d]   element (b, t, c) at (b*n + t)*d + c
 * H heads of dh = d/H contiguous channels (head h: channels h*dh .. h*dh+dh-1).
 *
 * The keys of query t, its window: A(t) = { s : t - W < s <= t } for a window
 * W >= 1, A(t) = { s : s <= t } for W = 0 (full causal attention; W >= n is
 * the same and runs as W = 0, bit for bit).
 *
 *   S[b,h,t,s] = scale * sum_{c<dh} q[b,t,h*dh+c] k[b,s,h*dh+c],  scale = 1/sqrt(dh)
 *   P[b,h,t,s] = exp(S[b,h,t,s] - lse[b,h,t]) for s in A(t) (0 elsewhere),
 *   lse[b,h,t] = log sum_{s in A(t)} exp(S[b,h,t,s])
 *   o[b,t,h*dh+c] = sum_{s in A(t)} P[b,h,t,s] v[b,s,h*dh+c]
 *
 * Backward, with dout = dL/do and Delta[b,h,t] = sum_c dout[b,t,hc] o[b,t,hc]:
 *   dS[t,s] = P[t,s] (sum_c dout[t,hc] v[s,hc] - Delta[t])
 *   dq[t,hc] = scale sum_{s in A(t)} dS[t,s] k[s,hc]
 *   dk[s,hc] = scale sum_{t : s in A(t)} dS[t,s] q[t,hc]
 *   dv[s,hc] = sum_{t : s in A(t)} P[t,s] dout[t,hc]
 * Gradients are written, not accumulated into. No atomics; every sum runs in
 * a fixed order: the same inputs give the same bits on every run.
 *
 * The forward saves what the backward needs in `saved`
 * (tmm_op_attention_saved floats): MEMORY_EFFICIENT saves lse [B, H, n];
 * NAIVE saves lse followed by P [B, H, n, n]. The backward reads o and saved
 * as the forward left them (same desc) and uses `scratch`
 * (tmm_op_attention_backward_scratch floats).
 *
 * Cost and loop bound (lavapipe's loop cap, shaders/loop_limit.glsl):
 * MEMORY_EFFICIENT runs over the key (or query) positions in host-dispatched
 * passes of at most TMM_MAX_LOOP positions, so no invocation loops more than
 * 4096 times for any n. With a window W < n it costs O(n W d): the passes
 * cover the W offsets of each row's window (ceil(W / 4096) passes over all
 * rows), and no kernel reads keys or values (forward, dq) or queries, dout,
 * lse or Delta (dk, dv) of positions outside the windows it computes. NAIVE
 * masks the n x n matrices; it loops over whole rows (3 loops over a row in
 * its softmax) and so accepts n <= TMM_ATTENTION_NAIVE_MAX_N only; its n x n
 * matrices must fit in a binding anyway.
 *
 * Views: every view must start at a multiple of the device's
 * minStorageBufferOffsetAlignment (they are bound directly) and each tensor
 * must fit in maxStorageBufferRange (else TMM_ERR_UNSUPPORTED); n < 2^31.
 * Outputs must not overlap inputs (not checked). */
#ifndef TMM_OPS_ATTENTION_H
#define TMM_OPS_ATTENTION_H

#include "recorder.h"

typedef enum tmm_attention_impl {
    TMM_ATTENTION_AUTO = 0,         /* MEMORY_EFFICIENT */
    TMM_ATTENTION_NAIVE,            /* materializes scores/probabilities [B, H, n, n]: for checking */
    TMM_ATTENTION_MEMORY_EFFICIENT, /* online softmax, no n x n matrix; the backward recomputes scores */
} tmm_attention_impl;

#define TMM_ATTENTION_MAX_HEAD_DIM 128u /* dh = d/H, kept in registers */
#define TMM_ATTENTION_NAIVE_MAX_N 1024u /* 3 * n loop iterations per softmax row <= 4096 */

typedef struct tmm_attention_desc {
    uint32_t batch; /* B >= 1 */
    uint32_t n;     /* sequence length >= 1 */
    uint32_t d;     /* channels >= 1 */
    uint32_t heads; /* H, divides d; 0 counts as 1 */
    tmm_attention_impl impl;
    uint32_t window; /* W: keys t-W < s <= t; 0 (or W >= n): full causal attention */
} tmm_attention_desc;

const char *tmm_attention_impl_name(tmm_attention_impl impl);

/* Checks a descriptor without recording (r may be NULL: shape checks only). */
tmm_status tmm_attention_check(const tmm_recorder *r, const tmm_attention_desc *desc);

/* Floats the forward saves for the backward (see above). */
uint64_t tmm_op_attention_saved(const tmm_attention_desc *desc);
/* Floats of scratch the backward needs. */
uint64_t tmm_op_attention_backward_scratch(const tmm_attention_desc *desc);

/* o (and saved) from q, k, v. */
tmm_status tmm_op_attention_forward(tmm_recorder *r, const tmm_attention_desc *desc, tmm_view q, tmm_view k,
                                    tmm_view v, tmm_view o, tmm_view saved);

/* dq, dk, dv from q, k, v, the forward's o and saved, and dout. */
tmm_status tmm_op_attention_backward(tmm_recorder *r, const tmm_attention_desc *desc, tmm_view q, tmm_view k,
                                     tmm_view v, tmm_view o, tmm_view saved, tmm_view dout, tmm_view scratch,
                                     tmm_view dq, tmm_view dk, tmm_view dv);

/* A MEMORY_EFFICIENT pass covers at most TMM_MAX_LOOP positions (window
 * offsets with a window), or the device's tuning.loop_budget when lower
 * (tests: the multi-pass path on short sequences). */

#endif
