/* C reference of causal softmax attention (src/ops/attention.h), full or
 * windowed: the definition of its forward and backward, and of the cached
 * decoding ops (src/ops/attention_step.h). The *_d functions work in double
 * throughout (finite-difference checks); the float versions convert, compute
 * in double and round once. desc must be valid (tmm_attention_check,
 * tmm_attention_step_check); impl is ignored. */
#ifndef TMM_REF_ATTENTION_H
#define TMM_REF_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "ops/attention.h"
#include "ops/attention_step.h"

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

/* Cached decoding (shapes and meaning in ops/attention_step.h): cache rows
 * of positions pos[b] into slots pos[b] mod C; the last min(C, len[b])
 * positions of a prefill k, v [B, n, d] into theirs; and the step
 * o [B, d] for queries q [B, d] at positions pos over the caches. */
void ref_attention_cache_write(const tmm_attention_step_desc *desc, const uint32_t *pos, const float *k,
                               const float *v, float *kcache, float *vcache);
void ref_attention_cache_fill(const tmm_attention_step_desc *desc, uint32_t n, const uint32_t *len, const float *k,
                              const float *v, float *kcache, float *vcache);
void ref_attention_step_d(const tmm_attention_step_desc *desc, const uint32_t *pos, const double *q,
                          const double *kcache, const double *vcache, double *o);
void ref_attention_step(const tmm_attention_step_desc *desc, const uint32_t *pos, const float *q,
                        const float *kcache, const float *vcache, float *o);

#endif
