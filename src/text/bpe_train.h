/* Training a byte-level BPE (docs/tokenizer.md, "Training"): count the
 * GPT-2 pre-tokenized words of a corpus, then merge the most frequent
 * adjacent pair until the vocabulary is full. Deterministic: the same text
 * in the same order gives the same tokenizer. */
#ifndef TMM_TEXT_BPE_TRAIN_H
#define TMM_TEXT_BPE_TRAIN_H

#include "text/tokenizer.h"

/* Distinct words kept while counting (the memory bound) by default, and the
 * longest word counted (longer ones are skipped). */
#define TMM_BPE_DEFAULT_MAX_WORDS (1u << 21)
#define TMM_BPE_MAX_WORD 1024u

typedef struct tmm_bpe_counter tmm_bpe_counter;

/* When more than max_words distinct words are held, the rarest are dropped:
 * those seen fewer than t times, t = 2, 4, 8, ... until at most half remain. */
tmm_status tmm_bpe_counter_new(uint64_t max_words, tmm_bpe_counter **out);
void tmm_bpe_counter_free(tmm_bpe_counter *c);
/* Pre-tokenizes text (any bytes) with the GPT-2 pattern and counts its words. */
tmm_status tmm_bpe_count(tmm_bpe_counter *c, const char *text, size_t length);
/* Distinct words held, and words counted in all (pruned ones included). */
uint64_t tmm_bpe_counter_distinct(const tmm_bpe_counter *c);
uint64_t tmm_bpe_counter_total(const tmm_bpe_counter *c);

/* merges done of total, every 1/256 of the way and at the end */
typedef void (*tmm_bpe_progress_fn)(uint32_t done, uint32_t total, void *user);

/* A tokenizer of at most vocab ids (257 .. 2^22): the 256 bytes (ids 0..255),
 * <|endoftext|> (256, special), then one token per merge. Fewer when the
 * words run out of pairs. */
tmm_status tmm_bpe_train(const tmm_bpe_counter *c, uint32_t vocab, tmm_bpe_progress_fn progress, void *user,
                         tmm_tokenizer **out);

#endif
