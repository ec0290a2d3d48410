/* Token shards: the binary files `tmm prepare` writes and `tmm train` reads
 * (docs/formats.md "Token shards"). A shard is llm.c's .bin layout (a header
 * of 256 little-endian int32, magic 20240520, version 1 for uint16 tokens or
 * 2 for uint32, the token count) with tmm's fields in the header's unused
 * words: the tokenizer's fingerprint, vocabulary and end-of-text id, the
 * document count, the split and an FNV-1a 64 checksum of the tokens.
 *
 * A shard holds whole documents, each followed by one end-of-text token; the
 * end-of-text id never occurs inside a document, so the documents are the
 * runs between them. A shard set (a prepared directory, or shard files) is
 * opened once: every shard is mapped read-only, and checked in one pass
 * (size, header, checksum, every token below the vocabulary, the document
 * count). Afterwards its tokens are read in place: the page cache streams a
 * corpus larger than memory. A set is read-only after open and may be read by
 * any thread. */
#ifndef TMM_TRAIN_SHARDS_H
#define TMM_TRAIN_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmm/tmm.h"

#define TMM_SHARD_MAGIC 20240520u
#define TMM_SHARD_HEADER_BYTES 1024u
#define TMM_SHARD_VERSION_U16 1u      /* llm.c's GPT-2 shards: uint16 tokens */
#define TMM_SHARD_VERSION_U32 2u      /* llm.c's Llama 3 shards: uint32 tokens */
#define TMM_SHARD_TMM_TAG 0x316d6d74u /* "tmm1": tmm's fields follow */
#define TMM_SHARD_MAX_TOKENS 2147483647ull /* llm.c's count is an int32 */
#define TMM_SHARD_DEFAULT_TOKENS 100000000ull
#define TMM_SHARD_MANIFEST "manifest.json"
#define TMM_SHARD_TOKENIZER "tokenizer.json"
#define TMM_SHARD_MAX_FILES 100000u

typedef enum tmm_shard_split { TMM_SHARD_TRAIN = 0, TMM_SHARD_VAL = 1 } tmm_shard_split;

typedef struct tmm_shard_header {
    uint32_t version;     /* 1: uint16 tokens, 2: uint32 */
    uint64_t tokens;
    uint64_t fingerprint; /* tmm_tokenizer_fingerprint */
    uint32_t vocab, eot;
    uint64_t documents;
    uint32_t split;       /* tmm_shard_split */
    uint32_t index;       /* NNNNNN of train_NNNNNN.bin */
    uint64_t checksum;    /* FNV-1a 64 of the token bytes */
} tmm_shard_header;

/* 2 or 4: the token width of a vocabulary (uint16 when every id fits). */
uint32_t tmm_shard_width(uint32_t vocab);
void tmm_shard_header_encode(const tmm_shard_header *h, uint8_t out[TMM_SHARD_HEADER_BYTES]);
/* Checks every field of a header read from a file of file_size bytes: magic,
 * version, tmm's tag, the size against the count, vocab and end-of-text,
 * zero reserved words. path names the file in errors. */
tmm_status tmm_shard_header_decode(const uint8_t *bytes, uint64_t file_size, const char *path, tmm_shard_header *h);
/* The shard's file name: train_NNNNNN.bin or val_NNNNNN.bin. */
void tmm_shard_name(tmm_shard_split split, uint32_t index, char *buf, size_t size);

/* ---- writing: a temporary file, renamed when complete ---------------------- */

typedef struct tmm_shard_writer tmm_shard_writer;
/* Starts dir/<name> as a temporary file beside it; the header's version,
 * fingerprint, vocab, eot, split and index come from h. */
tmm_status tmm_shard_writer_open(const char *dir, const tmm_shard_header *h, tmm_shard_writer **out);
/* Appends one document's tokens and its end-of-text token. */
tmm_status tmm_shard_writer_document(tmm_shard_writer *w, const uint32_t *ids, size_t count);
uint64_t tmm_shard_writer_tokens(const tmm_shard_writer *w);
/* Writes the header, fsyncs, renames to the final name; *h receives the
 * complete header. Frees w in every case. */
tmm_status tmm_shard_writer_close(tmm_shard_writer *w, tmm_shard_header *h);
/* Removes the temporary file and frees w (NULL is fine). */
void tmm_shard_writer_abort(tmm_shard_writer *w);

/* ---- reading ------------------------------------------------------------ */

typedef struct tmm_shard_set tmm_shard_set;

/* Whether path is a prepared directory (holds manifest.json) or a file that
 * starts with the shard magic. */
bool tmm_shards_detect(const char *path);

/* Opens shards: each path a prepared directory (its manifest's shards) or a
 * shard file (the tokenizer.json beside it names the tokenizer; its header
 * says its split). Every shard must agree with the tokenizer (fingerprint,
 * vocabulary, end-of-text). with_docs: also index the documents' starts
 * (document mode). Errors name the file and what is wrong. */
tmm_status tmm_shards_open(const char *const *paths, uint32_t count, bool with_docs, tmm_shard_set **out);
void tmm_shards_close(tmm_shard_set *set);

/* The path of the tokenizer.json of the set (the prepared directory's). */
const char *tmm_shards_tokenizer_path(const tmm_shard_set *set);
uint64_t tmm_shards_fingerprint(const tmm_shard_set *set);
uint32_t tmm_shards_vocab(const tmm_shard_set *set);
uint32_t tmm_shards_eot(const tmm_shard_set *set);
uint32_t tmm_shards_files(const tmm_shard_set *set, tmm_shard_split split);
/* Tokens of a split: its shards back to back, in order. */
uint64_t tmm_shards_tokens(const tmm_shard_set *set, tmm_shard_split split);
uint64_t tmm_shards_documents(const tmm_shard_set *set, tmm_shard_split split);
/* Copies tokens [start, start + count) of the split's stream (in range). */
void tmm_shards_read(const tmm_shard_set *set, tmm_shard_split split, uint64_t start, uint32_t count, uint32_t *out);
/* Document d of the split (with_docs): its first token in the split's stream
 * and its length without the end-of-text token. */
void tmm_shards_document(const tmm_shard_set *set, tmm_shard_split split, uint64_t d, uint64_t *start,
                         uint64_t *length);
/* How many times each token occurs in the training split (vocab entries),
 * counted by the open's pass. */
const uint64_t *tmm_shards_train_counts(const tmm_shard_set *set);

#endif
