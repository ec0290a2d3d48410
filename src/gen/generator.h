/* Internals of generation (the public API is include/tmm/generate.h). */
#ifndef TMM_GEN_GENERATOR_H
#define TMM_GEN_GENERATOR_H

#include <stddef.h>

#include "model/distilled.h"
#include "model/model.h"
#include "model/params.h"
#include "text/tokenizer.h"
#include "tmm/generate.h"

/* tmm_generator_load with tmm_checkpoint_load's flags (tmm generate
 * --allow-nonfinite) and TMM_LOAD_EXACT. A checkpoint directory that
 * holds distill.safetensors (tmm distill) decodes with its realizations
 * (TMM_LOAD_EXACT: without them; a checkpoint without one refuses it). */
tmm_status tmm_gen_load(tmm_device *device, const char *checkpoint, uint32_t batch, tmm_toeplitz_impl mixer,
                        unsigned load_flags, tmm_generator **out);

/* One forward pass of sequence b = seqs[b][0 .. lengths[b]) for every b <
 * batch (1 <= lengths[b] <= n_ctx), through the shortest prefill model that
 * holds the longest (the same function as the full model: causal, cropped
 * weights); for scoring (tmm eval --task). The logits of sequence b's
 * position t are then row b * *row_len + t of *model's
 * (tmm_model_logits_rows), until the next call. The decoder's state is not
 * kept: prefill again before stepping. */
tmm_status tmm_gen_forward(tmm_generator *gen, const uint32_t *const *seqs, const uint32_t *lengths,
                           tmm_model **model, uint32_t *row_len);

/* A generator from weights in memory (a host arena of the table's layout)
 * instead of a checkpoint: tmm bench generate's random models; distilled:
 * decode with these realizations (NULL: exactly). */
tmm_status tmm_gen_create(tmm_device *device, const tmm_param_table *table, const float *params,
                          tmm_model_tokenizer tokenizer, uint32_t batch, tmm_toeplitz_impl mixer,
                          const tmm_distilled *distilled, tmm_generator **out);

/* Continuous batching (src/serve): every sequence b with restart[b] starts
 * anew, empty, at position 0, while the others keep their positions and
 * state (the running state of the restarted ones, mixer.h, is zeroed); its
 * tokens then go in through tmm_generator_step, one per step. Before the
 * first prefill or restart every sequence is at position 0. */
tmm_status tmm_gen_restart(tmm_generator *g, const bool *restart);

/* Sequence b starts anew with `prompt` (1 <= len <= n_ctx tokens) in one
 * forward pass of a one-sequence model (the smallest bucket that holds it;
 * distilled: and its exact head), whose decoder's state is then copied into
 * slot b: it is at position len, the other sequences keep their positions
 * and state. logits (when not NULL) receives the rows of the prompt's
 * positions from .. len - 1 ([len - from, vocab]; the last one predicts the
 * next token). */
tmm_status tmm_gen_prefill_slot(tmm_generator *g, uint32_t b, const uint32_t *prompt, uint32_t len, uint32_t from,
                                float *logits);

/* Whether the decoder keeps a running state (Mamba 2, linear attention,
 * distilled): its step costs the same at every position, and a restart
 * zeroes it. */
bool tmm_gen_running_state(const tmm_generator *g);

/* The commands one decode step records (tmm bench generate). */
uint32_t tmm_gen_step_commands(const tmm_generator *g);

#endif
