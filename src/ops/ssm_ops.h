/* Small ops of the Hyena and Mamba 2 baselines (docs/baselines.md sections 4
 * and 5): causal depthwise conv1d (+ optional SiLU, and its decoding step),
 * GELU (exact erf) with bias, the sine layer of Hyena's implicit filter,
 * softplus with bias, and gates (products, SiLU gate, per-column scale).
 * Forward and backward of each; their meaning is the double-precision C
 * reference in src/ref/ref_ssm_ops.h.
 *
 * Conventions (as src/ops/nn_ops.h):
 *   - Activations are contiguous row-major [rows, C] float32 views (rows =
 *     B * n position-major [B, n, C] in training, [batch, C] while decoding;
 *     no column slices of wider matrices: copy them out first). Row-indexed
 *     views (activations, their gradients, pos, len, the conv window) may
 *     start at any multiple of 4 bytes; they are bound in chunks of whole
 *     rows within maxStorageBufferRange, so a tensor may be larger than one
 *     binding (one row larger than a binding is TMM_ERR_UNSUPPORTED).
 *   - Views bound as given: per-column parameters and their gradients (w,
 *     bias, b, omega, c, k and dw, dbias, db, domega, dc, dk) and scratch.
 *     Their offsets must be multiples of the device's
 *     minStorageBufferOffsetAlignment (256 bytes suits every device), else
 *     TMM_ERR_INVALID_ARGUMENT.
 *   - An optional view is absent when it is empty ((tmm_view){ 0 }).
 *   - Parameter gradients are column sums over all rows: overwritten, or
 *     added to with `accumulate`. Deterministic: partial sums over segments
 *     of rows (TMM_NN_COL_SEG = 256 rows; 128 for conv1d), each one
 *     invocation in row order, then summed over segments in order by
 *     tmm_op_sum_cols; no atomics, identical bits on every run, independent
 *     of how rows were split into bindings. When rows span several bindings,
 *     each binding must hold at least 256 rows (else TMM_ERR_UNSUPPORTED).
 *     Scratch: the matching *_scratch function (floats; 0 means an empty
 *     view is fine); contents undefined afterwards.
 *   - Aliasing: element-wise outputs may be exactly (same buffer and offset)
 *     one of the op's row inputs where the op says so; any other overlap of
 *     an output with another view is TMM_ERR_INVALID_ARGUMENT.
 *   - Loop cap (shaders/loop_limit.glsl): no invocation loops more than
 *     TMM_MAX_LOOP times for any size (long columns are summed in passes).
 *   - rows = 0 (or C = 0) records nothing, except that parameter gradients
 *     are zeroed when not accumulating.
 */
#ifndef TMM_OPS_SSM_H
#define TMM_OPS_SSM_H

#include "ops.h"

/* ---- causal depthwise conv1d, kernel K, with bias --------------------------
 *
 * x, y [B, n, C] (rows = B n, position-major); w [C, K] (w[c*K + j]); bias
 * [C]; 1 <= K <= TMM_CONV1D_MAX_K. Per sequence (never across sequences),
 * with x at negative positions 0:
 *   pre[b,t,c] = bias[c] + sum_{j<K} w[c,j] x[b, t-K+1+j, c]
 *   y = pre, or y = silu(pre) = pre * sigmoid(pre) with `silu` (Mamba 2).
 * Backward, g = dy (or dy * silu'(pre), silu'(a) = s + a s (1 - s), s =
 * sigmoid(a); pre is recomputed from x, w, bias: nothing is saved):
 *   dx[b,t,c]  = sum_{j<K, t+K-1-j < n} w[c,j] g[b, t+K-1-j, c]   (written)
 *   dw[c,j]   (+)= sum_{b,t} g[b,t,c] x[b, t-K+1+j, c]
 *   dbias[c]  (+)= sum_{b,t} g[b,t,c]
 * y, dx must not overlap any other argument (neighbouring rows are read).
 * Row chunks carry K-1 halo rows (behind for x, ahead for g in dx).
 *
 * Decoding. window [batch, K-1, C] holds the last K-1 inputs of each
 * sequence, oldest first: window[b, j] is the input at position
 * pos[b] - (K-1) + j. pos is uint32 [batch].
 *   step: x, y [batch, C], x the input at position pos[b]:
 *     y[b,c] = bias[c] + sum_{j<K-1} w[c,j] window[b,j,c] + w[c,K-1] x[b,c]
 *     (silu applied with `silu`), then the window shifts by one (window[b,
 *     K-2] = x). Entries at negative positions (j < K-1-pos[b]) are read as
 *     0 and written 0, so pos 0 starts a sequence whatever the window held.
 *     y may be the same view as x; the window is updated in place.
 *   fill: from a prompt x [B, n, C] and len uint32 [B]:
 *     window[b, j, c] = x[b, len[b]-K+1+j, c] (0 at negative positions), so
 *     that a step at pos = len[b] continues the sequence; len[b] > n is a
 *     caller error (entries at positions >= n become 0). Binds whole
 *     sequences: n C 4 bytes must fit a binding.
 * K = 1: the window is empty (may be an empty view); fill records nothing. */
#define TMM_CONV1D_MAX_K 8u
#define TMM_CONV1D_COL_SEG 128u /* rows per segment of dw, dbias (1 + 3K <= 25 loop iterations per row) */
tmm_status tmm_op_conv1d_forward(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, uint32_t batch, uint32_t n,
                                 uint32_t C, uint32_t K, bool silu, tmm_view y);
/* Floats of the backward's scratch: with silu, g = dy silu'(pre) (rows C);
 * above TMM_CONV1D_COL_SEG rows, dw's and dbias's partial sums. */
uint64_t tmm_op_conv1d_backward_scratch(uint32_t batch, uint32_t n, uint32_t C, uint32_t K, bool silu);
tmm_status tmm_op_conv1d_backward(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, tmm_view dy, uint32_t batch,
                                  uint32_t n, uint32_t C, uint32_t K, bool silu, bool accumulate, tmm_view scratch,
                                  tmm_view dx, tmm_view dw, tmm_view dbias);
tmm_status tmm_op_conv1d_step(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, tmm_view pos, uint32_t batch,
                              uint32_t C, uint32_t K, bool silu, tmm_view window, tmm_view y);
tmm_status tmm_op_conv1d_fill(tmm_recorder *r, tmm_view x, tmm_view len, uint32_t batch, uint32_t n, uint32_t C,
                              uint32_t K, tmm_view window);

/* ---- GELU (exact, erf) with optional bias ------------------------------------
 *
 * a = x + b (b [C] optional: absent means a = x), y = gelu(a) = a Phi(a),
 * Phi(a) = (1 + erf(a / sqrt 2)) / 2 = erfc(-a / sqrt 2) / 2.
 * Backward: dx = dy gelu'(a), gelu'(a) = Phi(a) + a phi(a), phi(a) =
 * exp(-a^2/2) / sqrt(2 pi); db (+)= sum over rows of dx (db optional,
 * independent of b). a is recomputed from x and b.
 * GLSL has no erf: erfc(z), z = |a| / sqrt 2, is Numerical Recipes' erfcc
 * (t exp(-z^2 + P(t)), t = 1 / (1 + z/2), Chebyshev-fitted P; relative
 * error < 1.2e-7 for all z >= 0), with z^2 carried exactly (a split at 12
 * bits) and exp evaluated by a Cody-Waite reduction and a Taylor polynomial
 * (llvmpipe's own exp(x) loses |x| 2^-24 relative, its log is only accurate
 * to 2^-21 absolute near 1, and fma is not fused there). Measured on
 * lavapipe over a in [-14, 14]: gelu within 4.1e-7 relative (down to float
 * underflow near a = -13), gelu' within 3.3e-7 of |Phi| + |a phi|. With a
 * bias, a = x + b is rounded to float first, which moves gelu by up to
 * |a gelu'(a)| 2^-24 (most in the left tail; the reference adds in double).
 * y may be the same view as x; dx may be the same view as dy or x. */
tmm_status tmm_op_gelu_forward(tmm_recorder *r, tmm_view x, tmm_view b, uint32_t rows, uint32_t C, tmm_view y);
uint64_t tmm_op_gelu_backward_scratch(uint32_t rows, uint32_t C);
tmm_status tmm_op_gelu_backward(tmm_recorder *r, tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C,
                                bool accumulate, tmm_view scratch, tmm_view dx, tmm_view db);

/* ---- sine layer (Hyena's implicit filter) ------------------------------------
 *
 * y = sin(omega[c] (x[r,c] + c[c])), x [rows, C], omega [C], c [C].
 * Backward, u = x + c, g = dy cos(omega u):
 *   dx = g omega;   domega[c] (+)= sum_r g u;   dc[c] (+)= sum_r g omega
 * (domega and dc with the same accumulate). y may be the same view as x;
 * dx may be the same view as dy or x. */
tmm_status tmm_op_sine_forward(tmm_recorder *r, tmm_view x, tmm_view omega, tmm_view c, uint32_t rows, uint32_t C,
                               tmm_view y);
uint64_t tmm_op_sine_backward_scratch(uint32_t rows, uint32_t C);
tmm_status tmm_op_sine_backward(tmm_recorder *r, tmm_view x, tmm_view omega, tmm_view c, tmm_view dy, uint32_t rows,
                                uint32_t C, bool accumulate, tmm_view scratch, tmm_view dx, tmm_view domega,
                                tmm_view dc);

/* ---- softplus with optional bias ---------------------------------------------
 *
 * a = x + b (b [C] optional), y = softplus(a) = max(a, 0) + log1p(exp(-|a|)),
 * safe for any finite a: exp as in GELU (exp(-|a|) <= 1, 0 below -87),
 * log1p(e) = 2 atanh(e / (2 + e)) by its series (llvmpipe's log is poor near
 * 1). Measured on lavapipe over a in [-87, 39]: within 2.1e-7 relative;
 * sigmoid within 1.6e-7.
 * Backward: dx = dy sigmoid(a); db (+)= sum over rows of dx (db optional).
 * y may be the same view as x; dx may be the same view as dy or x. */
tmm_status tmm_op_softplus_forward(tmm_recorder *r, tmm_view x, tmm_view b, uint32_t rows, uint32_t C, tmm_view y);
uint64_t tmm_op_softplus_backward_scratch(uint32_t rows, uint32_t C);
tmm_status tmm_op_softplus_backward(tmm_recorder *r, tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C,
                                    bool accumulate, tmm_view scratch, tmm_view dx, tmm_view db);

/* ---- gates, element-wise over [rows, C] -------------------------------------
 *
 * mul:   y = a * b;         da = dy * b,        db = dy * a
 * silu:  y = a * silu(z);   da = dy * silu(z),  dz = dy * a * silu'(z)
 * scale: y = a * k[c];      da = dy * k,        dk[c] (+)= sum_r dy * a
 * k [C] is a per-column parameter. In mul, b may be a fixed table with no
 * gradient (db absent). Backward outputs (da, db, dz, dk) are each optional;
 * da, db, dz are written. Aliasing: y may be the same view as a or as b/z;
 * each of da, db, dz may be the same view as any one row input (a, b, z,
 * dy), but they must not overlap each other. dk overlaps nothing. */
tmm_status tmm_op_gate_mul_forward(tmm_recorder *r, tmm_view a, tmm_view b, uint32_t rows, uint32_t C, tmm_view y);
tmm_status tmm_op_gate_mul_backward(tmm_recorder *r, tmm_view a, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C,
                                    tmm_view da, tmm_view db);
tmm_status tmm_op_gate_silu_forward(tmm_recorder *r, tmm_view a, tmm_view z, uint32_t rows, uint32_t C, tmm_view y);
tmm_status tmm_op_gate_silu_backward(tmm_recorder *r, tmm_view a, tmm_view z, tmm_view dy, uint32_t rows, uint32_t C,
                                     tmm_view da, tmm_view dz);
tmm_status tmm_op_gate_scale_forward(tmm_recorder *r, tmm_view a, tmm_view k, uint32_t rows, uint32_t C, tmm_view y);
uint64_t tmm_op_gate_scale_backward_scratch(uint32_t rows, uint32_t C);
tmm_status tmm_op_gate_scale_backward(tmm_recorder *r, tmm_view a, tmm_view k, tmm_view dy, uint32_t rows, uint32_t C,
                                      bool accumulate, tmm_view scratch, tmm_view da, tmm_view dk);

/* ---- internal: shared by the files above --------------------------------------- */

/* True when v is absent (an empty view). */
static inline bool tmm_ssm_absent(tmm_view v) { return v.buffer == NULL || v.size == 0; }

/* Checks element-wise aliasing: each output with n > 0 is either exactly one
 * of ins (same buffer and offset) or overlaps none of them, and overlaps no
 * other output. (nn_gate.c) */
typedef struct tmm_op_span tmm_op_span;
tmm_status tmm_ssm_check_alias(const char *op, const tmm_op_span *ins, size_t n_ins, const tmm_op_span *outs,
                               size_t n_outs);

/* The bias + activation ops (GELU, softplus): forward kernel (x, b, y; push
 * n, d, has_b, base_x, base_y), element backward (x, b, dy, dx; push n, d,
 * has_b, base_x, base_dy, base_dx) and bias-sum kernel (x, b, dy, db; push
 * rows, d, seg, nseg, seg0, direct, accumulate, has_b, base_x, base_dy).
 * (nn_gelu.c) */
tmm_status tmm_ssm_bias_act_forward(tmm_recorder *r, const char *op, const tmm_spirv *fwd, tmm_view x, tmm_view b,
                                    uint32_t rows, uint32_t C, tmm_view y);
uint64_t tmm_ssm_bias_act_backward_scratch(uint32_t rows, uint32_t C);
tmm_status tmm_ssm_bias_act_backward(tmm_recorder *r, const char *op, const tmm_spirv *bwd, const tmm_spirv *bwd_bias,
                                     tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C, bool accumulate,
                                     tmm_view scratch, tmm_view dx, tmm_view db);

#endif
