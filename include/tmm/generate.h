/* Text generation from a trained checkpoint: load, prefill, step, sample.
 *
 *   tmm_device *dev;           tmm_device_create(NULL, &dev)
 *   tmm_generator *g;          tmm_generator_load(dev, "runs/copy", 1, TMM_TOEPLITZ_AUTO, &g)
 *   tokens = tmm_tokenize(g, "some text", ...)
 *   tmm_generator_prefill(g, &tokens, &count, logits)        one forward pass
 *   loop: tok = tmm_sample(&sampler, logits, vocab, draw++)
 *         tmm_generator_step(g, &tok, logits)                 O(t·d) per layer
 *   tmm_generator_destroy(g); tmm_device_destroy(dev)
 *
 * The prefill runs the whole prompt through the model in one forward pass
 * (the Toeplitz layers by FFT or directly, as the device's measured crossover
 * chooses) and keeps each layer's mixer inputs on the device. Each step then
 * computes one new position per sequence: the Toeplitz output of position t
 * is one dot product over the cached positions 0..t per channel, and the rest
 * of the block runs for the new position only (docs/model.md "Autoregressive
 * decoding"). The context is fixed at the model's n_ctx: a sequence whose
 * position reached n_ctx cannot step further; prefill again with a shorter
 * window to continue (tmm generate --slide).
 *
 * A checkpoint made by tmm distill (its directory holds distill.safetensors)
 * decodes through its state-space realizations instead: each step costs
 * O(r) per channel and layer whatever the position (docs/model.md
 * "Distilled decoding"); the prefill still runs the exact model.
 *
 * A generator holds `batch` sequences that advance together, each at its own
 * position (prompts may differ in length). See examples/generate.c. */
#ifndef TMM_GENERATE_H
#define TMM_GENERATE_H

#include "tmm/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tmm_generator tmm_generator;


typedef struct tmm_generator_info {
    tmm_model_config config;
    uint32_t batch;
    const char *tokenizer;  /* "bytes" (byte-level text, EOT = 256), "copy-symbols", or for runs on
                               prepared shards the kind of the run's tokenizer.json ("bytes", "bpe") */
    uint32_t eot;           /* the end-of-text token, or UINT32_MAX when there is none */
    uint64_t step;          /* training step of the checkpoint */
    bool distilled;         /* decoding runs the state-space realizations of tmm distill (O(r) per token
                               and layer) instead of the cached dot product (O(t)) */
    uint32_t distill_head;  /* their exact head (lags), when distilled */
} tmm_generator_info;

/* Loads a checkpoint (a run directory, a checkpoints directory, a step
 * directory or a model .safetensors file) for `batch` sequences; impl: how
 * prefills compute the Toeplitz layers (AUTO: as the device's measured
 * crossover picks). */
TMM_API tmm_status tmm_generator_load(tmm_device *device, const char *checkpoint, uint32_t batch,
                                      tmm_toeplitz_impl impl, tmm_generator **out);
TMM_API void tmm_generator_destroy(tmm_generator *gen);
TMM_API const tmm_generator_info *tmm_generator_get_info(const tmm_generator *gen);
/* Changes how prefills compute the Toeplitz layers; FFT plans are made here. */
TMM_API tmm_status tmm_generator_set_toeplitz_impl(tmm_generator *gen, tmm_toeplitz_impl impl);
/* Its former name: deprecated, removed in version 0.2. */
TMM_API tmm_status tmm_generator_set_mixer(tmm_generator *gen, tmm_toeplitz_impl impl);

/* Starts every sequence anew: prompts[b] holds lengths[b] tokens, 1 <=
 * lengths[b] <= n_ctx, for b < batch. One forward pass; logits (when not
 * NULL) receives [batch, vocab]: row b predicts the token after prompt b.
 * Afterwards sequence b is at position lengths[b]. */
TMM_API tmm_status tmm_generator_prefill(tmm_generator *gen, const uint32_t *const *prompts, const uint32_t *lengths,
                                         float *logits);

/* Appends tokens[b] to every sequence b at its position and computes the
 * logits [batch, vocab] of the next token (when not NULL); positions advance
 * by one. TMM_ERR_INVALID_ARGUMENT before a prefill, for a token outside the
 * vocabulary, or when a sequence's position is n_ctx (its context is full). */
TMM_API tmm_status tmm_generator_step(tmm_generator *gen, const uint32_t *tokens, float *logits);

/* Tokens sequence b holds (its position): 0 before a prefill. */
TMM_API uint32_t tmm_generator_position(const tmm_generator *gen, uint32_t b);

/* Sampling from one row of logits. greedy (or temperature 0): the argmax,
 * lowest token on ties. Else softmax(logits / temperature), restricted to the
 * top_k most likely tokens (0: all) and then to the smallest set of most
 * likely tokens whose probability reaches top_p (1: all); one uniform draw
 * decides. The draw is a pure function of (seed, draw): the same seed and
 * draw numbers give the same tokens on every run and machine. */
typedef struct tmm_sampler {
    float temperature;  /* >= 0; default 1 */
    uint32_t top_k;     /* default 0 (off) */
    float top_p;        /* in (0, 1]; default 1 (off) */
    bool greedy;
    uint64_t seed;
} tmm_sampler;

#define TMM_SAMPLER_DEFAULT { 1.0f, 0, 1.0f, false, 0 }

/* TMM_ERR_INVALID_ARGUMENT with a message for a bad setting. */
TMM_API tmm_status tmm_sampler_check(const tmm_sampler *sampler);
TMM_API tmm_status tmm_sample(const tmm_sampler *sampler, const float *logits, uint32_t vocab, uint64_t draw,
                              uint32_t *token);

/* Text <-> tokens with the checkpoint's tokenizer. "bytes": every byte is a
 * token. A run on prepared shards: its tokenizer.json (byte-level BPE;
 * special tokens such as "<|endoftext|>" written in the prompt are
 * recognised). "copy-symbols" (the copy task, alphabet V): with V <= 36 each symbol
 * is one character of 0-9a-z, else a decimal number; whitespace separates
 * and is ignored. *tokens is malloc'ed (free() it). */
TMM_API tmm_status tmm_tokenize(const tmm_generator *gen, const char *text, size_t length, uint32_t **tokens,
                                uint32_t *count);
/* The text of one token into buf (NUL-terminated when it fits); returns its
 * length in bytes (0 for the end-of-text token). */
TMM_API size_t tmm_detokenize(const tmm_generator *gen, uint32_t token, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
