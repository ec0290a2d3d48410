/* C reference of causal softmax attention (src/ops/attention.h): the
 * definition of its forward and backward. The *_d functions work in double
 * throughout (finite-difference checks); the float versions convert, compute
 * in double and round once. desc must be valid (tmm_attention_check); impl is
 * ignored. */
#ifndef TMM_REF_ATTENTION_H
#define TMM_REF_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "ops/attention.h"

/* o[B, n, d] and lse[B, H, n] (lse may be NULL) from q, k, v [B, n, d]. */
void ref_attention_forward_d(const tmm_attention_desc *desc, const double *q, const double *k, const double *v,
                             double *o, double *lse);
/* dq, dk, dv [B, n, d] from q, k, v and dout (recomputes the forward). */
void ref_attention_backward_d(const tmm_attention_desc *desc, const double *q, const double *k, const double *v,
                              const double *dout, double *dq, double *dk, double *dv);

void ref_attention_forward(const tmm_attention_desc *desc, const float *q, const float *k, const float *v, float *o,
                           float *lse);
void ref_attention_backward(const tmm_attention_desc *desc, const float *q, const float *k, const float *v,
                            const float *dout, float *dq, float *dk, float *dv);

#endif
