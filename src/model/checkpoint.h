/* Model checkpoints and the training state, for `tmm train` (save, keep the
 * last K, resume bit-exactly) and for `tmm generate` / `tmm eval` (load).
 * The run directory's layout, both files' tensors and metadata, the
 * checksums, what loading checks and how saving stays crash-safe are
 * specified in docs/formats.md, which this file implements. One process
 * saves into a run directory at a time (the trainer holds its lock). */
#ifndef TMM_CHECKPOINT_H
#define TMM_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"
#include "model/params.h"
#include "text/tokenizer.h"
#include "tmm/model.h"

/* 2: kernel-k windows stay inside their head (version 1 files of kernel-k
 * models with heads are refused; all other version 1 files load). 3: arch
 * and window; 4: state; 5: init (older files: the architecture's); 6:
 * meta_fnv1a64 covers the tensor table too (names, dtypes, shapes, offsets). */
#define TMM_CHECKPOINT_FORMAT_VERSION 6
#define TMM_CHECKPOINT_TABLE_VERSION 6
#define TMM_CHECKPOINT_KEEP_DEFAULT 3
#define TMM_TRAIN_STATE_WORDS 16

/* What a resumed run needs besides the weights. */
typedef struct tmm_train_state {
    uint64_t step;        /* optimizer steps done; must equal the step saved */
    float *m, *v;         /* AdamW first and second moments: arenas of the
                             parameter table's layout (arena_floats each; the
                             padding is neither stored nor read) */
    uint32_t n_words;     /* <= TMM_TRAIN_STATE_WORDS */
    uint64_t words[TMM_TRAIN_STATE_WORDS]; /* the trainer's own: RNG states,
                             data position, ...; stored exactly */
    const char *blob;     /* the trainer's own string, or NULL */
    const tmm_st_meta *config; /* optimizer and schedule config as strings
                             (write floats with "%a" or "%.9g" to round-trip) */
    uint32_t n_config;
} tmm_train_state;

/* A loaded checkpoint. Everything is owned by it: tmm_checkpoint_free. */
typedef struct tmm_checkpoint {
    char *dir;              /* the step directory (for a bare model file, its directory) */
    char *model_path;       /* the model file that was read */
    uint64_t step;
    tmm_param_table table;  /* built from the checkpoint's config (table.config) */
    float *params;          /* table.arena_floats floats, padding zero */
    tmm_st_meta *meta;      /* the caller's extra metadata, in file order */
    uint32_t n_meta;
    bool has_state;         /* state below was loaded */
    tmm_train_state state;  /* m, v, blob and config owned by the checkpoint */
} tmm_checkpoint;

/* Saves a checkpoint of step into run_dir (created if needed): the model, and
 * the train state when state is not NULL (state->step must equal step).
 * extra: metadata strings stored in the model file (distinct keys, none of
 * the reserved keys above). Then "latest" names it, and of the step
 * directories numbered up to step only the keep newest stay, this one among
 * them (keep 0: keep all). Directories numbered above step (left by a run
 * that was resumed from an earlier checkpoint) are not touched. Saving a step
 * that already exists replaces it. On failure "latest" and the checkpoints
 * it names are as they were. */
tmm_status tmm_checkpoint_save(const char *run_dir, uint64_t step, const tmm_param_table *table,
                               const float *params, const tmm_train_state *state, const tmm_st_meta *extra,
                               uint32_t n_extra, uint32_t keep);

/* Writes one model.safetensors file (atomically) outside the checkpoint
 * layout, e.g. to export weights. */
tmm_status tmm_checkpoint_write_model(const char *path, uint64_t step, const tmm_param_table *table,
                                      const float *params, const tmm_st_meta *extra, uint32_t n_extra);

/* Flags of tmm_checkpoint_load. */
enum {
    TMM_CHECKPOINT_STATE = 1,            /* also load train_state.safetensors (an error if it is absent) */
    TMM_CHECKPOINT_ALLOW_NONFINITE = 2,  /* accept NaN and infinite values (for debugging a diverged run) */
};

/* Loads a checkpoint. path is a run directory (its checkpoints/latest), a
 * checkpoints directory (its latest), a step directory, or a model
 * .safetensors file (its directory is the step directory). When "latest" is
 * missing, the newest step directory is used (with a warning).
 * expect: when not NULL, every config field must equal it, or the load fails
 * naming the first field that differs. A NaN or infinite value in any tensor
 * fails the load, naming the tensor, unless TMM_CHECKPOINT_ALLOW_NONFINITE.
 * On failure *out is zeroed and owns nothing. */
tmm_status tmm_checkpoint_load(const char *path, const tmm_model_config *expect, unsigned flags,
                               tmm_checkpoint *out);
/* The model only, for inference: tmm_checkpoint_load(path, expect, 0, out). */
tmm_status tmm_checkpoint_load_model(const char *path, const tmm_model_config *expect, tmm_checkpoint *out);

/* The run directory that holds the checkpoint at path: path itself for a run
 * directory, else the directory above its checkpoints/. Derived from the path
 * alone, never from what the checkpoint says. TMM_ERR_INVALID_ARGUMENT when
 * the checkpoint is not inside a RUN/checkpoints/ layout. */
tmm_status tmm_checkpoint_run_dir(const char *path, char *buf, size_t size);
/* The run's tokenizer.json of the checkpoint at path (TMM_RUN_TOKENIZER in
 * its run directory), checked against the checkpoint's fingerprint
 * ("tokenizer_fingerprint") and its vocabulary. */
tmm_status tmm_checkpoint_tokenizer(const char *checkpoint, const char *fingerprint, uint32_t vocab,
                                    tmm_tokenizer **out);
/* Whether run_dir holds a run: checkpoints/, metrics.jsonl, config.json or tokenizer.json. */
bool tmm_run_dir_holds_run(const char *run_dir);
/* Whether the run in run_dir saved a checkpoint (checkpoints/latest names one): what --resume needs. */
bool tmm_run_dir_has_checkpoint(const char *run_dir);
/* Removes the run in run_dir (what tmm train writes there: checkpoints/ with
 * its step directories, metrics.jsonl, config.json, tokenizer.json), following no symbolic
 * link; a file tmm did not write stops it with an error. */
tmm_status tmm_run_dir_clear(const char *run_dir);
/* Frees what a checkpoint owns and zeroes it. NULL and zeroed are fine. */
void tmm_checkpoint_free(tmm_checkpoint *ckpt);

/* Value of one of the caller's extra metadata keys, or NULL. */
const char *tmm_checkpoint_meta(const tmm_checkpoint *ckpt, const char *key);
/* Name of the first config field where a and b differ ("vocab", ...,
 * "seed"), or NULL when they are equal. */
const char *tmm_checkpoint_config_diff(const tmm_model_config *a, const tmm_model_config *b);
/* RUN/checkpoints/step-NNNNNN into buf. TMM_ERR_INVALID_ARGUMENT if it does
 * not fit. */
tmm_status tmm_checkpoint_step_dir(const char *run_dir, uint64_t step, char *buf, size_t size);

#endif
