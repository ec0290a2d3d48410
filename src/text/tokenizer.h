/* Tokenizers of real text: tmm's byte tokenizer and BPE as Hugging Face
 * defines it (byte-level as GPT-2's and Llama 3's, SentencePiece-style as
 * Llama 2's and Mistral's), loaded from and saved to Hugging Face
 * tokenizer.json, and OpenAI's tiktoken encodings (docs/tokenizer.md).
 *
 * "bytes" is the built-in byte tokenizer: token b is byte b (0..255), the
 * end-of-text token is 256, the vocabulary 257 (TMM_TEXT_VOCAB).
 *
 * Decoding is exact for byte-level BPE: decode(encode(x)) == x for any
 * bytes, invalid UTF-8 included; the others round-trip where their
 * normalizer and decoder do (docs/tokenizer.md). A tmm_tokenizer is read-only after it is made and may be shared
 * by threads; encoding caches pre-tokenized words in a tmm_tok_cache, one per
 * thread (or none: slower, same result). */
#ifndef TMM_TEXT_TOKENIZER_H
#define TMM_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmm/tmm.h"

typedef struct tmm_tokenizer tmm_tokenizer;
typedef struct tmm_tok_cache tmm_tok_cache;

/* A growable array of token ids (free ids with free()). */
typedef struct tmm_tokens {
    uint32_t *ids;
    size_t count, capacity;
} tmm_tokens;

/* A growable byte buffer (free data with free()). */
typedef struct tmm_bytes {
    char *data;
    size_t length, capacity;
} tmm_bytes;

/* "bytes", or the path of a tokenizer.json or of a .tiktoken file (told
 * apart by content; the tiktoken encoding by the file's name, as
 * "cl100k_base.tiktoken", else by its number of ranks). Unsupported model
 * types (Unigram, WordPiece, WordLevel), normalizers, pre-tokenizers,
 * post-processors and decoders get one clear error naming them. */
tmm_status tmm_tokenizer_load(const char *name_or_path, tmm_tokenizer **out);
/* The same, a .tiktoken file read as the named encoding (r50k_base,
 * p50k_base, cl100k_base, o200k_base) when encoding is not NULL. */
tmm_status tmm_tokenizer_load_as(const char *path, const char *encoding, tmm_tokenizer **out);
/* The same from a tokenizer.json already in memory; origin names it in errors. */
tmm_status tmm_tokenizer_parse(const char *json, size_t length, const char *origin, tmm_tokenizer **out);
tmm_status tmm_tokenizer_bytes(tmm_tokenizer **out);
void tmm_tokenizer_free(tmm_tokenizer *tok);

/* tokenizer.json text (malloc'ed, NUL-terminated) that loads back to the same
 * tokenizer, and the same written atomically to path (temporary file, fsync,
 * rename). The byte tokenizer is written as a BPE without merges. */
tmm_status tmm_tokenizer_to_json(const tmm_tokenizer *tok, char **json, size_t *length);
tmm_status tmm_tokenizer_save(const tmm_tokenizer *tok, const char *path);

/* One past the largest id, added tokens included. */
uint32_t tmm_tokenizer_vocab(const tmm_tokenizer *tok);
/* The end-of-text id (the added token "<|endoftext|>", "<|end_of_text|>"
 * or "</s>", else the first special added token; 256 for bytes);
 * UINT32_MAX when it has none. */
uint32_t tmm_tokenizer_eot(const tmm_tokenizer *tok);
/* "bytes" or "bpe". */
const char *tmm_tokenizer_kind(const tmm_tokenizer *tok);
/* A 64-bit fingerprint of what the tokenizer maps (vocabulary, merges,
 * added tokens, pattern), not of its JSON spelling: shards record it and a
 * run refuses shards made with another tokenizer. */
uint64_t tmm_tokenizer_fingerprint(const tmm_tokenizer *tok);

tmm_tok_cache *tmm_tok_cache_new(void);
void tmm_tok_cache_free(tmm_tok_cache *cache);
/* Keeps the cache's scratch space but stops it remembering words (to measure
 * what the word cache is worth): same ids, slower. */
void tmm_tok_cache_disable_words(tmm_tok_cache *cache);

/* Appends the ids of text (any bytes) to out. With special, the added
 * special tokens written in the text are recognised as themselves; without,
 * they are ordinary text. cache may be NULL. */
tmm_status tmm_tokenizer_encode(const tmm_tokenizer *tok, tmm_tok_cache *cache, const char *text, size_t length,
                                bool special, tmm_tokens *out);
/* The post-processor's template (TemplateProcessing's "single": Llama's
 * <s> or <|begin_of_text|> before the text) around ids[first..count), as
 * Hugging Face's encode with add_special_tokens; nothing without one. */
tmm_status tmm_tokenizer_add_special(const tmm_tokenizer *tok, tmm_tokens *ids, size_t first);
bool tmm_tokenizer_has_template(const tmm_tokenizer *tok);
/* Appends the bytes of ids to out; an id at or past the vocabulary is an
 * error naming it. Special tokens decode to their text when special, to
 * nothing otherwise. */
tmm_status tmm_tokenizer_decode(const tmm_tokenizer *tok, const uint32_t *ids, size_t count, bool special,
                                tmm_bytes *out);
/* The bytes of one token, for streaming output (as in the middle of a text:
 * a SentencePiece-style token's leading "▁" is a space): *bytes points into
 * the tokenizer; returns their length (0 for an unknown id). */
size_t tmm_tokenizer_token_bytes(const tmm_tokenizer *tok, uint32_t id, const char **bytes);

tmm_status tmm_tokens_push(tmm_tokens *t, uint32_t id);
tmm_status tmm_bytes_append(tmm_bytes *b, const void *data, size_t length);


/* ---- the kinds of tokenizer a model has ------------------------------------- */

/* The byte tokenizer's end-of-text token and vocabulary. */
#define TMM_TEXT_EOT 256u
#define TMM_TEXT_VOCAB 257u
/* A run's own tokenizer (runs on prepared shards): RUN/tokenizer.json, named
 * by its checkpoints' "tokenizer" metadata, with "tokenizer_fingerprint". */
#define TMM_RUN_TOKENIZER "tokenizer.json"

/* BYTES: the byte tokenizer; COPY: the copy task's symbols (0-9a-z below 37
 * symbols, numbers separated by spaces above); RUN: a tmm_tokenizer loaded
 * from the run's tokenizer.json (model/checkpoint.h, tmm_checkpoint_tokenizer). */
typedef enum tmm_model_tokenizer { TMM_TOKENIZER_BYTES, TMM_TOKENIZER_COPY, TMM_TOKENIZER_RUN } tmm_model_tokenizer;

/* The kind a checkpoint's "tokenizer" metadata names ("bytes",
 * "copy-symbols", "tokenizer.json"); NULL (older checkpoints) picks bytes for
 * vocab 257 and copy symbols otherwise. Fails for an unknown name or a
 * vocabulary that does not fit it. */
tmm_status tmm_model_tokenizer_pick(const char *name, uint32_t vocab, tmm_model_tokenizer *out);
const char *tmm_model_tokenizer_name(tmm_model_tokenizer kind);
/* Text to tokens and one token to text for BYTES and COPY (RUN: through its
 * tmm_tokenizer, below). */
tmm_status tmm_model_tokenizer_encode(tmm_model_tokenizer kind, uint32_t vocab, const char *text, size_t length,
                                     uint32_t **tokens, uint32_t *count);
size_t tmm_model_tokenizer_decode(tmm_model_tokenizer kind, uint32_t vocab, uint32_t token, char *buf, size_t size);
/* A prompt through tok, with the special tokens recognised ("<|endoftext|>");
 * *tokens is malloc'ed (free()). */
tmm_status tmm_tokenizer_encode_prompt(const tmm_tokenizer *tok, const char *text, size_t length, uint32_t **tokens,
                                       uint32_t *count);
/* One token's bytes as a string (the end-of-text token: empty); returns its length. */
size_t tmm_tokenizer_decode_token(const tmm_tokenizer *tok, uint32_t token, char *buf, size_t size);

#endif
