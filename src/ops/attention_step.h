/* Cached decoding of causal softmax attention (ops/attention.h): one new
 * position per sequence and step, every sequence b of a batch at its own
 * position t = pos[b]. Meaning: ref_attention_step (src/ref/ref_attention.h).
 *
 * The cache holds C positions per sequence (capacity), float32:
 *   kcache, vcache   [B, C, d]   position s of sequence b in slot s mod C,
 *                                element (b, slot, c) at (b*C + slot)*d + c
 * Full attention: C = n (the slot of s is s; the model's k, v activations
 * [B, n, d] of a prefill serve as the cache). Window W: C = W (a ring buffer
 * of the last W positions), or any C >= W.
 *
 *   q, o    [B, d]   H heads of dh = d/H channels, as in attention.h
 *   o[b, h*dh+c] = sum_{s=lo..t} P[s] vcache[b, s mod C, h*dh+c],
 *   P[s] = softmax_s(scale * sum_{c<dh} q[b, h*dh+c] kcache[b, s mod C, h*dh+c]),
 *   lo = max(0, t - W + 1) (W = 0: lo = 0), scale = 1/sqrt(dh):
 * row t of tmm_op_attention_forward with the same window. O(min(t+1, W) d)
 * per sequence.
 *
 * Contract (not checked; the kernels read and write only inside the views
 * whatever the values): pos and len are buffers of B uint32; the positions
 * lo..t must be the last ones written to their slots, i.e. min(t+1, W) <= C
 * (W = 0: t < C).
 *
 * Flash decoding: the positions are cut into chunks of
 * TMM_ATTENTION_STEP_CHUNK (at most the device's tuning.loop_budget when
 * lower) computed in parallel, each giving a partial max, sum and weighted
 * value per head; a combine pass merges them in order (in several passes of
 * at most loop_budget chunks when there are more). No invocation loops more
 * than TMM_MAX_LOOP times, for any t. No atomics, fixed order: the same inputs
 * give the same bits on every run.
 *
 * Views may start at any float (they are bound from the aligned offset
 * before them). pos, len, q, k and v of a step, o and scratch must each fit
 * one binding (maxStorageBufferRange); the caches (and cache_fill's k, v) are
 * bound per group of whole sequences, so only one sequence's C x d (n x d)
 * floats must fit; element indices are 32-bit (C d, n d < 2^31). Outputs
 * must not overlap inputs (not checked). */
#ifndef TMM_OPS_ATTENTION_STEP_H
#define TMM_OPS_ATTENTION_STEP_H

#include "attention.h"

#define TMM_ATTENTION_STEP_CHUNK 256u /* positions per chunk of the step */

typedef struct tmm_attention_step_desc {
    uint32_t batch;    /* B >= 1 */
    uint32_t d;        /* channels >= 1 */
    uint32_t heads;    /* H, divides d; 0 counts as 1; d/H <= TMM_ATTENTION_MAX_HEAD_DIM */
    uint32_t capacity; /* C >= 1 positions per sequence in the cache */
    uint32_t window;   /* W: attend to t-W+1 .. t; 0: to 0 .. t */
} tmm_attention_step_desc;

/* Checks a descriptor (r may be NULL: shape checks only). */
tmm_status tmm_attention_step_check(const tmm_recorder *r, const tmm_attention_step_desc *desc);

/* kcache[b, pos[b] mod C, :] = k[b, :] and vcache[b, pos[b] mod C, :] = v[b, :]
 * (k, v [B, d]); other slots are left as they are. */
tmm_status tmm_op_attention_cache_write(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos,
                                        tmm_view k, tmm_view v, tmm_view kcache, tmm_view vcache);

/* After a prefill of len[b] <= n positions (k, v [B, n, d], e.g. the
 * forward's activations): kcache[b, s mod C, :] = k[b, s, :] (and v) for
 * s = max(0, len[b] - C) .. len[b] - 1, the positions a ring cache keeps;
 * other slots are left as they are. (With C = n the activations themselves
 * can serve as the cache.) len[b] > n counts as n. */
tmm_status tmm_op_attention_cache_fill(tmm_recorder *r, const tmm_attention_step_desc *desc, uint32_t n,
                                       tmm_view len, tmm_view k, tmm_view v, tmm_view kcache, tmm_view vcache);

/* Floats of scratch tmm_op_attention_step needs on dev (0 when one chunk
 * covers min(W, C) positions, or for an invalid descriptor). */
uint64_t tmm_op_attention_step_scratch(const tmm_device *dev, const tmm_attention_step_desc *desc);

/* o [B, d] (written) from q [B, d] at positions pos and the caches (see
 * above). scratch: tmm_op_attention_step_scratch floats (may be an empty
 * view when that is 0). */
tmm_status tmm_op_attention_step(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos, tmm_view q,
                                 tmm_view kcache, tmm_view vcache, tmm_view scratch, tmm_view o);

/* tmm_op_attention_cache_write of k, v [B, d], then tmm_op_attention_step,
 * in the step's dispatches (the part kernel writes each head's new rows in
 * the invocation that reads that slot): the same caches and o. */
tmm_status tmm_op_attention_step_write(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos,
                                       tmm_view q, tmm_view k, tmm_view v, tmm_view kcache, tmm_view vcache,
                                       tmm_view scratch, tmm_view o);

#endif
