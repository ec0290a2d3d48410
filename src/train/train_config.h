/* Everything a training run needs, its defaults, and its JSON form (the
 * config file of `tmm train --config`, the presets in assets/presets, and
 * the resolved config the trainer prints and saves in the run directory).
 *
 * Every field is one row of tmm_config_fields (train_config.c; the model's rows,
 * first, are model/model_fields.h's): its JSON
 * section and key, its `tmm train` flag, type, accepted range and help. The
 * JSON reader, the JSON writer, the flags and their help all come from that
 * table, so a value is checked the same way whether it comes from a flag, a
 * config file, a preset or a checkpoint. JSON layout (every key optional;
 * unknown keys are errors): { "model": {...}, "optimizer": {...},
 * "schedule": {...}, "task": {...}, "train": {...} }.
 * 64-bit integers (seeds) are written as JSON numbers up to 2^53 and as
 * decimal strings above, and read from either, so every value survives. */
#ifndef TMM_TRAIN_CONFIG_H
#define TMM_TRAIN_CONFIG_H

#include "io/config_field.h"
#include "model/model_fields.h"
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
    tmm_mqar_config mqar;         /* pairs, queries, keys, values */
    char *text_files[TMM_MAX_TEXT_FILES];
    uint32_t text_file_count;
    tmm_text_mode text_mode;
    double val_fraction;
    uint64_t steps;
    uint32_t batch;               /* sequences per optimizer step */
    uint32_t accum;               /* micro-batches per step: batch / accum sequences each */
    uint64_t data_seed;
    uint32_t eval_every, eval_batches, log_every, save_every, keep;
    double target_accuracy;       /* copy, mqar: stop once held-out accuracy reaches it (0: never) */
    tmm_toeplitz_impl toeplitz_impl; /* how the Toeplitz layers are computed: auto, direct, fft */
    tmm_precision precision;      /* how activations are kept for the backward */
    double loss_scale;            /* fp16: the initial dynamic loss scale, a power of two in [1, 2^24] */
    uint32_t loss_scale_window;   /* fp16: good steps in a row before the loss scale doubles */
    tmm_recompute recompute;      /* what the backward recomputes instead */
    double max_memory_gib;        /* refuse a run planned above this (0: the device's memory) */
    uint32_t check_every;         /* several ranks: steps between cross-rank weight checksums (0: never) */
    double dist_timeout;          /* several ranks: seconds to wait for the others in an exchange */
    char run_dir[TMM_CONFIG_PATH_MAX];
} tmm_train_config;

/* The table, terminated by a row with section NULL. */
extern const tmm_config_field tmm_config_fields[];
/* The row of a flag (without dashes), or NULL. */
const tmm_config_field *tmm_config_field_by_flag(const char *flag);
/* Sets a field from a flag's text: the same checks as the JSON reader. For
 * FILES, first clears the list when `first` is set, then appends. */
tmm_status tmm_config_set_text(tmm_train_config *config, const tmm_config_field *field, const char *text,
                               bool first);
/* Sets a field from text with the same checks, naming `source` (a file) in errors. */
tmm_status tmm_config_set_text_from(tmm_train_config *config, const tmm_config_field *field, const char *text,
                                    const char *source);
/* The current value as text (for help and docs) into buf. */
void tmm_config_value_text(const tmm_train_config *config, const tmm_config_field *field, char *buf, size_t size);

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
tmm_status tmm_toeplitz_impl_parse(const char *name, tmm_toeplitz_impl *out);
/* Checks the whole config (after the vocab is known). */
tmm_status tmm_train_config_check(const tmm_train_config *config);
/* The resolved config as JSON (malloc'ed), in the layout above. */
char *tmm_train_config_to_json(const tmm_train_config *config);

#endif
