/* Internals of generation (the public API is include/tmm/generate.h): the
 * tokenizers, usable without a loaded model. */
#ifndef TMM_GEN_GENERATOR_H
#define TMM_GEN_GENERATOR_H

#include <stddef.h>

#include "model/distilled.h"
#include "model/model.h"
#include "model/params.h"
#include "tmm/generate.h"

/* TEXT: a tokenizer of src/text (bytes or byte-level BPE) loaded from the
 * run's tokenizer.json (runs on prepared shards). */
typedef enum tmm_gen_tokenizer { TMM_GEN_TOKENIZER_BYTES, TMM_GEN_TOKENIZER_COPY, TMM_GEN_TOKENIZER_TEXT }
    tmm_gen_tokenizer;
typedef struct tmm_tokenizer tmm_tokenizer;

/* The tokenizer named by a checkpoint's "tokenizer" metadata ("bytes",
 * "copy-symbols", "tokenizer.json"); NULL (older checkpoints) picks bytes for
 * vocab 257 and copy symbols otherwise. Fails for an unknown name or a
 * vocabulary that does not fit it. */
tmm_status tmm_gen_tokenizer_pick(const char *name, uint32_t vocab, tmm_gen_tokenizer *out);
const char *tmm_gen_tokenizer_name(tmm_gen_tokenizer tokenizer);
tmm_status tmm_gen_tokenize(tmm_gen_tokenizer tokenizer, uint32_t vocab, const char *text, size_t length,
                            uint32_t **tokens, uint32_t *count);
size_t tmm_gen_detokenize(tmm_gen_tokenizer tokenizer, uint32_t vocab, uint32_t token, char *buf, size_t size);
/* The run's tokenizer.json of the checkpoint at path (RUN/tokenizer.json),
 * checked against the checkpoint's fingerprint and vocabulary. */
tmm_status tmm_gen_run_tokenizer(const char *checkpoint, const char *fingerprint, uint32_t vocab,
                                 tmm_tokenizer **out);
/* Prompts are encoded with the special tokens recognised ("<|endoftext|>"). */
tmm_status tmm_gen_tokenize_text(const tmm_tokenizer *tok, const char *text, size_t length, uint32_t **tokens,
                                 uint32_t *count);
size_t tmm_gen_detokenize_text(const tmm_tokenizer *tok, uint32_t token, char *buf, size_t size);

/* tmm_generator_load with tmm_checkpoint_load's flags (tmm generate
 * --allow-nonfinite) and TMM_LOAD_EXACT. A checkpoint directory that
 * holds distill.safetensors (tmm distill) decodes with its realizations. */
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
                          tmm_gen_tokenizer tokenizer, uint32_t batch, tmm_toeplitz_impl mixer,
                          const tmm_distilled *distilled, tmm_generator **out);

#endif
