/* Reading a text corpus as documents, streaming (bounded memory whatever the
 * file's size): plain text, JSONL with a "text" field per line (by the
 * extension .jsonl), either gzip-compressed (.gz, by content), and
 * directories (their files as tmm_walk_files gives them: name order, hidden
 * names and symbolic links skipped). */
#ifndef TMM_TEXT_CORPUS_H
#define TMM_TEXT_CORPUS_H

#include <stdbool.h>
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
/* The error for a JSONL line longer than TMM_CORPUS_MAX_LINE. */
tmm_status tmm_corpus_long_line(const char *path, uint64_t line);

tmm_status tmm_corpus_read(const char *const *paths, size_t count, tmm_corpus_fn fn, tmm_corpus_progress_fn progress,
                           void *user);

/* Whether path names a JSONL file: it ends in .jsonl or .jsonl.gz (any case). */
bool tmm_corpus_is_jsonl(const char *path);

/* One corpus file read in pieces, for readers that cut it themselves (tmm
 * prepare): gzip-compressed by content, under the two .gz rules above, else
 * read as it is. tmm_corpus_file_read fills buf with up to cap bytes, *got 0
 * at the end; an error (truncated, damaged, too large) names the file. */
typedef struct tmm_corpus_file tmm_corpus_file;
tmm_status tmm_corpus_file_open(const char *path, tmm_corpus_file **out);
tmm_status tmm_corpus_file_read(tmm_corpus_file *f, char *buf, size_t cap, size_t *got);
/* The most bytes the file may yield: tmm_gz_limit when compressed, else UINT64_MAX. */
uint64_t tmm_corpus_file_limit(const tmm_corpus_file *f);
void tmm_corpus_file_close(tmm_corpus_file *f);

/* One line of a JSONL file (without its LF; a CR before it is dropped), as
 * docs/data.md defines: BLANK (only spaces, tabs, CRs), EMPTY (a "text" of
 * ""), or TEXT with *text the field's bytes (malloc'ed: free() it). Anything
 * else (a line longer than TMM_CORPUS_MAX_LINE, invalid JSON, text after it,
 * a duplicate key, no "text" string, the escape \u0000) is an error naming
 * path:line. Every JSONL reader's rule. */
typedef enum tmm_jsonl_kind { TMM_JSONL_BLANK, TMM_JSONL_EMPTY, TMM_JSONL_TEXT } tmm_jsonl_kind;
tmm_status tmm_jsonl_line(const char *path, uint64_t line, const char *s, size_t len, tmm_jsonl_kind *kind,
                          char **text, size_t *text_len);

#endif
