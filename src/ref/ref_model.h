/* The whole model of every architecture in plain C, in double precision: the
 * readable definition of its forward and backward that the Vulkan model is
 * checked against (and that finite differences check in turn). Follows
 * docs/model.md (the TMM) and docs/baselines.md (the others). */
#ifndef TMM_REF_MODEL_H
#define TMM_REF_MODEL_H

#include <stdint.h>

#include "model/params.h"

/* Runs the model on a batch of B sequences of n_ctx tokens.
 *   params:  the arena (table->arena_floats doubles) in the table's layout
 *   tokens:  [B, n] inputs; targets: [B, n], a negative target is not scored
 *   logits:  [B, n, V] output, or NULL
 *   grads:   NULL for forward only; else the arena of gradients (same layout),
 *            overwritten; frozen parameters get zeros
 * Returns the mean cross-entropy over scored targets (0 when none). */
double ref_model_run(const tmm_param_table *table, const double *params, uint32_t batch, const uint32_t *tokens,
                     const int32_t *targets, double *logits, double *grads);

/* The general causal Toeplitz layer of the spec, in double: G groups of
 * d/G channels, K taps, w [G, K, n], beta [G, n], u and y [B, n, d].
 * Backward adds into du, dw, dbeta (any may be NULL). */
void ref_toeplitz_fwd_d(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, const double *w,
                        const double *beta, const double *u, double *y);
void ref_toeplitz_bwd_d(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, const double *w,
                        const double *u, const double *gy, double *du, double *dw, double *dbeta);

#endif
