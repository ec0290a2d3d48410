/* Ops of the Llama-style transformer baseline (docs/baselines.md section 1):
 * RMSNorm, SwiGLU and RoPE, forward and backward. Their meaning is the double-precision C reference in
 * src/ref/ref_llama.h.
 *
 * Conventions (as src/ops/nn_ops.h):
 *   - Activations are row-major [rows, width] float32 (rows = B * n, or B
 *     while decoding). Row-indexed views (x, y, dy, dx, gu, dgu, rstd, pos)
 *     may start at any multiple of 4 bytes; they are bound in chunks of whole
 *     rows, each within maxStorageBufferRange, so a tensor may be larger than
 *     one binding (a single row larger than a binding is TMM_ERR_UNSUPPORTED).
 *   - Views bound as given: the gain g and its gradient dg, the RoPE table,
 *     and scratch. Their offsets must be multiples of the device's
 *     minStorageBufferOffsetAlignment (256 bytes suits every device), else
 *     TMM_ERR_INVALID_ARGUMENT; each must fit one binding.
 *   - Scratch views are sized by the matching *_scratch function (floats; 0
 *     means an empty view is fine); their contents are undefined afterwards.
 *   - Outputs must not overlap inputs except where an op says "may be the same
 *     view as" (then exactly the same offset); overlaps are
 *     TMM_ERR_INVALID_ARGUMENT.
 *   - Deterministic: no atomics, every sum in a fixed order, identical bits
 *     on every run, independent of how rows are split into bindings.
 *   - Loop cap (shaders/loop_limit.glsl): no invocation loops more than
 *     TMM_MAX_LOOP times; long rows are summed in chunks, long columns in
 *     segments, combined by further passes.
 */
#ifndef TMM_OPS_LLAMA_H
#define TMM_OPS_LLAMA_H

#include "ops.h"

/* ---- RMSNorm over the last axis --------------------------------------------
 *
 * Forward, per row r of x [rows, d]:
 *   rstd[r] = 1 / sqrt(sum_c x[r, c]^2 / d + eps)
 *   y[r, c] = x[r, c] * rstd[r] * g[c]
 * g [d]; rstd [rows] is saved for the backward. eps > 0 (each
 * architecture's norm_eps: the transformer's 1e-6, Mamba 2's 1e-5). Rows longer than
 * TMM_RMSNORM_CHUNK are summed in chunks whose sums a second pass adds in
 * chunk order; d up to TMM_RMSNORM_CHUNK * TMM_MAX_LOOP (8388608), else
 * TMM_ERR_UNSUPPORTED. y may be the same view as x. rows = 0 records nothing.
 * Scratch:
 * tmm_op_rmsnorm_forward_scratch (0 when d <= TMM_RMSNORM_CHUNK).
 *
 * Backward, with xhat = x * rstd (rstd as the forward saved it):
 *   dx[r, c] = rstd[r] * (dy[r, c] g[c] - xhat[r, c] * sum_j dy[r, j] g[j] xhat[r, j] / d)
 *   dg[c] (+)= sum_r dy[r, c] * xhat[r, c]
 * dx is overwritten; dg is overwritten, or added to with accumulate. dx may
 * be the same view as dy (computed in place). Row sums in chunks of
 * TMM_RMSNORM_CHUNK (combined by tmm_op_sum_rows); column sums in segments
 * of TMM_NN_COL_SEG = 256 rows (combined by tmm_op_sum_cols). When rows span
 * several bindings, each binding must hold at least 256 rows (else
 * TMM_ERR_UNSUPPORTED): d up to about 131000 with 128 MiB bindings. rows = 0
 * zeroes dg (unless accumulate). Scratch: tmm_op_rmsnorm_backward_scratch.
 * Rows of d up to TMM_NN_NORM_FUSED_MAX_D (nn_ops.h) go through one kernel
 * that reads each segment once; tmm_op_rmsnorm_backward_unfused records the
 * three phases (row sums, column sums, dx) at any d, for the tests that
 * compare the two. The sums are the same in the same order in both. */
#define TMM_RMSNORM_CHUNK 2048u
uint64_t tmm_op_rmsnorm_forward_scratch(uint32_t rows, uint32_t d);
tmm_status tmm_op_rmsnorm_forward(tmm_recorder *r, tmm_view x, tmm_view g, uint32_t rows, uint32_t d, float eps,
                                  tmm_view scratch, tmm_view y, tmm_view rstd);
uint64_t tmm_op_rmsnorm_backward_scratch(uint32_t rows, uint32_t d);
tmm_status tmm_op_rmsnorm_backward(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy, uint32_t rows,
                                   uint32_t d, bool accumulate, tmm_view scratch, tmm_view dx, tmm_view dg);
/* The same, with the residual's gradient added: dh += dx, in the fused
 * kernel's pass. dh must not overlap dy; above TMM_NN_NORM_FUSED_MAX_D, dx is
 * computed over dy, then added. */
tmm_status tmm_op_rmsnorm_backward_residual(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy,
                                            uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch, tmm_view dh,
                                            tmm_view dg);
tmm_status tmm_op_rmsnorm_backward_unfused(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy,
                                           uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch, tmm_view dx,
                                           tmm_view dg);

/* ---- SwiGLU -----------------------------------------------------------------
 *
 * gu [rows, 2f]: columns 0..f-1 are the gate a, f..2f-1 the up projection b
 * (one matmul with the weight [Wgate; Wup] computes both).
 * Forward: y [rows, f] = silu(a) * b, silu(a) = a * sigmoid(a).
 * Backward, from gu and dy [rows, f], s = sigmoid(a):
 *   dgu[r, j]     = dy * b * silu'(a),  silu'(a) = s + a s (1 - s)
 *   dgu[r, f + j] = dy * silu(a)
 * dgu [rows, 2f] is overwritten; it may be the same view as gu (gu is not
 * needed afterwards). y must not overlap gu. 2f * 4 bytes must fit a
 * binding. */
tmm_status tmm_op_swiglu_forward(tmm_recorder *r, tmm_view gu, uint32_t rows, uint32_t f, tmm_view y);
tmm_status tmm_op_swiglu_backward(tmm_recorder *r, tmm_view gu, tmm_view dy, uint32_t rows, uint32_t f,
                                  tmm_view dgu);

/* ---- RoPE (rotary position embedding, "rotate half") -------------------------
 *
 * x, y [rows, d] with `heads` heads of dh = d / heads contiguous channels (dh
 * even). For head h, i < dh/2, c0 = h dh + i, c1 = c0 + dh/2, and a row at
 * position t, theta = t * base^(-2i/dh):
 *   y[c0] = x[c0] cos(theta) - x[c1] sin(theta)
 *   y[c1] = x[c0] sin(theta) + x[c1] cos(theta)
 * With inverse the rotation is by -theta: the transpose, so the backward is
 * tmm_op_rope(dy -> dx, inverse = true) and inverse undoes the forward.
 *
 * The cos and sin come from a table the host computes in double
 * (tmm_rope_table) and uploads once: positions 0..n-1, laid out [n, dh/2, 2]
 * with table[2 (t (dh/2) + i)] = cos(theta(t, i)) and
 * table[2 (t (dh/2) + i) + 1] = sin(theta(t, i)), rounded to float;
 * tmm_rope_table_floats(n, dh) = n * dh floats. The same table serves every
 * layer and both modes, and a table of more positions serves a smaller n
 * (its first n positions are the same). Its first n * dh floats are bound
 * (n * dh * 4 bytes must fit a binding: TMM_ERR_UNSUPPORTED otherwise).
 *
 * Positions (mode):
 *   TMM_ROPE_SEQUENCE  rows are [B, n, d] position-major: row r is at
 *                      position r mod n (training, prefill); pos is unused.
 *   TMM_ROPE_POSITIONS rows are [B, d], one per sequence: row r is at
 *                      position pos[r], pos a uint32 buffer [rows]
 *                      (decoding). A position >= n is a caller error; the
 *                      kernel does not read the table out of range and
 *                      writes a zero row for it.
 * n is the number of positions in the table (the sequence length, or the
 * context length while decoding). y may be the same view as x (in place). */
typedef enum tmm_rope_mode {
    TMM_ROPE_SEQUENCE = 0,
    TMM_ROPE_POSITIONS,
} tmm_rope_mode;

#define TMM_ROPE_BASE 10000.0
/* Floats of the table for n positions and head width dh: n * dh. */
uint64_t tmm_rope_table_floats(uint32_t n, uint32_t dh);
/* Fills out[0 .. tmm_rope_table_floats(n, dh)) as described above.
 * TMM_ERR_INVALID_ARGUMENT when dh is 0 or odd or base is not finite and > 0. */
tmm_status tmm_rope_table(uint32_t n, uint32_t dh, double base, float *out);
tmm_status tmm_op_rope(tmm_recorder *r, tmm_rope_mode mode, tmm_view x, tmm_view table, tmm_view pos, uint32_t rows,
                       uint32_t d, uint32_t heads, uint32_t n, bool inverse, tmm_view y);

#endif
