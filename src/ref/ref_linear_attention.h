/* C reference of causal linear attention (src/ops/linear_attention.h): the
 * plain recurrence over positions, which defines the op (the device computes
 * the chunked form). The *_d functions work in double throughout
 * (finite-difference checks); the float versions convert, compute in double
 * and round once. desc must be valid (tmm_linear_attention_check); chunk is
 * ignored. Shapes as in linear_attention.h. */
#ifndef TMM_REF_LINEAR_ATTENTION_H
#define TMM_REF_LINEAR_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "ops/linear_attention.h"

/* y [B, n, d] from q, k, v [B, n, d]; den [B, H, n] (optional, may be NULL):
 * the denominators fq_t·z_t + eps. */
void ref_linear_attention_forward_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                    const double *v, double *y, double *den);
/* dq, dk, dv [B, n, d] (overwritten) from q, k, v and dy (recomputes the forward). */
void ref_linear_attention_backward_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                     const double *v, const double *dy, double *dq, double *dk, double *dv);
/* S [B, H, D, D], z [B, H, D] (overwritten): sums over s < min(len[b], n) of k, v [B, n, d]. */
void ref_linear_attention_state_d(const tmm_linear_attention_desc *desc, const uint32_t *len, const double *k,
                                  const double *v, double *S, double *z);
/* One decoding step: rows q, k, v [B, d]; S, z updated in place, y [B, d]. */
void ref_linear_attention_step_d(const tmm_linear_attention_desc *desc, const double *q, const double *k,
                                 const double *v, double *S, double *z, double *y);

void ref_linear_attention_forward(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                                  const float *v, float *y, float *den);
void ref_linear_attention_backward(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                                   const float *v, const float *dy, float *dq, float *dk, float *dv);
void ref_linear_attention_state(const tmm_linear_attention_desc *desc, const uint32_t *len, const float *k,
                                const float *v, float *S, float *z);
/* The state is kept in float between steps (as the device keeps it). */
void ref_linear_attention_step(const tmm_linear_attention_desc *desc, const float *q, const float *k,
                               const float *v, float *S, float *z, float *y);

#endif
