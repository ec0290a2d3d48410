/* Plain C references of the nn ops (src/ops/nn_ops.h), in double precision:
 * they define what the device ops compute, and are themselves checked by
 * finite differences (tests/test_nn_fd.c). Arrays are row-major; rows = B*n.
 * Parameter gradients are overwritten, or added to with accumulate. */
#ifndef TMM_REF_NN_H
#define TMM_REF_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* h[i, :] = E[tok[i], :]; a token >= vocab gives a zero row. E [vocab, d]. */
void ref_embedding_fwd_d(const uint32_t *tok, size_t rows, const double *E, size_t vocab, size_t d, double *h);
/* dE[v, :] (+)= sum over i with tok[i] == v of dh[i, :]; tokens >= vocab are skipped. */
void ref_embedding_bwd_d(const uint32_t *tok, size_t rows, const double *dh, size_t vocab, size_t d, bool accumulate,
                         double *dE);

/* LayerNorm over d with biased variance: y = (x - mean) * rstd * gamma + beta,
 * rstd = 1 / sqrt(var + eps). mean and rstd ([rows]) may be NULL. */
void ref_layernorm_fwd_d(const double *x, const double *gamma, const double *beta, size_t rows, size_t d, double eps,
                         double *y, double *mean, double *rstd);
/* Gradients of sum(dy * y) (statistics recomputed from x): dx, dgamma, dbeta
 * (dgamma and dbeta (+)=). */
void ref_layernorm_bwd_d(const double *x, const double *gamma, const double *dy, size_t rows, size_t d, double eps,
                         bool accumulate, double *dx, double *dgamma, double *dbeta);

/* y = silu(x + b), b [d] broadcast over rows. */
void ref_bias_silu_fwd_d(const double *x, const double *b, size_t rows, size_t d, double *y);
/* da = dy * silu'(x + b); db (+)= sum over rows of da. */
void ref_bias_silu_bwd_d(const double *x, const double *b, const double *dy, size_t rows, size_t d, bool accumulate,
                         double *da, double *db);

/* Number of targets that are scored (0 <= target < vocab). */
size_t ref_count_scored(const int32_t *targets, size_t rows, size_t vocab);
/* Per-row softmax cross-entropy: loss[r] = logsumexp(logits[r, :]) -
 * logits[r, target[r]], 0 when the target is negative or >= vocab; argmax[r]
 * = the first index of the row's largest logit. loss and argmax may be NULL.
 * Returns the mean loss over scored rows (0 when none is scored). */
double ref_xent_fwd_d(const double *logits, const int32_t *targets, size_t rows, size_t vocab, double *loss,
                      uint32_t *argmax);
/* Gradient of the mean loss with n_scored scored rows, times the loss scale:
 * dlogits[r, j] = (softmax(logits[r, :])[j] - [j == target[r]]) / n_scored * loss_scale,
 * 0 rows for unscored targets and everywhere when n_scored is 0. */
void ref_xent_bwd_d(const double *logits, const int32_t *targets, size_t rows, size_t vocab, size_t n_scored,
                    double loss_scale, double *dlogits);

#endif
