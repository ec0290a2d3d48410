/* The retention/capacity autoencoder on a device (docs/model.md,
 * "Autoencoder"; the paper's E3 and E4, docs/experiments.md): an encoder, any
 * architecture's causal LM used for its final hidden state h at the last
 * position of each sequence, and a decoder that regenerates the whole input
 * from that one vector:
 *
 *     H = encoder hidden state [B, n, d]   (the LM head's input: after the final norm)
 *     U = unroll(H at position n - 1)      U[b, i, j] = h_b[(i + j) mod d], j < d/2
 *     X = U · Wᵀ + bias                    "unroll.weight" [d_dec, d/2], "unroll.bias" [d_dec]
 *     logits = decoder(X)                  a causal model (the TMM in the
 *                                          experiments) whose first block reads X
 *     loss = mean over every position i of cross_entropy(logits[i], token[i])
 *
 * The two models are tmm_models in their autoencoder modes (model.h:
 * tmm_model_set_encoder, tmm_model_set_input); the unroll is its own op
 * (ops/autoenc_ops.h); the Linear's two tensors live in a third, small arena
 * (tmm_autoenc_linear_table). With train_encoder false the encoder is frozen
 * (E3, retention: only the Linear and the decoder learn); with true the
 * gradient flows back through h into the encoder (E4, capacity), at position
 * n - 1 only. Training is AdamW (train/optim.h), one optimizer per arena:
 * gradient clipping applies to each arena's norm separately.
 *
 * Every pass is recorded once and replayed. Reference: ref_autoenc_run
 * (src/ref/ref_autoenc.h). */
#ifndef TMM_TRAIN_AUTOENC_H
#define TMM_TRAIN_AUTOENC_H

#include "model/model.h"
#include "train/optim.h"

typedef struct tmm_autoenc tmm_autoenc;

/* Checks the pair: both configs valid, the encoder's width even, the same
 * context length and vocabulary. */
tmm_status tmm_autoenc_config_check(const tmm_model_config *encoder, const tmm_model_config *decoder);

/* Creates both models for `batch` sequences (parameters initialized from
 * their configs' seeds; the Linear from the decoder's seed) and, with optim,
 * their optimizers. */
tmm_status tmm_autoenc_create(tmm_device *device, const tmm_model_config *encoder, const tmm_model_config *decoder,
                              uint32_t batch, bool train_encoder, const tmm_optim_config *optim,
                              tmm_autoenc **out);
void tmm_autoenc_destroy(tmm_autoenc *a);

/* The models, to load (tmm_model_write_params) or read their parameters and
 * gradients. Do not change their modes. */
tmm_model *tmm_autoenc_encoder(tmm_autoenc *a);
tmm_model *tmm_autoenc_decoder(tmm_autoenc *a);
/* The Linear's table ("unroll.weight", "unroll.bias") and its arenas. */
const tmm_param_table *tmm_autoenc_linear_table(const tmm_autoenc *a);
tmm_status tmm_autoenc_write_linear(tmm_autoenc *a, const float *arena);
tmm_status tmm_autoenc_read_linear(tmm_autoenc *a, float *arena);
tmm_status tmm_autoenc_read_linear_grads(tmm_autoenc *a, float *arena);

/* The next batch: tokens [batch, n] (checked against the vocabulary); every
 * position is scored against its own token. */
tmm_status tmm_autoenc_set_batch(tmm_autoenc *a, const uint32_t *tokens);
/* Forward (and with backward, every gradient; no update). */
tmm_status tmm_autoenc_run(tmm_autoenc *a, bool backward);
/* One training step: forward, backward and AdamW at step t (>= 1) with this
 * learning rate (needs optim at create). */
tmm_status tmm_autoenc_step(tmm_autoenc *a, uint32_t step, double lr);

/* Of the last run or step: the mean reconstruction loss, and the predicted
 * token (argmax) at every position [batch, n]. */
tmm_status tmm_autoenc_loss(tmm_autoenc *a, float *loss);
tmm_status tmm_autoenc_argmax(tmm_autoenc *a, uint32_t *argmax);

#endif
