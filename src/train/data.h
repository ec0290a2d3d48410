/* Training data: the copy task and byte-level text, on the CPU, deterministic
 * from a seed.
 *
 * A batch is a pure function of (config, split, index, batch, n): the same
 * seed gives the same bytes on every machine and every run, and nothing else
 * (no hidden cursor) has to be saved to resume exactly. The "data position"
 * of a run is just the index of its next batch. Every random choice comes
 * from the counter-based generator of model/rng.h.
 *
 * Row numbering: row r of batch `index` (of `batch` rows) is sample
 * j = index * batch + r of its split, and every row is a function of j alone.
 * So batch (i, B) equals rows [i*B, i*B + B) of the stream at any batch size:
 * two micro-batches (2i, B) and (2i + 1, B) are exactly batch (i, 2B).
 *
 * Layout of one row, for every task: tokens[t] (t = 0..n-1) is the model's
 * input at position t; targets[t] is the token position t must predict (the
 * next token), or TMM_TARGET_IGNORE where the position is not scored.
 *
 * ---- copy (tmm-spec.md "Copy task") -------------------------------------
 * Tokens 0 .. alphabet-1 (default 16); no separator, vocab = alphabet.
 * With h = floor(n / 2) and A = h random symbols (uniform, independent):
 *   tokens  = [A ; A]                 positions 0..2h-1, tokens[h + i] = A[i]
 *             (odd n: one more random symbol at position n-1 = 2h, never
 *             copied and never scored)
 *   targets[t] = tokens[t + 1]  for t = h-1 .. 2h-2   (the h positions whose
 *             next token is the second copy: position h-1 predicts A[0],
 *             position 2h-2 predicts A[h-1])
 *   targets[t] = TMM_TARGET_IGNORE everywhere else (the first copy, the last
 *             position 2h-1, and for odd n position 2h).
 * Every row has exactly h scored targets, so "teacher-forced argmax accuracy
 * on the scored half" = (positions with target >= 0 and argmax == target) / h
 * per row. n >= 2.
 * Streams: training sample j of seed s uses key tmm_rng_key(s, "copy/train");
 * validation sample j uses tmm_rng_key(TMM_DATA_VAL_SEED, "copy/val") for
 * every training seed, so the held-out set is the same in every run (scores
 * compare across seeds) and comes from a stream no training seed uses. Row key
 * k = tmm_rng_bits(stream, j), A[i] = tmm_rng_bits(k, i) % alphabet, odd-n
 * extra symbol = tmm_rng_bits(k, h) % alphabet. (Different streams do not
 * preclude equal contents: with a tiny alphabet^h, e.g. 16^4, validation rows
 * also occur in training by chance; from 16^16 on that is negligible.)
 * The validation set is unbounded: index i gives new fixed rows for any i.
 *
 * ---- text ----------------------------------------------------------------
 * Byte-level: tokens 0..255 are byte values, TMM_TEXT_EOT = 256 ends a
 * document; vocab TMM_TEXT_VOCAB = 257 (no separate padding token: padding is
 * EOT and unscored). Files are read as bytes (invalid UTF-8 is kept as is).
 *
 * Documents. A file is JSONL when its name ends in ".jsonl" (any case) or
 * text_format is TMM_TEXT_JSONL: every line (LF, an optional CR before it is
 * dropped) that is not blank is a JSON object with a string "text" field,
 * which is one document (decoded by cJSON; a line holding the escape "\u0000",
 * a NUL character, is an error: C strings cannot carry it).
 * A line that is not such an object is an error naming the file and line.
 * Blank lines and empty "text" values are skipped (empty ones are counted).
 * A plain text file is, in window mode, one document: all its bytes verbatim.
 * In document mode it is split at blank lines (lines of only spaces, tabs and
 * CRs): a document is a maximal run of non-blank lines, from its first byte
 * to the end of its last line, without that line's LF or CRLF. A file that
 * gives no document is an error: an empty (0-byte) file in any mode, a
 * plain file of only blank lines in document mode, a JSONL file of only blank
 * lines or empty "text" values.
 *
 * Window mode (TMM_TEXT_WINDOWS). The stream is every document in order (files
 * in the order given), each followed by one EOT: doc0 EOT doc1 EOT ... ; N
 * tokens. Split: the last V = max(ceil(val_fraction * N), n + 1) tokens are
 * validation, the first N - V training (V = 0 when val_fraction is 0). A
 * split must hold at least n + 1 tokens, else create fails and says how many
 * tokens it would need. A row is a window w of n + 1 consecutive tokens that
 * lies inside one split: tokens[t] = w[t], targets[t] = w[t + 1], all scored.
 *   training sample j: window start = tmm_rng_bits(tmm_rng_key(seed,
 *     "text/train/windows"), j) % (N - V - n)   (uniform over all starts)
 *   validation sample j: start = (N - V) + (j mod W) * n with
 *     W = floor((V - 1) / n): consecutive windows, each validation token
 *     scored once per pass of W rows (tmm_data_val_rows).
 *
 * Document mode (TMM_TEXT_DOCUMENTS, the paper's). One document per row.
 * With d the document's L bytes, the row is r = d[0..min(L, n+1)) followed by
 * EOT up to n + 1 tokens (r[k] = EOT for k >= L), and
 *   tokens[t] = r[t],  targets[t] = r[t + 1] for t < min(L, n), else IGNORE.
 * So a document of L <= n bytes has L scored targets: its bytes 1..L-1 and
 * the EOT that ends it (at position L-1); the padding after that EOT is not
 * scored. A longer document is truncated to n + 1 bytes, all n targets are
 * scored and there is no EOT. The document's first byte is never a target.
 * Split: a document is validation when u(d) < val_fraction, where
 * u(d) = (tmm_rng_bits(tmm_fnv1a64(d), 0) >> 11) * 2^-53 is a hash of its
 * bytes, so the split depends on the corpus only (not on the seed, not on
 * the file order) and equal documents are always on the same side. If that
 * leaves validation empty while val_fraction > 0, the documents of the
 * smallest u move to validation; fewer than two distinct documents with
 * val_fraction > 0 is an error (as is an empty training split).
 *   training sample j: epoch e = j / D (D training documents), document
 *     train[P_e(j mod D)] where P_e is a pseudo-random permutation of 0..D-1
 *     keyed by (seed, e): every document once per epoch, a new order each
 *     epoch, still a pure function of j.
 *   validation sample j: validation document (j mod W), W = their number, in
 *     corpus order.
 *
 * Thread safety: a tmm_data is read-only after create; tmm_data_batch may run
 * on any thread, concurrently. */
#ifndef TMM_TRAIN_DATA_H
#define TMM_TRAIN_DATA_H

#include <stdint.h>

#include "tmm/tmm.h"

/* The target of a position that is not scored (the reference's -100; every
 * negative target is ignored by the loss). */
#define TMM_TARGET_IGNORE (-100)
#define TMM_TEXT_EOT 256u
#define TMM_TEXT_VOCAB 257u
#define TMM_COPY_DEFAULT_ALPHABET 16u
#define TMM_COPY_MAX_ALPHABET 65536u
#define TMM_DATA_DEFAULT_VAL_FRACTION 0.05
/* Seed of the copy task's held-out stream (the same for every training seed). */
#define TMM_DATA_VAL_SEED 0x7e57da7aull

typedef enum tmm_data_task { TMM_DATA_COPY, TMM_DATA_TEXT } tmm_data_task;
typedef enum tmm_text_mode { TMM_TEXT_WINDOWS, TMM_TEXT_DOCUMENTS } tmm_text_mode;
/* AUTO: JSONL by the ".jsonl" extension, plain text otherwise. */
typedef enum tmm_text_format { TMM_TEXT_AUTO, TMM_TEXT_PLAIN, TMM_TEXT_JSONL } tmm_text_format;
typedef enum tmm_data_split { TMM_SPLIT_TRAIN, TMM_SPLIT_VAL } tmm_data_split;

typedef struct tmm_data_config {
    tmm_data_task task;
    uint64_t seed;
    /* The context length the trainer uses. Create checks the text splits
     * against it; tmm_data_val_rows and the entropy use it. Batches may ask
     * for another n (checked per call). */
    uint32_t n;
    uint32_t copy_alphabet;            /* copy: 2 .. TMM_COPY_MAX_ALPHABET */
    const char *const *text_paths;     /* text: one or more files */
    uint32_t text_path_count;
    tmm_text_mode text_mode;
    tmm_text_format text_format;
    double val_fraction;               /* text: in [0, 1); 0 = no validation split */
} tmm_data_config;

/* Sizes, for the trainer's printout and logs. */
typedef struct tmm_data_info {
    tmm_data_task task;
    uint32_t vocab;
    uint64_t train_tokens;   /* text: tokens of the training split (window
                                mode: stream tokens; document mode: document
                                bytes plus one EOT each); copy: 0 (unbounded) */
    uint64_t val_tokens;
    uint64_t train_docs;     /* documents (window mode: those that start in the split) */
    uint64_t val_docs;
    uint64_t skipped_docs;   /* empty JSONL "text" values skipped */
    uint64_t truncated_docs; /* document mode: training documents longer than n + 1 bytes */
    uint64_t truncated_bytes; /* ... and their bytes past the first n + 1, which no row holds */
    uint64_t val_rows;       /* tmm_data_val_rows */
} tmm_data_info;

typedef struct tmm_data tmm_data;

/* Defaults: copy task, seed 0, n 0 (must be set), alphabet 16, window mode,
 * format AUTO, val_fraction 0.05. */
void tmm_data_config_init(tmm_data_config *config);

/* Loads and splits the data. Errors: TMM_ERR_INVALID_ARGUMENT for a bad
 * config, a malformed JSONL line (names file:line), a corpus too short for
 * the splits; TMM_ERR_IO for a missing, unreadable or empty file. */
tmm_status tmm_data_create(const tmm_data_config *config, tmm_data **out);
void tmm_data_destroy(tmm_data *data);

/* Fills tokens [batch, n] and, when not NULL, targets [batch, n] with the rows
 * index*batch .. index*batch + batch - 1 of the split (layouts above). Fails
 * for batch 0, n too small for the task (copy: n >= 2; window mode: each split
 * must hold n + 1 tokens), or a validation split that is empty. */
tmm_status tmm_data_batch(const tmm_data *data, tmm_data_split split, uint64_t index, uint32_t batch, uint32_t n,
                          uint32_t *tokens, int32_t *targets);

/* Vocabulary the model needs: the copy alphabet, or TMM_TEXT_VOCAB. */
uint32_t tmm_data_vocab(const tmm_data *data);

/* Distinct validation rows at the config's n: one pass over the held-out set
 * (window mode: W windows, document mode: validation documents; rows beyond
 * wrap around). 0 for the copy task (unbounded: every row is new) and when
 * there is no validation split. */
uint64_t tmm_data_val_rows(const tmm_data *data);

/* Unigram entropy, in NATS per token (the unit of the cross-entropy loss;
 * divide by ln 2 for bits), of the scored targets of one pass over the
 * training split at the config's n: window mode, every token of the training
 * split; document mode, each training document once, its scored targets as
 * laid out above; copy, ln(alphabet) exactly. A model that predicts the
 * training split's byte frequencies scores this loss. */
double tmm_data_unigram_entropy(const tmm_data *data);

/* One line for the trainer's printout, e.g.
 * "text (windows of n+1 = 257): 1 file(s), 10946 bytes, 1 document(s); 10947 tokens: 10399 train,
 *  548 val (the last 5.01%); vocab 257; seed 1". */
const char *tmm_data_describe(const tmm_data *data);

const tmm_data_info *tmm_data_get_info(const tmm_data *data);

#endif
