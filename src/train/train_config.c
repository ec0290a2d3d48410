#define _POSIX_C_SOURCE 200809L /* strdup */
#include "train/train_config.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "status.h"

extern const char *const tmm_preset_names[];
extern const char *const tmm_preset_texts[];

void tmm_train_config_default(tmm_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->model = tmm_model_config_default();
    c->model.vocab = 0;
    c->model.n_ctx = 128;
    c->model.heads = 0;
    c->model.expansion = 2;
    c->optim = tmm_optim_config_default();
    c->optim.recipe = TMM_RECIPE_ORIGINAL;
    c->schedule = tmm_lr_schedule_default();
    c->schedule.peak_lr = 0; /* the architecture's and task's (tmm_train_config_resolve) */
    c->schedule.warmup_steps = 100;
    c->task = TMM_DATA_COPY;
    c->copy_alphabet = TMM_COPY_DEFAULT_ALPHABET;
    tmm_mqar_config_init(&c->mqar);
    c->text_mode = TMM_TEXT_WINDOWS;
    c->val_fraction = TMM_DATA_DEFAULT_VAL_FRACTION;
    c->steps = 1500;
    c->batch = 16;
    c->accum = 1;
    c->data_seed = 1;
    c->eval_every = 100;
    c->eval_batches = 8;
    c->log_every = 10;
    c->save_every = 0;
    c->keep = 3;
    c->target_accuracy = 0.99;
    c->loss_scale = 65536;
    c->loss_scale_window = 1000;
    c->check_every = 100;
    c->dist_timeout = 300;
    snprintf(c->run_dir, sizeof c->run_dir, "runs/latest");
}

void tmm_train_config_free(tmm_train_config *c)
{
    for (uint32_t i = 0; i < c->text_file_count; i++)
        free(c->text_files[i]);
    c->text_file_count = 0;
}

const char *tmm_train_preset(const char *name)
{
    for (int i = 0; tmm_preset_names[i]; i++)
        if (strcmp(tmm_preset_names[i], name) == 0)
            return tmm_preset_texts[i];
    return NULL;
}

const char *const *tmm_train_preset_names(void) { return tmm_preset_names; }

/* ---- the field table ---------------------------------------------------------- */

static const char *const task_names[] = { "copy", "text", "mqar", NULL }; /* tmm_data_task */
static const char *const mode_names[] = { "windows", "documents", NULL }; /* tmm_text_mode */
static const char *const lr_names[] = { "linear", "cosine", "constant", NULL };  /* tmm_lr_kind */
static const char *const impl_names[] = { "auto", "direct", "fft", NULL };       /* tmm_toeplitz_impl */
static const char *const precision_names[] = { "fp32", "fp16", "bf16", NULL };   /* tmm_precision */
static const char *const recompute_names[] = { "none", "mixer", "block", NULL }; /* tmm_recompute */
_Static_assert(sizeof(tmm_data_task) == sizeof(int) && sizeof(tmm_text_mode) == sizeof(int) &&
               sizeof(tmm_lr_kind) == sizeof(int) && sizeof(tmm_toeplitz_impl) == sizeof(int) &&
               sizeof(tmm_precision) == sizeof(int) && sizeof(tmm_recompute) == sizeof(int) &&
               sizeof(tmm_recipe) == sizeof(int),
               "enum fields are stored as int");

#define AT(member) offsetof(tmm_train_config, member)
#define MODEL_AT(member) (AT(model) + offsetof(tmm_model_config, member))
#define U32(sec, key, flag, member, lo, hi, help) TMM_FIELD_U32(sec, key, flag, AT(member), lo, hi, help)
#define U64(sec, key, flag, member, lo, hi, help) TMM_FIELD_U64(sec, key, flag, AT(member), lo, hi, help)
#define F64(sec, key, flag, member, lo, hi, help) TMM_FIELD_F64(sec, key, flag, AT(member), lo, hi, help)
#define BOOL(sec, key, flag, member, help) TMM_FIELD_BOOL(sec, key, flag, AT(member), help)
#define ENUM(sec, key, flag, arg, member, names, help) TMM_FIELD_ENUM(sec, key, flag, arg, AT(member), names, help)

const tmm_config_field tmm_config_fields[] = {
    TMM_MODEL_FIELD_ROWS(MODEL_AT),
    F64("optimizer", "lr", "lr", schedule.peak_lr, 0, 10,
        "peak learning rate (0: 3e-3 on copy and mqar; on text the paper's: 5e-4 tmm, 2e-4 baselines)"),
    F64("optimizer", "beta1", "beta1", optim.beta1, 0, 1, "AdamW beta1, in [0, 1)"),
    F64("optimizer", "beta2", "beta2", optim.beta2, 0, 1, "AdamW beta2, in [0, 1)"),
    F64("optimizer", "eps", "eps", optim.eps, 0, 1, "AdamW epsilon, > 0"),
    F64("optimizer", "weight_decay", "weight-decay", optim.weight_decay, 0, 10, "AdamW weight decay"),
    F64("optimizer", "clip", "clip", optim.max_grad_norm, 0, 1e9, "global gradient-norm clip (0: none)"),
    BOOL("optimizer", "decay_all", "decay-all", optim.decay_all, "decay biases, norms and embeddings too"),
    ENUM("optimizer", "recipe", "recipe", "R", optim.recipe, tmm_recipe_names,
         "original: each architecture's original recipe, its parameter groups' own rates, weight decays and "
         "init scales (docs/baselines.md); uniform: lr and weight_decay for every tensor, inits as declared "
         "(ablations; tmm before recipes; a run saved without this key resumes as uniform)"),
    ENUM("schedule", "kind", "schedule", "KIND", schedule.kind, lr_names, "learning-rate schedule"),
    U64("schedule", "warmup", "warmup", schedule.warmup_steps, 0, 1ull << 40, "warmup steps"),
    F64("schedule", "min_lr", "min-lr", schedule.min_lr, 0, 10, "final learning rate (at most lr)"),
    ENUM("task", "name", "task", "TASK", task, task_names, "the task (docs/data.md)"),
    U32("task", "alphabet", "alphabet", copy_alphabet, 2, TMM_COPY_MAX_ALPHABET, "copy: symbols"),
    U32("task", "pairs", "pairs", mqar.pairs, 1, TMM_MQAR_MAX_SYMBOLS,
        "mqar: key-value pairs per row (distinct keys; the row needs 2 x pairs + 2 x queries <= n)"),
    U32("task", "queries", "queries", mqar.queries, 0, TMM_MQAR_MAX_SYMBOLS,
        "mqar: keys queried per row, each once, in random order; only their values are scored (0: every pair)"),
    U32("task", "keys", "keys", mqar.keys, 1, TMM_MQAR_MAX_SYMBOLS, "mqar: key tokens (at least pairs)"),
    U32("task", "values", "values", mqar.values, 2, TMM_MQAR_MAX_SYMBOLS,
        "mqar: value tokens (vocab 1 + keys + values: the filler, the keys, the values)"),
    { "task", "files", "data", "FILE", TMM_CONFIG_FILES, AT(text_files), 0, TMM_MAX_TEXT_FILES, 0, 0, NULL,
      "text: a UTF-8 text or .jsonl file, or token shards (a tmm prepare directory or its .bin files) "
      "(repeat for more; sets the task to text)", NULL, NULL },
    ENUM("task", "mode", "text-mode", "MODE", text_mode, mode_names,
         "text: random windows, or one document per row (cut to n+1 tokens)"),
    F64("task", "val_fraction", "val-fraction", val_fraction, 0, 1,
        "text: held-out share, in [0, 1) (0: none, then eval_every must be 0; shards: their split, 0 ignores it)"),
    U64("train", "steps", "steps", steps, 1, 1ull << 40, "optimizer steps"),
    U32("train", "batch", "batch", batch, 1, 1u << 20, "sequences per step"),
    U32("train", "accum", "accum", accum, 1, 1u << 20, "micro-batches per step (divides batch)"),
    U64("train", "seed", "seed", data_seed, 0, UINT64_MAX, "data seed"),
    U32("train", "eval_every", "eval-every", eval_every, 0, UINT32_MAX, "steps between evaluations (0: none)"),
    U32("train", "eval_batches", "eval-batches", eval_batches, 1, 1u << 20, "held-out batches per evaluation"),
    U32("train", "log_every", "log-every", log_every, 0, UINT32_MAX, "steps between log lines (0: evaluations only)"),
    U32("train", "save_every", "save-every", save_every, 0, UINT32_MAX, "steps between checkpoints (0: at the end)"),
    U32("train", "keep", "keep", keep, 0, 1u << 20, "checkpoints kept (0: all)"),
    F64("train", "target_accuracy", "target-acc", target_accuracy, 0, 1,
        "copy, mqar: stop once held-out accuracy reaches it (0: never)"),
    /* "mixer_impl" and --mixer-impl until version 0.1 ("mixer" now means any sequence mixer) */
    { "train", "toeplitz_impl", "toeplitz-impl", "IMPL", TMM_CONFIG_ENUM, AT(toeplitz_impl), 0, 0, 0, 0, impl_names,
      "Toeplitz layers: direct, FFT, or auto (FFT from the device's measured crossover)", "mixer_impl", "mixer-impl" },
    ENUM("train", "precision", "precision", "P", precision, precision_names,
         "fp32, fp16 (with dynamic loss scaling) or bf16: the activations kept for the backward and the "
         "weight matrices the matmuls read; arithmetic, master weights, gradients and optimizer state stay fp32"),
    F64("train", "loss_scale", "loss-scale", loss_scale, 1, 16777216,
        "fp16 only: the initial loss scale, a power of two; halved at each overflow (that step is skipped), "
        "doubled after loss_scale_window good steps, within [2^-24, 2^24]"),
    U32("train", "loss_scale_window", "loss-scale-window", loss_scale_window, 1, UINT32_MAX,
        "fp16 only: good steps in a row before the loss scale doubles"),
    ENUM("train", "recompute", "recompute", "WHAT", recompute, recompute_names,
         "keep every activation (none), or recompute each mixer's (mixer) or each block's (block) in the backward"),
    { "train", "max_memory", "max-memory", "GIB", TMM_CONFIG_F64, AT(max_memory_gib), 0, 0, 0, 1 << 20, NULL,
      "refuse, before allocating, a run planned above GIB GiB of device memory, on every device type (0: the "
      "device's budget or heap size, which a CPU device only warns about)", NULL, NULL },
    U32("train", "check_every", "check-every", check_every, 0, UINT32_MAX,
        "several ranks (mpirun): steps between comparisons of the weights' checksum across ranks, which "
        "stops the run if they differ (0: only at the start)"),
    F64("train", "dist_timeout", "dist-timeout", dist_timeout, 1, 86400,
        "several ranks (mpirun): seconds a rank waits for the others in an exchange before it stops them "
        "all (a rank died or hangs)"),
    { "train", "run_dir", "run-dir", "DIR", TMM_CONFIG_PATH, AT(run_dir), 0, 0, 0, 0, NULL,
      "where checkpoints and metrics.jsonl go", NULL, NULL },
    { NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL },
};

const tmm_config_field *tmm_config_field_by_flag(const char *flag)
{
    for (const tmm_config_field *f = tmm_config_fields; f->section; f++)
        if (f->flag && strcmp(f->flag, flag) == 0)
            return f;
    return NULL;
}

static const void *field_cptr(const tmm_train_config *c, const tmm_config_field *f)
{
    return (const char *)c + f->offset;
}

static tmm_status add_file(tmm_train_config *c, const tmm_config_field *f, const char *source, const char *path)
{
    if (c->text_file_count == TMM_MAX_TEXT_FILES || !*path)
        return tmm_config_field_bad(f, source, path);
    char *copy = strdup(path);
    if (!copy)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    c->text_files[c->text_file_count++] = copy;
    return TMM_OK;
}

/* The common setter: a field from text (a flag, a JSON string, a JSON number
 * printed exactly), with the field's checks. source NULL: a flag. */
static tmm_status set_from_text(tmm_train_config *c, const tmm_config_field *f, const char *text,
                                const char *source)
{
    if (f->type == TMM_CONFIG_FILES)
        return add_file(c, f, source, text);
    return tmm_config_field_parse(c, f, text, source);
}

tmm_status tmm_config_set_text_from(tmm_train_config *c, const tmm_config_field *f, const char *text,
                                    const char *source)
{
    return set_from_text(c, f, text, source);
}

tmm_status tmm_config_set_text(tmm_train_config *c, const tmm_config_field *f, const char *text, bool first)
{
    if (f->type == TMM_CONFIG_FILES && first)
        tmm_train_config_free(c);
    return set_from_text(c, f, text, NULL);
}

void tmm_config_value_text(const tmm_train_config *c, const tmm_config_field *f, char *buf, size_t size)
{
    if (f->type != TMM_CONFIG_FILES) {
        tmm_config_field_text(c, f, buf, size);
        return;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < c->text_file_count && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "," : "", c->text_files[i]);
}

/* ---- JSON in ---------------------------------------------------------------- */

static const tmm_config_field *field_by_key(const char *section, const char *key)
{
    for (const tmm_config_field *f = tmm_config_fields; f->section; f++)
        if (strcmp(f->section, section) == 0 &&
            (strcmp(f->key, key) == 0 || (f->old_key && strcmp(f->old_key, key) == 0)))
            return f;
    return NULL;
}

static bool known_section(const char *name)
{
    for (const tmm_config_field *f = tmm_config_fields; f->section; f++)
        if (strcmp(f->section, name) == 0)
            return true;
    return false;
}

/* A JSON value as the text the flag would take: numbers exactly (integers up
 * to 2^53 as integers, others with 17 significant digits), strings as they
 * are, booleans as true/false. */
static tmm_status json_value_text(const tmm_config_field *f, const cJSON *v, const char *source, char *buf,
                                  size_t size)
{
    bool integer = f->type == TMM_CONFIG_U32 || f->type == TMM_CONFIG_U64;
    if (cJSON_IsNumber(v) && (integer || f->type == TMM_CONFIG_F64)) {
        double d = v->valuedouble;
        if (integer && !(d >= 0 && d <= 9007199254740992.0 && d == floor(d)))
            return tmm_config_field_bad(f, source, "a number that is not a whole number up to 2^53 (give larger ones "
                                        "as a string)");
        if (integer)
            snprintf(buf, size, "%" PRIu64, (uint64_t)d);
        else
            snprintf(buf, size, "%.17g", d);
    } else if (cJSON_IsString(v) && (integer || f->type == TMM_CONFIG_ENUM || f->type == TMM_CONFIG_PATH)) {
        if (strlen(v->valuestring) >= size)
            return tmm_config_field_bad(f, source, "a string that is too long");
        snprintf(buf, size, "%s", v->valuestring);
    } else if (cJSON_IsBool(v) && f->type == TMM_CONFIG_BOOL) {
        snprintf(buf, size, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else {
        return tmm_config_field_bad(f, source, cJSON_IsString(v) ? "a string" : cJSON_IsNumber(v) ? "a number"
                                    : cJSON_IsBool(v) ? "a boolean" : "another JSON type");
    }
    return TMM_OK;
}

static tmm_status apply_field(tmm_train_config *c, const tmm_config_field *f, const cJSON *v, const char *source)
{
    if (f->type == TMM_CONFIG_FILES) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > TMM_MAX_TEXT_FILES)
            return tmm_config_field_bad(f, source, "not a short list");
        tmm_train_config_free(c);
        const cJSON *item;
        cJSON_ArrayForEach(item, v)
        {
            if (!cJSON_IsString(item))
                return tmm_config_field_bad(f, source, "a list holding something else than strings");
            TMM_TRY(add_file(c, f, source, item->valuestring));
        }
        return TMM_OK;
    }
    char text[TMM_CONFIG_PATH_MAX + 8];
    TMM_TRY(json_value_text(f, v, source, text, sizeof text));
    return set_from_text(c, f, text, source);
}

tmm_status tmm_train_config_apply_json(tmm_train_config *c, const char *json, const char *source)
{
    cJSON *root = cJSON_Parse(json);
    if (!cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        cJSON_Delete(root);
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: not a JSON object (error near \"%.20s\")", source,
                        at && root == NULL ? at : "");
    }
    tmm_status s = TMM_OK;
    if (tmm_json_has_nul_escape(json, strlen(json)))
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: holds the escape \\u0000 (a NUL character), which would cut "
                     "its string: remove it", source);
    const char *dup = tmm_json_duplicate_key(root);
    if (s == TMM_OK && dup)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: section \"%s\" occurs twice", source, dup);
    const cJSON *sec;
    for (sec = root->child; s == TMM_OK && sec; sec = sec->next) {
        if (!known_section(sec->string)) {
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown section \"%.64s\" (model, optimizer, schedule, task, "
                         "train)", source, sec->string);
            break;
        }
        if (!cJSON_IsObject(sec)) {
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: \"%s\" must be an object", source, sec->string);
            break;
        }
        if ((dup = tmm_json_duplicate_key(sec))) {
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: \"%s.%.64s\" occurs twice", source, sec->string, dup);
            break;
        }
        for (const cJSON *it = sec->child; s == TMM_OK && it; it = it->next) {
            const tmm_config_field *f = field_by_key(sec->string, it->string);
            s = f ? apply_field(c, f, it, source)
                  : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: \"%s.%.64s\" is not a known key", source, sec->string,
                             it->string);
        }
    }
    cJSON_Delete(root);
    return s;
}

tmm_status tmm_toeplitz_impl_parse(const char *name, tmm_toeplitz_impl *out)
{
    static const tmm_toeplitz_impl all[] = { TMM_TOEPLITZ_AUTO, TMM_TOEPLITZ_DIRECT, TMM_TOEPLITZ_FFT };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, tmm_toeplitz_impl_name(all[i])) == 0) {
            *out = all[i];
            return TMM_OK;
        }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mixer implementation '%s': use auto, direct or fft", name);
}

/* Every field within its table range, whatever set it. */
static tmm_status check_ranges(const tmm_train_config *c)
{
    for (const tmm_config_field *f = tmm_config_fields; f->section; f++)
        if (!tmm_config_field_in_range(c, f)) {
            char text[64];
            tmm_config_value_text(c, f, text, sizeof text);
            return tmm_config_field_bad(f, "config", text);
        }
    return TMM_OK;
}

tmm_status tmm_train_config_check(const tmm_train_config *c)
{
    TMM_TRY(check_ranges(c));
    TMM_TRY(tmm_model_config_check(&c->model));
    TMM_TRY(tmm_optim_config_check(&c->optim));
    TMM_TRY(tmm_lr_schedule_check(&c->schedule, c->steps));
    if (c->batch % c->accum)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "batch (%u) must be a multiple of accum (%u)", c->batch, c->accum);
    if (c->task == TMM_DATA_TEXT && c->text_file_count == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the text task needs training files: --data FILE (or "
                        "\"task\": {\"files\": [...]})");
    int e;
    if (frexp(c->loss_scale, &e) != 0.5)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "loss_scale must be a power of two, like 65536 (got %g)",
                        c->loss_scale);
    if (c->val_fraction >= 1)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "val_fraction must be below 1 (got %g)", c->val_fraction);
    if (c->task == TMM_DATA_TEXT && c->val_fraction == 0 && c->eval_every > 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "val_fraction 0 leaves no held-out text to evaluate on: give "
                        "--val-fraction X (e.g. 0.05) or --eval-every 0");
    return TMM_OK;
}

/* ---- JSON out --------------------------------------------------------------- */

char *tmm_train_config_to_json(const tmm_train_config *c)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    for (const tmm_config_field *f = tmm_config_fields; ok && f->section; f++) {
        cJSON *sec = cJSON_GetObjectItemCaseSensitive(root, f->section);
        if (!sec)
            sec = cJSON_AddObjectToObject(root, f->section);
        const void *p = field_cptr(c, f);
        cJSON *v = NULL;
        char text[32];
        switch (f->type) {
        case TMM_CONFIG_U32: v = cJSON_CreateNumber(*(const uint32_t *)p); break;
        case TMM_CONFIG_U64: {
            uint64_t x = *(const uint64_t *)p;
            snprintf(text, sizeof text, "%" PRIu64, x);
            v = x <= (1ull << 53) ? cJSON_CreateNumber((double)x) : cJSON_CreateString(text);
            break;
        }
        case TMM_CONFIG_F64: v = cJSON_CreateNumber(*(const double *)p); break;
        case TMM_CONFIG_BOOL: v = cJSON_CreateBool(*(const bool *)p); break;
        case TMM_CONFIG_ENUM: v = cJSON_CreateString(f->names[*(const int *)p]); break;
        case TMM_CONFIG_PATH: v = cJSON_CreateString((const char *)p); break;
        case TMM_CONFIG_FILES:
            v = cJSON_CreateArray();
            for (uint32_t i = 0; v && i < c->text_file_count; i++)
                cJSON_AddItemToArray(v, cJSON_CreateString(c->text_files[i]));
            break;
        }
        ok = sec && v && cJSON_AddItemToObject(sec, f->key, v);
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}
