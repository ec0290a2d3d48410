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

/* ref_model_run with the autoencoder's two modes (docs/model.md, "Autoencoder"):
 *   input:    [B, n, d] taken as the first block's input instead of the token
 *             embedding (tokens are then not read; the embedding gets no
 *             gradient); with grads, d_input [B, n, d] receives dL/dinput
 *   hidden:   receives the final hidden state [B, n, d]: the LM head's input
 *             (after the final norm where the architecture has one)
 *   d_hidden: the model is used as an encoder: no LM head loss (targets are
 *             not read, 0 is returned) and the backward starts from this
 *             gradient of the hidden state [B, n, d]
 * Any field may be NULL; io NULL is ref_model_run. */
typedef struct ref_model_io {
    const double *input;
    double *d_input;
    double *hidden;
    const double *d_hidden;
} ref_model_io;
double ref_model_run_io(const tmm_param_table *table, const double *params, uint32_t batch, const uint32_t *tokens,
                        const int32_t *targets, double *logits, double *grads, const ref_model_io *io);

/* The general causal Toeplitz layer of the spec, in double: G groups of
 * d/G channels, K taps, w [G, K, n], beta [G, n], u and y [B, n, d].
 * Backward adds into du, dw, dbeta (any may be NULL). */
void ref_toeplitz_fwd_d(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, const double *w,
                        const double *beta, const double *u, double *y);
void ref_toeplitz_bwd_d(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, const double *w,
                        const double *u, const double *gy, double *du, double *dw, double *dbeta);

#endif
