/* The experiments' registry, the runner and what the experiments share
 * (experiment.h, exp_util.h). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "experiment/experiment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment/exp_util.h"
#include "files.h"
#include "model/arch.h"
#include "model/match.h"
#include "train/data.h"
#include "train/trainer.h"

const tmm_experiment tmm_experiments[] = {
    { "copy", "E1, copying",
      "TMM copies about as efficiently as a transformer; Mamba 2 and Hyena struggle; and a TMM much narrower "
      "than Hyena copies about as efficiently",
      { "n 64, 128; d 64, 2 layers, flat TMM; 200 steps of 16 (minutes on lavapipe)",
        "n 128 .. 1024; d 64, 2 layers; 2000 steps of 16",
        "n 128 .. 1024; d 256, 4 layers, 4 heads; 5000 steps of 32" },
      exp_copy, false },
    { "efficiency", "E2, training efficiency on text",
      "TMM trains more efficiently than Hyena and Mamba 2 (lower validation loss for the same tokens)",
      { "bytes of --data; d 64, n 64, 2 layers, 4 heads; 200 steps of 8 (minutes on lavapipe)",
        "d 128, n 256, 4 layers, 4 heads; 2000 steps of 16",
        "d 512, n 512, 8 layers, 8 heads; 20000 steps of 32" },
      exp_efficiency, true },
    { "retention", "E3, information retention",
      "the TMM's last hidden state keeps more of its input than the other architectures': a decoder trained on the "
      "frozen LM's vector regenerates more of the input",
      { "LMs d 64, n 32, 2 layers, 200 steps of 8; decoders 300 steps of 8 (minutes on lavapipe)",
        "LMs d 128, n 128, 4 layers, 2000 steps of 16; decoders 2000 steps of 16",
        "LMs d 512, n 512, 8 layers, 20000 steps of 32; decoders 10000 steps of 32" },
      exp_retention, false },
    { "capacity", "E4, capacity (autoencoding)",
      "how much of its input a jointly trained encoder keeps in one vector, against n and width (tmm's reading of "
      "the paper: the TMM at least matches the baselines)",
      { "n 16, 32 at d 64, d 32 at n 32; 2 layers; 300 steps of 8 (minutes on lavapipe)",
        "n 64 .. 256 at d 128, d 64 and 256 at n 256; 2000 steps of 16",
        "n 128 .. 512 at d 256, d 128 and 512 at n 512; 4 layers; 10000 steps of 32" },
      exp_capacity, false },
    { "recall", "E5, in-context recall",
      "TMM is competitive on recall tasks (multi-query associative recall, MQAR)",
      { "MQAR at n 64 with 2, 4, 8 pairs; d 32, 2 layers, 4 heads; 300 steps of 16 (minutes on lavapipe)",
        "n 128 with 4 .. 32 pairs, and n 64 .. 512 with n/4 pairs; d 64, 2 layers, 4 heads; 2000 steps of 32",
        "n 256 with 8 .. 64 pairs, and n 128 .. 1024 with n/4 pairs; d 256, 4 layers, 4 heads; 5000 steps of 32" },
      exp_recall, true },
    { "index", "E6, operator structure over training",
      "trained causal TMM layers often have Fredholm index -1 (shift-like), and are more often invertible or "
      "nearly so than the layers of autoencoders",
      { "E2's small TMM (d 64, n 64, 2 layers, 4 heads; 200 steps of 8), 8 checkpoints (a minute on lavapipe)",
        "E2's medium TMM (d 128, n 256, 4 layers), 20 checkpoints",
        "E2's paper TMM (d 512, n 512, 8 layers, 8 heads), 40 checkpoints" },
      exp_index, false },
    { NULL, NULL, NULL, { NULL, NULL, NULL }, NULL, false },
};

static const char *const preset_names[TMM_EXP_PRESET_COUNT] = { "small", "medium", "paper" };

const tmm_experiment *tmm_experiment_find(const char *name)
{
    for (const tmm_experiment *e = tmm_experiments; e->name; e++)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

const char *tmm_exp_preset_name(tmm_exp_preset p) { return p < TMM_EXP_PRESET_COUNT ? preset_names[p] : "?"; }

tmm_status tmm_exp_preset_parse(const char *name, tmm_exp_preset *out)
{
    for (int p = 0; p < TMM_EXP_PRESET_COUNT; p++)
        if (strcmp(name, preset_names[p]) == 0) {
            *out = (tmm_exp_preset)p;
            return TMM_OK;
        }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no preset '%s': small, medium or paper", name);
}

tmm_status tmm_experiment_run(tmm_device *dev, const tmm_experiment *e, const tmm_exp_options *o,
                              tmm_exp_outcome *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->verdict, sizeof out->verdict, "not tested");
    if (o->lr_sweep && !e->lr_sweep)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s has no learning-rate sweep (tmm experiment --help names "
                        "those that have)", e->name);
    TMM_TRY(tmm_path_join(out->dir, sizeof out->dir, o->out, e->name));
    TMM_TRY(tmm_make_dirs(out->dir));
    char lock_path[TMM_EXP_PATH_MAX + 16];
    tmm_lock *lock;
    TMM_TRY(tmm_path_join(lock_path, sizeof lock_path, out->dir, ".lock"));
    TMM_TRY(tmm_lock_take(lock_path, out->dir, "tmm experiment", false, &lock));
    tmm_status s = e->run(dev, o, out);
    tmm_lock_release(lock);
    return s;
}

/* ---- shared ----------------------------------------------------------------- */

exp_ctx exp_context(tmm_device *dev, const tmm_exp_options *o, const char *name, tmm_exp_outcome *out)
{
    return (exp_ctx){ .dev = dev, .train = tmm_exp_run_train, .o = o, .e = tmm_experiment_find(name),
                      .device = tmm_device_get_info(dev)->name, .out = out };
}

bool exp_selected(const tmm_exp_options *o, tmm_arch arch)
{
    bool any = false;
    for (int a = 0; a < TMM_N_ARCHS; a++)
        any = any || o->archs[a];
    return !any || o->archs[arch];
}

tmm_status exp_base_config(const char *preset, uint64_t seed, tmm_train_config *c)
{
    tmm_train_config_default(c);
    const char *json = tmm_train_preset(preset);
    tmm_status s = json ? tmm_train_config_apply_json(c, json, preset)
                        : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no built-in preset %s", preset);
    c->model.seed = seed;
    c->data_seed = seed;
    if (s != TMM_OK)
        tmm_train_config_free(c);
    return s;
}

#define LICENSES "/usr/share/common-licenses"

/* The text a user of Debian or Ubuntu has: the license texts (118 KB). */
static const char *const default_texts[] = { "GPL-3", "LGPL-3", "Apache-2.0", "GPL-2", "MPL-2.0", "Artistic",
                                             "GFDL-1.3" };

tmm_status exp_set_text_data(const tmm_exp_options *o, tmm_train_config *c)
{
    const tmm_config_field *f = tmm_config_field_by_flag("data");
    if (!f)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no --data config field");
    bool first = true;
    for (uint32_t i = 0; i < o->n_data; i++, first = false)
        TMM_TRY(tmm_config_set_text(c, f, o->data[i], first));
    for (size_t i = 0; o->n_data == 0 && i < sizeof default_texts / sizeof *default_texts; i++) {
        char path[256];
        snprintf(path, sizeof path, LICENSES "/%s", default_texts[i]);
        if (!tmm_path_exists(path))
            continue;
        TMM_TRY(tmm_config_set_text(c, f, path, first));
        first = false;
    }
    if (first)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no text to train on: give --data FILE (the default, the license "
                        "texts in " LICENSES ", is not there)");
    return TMM_OK;
}

void exp_set_shape(tmm_train_config *c, const exp_shape *shape, uint32_t n)
{
    c->model.d_model = shape->d, c->model.n_ctx = n, c->model.n_layers = shape->layers;
    c->model.heads = shape->heads, c->model.expansion = shape->expansion;
    c->steps = shape->steps, c->batch = shape->batch, c->accum = 1;
    c->eval_every = c->log_every = c->save_every = shape->eval_every;
    c->eval_batches = shape->eval_batches, c->keep = 1;
    c->schedule.warmup_steps = shape->warmup;
}

tmm_status exp_text_config(const tmm_exp_options *o, const exp_shape *shape, uint32_t n, tmm_train_config *c)
{
    TMM_TRY(exp_base_config("small-text", o->seed, c));
    exp_set_shape(c, shape, n);
    c->target_accuracy = 0;
    tmm_status s = exp_set_text_data(o, c);
    if (s == TMM_OK)
        s = exp_resolve(c);
    if (s != TMM_OK)
        tmm_train_config_free(c);
    return s;
}

tmm_status exp_resolve(tmm_train_config *c)
{
    tmm_train_config copy = *c; /* shallow: prepare only sets values */
    tmm_data *data = NULL;
    TMM_TRY(tmm_train_prepare(&copy, &data));
    tmm_data_destroy(data);
    c->model = copy.model;
    c->schedule = copy.schedule;
    return TMM_OK;
}

tmm_status exp_matched_model(const tmm_model_config *tmm, tmm_arch arch, tmm_model_config *c, const char **knob)
{
    *c = *tmm;
    *knob = "";
    const tmm_arch_desc *a = tmm_arch_of(arch);
    if (a->toeplitz)
        return TMM_OK;
    c->arch = arch;
    c->heads = 0; /* the architecture's default (tmm_model_config_resolve) */
    c->kernel = 1, c->expanded = false, c->frozen = false;
    c->window = a->default_window ? (tmm->n_ctx >= 4 ? tmm->n_ctx / 4 : 1) : 0;
    c->state = 0;
    tmm_model_config_resolve(c);
    tmm_status s = tmm_model_config_check(c);
    if (s != TMM_OK) {
        char why[256];
        snprintf(why, sizeof why, "%s", tmm_last_error());
        return tmm_fail(s, "%s at the TMM's shape: %s", tmm_arch_name(arch), why);
    }
    uint64_t params;
    *knob = tmm_model_match_params(c, tmm_model_param_count(tmm), &params);
    return TMM_OK;
}

const char *exp_verdict(uint32_t held, uint32_t tested)
{
    return tested == 0 ? "not tested" : held == tested ? "held" : held == 0 ? "not held" : "partly held";
}

tmm_status exp_train_runs(exp_ctx *x, tmm_exp_run *runs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!x->o->quiet) {
            printf("[%u/%u] %s\n", i + 1, n, runs[i].label);
            fflush(stdout);
        }
        TMM_TRY(x->train(x->dev, x->out->dir, &runs[i], x->o->stop, x->o->quiet));
        x->out->runs++;
        x->out->reused += runs[i].reused;
        if (!x->o->quiet && runs[i].reused)
            printf("  finished before: reused %s\n", runs[i].dir);
        if (runs[i].interrupted || (x->o->stop && *x->o->stop)) {
            x->out->interrupted = true;
            return TMM_OK;
        }
    }
    return TMM_OK;
}

void exp_runs_free(tmm_exp_run *runs, uint32_t n)
{
    for (uint32_t i = 0; runs && i < n; i++)
        tmm_exp_run_free(&runs[i]);
    free(runs);
}

tmm_arch exp_arch(const char *name)
{
    for (int a = 0; a < TMM_N_ARCHS; a++)
        if (strcmp(tmm_arch_name((tmm_arch)a), name) == 0)
            return (tmm_arch)a;
    abort(); /* a name the code gives, not a user */
}

double exp_flops_per_token(const tmm_model_config *c)
{
    const double d = c->d_model, L = c->n_layers;
    uint64_t per_step = 0; /* per layer */
    const double mix = tmm_arch_of(c->arch)->mixer->flops(c, &per_step); /* per layer and token, forward */
    /* 2 per weight, the embedding being a lookup and per-step weights not per token */
    const double dense = (double)tmm_model_param_count(c) - (double)c->vocab * d - L * (double)per_step;
    return 3 * (2 * dense + L * mix); /* forward, and a backward of twice its cost */
}

static tmm_status exp_path(const exp_ctx *x, const char *file, char *path, size_t size)
{
    return tmm_path_join(path, size, x->out->dir, file);
}

tmm_status exp_save_chart(const exp_ctx *x, const char *file, const tmm_chart *chart, bool bars)
{
    char path[TMM_EXP_PATH_MAX + 64];
    TMM_TRY(exp_path(x, file, path, sizeof path));
    tmm_svg t = { 0 };
    tmm_status s = bars ? tmm_svg_bar_chart(chart, &t) : tmm_svg_line_chart(chart, &t);
    if (s == TMM_OK)
        s = tmm_svg_save(&t, path);
    tmm_svg_free(&t);
    return s;
}

tmm_status exp_save_json(const exp_ctx *x, const char *file, const cJSON *json)
{
    char path[TMM_EXP_PATH_MAX + 64];
    TMM_TRY(exp_path(x, file, path, sizeof path));
    char *text = cJSON_Print(json);
    if (!text)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory writing %s", path);
    size_t len = strlen(text);
    text[len] = '\n'; /* cJSON_Print's NUL becomes the final newline */
    tmm_status s = tmm_write_file_atomic(path, text, len + 1);
    free(text);
    return s;
}

tmm_status exp_stream_open(exp_stream *s)
{
    s->buf = NULL, s->size = 0;
    s->f = open_memstream(&s->buf, &s->size);
    return s->f ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
}

tmm_status exp_stream_save(const exp_ctx *x, const char *file, exp_stream *stream)
{
    char path[TMM_EXP_PATH_MAX + 64];
    tmm_status s = exp_path(x, file, path, sizeof path);
    if (fclose(stream->f) != 0 && s == TMM_OK) /* sets buf and size */
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory writing %s", file);
    if (s == TMM_OK)
        s = tmm_write_file_atomic(path, stream->buf ? stream->buf : "", stream->buf ? stream->size : 0);
    free(stream->buf);
    *stream = (exp_stream){ 0 };
    return s;
}

tmm_status exp_save_summary(const exp_ctx *x, cJSON *root, const char *rule, const char *detail)
{
    cJSON_AddStringToObject(root, "rule", rule);
    cJSON_AddStringToObject(root, "verdict", x->out->verdict);
    if (detail)
        cJSON_AddStringToObject(root, "verdict_detail", detail);
    tmm_status s = exp_save_json(x, "summary.json", root);
    cJSON_Delete(root);
    return s;
}

cJSON *exp_number_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *exp_summary(const exp_ctx *x, const tmm_exp_run *runs, uint32_t n)
{
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "experiment", x->e->name);
    cJSON_AddStringToObject(root, "title", x->e->title);
    cJSON_AddStringToObject(root, "claim", x->e->claim);
    cJSON_AddStringToObject(root, "preset", tmm_exp_preset_name(x->o->preset));
    cJSON_AddNumberToObject(root, "seed", (double)x->o->seed);
    cJSON_AddStringToObject(root, "device", x->device);
    cJSON_AddItemToObject(root, "runs", arr);
    for (uint32_t i = 0; i < n; i++) {
        const tmm_exp_run *r = &runs[i];
        const tmm_model_config *m = &r->config.model;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "label", r->label);
        cJSON_AddStringToObject(o, "arch", tmm_arch_name(m->arch));
        const char *slash = strrchr(r->dir, '/');
        char rel[TMM_EXP_PATH_MAX + 8]; /* "runs/" and a directory name of up to TMM_EXP_PATH_MAX - 1 */
        snprintf(rel, sizeof rel, "runs/%s", slash ? slash + 1 : r->dir);
        cJSON_AddStringToObject(o, "dir", rel);
        cJSON_AddNumberToObject(o, "params", (double)r->params);
        cJSON_AddNumberToObject(o, "d_model", m->d_model);
        cJSON_AddNumberToObject(o, "n_ctx", m->n_ctx);
        cJSON_AddNumberToObject(o, "n_layers", m->n_layers);
        cJSON_AddNumberToObject(o, "heads", m->heads);
        cJSON_AddNumberToObject(o, "expansion", m->expansion);
        cJSON_AddNumberToObject(o, "flops_per_token", exp_flops_per_token(m));
        cJSON_AddNumberToObject(o, "lr", r->config.schedule.peak_lr);
        cJSON_AddNumberToObject(o, "batch", r->config.batch);
        cJSON_AddNumberToObject(o, "step_budget", (double)r->config.steps);
        cJSON_AddNumberToObject(o, "steps", (double)r->steps);
        cJSON_AddNumberToObject(o, "tokens", (double)r->steps * r->config.batch * m->n_ctx);
        cJSON_AddNumberToObject(o, "seconds", r->seconds);
        cJSON_AddItemToObject(o, "val_loss", exp_number_or_null(r->val_loss));
        cJSON_AddItemToObject(o, "accuracy", exp_number_or_null(r->accuracy));
        cJSON_AddBoolToObject(o, "reused", r->reused);
    }
    return root;
}

void exp_report_head(FILE *f, const exp_ctx *x, const tmm_exp_run *runs, uint32_t n, const char *matched)
{
    fprintf(f, "# %s\n\n**Claim** (the paper): %s.\n\n", x->e->title, x->e->claim);
    fprintf(f, "**Setup**: preset `%s` (%s), seed %llu, device: %s. %s\n\n", tmm_exp_preset_name(x->o->preset),
            x->e->presets[x->o->preset], (unsigned long long)x->o->seed, x->device, matched);
    fprintf(f, "| run | arch | params | d | layers | heads | MLP expansion | peak lr | batch | step budget | "
               "training FLOPs/token |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (uint32_t i = 0; i < n; i++) {
        const tmm_model_config *m = &runs[i].config.model;
        char label[32], e[16] = "-";
        if (tmm_arch_of(m->arch)->mlp != TMM_MLP_NONE)
            snprintf(e, sizeof e, "%u", m->expansion);
        fprintf(f, "| %s | %s | %llu | %u | %u | %u | %s | %.3g | %u | %llu | %.3g |\n", runs[i].label,
                tmm_arch_label(m, label, sizeof label), (unsigned long long)runs[i].params, m->d_model, m->n_layers,
                m->heads, e, runs[i].config.schedule.peak_lr, runs[i].config.batch,
                (unsigned long long)runs[i].config.steps, exp_flops_per_token(m));
    }
    fprintf(f, "\n");
}
