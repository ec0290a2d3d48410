/* Reading a text corpus as documents, streaming (bounded memory whatever the
 * file's size): plain text, JSONL with a "text" field per line (by the
 * extension .jsonl), either gzip-compressed (.gz, by content), and
 * directories (their files as tmm_walk_files gives them: name order, hidden
 * names and symbolic links skipped). */
#ifndef TMM_TEXT_CORPUS_H
#define TMM_TEXT_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "tmm/tmm.h"

/* Longest JSONL line and longest plain-text piece handed over at once. */
#define TMM_CORPUS_MAX_LINE (64u << 20)
#define TMM_CORPUS_CHUNK (1u << 20)

/* Called with each document (a JSONL line's text) or piece of a plain text
 * file: pieces end where a line ends between two non-space characters when
 * they can (so GPT-2's pre-tokenization splits them as it would the whole),
 * else after 16 chunks. */
typedef tmm_status (*tmm_corpus_fn)(const char *text, size_t length, void *user);
/* Progress: bytes of the files read so far (compressed bytes for .gz) of total. */
typedef void (*tmm_corpus_progress_fn)(uint64_t done, uint64_t total, void *user);

/* Every .gz reader's two rules (tmm prepare, tmm tokenizer train): a file may
 * inflate to at most TMM_GZ_MAX_RATIO times its compressed size (and 64 MiB
 * whatever its size), beyond which it is refused as a decompression bomb; and
 * a stream that ends early (truncated) or is damaged is an error, never the
 * part that inflated. */
#define TMM_GZ_MAX_RATIO 100
#define TMM_GZ_MIN_LIMIT (64ull << 20)
uint64_t tmm_gz_limit(const char *path);
/* After gzread returned got: TMM_OK while got > 0 or at a clean end; else the error, naming path. */
tmm_status tmm_gz_check(void *gz, int got, const char *path);
/* The error for inflating past tmm_gz_limit. */
tmm_status tmm_gz_too_large(const char *path, uint64_t limit);

tmm_status tmm_corpus_read(const char *const *paths, size_t count, tmm_corpus_fn fn, tmm_corpus_progress_fn progress,
                           void *user);

#endif
