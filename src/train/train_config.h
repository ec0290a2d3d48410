/* Everything a training run needs, its defaults, and its JSON form (the
 * config file of `tmm train --config`, the presets in assets/presets, and
 * the resolved config the trainer prints and saves in the run directory).
 *
 * JSON layout (every key optional; unknown keys are errors):
 *   { "model":     { "d_model", "n_ctx", "n_layers", "heads", "expansion", "kernel",
 *                    "expanded", "frozen", "seed", "vocab" (0: from the task) },
 *     "optimizer": { "lr", "beta1", "beta2", "eps", "weight_decay", "clip", "decay_all" },
 *     "schedule":  { "kind": "linear"|"cosine"|"constant", "warmup", "min_lr" },
 *     "task":      { "name": "copy"|"text", "alphabet", "files": [..], "mode": "windows"|"documents",
 *                    "val_fraction" },
 *     "train":     { "steps", "batch", "accum", "seed", "eval_every", "eval_batches", "log_every",
 *                    "save_every", "keep", "target_accuracy", "mixer_impl": "auto"|"direct"|"fft",
 *                    "run_dir" } } */
#ifndef TMM_TRAIN_CONFIG_H
#define TMM_TRAIN_CONFIG_H

#include "ops/toeplitz.h"
#include "tmm/model.h"
#include "train/data.h"
#include "train/optim.h"
#include "train/schedule.h"

#define TMM_MAX_TEXT_FILES 64

typedef struct tmm_train_config {
    tmm_model_config model;       /* vocab 0: taken from the task */
    tmm_optim_config optim;
    tmm_lr_schedule schedule;
    tmm_data_task task;
    uint32_t copy_alphabet;
    char *text_files[TMM_MAX_TEXT_FILES];
    uint32_t text_file_count;
    tmm_text_mode text_mode;
    double val_fraction;
    uint64_t steps;
    uint32_t batch;               /* sequences per optimizer step */
    uint32_t accum;               /* micro-batches per step: batch / accum sequences each */
    uint64_t data_seed;
    uint32_t eval_every, eval_batches, log_every, save_every, keep;
    double target_accuracy;       /* copy: stop once held-out accuracy reaches it (0: never) */
    tmm_toeplitz_impl mixer_impl; /* how the Toeplitz layers are computed: auto, direct, fft */
    char run_dir[1024];
} tmm_train_config;

/* The defaults: the small copy run of `tmm train` with no arguments (the
 * tiny-copy preset: flat mixing, d 64, n 128, 2 layers, 16 symbols). */
void tmm_train_config_default(tmm_train_config *config);
void tmm_train_config_free(tmm_train_config *config);
/* Applies a JSON document on top of config; `source` names it in errors. */
tmm_status tmm_train_config_apply_json(tmm_train_config *config, const char *json, const char *source);
/* The JSON of a preset (assets/presets/NAME.json, built in), or NULL. */
const char *tmm_train_preset(const char *name);
/* Names of the built-in presets, NULL-terminated. */
const char *const *tmm_train_preset_names(void);
/* "auto", "direct" or "fft". */
tmm_status tmm_mixer_impl_parse(const char *name, tmm_toeplitz_impl *out);
/* Checks the whole config (after the vocab is known). */
tmm_status tmm_train_config_check(const tmm_train_config *config);
/* The resolved config as JSON (malloc'ed), in the layout above. */
char *tmm_train_config_to_json(const tmm_train_config *config);

#endif
