/* What the attention-family mixers share (attention_mixer.c,
 * linear_mixer.c): four projections without bias,
 *     q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ, and h += o Woᵀ after the token mixing,
 * tensors blocks.L.attn.{q,k,v,o}.weight [d, d] ~ N(0, 0.02²) at mix[QKVO_*]. */
#ifndef TMM_MIXER_QKVO_H
#define TMM_MIXER_QKVO_H

#include "mixer/mixer.h"
#include "ops/decode_ops.h"

enum { QKVO_Q, QKVO_K, QKVO_V, QKVO_O };


void tmm_qkvo_declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx);
/* q, k, v [rows, d] from x [rows, d] for the mixer's rows, through matmuls. */
tmm_status tmm_qkvo_in(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view q, tmm_view k,
                       tmm_view v);
/* One decoding step's (rows = batch) q, k and v in one dispatch
 * (tmm_op_linear_rows_group), q and k rotated by rope when it is not NULL;
 * one dispatch where q, k and v are views of one buffer (tmm_qkvo_step_views). */
tmm_status tmm_qkvo_in_step(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x,
                            const tmm_row_rope *rope, tmm_view q, tmm_view k, tmm_view v);
/* Floats of a buffer for a step's q, k and v [B, d], and their views of it
 * (each at an aligned offset). */
uint64_t tmm_qkvo_step_floats(const tmm_device *dev, uint32_t B, uint32_t d);
void tmm_qkvo_step_views(const tmm_device *dev, tmm_buffer *qkv, uint32_t B, uint32_t d, tmm_view out[3]);
/* h += o Woᵀ. */
tmm_status tmm_qkvo_out(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view o, bool step, tmm_view h);
/* dx = dq Wq + dk Wk + dv Wv (written) and the gradients of Wq, Wk, Wv. */
tmm_status tmm_qkvo_in_backward(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dq,
                                tmm_view dk, tmm_view dv, tmm_view dx);
/* dout = dh Wo (written) and the gradient of Wo from dh and o. */
tmm_status tmm_qkvo_out_backward(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view o, tmm_view dh,
                                 tmm_view dout);

#endif
