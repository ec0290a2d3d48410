/* What the attention-family mixers share (attention_mixer.c,
 * linear_mixer.c): four projections without bias,
 *     q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ, and h += o Woᵀ after the token mixing,
 * tensors blocks.L.attn.{q,k,v,o}.weight [d, d] ~ N(0, 0.02²) at mix[QKVO_*]. */
#ifndef TMM_MIXER_QKVO_H
#define TMM_MIXER_QKVO_H

#include "mixer/mixer.h"

enum { QKVO_Q, QKVO_K, QKVO_V, QKVO_O };


void tmm_qkvo_declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx);
/* q, k, v [rows, d] from x [rows, d]: the training shapes (rows = the mixer's
 * rows) through matmuls, or one decoding step's (rows = batch) through the
 * row kernel. */
tmm_status tmm_qkvo_in(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x, bool step, tmm_view q,
                       tmm_view k, tmm_view v);
/* h += o Woᵀ. */
tmm_status tmm_qkvo_out(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view o, bool step, tmm_view h);
/* dx = dq Wq + dk Wk + dv Wv (written) and the gradients of Wq, Wk, Wv. */
tmm_status tmm_qkvo_in_backward(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dq,
                                tmm_view dk, tmm_view dv, tmm_view dx);
/* dout = dh Wo (written) and the gradient of Wo from dh and o. */
tmm_status tmm_qkvo_out_backward(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view o, tmm_view dh,
                                 tmm_view dout);

#endif
