/* tmm bench arch: the TMM and the baselines (docs/baselines.md) side by side
 * at matched parameter counts on one device, in one run: training speed,
 * planned training memory and cached decoding time per token against the
 * position. The measuring is bench train's and bench generate's own. */
#include <stdio.h>
#include <string.h>

#include "bench/internal.h"
#include "model/arch.h"
#include "model/match.h"

/* One architecture's model as given: the row's defaults, o's sizes. */
static tmm_status given_model(const tmm_bench_arch_opts *o, tmm_arch a, tmm_model_config *out)
{
    tmm_model_config c = tmm_model_config_default();
    c.arch = a;
    c.vocab = o->vocab, c.d_model = o->d, c.n_ctx = o->n, c.n_layers = o->layers;
    tmm_bench_set_heads(&c, o->heads, false);
    c.expansion = TMM_BENCH_ARCH_EXPANSION;
    c.window = tmm_arch_of(c.arch)->default_window ? o->window : 0;
    tmm_model_config_resolve(&c);
    tmm_status s = tmm_model_config_check(&c);
    if (s != TMM_OK) {
        const char *name = tmm_arch_name(c.arch);
        /* the message names the architecture once */
        return strncmp(tmm_last_error(), name, strlen(name)) == 0 ? s : tmm_bench_context(s, "%s", name);
    }
    *out = c;
    return TMM_OK;
}

tmm_status tmm_bench_arch_models(const tmm_bench_arch_opts *o, tmm_bench_arch_result *out)
{
    memset(out, 0, sizeof *out);
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        TMM_TRY(given_model(o, (tmm_arch)a, &out->rows[a].c));
        out->rows[a].params = tmm_model_param_count(&out->rows[a].c);
    }
    int subject = 0; /* the TMM: the others are matched to its parameter count */
    while (!tmm_arch_of(out->rows[subject].c.arch)->toeplitz)
        subject++;
    for (int a = 0; a < TMM_N_ARCHS; a++)
        if (a != subject)
            tmm_model_match_params(&out->rows[a].c, out->rows[subject].params, &out->rows[a].params);
    return TMM_OK;
}

/* Training speed and memory, then decoding, of one model. */
static tmm_status measure(tmm_device *dev, const tmm_bench_arch_opts *o, tmm_bench_arch_row *row)
{
    tmm_train_config tc;
    tmm_train_config_default(&tc);
    tc.model = row->c;
    tc.batch = o->batch;
    tc.accum = 1;
    tmm_status s = tmm_train_memory_plan(dev, &tc, &row->mem);
    if (s == TMM_OK)
        s = tmm_bench_train_steps(dev, &tc, TMM_BENCH_TRAIN_WARMUP, o->steps, false, &row->train);
    tmm_train_config_free(&tc);
    return s == TMM_OK ? tmm_bench_decode(dev, &row->c, o->repeat, o->positions, o->np, row->decode_ms) : s;
}

tmm_status tmm_bench_arch(tmm_device *dev, const tmm_bench_arch_opts *o, tmm_bench_arch_result *out,
                          void (*on_row)(void *user, const tmm_bench_arch_row *row), void *user)
{
    if (o->np > TMM_BENCH_MAX_POINTS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "at most %d decoding positions", TMM_BENCH_MAX_POINTS);
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        if (!o->selected[a])
            continue;
        tmm_status s = measure(dev, o, &out->rows[a]);
        if (s != TMM_OK)
            return tmm_bench_context(s, "measuring %s", tmm_arch_name(out->rows[a].c.arch));
        if (on_row)
            on_row(user, &out->rows[a]);
    }
    return TMM_OK;
}

char *tmm_bench_arch_json(const tmm_device *dev, const tmm_bench_arch_opts *o, const tmm_bench_arch_result *res)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
    cJSON_AddNumberToObject(root, "d_model", o->d);
    cJSON_AddNumberToObject(root, "n_ctx", o->n);
    cJSON_AddNumberToObject(root, "n_layers", o->layers);
    cJSON_AddNumberToObject(root, "heads", o->heads);
    cJSON_AddNumberToObject(root, "vocab", o->vocab);
    cJSON_AddNumberToObject(root, "window", o->window);
    cJSON_AddNumberToObject(root, "batch", o->batch);
    cJSON_AddNumberToObject(root, "steps", o->steps);
    cJSON_AddNumberToObject(root, "warmup_steps", TMM_BENCH_TRAIN_WARMUP);
    cJSON_AddNumberToObject(root, "repeat", o->repeat);
    cJSON *arr = cJSON_AddArrayToObject(root, "archs");
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        const tmm_bench_arch_row *r = &res->rows[a];
        if (!o->selected[a])
            continue;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, e);
        cJSON_AddStringToObject(e, "arch", tmm_arch_name(r->c.arch));
        cJSON_AddNumberToObject(e, "params", (double)r->params);
        if (tmm_arch_of(r->c.arch)->mlp != TMM_MLP_NONE)
            cJSON_AddNumberToObject(e, "expansion", r->c.expansion);
        cJSON_AddNumberToObject(e, "n_layers", r->c.n_layers);
        cJSON_AddNumberToObject(e, "heads", r->c.heads);
        if (tmm_arch_of(r->c.arch)->default_state)
            cJSON_AddNumberToObject(e, "state", r->c.state);
        if (tmm_arch_of(r->c.arch)->default_window)
            cJSON_AddNumberToObject(e, "window", r->c.window);
        cJSON_AddNumberToObject(e, "tokens_per_s", r->train.tokens_per_s);
        cJSON_AddNumberToObject(e, "ms_per_step", r->train.ms_per_step);
        cJSON_AddNumberToObject(e, "cpu_ms_per_step", r->train.cpu_ms_per_step);
        cJSON_AddNumberToObject(e, "memory_bytes", (double)r->mem.total);
        cJSON *m = cJSON_AddObjectToObject(e, "memory");
        cJSON_AddNumberToObject(m, "params", (double)r->mem.model.params);
        cJSON_AddNumberToObject(m, "grads", (double)r->mem.model.grads);
        cJSON_AddNumberToObject(m, "optimizer", (double)r->mem.optimizer);
        cJSON_AddNumberToObject(m, "activations", (double)r->mem.model.activations);
        cJSON_AddNumberToObject(m, "workspace", (double)(r->mem.model.workspace + r->mem.model.fft_plans));
        cJSON *dec = cJSON_AddArrayToObject(e, "decode");
        for (unsigned i = 0; i < o->np; i++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddNumberToObject(p, "position", o->positions[i]);
            cJSON_AddNumberToObject(p, "ms_per_token", r->decode_ms[i]);
            cJSON_AddItemToArray(dec, p);
        }
    }
    return tmm_bench_json_text(root);
}
