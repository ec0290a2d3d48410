#define _POSIX_C_SOURCE 200809L /* strdup */
#include "train/train_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    c->schedule = tmm_lr_schedule_default();
    c->schedule.peak_lr = 3e-3;
    c->schedule.warmup_steps = 100;
    c->task = TMM_DATA_COPY;
    c->copy_alphabet = TMM_COPY_DEFAULT_ALPHABET;
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

/* ---- JSON in ---------------------------------------------------------------- */

typedef struct reader {
    const char *source;
    tmm_status status;
} reader;

static bool fail(reader *rd, const char *section, const char *key, const char *what)
{
    if (rd->status == TMM_OK)
        rd->status = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: \"%s.%s\" %s", rd->source, section, key, what);
    return false;
}

static bool get_uint(reader *rd, const char *sec, const cJSON *it, uint64_t max, uint64_t *out)
{
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > (double)max ||
        it->valuedouble != floor(it->valuedouble))
        return fail(rd, sec, it->string, "must be a whole number in range");
    *out = (uint64_t)it->valuedouble;
    return true;
}

static void set_u32(reader *rd, const char *sec, const cJSON *it, uint32_t *out)
{
    uint64_t v;
    if (get_uint(rd, sec, it, UINT32_MAX, &v))
        *out = (uint32_t)v;
}

static void set_u64(reader *rd, const char *sec, const cJSON *it, uint64_t *out)
{
    get_uint(rd, sec, it, 1ull << 53, out); /* exact in a JSON double */
}

static void set_double(reader *rd, const char *sec, const cJSON *it, double *out)
{
    if (!cJSON_IsNumber(it))
        fail(rd, sec, it->string, "must be a number");
    else
        *out = it->valuedouble;
}

static void set_bool(reader *rd, const char *sec, const cJSON *it, bool *out)
{
    if (!cJSON_IsBool(it))
        fail(rd, sec, it->string, "must be true or false");
    else
        *out = cJSON_IsTrue(it);
}

static bool is(const cJSON *it, const char *key) { return strcmp(it->string, key) == 0; }

static void apply_model(reader *rd, tmm_train_config *c, const cJSON *obj)
{
    const char *s = "model";
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        tmm_model_config *m = &c->model;
        if (is(it, "d_model")) set_u32(rd, s, it, &m->d_model);
        else if (is(it, "n_ctx")) set_u32(rd, s, it, &m->n_ctx);
        else if (is(it, "n_layers")) set_u32(rd, s, it, &m->n_layers);
        else if (is(it, "heads")) set_u32(rd, s, it, &m->heads);
        else if (is(it, "expansion")) set_u32(rd, s, it, &m->expansion);
        else if (is(it, "kernel")) set_u32(rd, s, it, &m->kernel);
        else if (is(it, "vocab")) set_u32(rd, s, it, &m->vocab);
        else if (is(it, "expanded")) set_bool(rd, s, it, &m->expanded);
        else if (is(it, "frozen")) set_bool(rd, s, it, &m->frozen);
        else if (is(it, "seed")) set_u64(rd, s, it, &m->seed);
        else fail(rd, s, it->string, "is not a known key");
    }
}

static void apply_optimizer(reader *rd, tmm_train_config *c, const cJSON *obj)
{
    const char *s = "optimizer";
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (is(it, "lr")) set_double(rd, s, it, &c->schedule.peak_lr);
        else if (is(it, "beta1")) set_double(rd, s, it, &c->optim.beta1);
        else if (is(it, "beta2")) set_double(rd, s, it, &c->optim.beta2);
        else if (is(it, "eps")) set_double(rd, s, it, &c->optim.eps);
        else if (is(it, "weight_decay")) set_double(rd, s, it, &c->optim.weight_decay);
        else if (is(it, "clip")) set_double(rd, s, it, &c->optim.max_grad_norm);
        else if (is(it, "decay_all")) set_bool(rd, s, it, &c->optim.decay_all);
        else fail(rd, s, it->string, "is not a known key");
    }
}

static void apply_schedule(reader *rd, tmm_train_config *c, const cJSON *obj)
{
    const char *s = "schedule";
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (is(it, "kind")) {
            if (!cJSON_IsString(it) || tmm_lr_kind_parse(it->valuestring, &c->schedule.kind) != TMM_OK)
                fail(rd, s, it->string, "must be \"linear\", \"cosine\" or \"constant\"");
        } else if (is(it, "warmup")) set_u64(rd, s, it, &c->schedule.warmup_steps);
        else if (is(it, "min_lr")) set_double(rd, s, it, &c->schedule.min_lr);
        else fail(rd, s, it->string, "is not a known key");
    }
}

static void apply_task(reader *rd, tmm_train_config *c, const cJSON *obj)
{
    const char *s = "task";
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (is(it, "name")) {
            if (cJSON_IsString(it) && strcmp(it->valuestring, "copy") == 0) c->task = TMM_DATA_COPY;
            else if (cJSON_IsString(it) && strcmp(it->valuestring, "text") == 0) c->task = TMM_DATA_TEXT;
            else fail(rd, s, it->string, "must be \"copy\" or \"text\"");
        } else if (is(it, "alphabet")) set_u32(rd, s, it, &c->copy_alphabet);
        else if (is(it, "mode")) {
            if (cJSON_IsString(it) && strcmp(it->valuestring, "windows") == 0) c->text_mode = TMM_TEXT_WINDOWS;
            else if (cJSON_IsString(it) && strcmp(it->valuestring, "documents") == 0) c->text_mode = TMM_TEXT_DOCUMENTS;
            else fail(rd, s, it->string, "must be \"windows\" or \"documents\"");
        } else if (is(it, "val_fraction")) set_double(rd, s, it, &c->val_fraction);
        else if (is(it, "files")) {
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) > TMM_MAX_TEXT_FILES) {
                fail(rd, s, it->string, "must be a list of at most 64 file names");
                continue;
            }
            tmm_train_config_free(c);
            const cJSON *f;
            cJSON_ArrayForEach(f, it)
            {
                if (!cJSON_IsString(f)) {
                    fail(rd, s, it->string, "must hold strings");
                    break;
                }
                c->text_files[c->text_file_count++] = strdup(f->valuestring);
            }
        } else fail(rd, s, it->string, "is not a known key");
    }
}

static void apply_train(reader *rd, tmm_train_config *c, const cJSON *obj)
{
    const char *s = "train";
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
    {
        if (is(it, "steps")) set_u64(rd, s, it, &c->steps);
        else if (is(it, "batch")) set_u32(rd, s, it, &c->batch);
        else if (is(it, "accum")) set_u32(rd, s, it, &c->accum);
        else if (is(it, "seed")) set_u64(rd, s, it, &c->data_seed);
        else if (is(it, "eval_every")) set_u32(rd, s, it, &c->eval_every);
        else if (is(it, "eval_batches")) set_u32(rd, s, it, &c->eval_batches);
        else if (is(it, "log_every")) set_u32(rd, s, it, &c->log_every);
        else if (is(it, "save_every")) set_u32(rd, s, it, &c->save_every);
        else if (is(it, "keep")) set_u32(rd, s, it, &c->keep);
        else if (is(it, "target_accuracy")) set_double(rd, s, it, &c->target_accuracy);
        else if (is(it, "mixer_impl")) {
            if (!cJSON_IsString(it) || tmm_mixer_impl_parse(it->valuestring, &c->mixer_impl) != TMM_OK)
                fail(rd, s, it->string, "must be \"auto\", \"direct\" or \"fft\"");
        }
        else if (is(it, "run_dir")) {
            if (!cJSON_IsString(it) || strlen(it->valuestring) >= sizeof c->run_dir)
                fail(rd, s, it->string, "must be a path");
            else
                snprintf(c->run_dir, sizeof c->run_dir, "%s", it->valuestring);
        } else fail(rd, s, it->string, "is not a known key");
    }
}

tmm_status tmm_train_config_apply_json(tmm_train_config *c, const char *json, const char *source)
{
    cJSON *root = cJSON_Parse(json);
    if (!cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        cJSON_Delete(root);
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: not a JSON object (error near \"%.20s\")", source,
                        at ? at : "");
    }
    reader rd = { source, TMM_OK };
    const cJSON *sec;
    cJSON_ArrayForEach(sec, root)
    {
        if (!cJSON_IsObject(sec)) {
            rd.status = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: \"%s\" must be an object", source, sec->string);
            break;
        }
        if (is(sec, "model")) apply_model(&rd, c, sec);
        else if (is(sec, "optimizer")) apply_optimizer(&rd, c, sec);
        else if (is(sec, "schedule")) apply_schedule(&rd, c, sec);
        else if (is(sec, "task")) apply_task(&rd, c, sec);
        else if (is(sec, "train")) apply_train(&rd, c, sec);
        else rd.status = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown section \"%s\" (model, optimizer, "
                                  "schedule, task, train)", source, sec->string);
        if (rd.status != TMM_OK)
            break;
    }
    cJSON_Delete(root);
    return rd.status;
}

tmm_status tmm_mixer_impl_parse(const char *name, tmm_toeplitz_impl *out)
{
    static const tmm_toeplitz_impl all[] = { TMM_TOEPLITZ_AUTO, TMM_TOEPLITZ_DIRECT, TMM_TOEPLITZ_FFT };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, tmm_toeplitz_impl_name(all[i])) == 0) {
            *out = all[i];
            return TMM_OK;
        }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mixer implementation '%s': use auto, direct or fft", name);
}

tmm_status tmm_train_config_check(const tmm_train_config *c)
{
    TMM_TRY(tmm_model_config_check(&c->model));
    TMM_TRY(tmm_optim_config_check(&c->optim));
    if (c->steps == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "steps must be at least 1");
    TMM_TRY(tmm_lr_schedule_check(&c->schedule, c->steps));
    if (c->batch == 0 || c->accum == 0 || c->batch % c->accum)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "batch (%u) must be a positive multiple of accum (%u)", c->batch,
                        c->accum);
    if (c->task == TMM_DATA_TEXT && c->text_file_count == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the text task needs training files: --data FILE (or "
                        "\"task\": {\"files\": [...]})");
    if (c->target_accuracy < 0 || c->target_accuracy > 1)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "target_accuracy must be in [0, 1]");
    if (c->run_dir[0] == '\0')
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "run_dir is empty");
    return TMM_OK;
}

/* ---- JSON out --------------------------------------------------------------- */

char *tmm_train_config_to_json(const tmm_train_config *c)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddNumberToObject(m, "vocab", c->model.vocab);
    cJSON_AddNumberToObject(m, "d_model", c->model.d_model);
    cJSON_AddNumberToObject(m, "n_ctx", c->model.n_ctx);
    cJSON_AddNumberToObject(m, "n_layers", c->model.n_layers);
    cJSON_AddNumberToObject(m, "heads", c->model.heads);
    cJSON_AddNumberToObject(m, "expansion", c->model.expansion);
    cJSON_AddNumberToObject(m, "kernel", c->model.kernel);
    cJSON_AddBoolToObject(m, "expanded", c->model.expanded);
    cJSON_AddBoolToObject(m, "frozen", c->model.frozen);
    cJSON_AddNumberToObject(m, "seed", (double)c->model.seed);
    cJSON *o = cJSON_AddObjectToObject(root, "optimizer");
    cJSON_AddNumberToObject(o, "lr", c->schedule.peak_lr);
    cJSON_AddNumberToObject(o, "beta1", c->optim.beta1);
    cJSON_AddNumberToObject(o, "beta2", c->optim.beta2);
    cJSON_AddNumberToObject(o, "eps", c->optim.eps);
    cJSON_AddNumberToObject(o, "weight_decay", c->optim.weight_decay);
    cJSON_AddNumberToObject(o, "clip", c->optim.max_grad_norm);
    cJSON_AddBoolToObject(o, "decay_all", c->optim.decay_all);
    cJSON *s = cJSON_AddObjectToObject(root, "schedule");
    cJSON_AddStringToObject(s, "kind", tmm_lr_kind_name(c->schedule.kind));
    cJSON_AddNumberToObject(s, "warmup", (double)c->schedule.warmup_steps);
    cJSON_AddNumberToObject(s, "min_lr", c->schedule.min_lr);
    cJSON *t = cJSON_AddObjectToObject(root, "task");
    cJSON_AddStringToObject(t, "name", c->task == TMM_DATA_COPY ? "copy" : "text");
    if (c->task == TMM_DATA_COPY) {
        cJSON_AddNumberToObject(t, "alphabet", c->copy_alphabet);
    } else {
        cJSON *files = cJSON_AddArrayToObject(t, "files");
        for (uint32_t i = 0; i < c->text_file_count; i++)
            cJSON_AddItemToArray(files, cJSON_CreateString(c->text_files[i]));
        cJSON_AddStringToObject(t, "mode", c->text_mode == TMM_TEXT_WINDOWS ? "windows" : "documents");
        cJSON_AddNumberToObject(t, "val_fraction", c->val_fraction);
    }
    cJSON *tr = cJSON_AddObjectToObject(root, "train");
    cJSON_AddNumberToObject(tr, "steps", (double)c->steps);
    cJSON_AddNumberToObject(tr, "batch", c->batch);
    cJSON_AddNumberToObject(tr, "accum", c->accum);
    cJSON_AddNumberToObject(tr, "seed", (double)c->data_seed);
    cJSON_AddNumberToObject(tr, "eval_every", c->eval_every);
    cJSON_AddNumberToObject(tr, "eval_batches", c->eval_batches);
    cJSON_AddNumberToObject(tr, "log_every", c->log_every);
    cJSON_AddNumberToObject(tr, "save_every", c->save_every);
    cJSON_AddNumberToObject(tr, "keep", c->keep);
    cJSON_AddNumberToObject(tr, "target_accuracy", c->target_accuracy);
    cJSON_AddStringToObject(tr, "mixer_impl", tmm_toeplitz_impl_name(c->mixer_impl));
    cJSON_AddStringToObject(tr, "run_dir", c->run_dir);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}
