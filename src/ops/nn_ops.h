/* Neural-network ops of the TMM language model (besides matmul and the
 * Toeplitz mixing): embedding, LayerNorm, fused bias + SiLU, and the fused
 * softmax cross-entropy LM-head loss with argmax. Each records its kernels
 * into a recorder; the C references in src/ref/ref_nn.h define what they
 * compute (in double).
 *
 * Conventions shared by every op here:
 *   - Activations are row-major [rows, width] float32 (rows = B * n).
 *   - Row-indexed tensors (activations and their gradients, tokens,
 *     targets, logits, per-row outputs, and E and dE by vocab rows) may start
 *     at any multiple of 4 bytes; they are bound in chunks of whole rows,
 *     each binding at most maxStorageBufferRange bytes from an aligned
 *     offset, so a tensor may be larger than one binding (a single row larger
 *     than a binding is TMM_ERR_UNSUPPORTED). Exceptions are named at each op.
 *   - Views bound as given: parameters and their gradients (gamma, beta, b,
 *     dgamma, dbeta, db), scratch, the embedding index, and xent_mean's loss
 *     and out. Their offsets must be multiples of the device's
 *     minStorageBufferOffsetAlignment (256 bytes suits every device;
 *     TMM_ERR_INVALID_ARGUMENT otherwise).
 *   - Scratch views are sized by the matching *_scratch function (floats; 0
 *     means an empty view is fine). Their contents are undefined afterwards.
 *   - Parameter gradients (dgamma, dbeta, db, dE) are overwritten, or added
 *     to when `accumulate` is true (gradient accumulation over micro-batches).
 *   - Deterministic: no atomics; every sum is taken in a fixed order by one
 *     invocation per partial sum, so the same inputs give identical bits on
 *     every run on the same device, and results do not depend on how rows
 *     were split into bindings.
 *   - Loop bounds (lavapipe's llvmpipe silently ends the loops of an
 *     invocation after 65535 iterations in total; shaders/loop_limit.glsl):
 *     no invocation loops more than TMM_NN_MAX_LOOP times; long rows and long
 *     columns are split into segments whose partial results a second pass
 *     combines. The limits that follow are documented per op.
 *
 * Typical training-step use:
 *   host:  tmm_nn_embedding_index(tokens) and tmm_nn_count_scored(targets),
 *          uploaded / passed with the batch;
 *   fwd:   embedding_forward -> per block: layernorm_forward, matmul,
 *          bias_silu_forward, matmul, axpy, ... -> matmul (LM head) -> xent
 *          with backward = true (dlogits replace the logits) -> xent_mean;
 *   bwd:   ..., bias_silu_backward, layernorm_backward, embedding_backward.
 */
#ifndef TMM_NN_OPS_H
#define TMM_NN_OPS_H

#include "ops.h"

/* Most loop iterations of one invocation (shaders/loop_limit.glsl). */
#define TMM_NN_MAX_LOOP TMM_MAX_LOOP

/* ---- embedding ------------------------------------------------------------
 *
 * Forward: h[i, :] = E[tok[i], :] for i < rows; E is [vocab, d], tok is
 * uint32 [rows] (a uint buffer). A token >= vocab is a caller error; the
 * kernel never reads out of bounds and writes a zero row for it
 * (tmm_nn_embedding_index rejects such tokens with their position). E, h and
 * tok are chunked (E by vocab ranges, one pass per range), so none needs to
 * fit one binding.
 */
tmm_status tmm_op_embedding_forward(tmm_recorder *r, tmm_view tokens, tmm_view E, uint32_t rows, uint32_t vocab,
                                    uint32_t d, tmm_view h);

/* Backward: dE[v, :] (+)= sum over i with tok[i] == v of dh[i, :].
 *
 * The tokens reach the device through an index that the host builds from
 * them (the host has the tokens anyway) and uploads with the batch:
 * positions grouped by token (counting sort, ascending tokens, each group in
 * position order), the distinct tokens, and for tokens that occur more than
 * L times, segments of at most L positions (L = max(256, ceil(max count /
 * 4096)), stored in the index). One invocation per (distinct token,
 * channel) sums the token's positions in order, or, for long tokens, the
 * partial sums of its segments in order, which a first pass computes (one
 * invocation per (segment, channel), in position order). Fixed order, no
 * atomics: identical bits run to run. Loop bounds: at most L <= 4096
 * positions per segment and 4096 segments per token, so a token may occur up
 * to 16777216 times in one batch (more is TMM_ERR_UNSUPPORTED from the
 * index builder).
 *
 * The index has a fixed size for a given rows (tmm_nn_embedding_index_words
 * uint32 words) and must be built for the same rows and vocab as the call.
 * The dispatch sizes depend on rows, vocab and d only, so a recording can be
 * replayed with a new batch's index (and dh) uploaded. The kernels clamp
 * what they read from the index, so a corrupt index gives wrong sums but no
 * out-of-range access.
 *
 * accumulate false: dE = 0 then the sums (rows of tokens that occur nowhere
 * are zero); true: the sums are added to dE (other rows unchanged).
 * dh [rows, d] is read at arbitrary positions and is bound whole: rows * d * 4
 * bytes must fit maxStorageBufferRange (else TMM_ERR_UNSUPPORTED from the
 * recorder). dE is chunked by vocab ranges. */
uint64_t tmm_nn_embedding_index_words(uint32_t rows);
/* Builds the index of tokens[0..rows) into index[0 .. index_words(rows)).
 * TMM_ERR_INVALID_ARGUMENT naming the first token >= vocab; out of host memory
 * when the vocab-sized count table cannot be allocated. */
tmm_status tmm_nn_embedding_index(const uint32_t *tokens, uint32_t rows, uint32_t vocab, uint32_t *index);
uint64_t tmm_op_embedding_backward_scratch(uint32_t rows, uint32_t d);
tmm_status tmm_op_embedding_backward(tmm_recorder *r, tmm_view index, tmm_view dh, uint32_t rows, uint32_t vocab,
                                     uint32_t d, bool accumulate, tmm_view scratch, tmm_view dE);

/* ---- LayerNorm over the last axis ------------------------------------------
 *
 * Forward, per row r of x [rows, d] (biased variance, as the spec):
 *   mean[r] = sum_c x[r, c] / d
 *   rstd[r] = 1 / sqrt(sum_c (x[r, c] - mean[r])^2 / d + eps)
 *   y[r, c] = (x[r, c] - mean[r]) * rstd[r] * gamma[c] + beta[c]
 * mean and rstd ([rows] each) are saved for the backward. eps is 1e-5 in the
 * model (TMM_NN_LAYERNORM_EPS). Rows longer than TMM_NN_LN_CHUNK are split
 * into chunks whose mean and M2 are combined (Chan et al.) in chunk order;
 * d up to TMM_NN_LN_CHUNK * TMM_NN_MAX_LOOP. y may be the same view as x.
 *
 * Backward, with g = dy * gamma and xhat = (x - mean) * rstd:
 *   dx[r, c]  = rstd[r] * (g - (sum_c g + xhat * sum_c g * xhat) / d)
 *   dgamma[c] (+)= sum_r dy * xhat,   dbeta[c] (+)= sum_r dy
 * Row sums in chunks of TMM_NN_LN_CHUNK (combined by tmm_op_sum_rows);
 * column sums in segments of TMM_NN_COL_SEG rows (combined by tmm_op_sum_cols).
 * dx may be the same view as dy (computed in place). Rows of d up to
 * TMM_NN_NORM_FUSED_MAX_D go through one kernel that reads each segment once
 * (the column sums, then each row's sums and dx; RMSNorm's backward too);
 * longer rows through three phases (row sums, column sums, dx), which
 * tmm_op_layernorm_backward_unfused records at any d for the tests that
 * compare the two. The sums are the same in the same order in both. */
#define TMM_NN_LAYERNORM_EPS 1e-5f
#define TMM_NN_LN_CHUNK 2048u
#define TMM_NN_COL_SEG 256u
#define TMM_NN_NORM_FUSED_MAX_D 1024u
uint64_t tmm_op_layernorm_forward_scratch(uint32_t rows, uint32_t d);
tmm_status tmm_op_layernorm_forward(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view beta, uint32_t rows,
                                    uint32_t d, float eps, tmm_view scratch, tmm_view y, tmm_view mean,
                                    tmm_view rstd);
uint64_t tmm_op_layernorm_backward_scratch(uint32_t rows, uint32_t d);
tmm_status tmm_op_layernorm_backward(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean, tmm_view rstd,
                                     tmm_view dy, uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch,
                                     tmm_view dx, tmm_view dgamma, tmm_view dbeta);
/* The same, with the residual's gradient added: dh += dx (the block's
 * h = h + F(Norm(h))), in the fused kernel's pass. dh must not overlap dy;
 * above TMM_NN_NORM_FUSED_MAX_D, dx is computed over dy, then added. */
tmm_status tmm_op_layernorm_backward_residual(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean,
                                              tmm_view rstd, tmm_view dy, uint32_t rows, uint32_t d, bool accumulate,
                                              tmm_view scratch, tmm_view dh, tmm_view dgamma, tmm_view dbeta);
tmm_status tmm_op_layernorm_backward_unfused(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean,
                                             tmm_view rstd, tmm_view dy, uint32_t rows, uint32_t d, bool accumulate,
                                             tmm_view scratch, tmm_view dx, tmm_view dgamma, tmm_view dbeta);

/* ---- bias + SiLU, fused ------------------------------------------------------
 *
 * Forward: a = x + b (b [d] broadcast over rows), y = silu(a) = a * sigmoid(a).
 * a is not stored: the backward recomputes it from x and b (same float
 * addition). y may be the same view as x.
 * Backward: da = dy * silu'(a), silu'(a) = s + a * s * (1 - s), s = sigmoid(a);
 * db (+)= sum over rows of da (segments of TMM_NN_COL_SEG rows, combined by
 * tmm_op_sum_cols). da may be the same view as dy. */
tmm_status tmm_op_bias_silu_forward(tmm_recorder *r, tmm_view x, tmm_view b, uint32_t rows, uint32_t d, tmm_view y);
uint64_t tmm_op_bias_silu_backward_scratch(uint32_t rows, uint32_t d);
tmm_status tmm_op_bias_silu_backward(tmm_recorder *r, tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t d,
                                     bool accumulate, tmm_view scratch, tmm_view da, tmm_view db);

/* ---- softmax cross-entropy LM-head loss, fused, with argmax -----------------
 *
 * logits [rows, vocab]; targets int32 [rows]: a negative target (the
 * reference uses -100) is not scored. A target >= vocab is a caller error
 * (tmm_nn_count_scored rejects it); the kernels treat it like an ignored one.
 * Per row, with max-subtraction (M = max_j logits[r, j]):
 *   lse[r]   = M + log(sum_j exp(logits[r, j] - M))
 *   loss[r]  = lse[r] - logits[r, target[r]]        (0 for ignored rows)
 *   argmax[r] = the first j with the largest logit   (uint32)
 * With backward, the gradient of (the sum of the scored rows' losses) /
 * denominator overwrites the logits (no second [rows, vocab] buffer):
 *   logits[r, j] = (exp(logits[r, j] - lse[r]) - [j == target[r]]) / denominator
 * and rows of ignored targets become 0; then multiplied by the loss scale S,
 * the float at the start of the view loss_scale when it is not empty (dynamic
 * loss scaling, train/optim.h; read when the kernel runs, so S may change
 * between replays). The loss itself is never scaled. The denominator is
 * normally the number of scored rows, counted on the host
 * (tmm_nn_count_scored): the mean loss; a trainer accumulating micro-batches
 * passes the scored rows of the whole step. With denominator 0 the gradient
 * is all zeros.
 * loss and argmax are optional (pass a view of size 0 to skip either).
 * NaN logits, or a row of -inf logits, give unspecified loss and argmax.
 * Replays: 1 / denominator is a push constant of the recording, so a
 * recording replayed with a new batch assumes the same denominator (true of
 * the copy task; with padding, record again or keep it fixed).
 *
 * The loss here is per row; the mean is tmm_op_xent_mean (deterministic).
 * Rows are split into chunks of TMM_NN_XENT_CHUNK logits (max, its first
 * index and sum of exp per chunk), combined per row in chunk order; vocab
 * up to TMM_NN_XENT_MAX_VOCAB (TMM_ERR_UNSUPPORTED above). */
#define TMM_NN_XENT_CHUNK 2048u
#define TMM_NN_XENT_MAX_VOCAB (TMM_NN_XENT_CHUNK * (TMM_NN_MAX_LOOP / 2))
/* Counts targets[i] >= 0; TMM_ERR_INVALID_ARGUMENT names the first target >= vocab. */
tmm_status tmm_nn_count_scored(const int32_t *targets, uint32_t rows, uint32_t vocab, uint32_t *n_scored);
uint64_t tmm_op_xent_scratch(uint32_t rows, uint32_t vocab);
tmm_status tmm_op_xent(tmm_recorder *r, tmm_view logits, tmm_view targets, uint32_t rows, uint32_t vocab,
                       uint32_t denominator, bool backward, tmm_view loss_scale, tmm_view scratch, tmm_view loss,
                       tmm_view argmax);
/* out[0] = sum of loss[0..rows) (tmm_op_sum's fixed order) / denominator; 0
 * when denominator is 0. */
uint64_t tmm_op_xent_mean_scratch(uint32_t rows);
tmm_status tmm_op_xent_mean(tmm_recorder *r, tmm_view loss, uint32_t rows, uint32_t denominator, tmm_view scratch,
                            tmm_view out);
/* argmax[r] (uint32) = first index of the largest of logits[r, 0..vocab). */
uint64_t tmm_op_argmax_scratch(uint32_t rows, uint32_t vocab);
tmm_status tmm_op_argmax(tmm_recorder *r, tmm_view logits, uint32_t rows, uint32_t vocab, tmm_view scratch,
                         tmm_view argmax);

/* Whether reductions (LayerNorm's and RMSNorm's statistics, the
 * cross-entropy's max, sum and argmax, the naive attention's softmax, the
 * optimizer's gradient norm) take the subgroup kernels (*_sg.comp,
 * shaders/workgroup_reduce.glsl) on dev: subgroup arithmetic (GPUs with it in
 * compute; tuning.reduce_variant forces either way). */
bool tmm_op_rows_use_subgroups(const tmm_device *dev);
/* The same for a device's info and a reduce_variant (tmm devices). */
bool tmm_op_row_subgroups_for(const tmm_device_info *info, uint32_t reduce_variant);
/* The subgroup kernels' workgroup size: min(256, S^2) for the device's
 * subgroup size S, so that a workgroup holds at most S subgroups (at most 64
 * of the smallest size, 4, the selection accepts). */
uint32_t tmm_op_sg_workgroup(const tmm_device_info *info);

#endif
