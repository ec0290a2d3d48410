/* The frame's cached decode step: one new position of each of `batch`
 * sequences through the embedding, every block's halves in the
 * architecture's order (frame.h; the mixer half through a decoder of the
 * model's mixer, which holds what the mixer needs of the positions so far),
 * the final norm and the LM head: the model's forward (model.c) for one row
 * per sequence. Recorded once at creation and replayed for every token; the
 * residual stream h is only added to, never copied. */
#ifndef TMM_MODEL_STEP_H
#define TMM_MODEL_STEP_H

#include "mixer/mixer.h"
#include "model/model.h"

typedef struct tmm_model_step tmm_model_step;

/* decoder: made by the model's mixer class for `batch` sequences; it stays
 * the caller's and must outlive the step. */
tmm_status tmm_model_step_create(tmm_device *device, tmm_model *model, tmm_mixer_decoder *decoder, uint32_t batch,
                                 tmm_model_step **out);
/* One step: tokens[b] at positions[b] for every b < batch; logits (when not
 * NULL) receives [batch, vocab]. */
tmm_status tmm_model_step_run(tmm_model_step *s, const uint32_t *tokens, const uint32_t *positions, float *logits);
void tmm_model_step_destroy(tmm_model_step *s);
/* The commands (dispatches, copies, fills) one step records: its fixed cost. */
uint32_t tmm_model_step_commands(const tmm_model_step *s);

#endif
