/* Training data: the copy task, MQAR (mqar.h) and byte-level text, on the CPU, deterministic
 * from a seed. A batch is a pure function of (config, split, index, batch, n):
 * nothing but the index of the next batch has to be saved to resume exactly.
 * The rows of each task, the document and window modes, the splits and the
 * sample streams are specified in docs/data.md, which this file implements.
 * Thread safety: a tmm_data is read-only after create; tmm_data_batch may run
 * on any thread, concurrently. */
#ifndef TMM_TRAIN_DATA_H
#define TMM_TRAIN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmm/tmm.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "train/mqar.h"

#define TMM_COPY_DEFAULT_ALPHABET 16u
#define TMM_COPY_PEAK_LR 3e-3 /* the copy task's default peak learning rate, every architecture */
#define TMM_COPY_MAX_ALPHABET 65536u
#define TMM_DATA_DEFAULT_VAL_FRACTION 0.05
/* Seed of the copy and MQAR tasks' held-out streams (the same for every training seed). */
#define TMM_DATA_VAL_SEED 0x7e57da7aull

typedef enum tmm_data_task { TMM_DATA_COPY, TMM_DATA_TEXT, TMM_DATA_MQAR } tmm_data_task;

/* The task's name in configs and checkpoints: "copy", "text", "mqar". */
const char *tmm_data_task_name(tmm_data_task task);
/* The generated tasks (copy, mqar): unbounded held-out rows of a fixed
 * stream, scored where the task says; their accuracy is what they measure,
 * so a run may stop at a target accuracy, and their peak lr is
 * TMM_COPY_PEAK_LR. */
static inline bool tmm_data_task_generated(tmm_data_task task)
{
    return task == TMM_DATA_COPY || task == TMM_DATA_MQAR;
}
/* The key of the held-out accuracy in metrics.jsonl: "copy_acc", "mqar_acc", "val_accuracy". */
const char *tmm_data_accuracy_key(tmm_data_task task);
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
    tmm_mqar_config mqar;              /* mqar */
    const char *const *text_paths;     /* text: one or more files; or prepared shards: directories
                                          or shard files (detected by manifest.json / the magic) */
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
    uint64_t truncated_bytes; /* ... and their bytes (shards: tokens) past the first n + 1, which no row holds */
    uint64_t val_rows;       /* tmm_data_val_rows */
} tmm_data_info;

typedef struct tmm_data tmm_data;

/* Defaults: copy task, seed 0, n 0 (must be set), alphabet 16, MQAR's
 * defaults (tmm_mqar_config_init), window mode, format AUTO, val_fraction 0.05. */
void tmm_data_config_init(tmm_data_config *config);

/* Loads and splits the data. Errors: TMM_ERR_INVALID_ARGUMENT for a bad
 * config, a malformed JSONL line (names file:line), a corpus too short for
 * the splits; TMM_ERR_IO for a missing, unreadable or empty file. */
tmm_status tmm_data_create(const tmm_data_config *config, tmm_data **out);
void tmm_data_destroy(tmm_data *data);

/* Fills tokens [batch, n] and, when not NULL, targets [batch, n] with the rows
 * index*batch .. index*batch + batch - 1 of the split (layouts above). Fails
 * for batch 0, n too small for the task (copy: n >= 2; mqar: tmm_mqar_check; window mode: each split
 * must hold n + 1 tokens), or a validation split that is empty. */
tmm_status tmm_data_batch(const tmm_data *data, tmm_data_split split, uint64_t index, uint32_t batch, uint32_t n,
                          uint32_t *tokens, int32_t *targets);

/* Vocabulary the model needs: the copy alphabet, MQAR's 1 + keys + values, TMM_TEXT_VOCAB, or the shards' tokenizer's. */
uint32_t tmm_data_vocab(const tmm_data *data);

/* Distinct validation rows at the config's n: one pass over the held-out set
 * (window mode: W windows, document mode: validation documents; rows beyond
 * wrap around). 0 for copy and mqar (unbounded: every row is new) and when
 * there is no validation split. */
uint64_t tmm_data_val_rows(const tmm_data *data);

/* Unigram entropy, in NATS per token (the unit of the cross-entropy loss;
 * divide by ln 2 for bits), of the scored targets of one pass over the
 * training split at the config's n: window mode, every token of the training
 * split; document mode, each training document once, its scored targets as
 * laid out above; copy, ln(alphabet) exactly; mqar, ln(values) exactly (the
 * values are uniform). A model that predicts the
 * training split's byte frequencies scores this loss. */
double tmm_data_unigram_entropy(const tmm_data *data);

/* One line for the trainer's printout, e.g.
 * "text (windows of n+1 = 257): 1 file(s), 10946 bytes, 1 document(s); 10947 tokens: 10399 train,
 *  548 val (the last 5.01%); vocab 257; seed 1". */
const char *tmm_data_describe(const tmm_data *data);

const tmm_data_info *tmm_data_get_info(const tmm_data *data);

/* Prepared shards: the tokenizer.json they were written with and its
 * fingerprint (NULL and 0 for the copy task and plain text). */
const char *tmm_data_tokenizer_path(const tmm_data *data);
uint64_t tmm_data_tokenizer_fingerprint(const tmm_data *data);

#endif
