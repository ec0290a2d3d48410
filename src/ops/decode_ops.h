/* Ops of cached decoding (docs/model.md "Autoregressive decoding"): every
 * sequence b of a batch is at its own position pos[b]; the Toeplitz layer's
 * inputs of positions 0..pos[b] are kept in a cache [B, n, d] (the same
 * layout as the model's activations, so a prefill fills it), and the new
 * position's output is one dot product over the cache per channel.
 *
 * pos is a buffer of B uint32 values, each < n (the caller checks; the
 * kernels trust it). Shapes follow ops/toeplitz.h:
 *   cache [B, n, d], x and y [B, d], w [G, K, n], beta [G, n].
 * Meaning: ref_toeplitz_step (src/ref/ref_decode.h). */
#ifndef TMM_OPS_DECODE_H
#define TMM_OPS_DECODE_H

#include "toeplitz.h"

/* Positions one invocation of the step kernel sums (fewer where K times
 * this passes TMM_MAX_LOOP). */
#define TMM_STEP_CHUNK 256u

/* Floats of scratch tmm_op_toeplitz_step needs (used where n is longer than
 * one chunk). */
uint64_t tmm_op_toeplitz_step_scratch(const tmm_toeplitz_desc *desc);

/* With t = pos[b] and x[b, :] standing for cache[b, t, :]:
 *   y[b, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * cache[b, s, c-(K-1)+a]
 *   cache[b, t, :] = x[b, :]
 * (ref_cache_write, then ref_toeplitz_step): O(t * K) per channel, the same
 * sum as the forward's row t. One dispatch where n <= TMM_STEP_CHUNK, else
 * a second that adds the chunks' sums. w, beta and scratch are bound as given
 * (offsets multiples of minStorageBufferOffsetAlignment). */
tmm_status tmm_op_toeplitz_step(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view pos, tmm_view x,
                                tmm_view cache, tmm_view w, tmm_view beta, tmm_view scratch, tmm_view y);

/* tmm_op_toeplitz_step with y multiplied by gate [B, d] in the same
 * dispatches (y = step ⊙ gate: Hyena's output gate); gate must not overlap y. */
tmm_status tmm_op_toeplitz_step_gate(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view pos, tmm_view x,
                                     tmm_view cache, tmm_view w, tmm_view beta, tmm_view gate, tmm_view scratch,
                                     tmm_view y);

/* Rows a decoding step's linear layers handle with their own kernel. */
#define TMM_DECODE_MAX_ROWS 8u

/* y[rows, out] (+)= x[rows, in] · Wᵀ + bias (W [out, in], bias optional: an
 * empty view): the linear layer of tmm_op_matmul for the few rows of one
 * decoding step. Up to TMM_DECODE_MAX_ROWS rows and in <= 4 * TMM_MAX_LOOP
 * one invocation per output reads every weight once; other shapes go to
 * tmm_op_matmul. W and bias are bound as given (aligned offsets). */
tmm_status tmm_op_linear_rows(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                              tmm_view bias, tmm_view y, bool accumulate);

/* The activation a decoding step's linear layer may apply to its output
 * (SILU and GELU: tmm_op_linear_rows_act; SWIGLU, ROPE and SOFTPLUS: a group
 * of tmm_op_linear_rows_group). */
typedef enum tmm_row_act {
    TMM_ROW_ACT_NONE,
    TMM_ROW_ACT_SILU,
    TMM_ROW_ACT_GELU,
    TMM_ROW_ACT_SWIGLU,
    TMM_ROW_ACT_ROPE,
    TMM_ROW_ACT_SOFTPLUS,
} tmm_row_act;
/* y[rows, out] = act(x · Wᵀ + bias) in the same dispatch: an MLP's first
 * half in one command (the MLP's own ops compute the same: SiLU as
 * tmm_op_bias_silu_forward, GELU as tmm_op_gelu_forward). Shapes that
 * tmm_op_linear_rows hands to tmm_op_matmul get the activation as its own op. */
tmm_status tmm_op_linear_rows_act(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                                  tmm_view bias, tmm_row_act act, tmm_view y);


/* Groups one tmm_op_linear_rows_group dispatch takes. */
#define TMM_ROW_GROUPS 4u

/* One linear layer of tmm_op_linear_rows_group: y [rows, out] (written) =
 * act(x · Wᵀ + bias) with
 *   NONE      W [out, in], bias optional (an empty view)
 *   SWIGLU    W [2 out, in]: silu(x · W[:out]ᵀ) ⊙ (x · W[out:]ᵀ), no bias
 *             (tmm_op_swiglu_forward of the [rows, 2 out] product)
 *   ROPE      W [out, in], no bias: tmm_op_rope (TMM_ROPE_POSITIONS) of the
 *             product, by the op's tmm_row_rope
 *   SOFTPLUS  W [out, in]: tmm_op_softplus_forward of the product with bias. */
typedef struct tmm_row_group {
    tmm_view w, bias, y;
    uint32_t out;
    tmm_row_act act;
} tmm_row_group;

/* What ROPE groups rotate by: tmm_op_rope's table of npos positions for
 * heads of dh channels, pos [rows] uint32 (row r at position pos[r]). */
typedef struct tmm_row_rope {
    tmm_view table, pos;
    uint32_t dh, npos;
} tmm_row_rope;

/* Up to TMM_ROW_GROUPS linear layers of the same rows x [rows, in] (Q, K
 * and V; an MLP's gate and up; a mixer's input projections), in one dispatch
 * where the groups' W views share a buffer, and so do their biases and their
 * outputs, each within one binding; W and bias may start at any float. Else
 * (or for more rows or longer rows than the kernel takes) each group is its
 * linear layer, then its activation's op: the unfused path, which writes a
 * SWIGLU group's product to tmp [rows, 2 out] (unused otherwise). rope: for
 * ROPE groups (may be NULL without). Outputs must not overlap. Meaning:
 * ref_linear_rows_group (src/ref/ref_decode.h). */
tmm_status tmm_op_linear_rows_group(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in,
                                    const tmm_row_group *groups, uint32_t n, const tmm_row_rope *rope, tmm_view tmp);

/* Hyena's three short convolutions of one decoding step and its first gate,
 * in one dispatch: u [3, B, d] holds the step's projections (x0, x1, v),
 * w [3d, K] and bias [3d] the three parts' taps (the parts' rows in order),
 * window [3, B, K-1, d] their windows (each part's as tmm_op_conv1d_step
 * keeps it; K = 1: none, may be empty). With y_q = tmm_op_conv1d_step of
 * part q (no SiLU; its window shifted): u[0] = y_0 and u[2] = y_2 ⊙ y_1
 * (written), u[1] unchanged. Meaning: ref_hyena_conv_step. */
tmm_status tmm_op_hyena_conv_step(tmm_recorder *r, tmm_view u, tmm_view w, tmm_view bias, tmm_view pos, uint32_t batch,
                                  uint32_t d, uint32_t K, tmm_view window);

/* Mamba 2's gate and norm of one decoding step in one dispatch:
 * y = RMSNorm(x ⊙ silu(z)) · g (rows [rows, d], g [d]; rstd [rows] saved):
 * tmm_op_gate_silu_forward then tmm_op_rmsnorm_forward, the same arithmetic
 * as their one-dispatch row kernels. Where the norm would not use its row
 * kernel (more rows, longer rows, subgroups) it is those two ops: the
 * unfused path (scratch: tmm_op_rmsnorm_forward's). y may alias x.
 * Meaning: ref_gate_silu_fwd then ref_rmsnorm_fwd_d. */
tmm_status tmm_op_rmsnorm_gate_step(tmm_recorder *r, tmm_view x, tmm_view z, tmm_view g, uint32_t rows, uint32_t d,
                                   float eps, tmm_view scratch, tmm_view rstd, tmm_view y);

#endif
