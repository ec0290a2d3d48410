/* Model checkpoints and the training state, for `tmm train` (save, keep the
 * last K, resume bit-exactly) and for `tmm generate` / `tmm eval` (load).
 *
 * Layout of a run directory:
 *
 *   RUN/checkpoints/step-000500/model.safetensors        the model
 *   RUN/checkpoints/step-000500/train_state.safetensors  optimizer and data state (optional)
 *   RUN/checkpoints/latest                               "step-000500\n": the newest complete checkpoint
 *
 * Step directories are named "step-" and the step in at least 6 digits; they
 * are ordered by the number, not by the name.
 *
 * model.safetensors (plain safetensors; tools/torch_ref.py reads it):
 *   tensors     every parameter of the tmm_param_table under its documented
 *               name (src/model/params.h), F32, its shape, in table order;
 *               the arena's alignment padding is not stored.
 *   __metadata__ (all values are strings)
 *     format "tmm-model", format_version "2"
 *     vocab d_model n_ctx n_layers heads expansion kernel  decimal
 *     expanded frozen                                     "0" or "1"
 *     seed step                                           decimal uint64
 *     data_fnv1a64   16 hex digits: FNV-1a 64 of the data section (every byte
 *                    after the header)
 *     meta_fnv1a64   16 hex digits: FNV-1a 64 over the other metadata pairs
 *                    sorted by key (bytewise), each as key NUL value NUL
 *     any other key: the caller's extra strings (tokenizer, task, ...)
 *
 * train_state.safetensors:
 *   tensors     "m.<name>" and "v.<name>" for every parameter (frozen ones
 *               too: their moments are whatever the caller's arenas hold,
 *               normally zero), F32, the parameter's shape, in table order.
 *   __metadata__
 *     format "tmm-train-state", format_version "2"
 *     step           decimal uint64 (equal to the model file's step)
 *     model_fnv1a64  the data_fnv1a64 of the model file written with it: a
 *                    state never pairs with another checkpoint's model
 *     words          the caller's uint64 words, decimal, comma-separated
 *                    ("" when none)
 *     blob           the caller's string blob (absent when NULL)
 *     opt.<key>      the caller's optimizer / schedule config strings
 *     data_fnv1a64, meta_fnv1a64   as in the model file
 *
 * Integrity: loading checks, in order, that the file is well-formed
 * safetensors (header size, JSON, dtypes, shapes, offsets inside the file),
 * its format and version, both checksums, the model config (valid, and equal
 * to the caller's when one is given), that exactly the expected tensors are
 * present with dtype F32 and the expected shapes, and for the state that its
 * step and model_fnv1a64 match the model file. Any failure is TMM_ERR_IO (a
 * config that differs from the caller's: TMM_ERR_INVALID_ARGUMENT) with one
 * message that names the file and what is wrong; nothing is half-loaded.
 *
 * Saving is crash-safe: files go into RUN/checkpoints/.step-N.tmp (each written
 * to a temporary file, fsync'ed and renamed), the directory is fsync'ed and
 * renamed to step-N, then "latest" is replaced atomically, and only then are
 * old checkpoints deleted. A crash at any point leaves "latest" naming a
 * complete checkpoint. Leftover .tmp directories are ignored by loading and
 * removed by the next save. One process saves into a run directory at a time. */
#ifndef TMM_CHECKPOINT_H
#define TMM_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"
#include "model/params.h"
#include "tmm/model.h"

/* 2: kernel-k windows stay inside their head (version 1 files of kernel-k
 * models with heads are refused; all other version 1 files load). */
#define TMM_CHECKPOINT_FORMAT_VERSION 2
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
/* Whether run_dir holds a run: checkpoints/, metrics.jsonl or config.json. */
bool tmm_run_dir_holds_run(const char *run_dir);
/* Removes the run in run_dir (what tmm train writes there: checkpoints/ with
 * its step directories, metrics.jsonl, config.json), following no symbolic
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
