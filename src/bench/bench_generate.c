/* tmm bench generate: time to first token against prompt length, and decode
 * time per token against position, cached beside the naive way (a full
 * forward pass for every new token); a distilled checkpoint's realizations
 * beside exact decoding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/internal.h"
#include "model/arch.h"
#include "model/rng.h"

tmm_status tmm_bench_gen_first_token(tmm_bench_gen *b, uint32_t len, double *ms)
{
    double t[TMM_BENCH_MAX_REPEAT];
    const uint32_t *p = b->tokens;
    tmm_sampler greedy = TMM_SAMPLER_DEFAULT;
    greedy.greedy = true;
    for (uint32_t r = 0; r < b->repeat; r++) {
        double t0 = tmm_bench_now_ms();
        uint32_t tok;
        TMM_TRY(tmm_generator_prefill(b->gen, &p, &len, b->logits));
        TMM_TRY(tmm_sample(&greedy, b->logits, b->V, 0, &tok));
        t[r] = tmm_bench_now_ms() - t0;
    }
    *ms = tmm_bench_median(t, b->repeat);
    return TMM_OK;
}

tmm_status tmm_bench_gen_cached(tmm_bench_gen *b, uint32_t pos, double *ms)
{
    double t[TMM_BENCH_MAX_REPEAT];
    const uint32_t *p = b->tokens;
    if ((uint64_t)pos + b->repeat > b->n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "position %u plus %u steps passes the context of %u", pos,
                        b->repeat, b->n);
    TMM_TRY(tmm_generator_prefill(b->gen, &p, &pos, b->logits));
    for (uint32_t r = 0; r < b->repeat; r++) {
        double t0 = tmm_bench_now_ms();
        TMM_TRY(tmm_generator_step(b->gen, &b->tokens[pos + r], b->logits));
        t[r] = tmm_bench_now_ms() - t0;
    }
    *ms = tmm_bench_median(t, b->repeat);
    return TMM_OK;
}

void tmm_bench_gen_close(tmm_bench_gen *b)
{
    tmm_generator_destroy(b->gen);
    free(b->tokens), free(b->logits);
    memset(b, 0, sizeof *b);
}

tmm_status tmm_bench_gen_open(tmm_device *dev, const tmm_param_table *table, const float *params,
                              tmm_model_tokenizer tokenizer, tmm_toeplitz_impl impl, uint32_t repeat,
                              const tmm_distilled *distilled, tmm_bench_gen *out)
{
    const tmm_model_config *c = &table->config;
    memset(out, 0, sizeof *out);
    if (repeat == 0 || repeat > TMM_BENCH_MAX_REPEAT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "repeat must be from 1 to %u", TMM_BENCH_MAX_REPEAT);
    *out = (tmm_bench_gen){ .n = c->n_ctx, .V = c->vocab, .repeat = repeat };
    out->tokens = malloc(out->n * sizeof *out->tokens);
    out->logits = malloc(out->V * sizeof *out->logits);
    tmm_status s = out->tokens && out->logits ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        for (uint32_t i = 0; i < out->n; i++)
            out->tokens[i] = (uint32_t)(tmm_rng_bits(1, i) % out->V);
        s = tmm_gen_create(dev, table, params, tokenizer, 1, impl, distilled, &out->gen);
    }
    if (s != TMM_OK)
        tmm_bench_gen_close(out);
    return s;
}

tmm_status tmm_bench_gen_random(tmm_device *dev, const tmm_model_config *c, tmm_toeplitz_impl impl, uint32_t repeat,
                                tmm_bench_gen *out)
{
    memset(out, 0, sizeof *out);
    tmm_param_table table = { 0 };
    float *params = NULL;
    tmm_model_tokenizer tokenizer;
    tmm_status s = tmm_param_table_build(c, &table);
    if (s == TMM_OK && !(params = malloc(table.arena_floats * sizeof *params)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        tmm_param_init(&table, params);
        s = tmm_model_tokenizer_pick(NULL, c->vocab, &tokenizer);
    }
    if (s == TMM_OK)
        s = tmm_bench_gen_open(dev, &table, params, tokenizer, impl, repeat, NULL, out);
    free(params);
    tmm_param_table_free(&table);
    return s;
}

tmm_status tmm_bench_decode(tmm_device *dev, const tmm_model_config *c, uint32_t repeat, const uint32_t *positions,
                            unsigned count, double *ms)
{
    tmm_bench_gen g;
    double warm;
    tmm_status s = tmm_bench_gen_random(dev, c, TMM_TOEPLITZ_AUTO, repeat, &g);
    if (s == TMM_OK)
        s = tmm_bench_gen_cached(&g, 1, &warm); /* warm-up: compiles the decoding kernels */
    for (unsigned i = 0; i < count && s == TMM_OK; i++)
        s = tmm_bench_gen_cached(&g, positions[i], &ms[i]);
    tmm_bench_gen_close(&g);
    return s;
}

/* Keeps the values that fit: prompts <= n, positions + repeat <= n. */
static unsigned keep_fitting(uint32_t *v, unsigned count, uint32_t limit)
{
    unsigned k = 0;
    for (unsigned i = 0; i < count; i++)
        if (v[i] <= limit)
            v[k++] = v[i];
    return k;
}

bool tmm_bench_generate_fit(tmm_bench_generate_opts *o, bool positions_given)
{
    const uint32_t n = o->config.n_ctx, repeat = o->repeat;
    if (!positions_given && n > repeat) { /* the last position too: steps that end at n - 1 */
        o->n_positions = keep_fitting(o->positions, o->n_positions, n - repeat - 1);
        o->positions[o->n_positions++] = n - repeat;
    }
    o->n_prompts = keep_fitting(o->prompts, o->n_prompts, n);
    o->n_positions = keep_fitting(o->positions, o->n_positions, n > repeat ? n - repeat : 0);
    return o->n_prompts > 0 && o->n_positions > 0;
}

/* How far distilled decoding (bd) strays from exact decoding (b) up to
 * position `to`. */
static tmm_status measure_fidelity(tmm_bench_gen *b, tmm_bench_gen *bd, uint32_t to, tmm_bench_fidelity *f)
{
    uint32_t len = 16 < b->n ? 16 : 1;
    const uint32_t *p = b->tokens;
    float *ld = malloc(b->V * sizeof *ld);
    if (!ld)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    *f = (tmm_bench_fidelity){ .first_split = UINT32_MAX };
    tmm_status s = tmm_generator_prefill(b->gen, &p, &len, b->logits);
    if (s == TMM_OK)
        s = tmm_generator_prefill(bd->gen, &p, &len, ld);
    tmm_sampler greedy = TMM_SAMPLER_DEFAULT;
    greedy.greedy = true;
    const uint32_t last = to < b->n - 1 ? to : b->n - 1;
    for (uint32_t pos = len; s == TMM_OK && pos <= last; pos++) {
        uint32_t te, td;
        double worst = 0;
        for (uint32_t v = 0; v < b->V; v++)
            worst = fmax(worst, fabs((double)b->logits[v] - ld[v]));
        s = tmm_sample(&greedy, b->logits, b->V, 0, &te);
        if (s == TMM_OK)
            s = tmm_sample(&greedy, ld, b->V, 0, &td);
        f->steps++, f->agree += te == td, f->max_dlogit = fmax(f->max_dlogit, worst), f->mean_dlogit += worst;
        if (te != td && f->first_split == UINT32_MAX)
            f->first_split = pos;
        if (s == TMM_OK && pos < last)
            s = tmm_generator_step(b->gen, &te, b->logits);
        if (s == TMM_OK && pos < last)
            s = tmm_generator_step(bd->gen, &te, ld);
    }
    f->mean_dlogit /= f->steps ? f->steps : 1;
    free(ld);
    return s;
}

/* Every measurement of an open model b (and its distilled twin bd, or NULL). */
static tmm_status run(tmm_bench_gen *b, tmm_bench_gen *bd, const tmm_bench_generate_opts *o,
                      tmm_bench_generate_result *out)
{
    const uint32_t *positions = o->positions;
    tmm_status s = tmm_bench_gen_cached(b, 1, &out->cached_ms[0]); /* warm-up: compiles every kernel */
    if (s == TMM_OK && bd)
        s = tmm_bench_gen_cached(bd, 1, &out->distilled_ms[0]);
    for (unsigned i = 0; s == TMM_OK && i < o->n_prompts; i++)
        s = tmm_bench_gen_first_token(b, o->prompts[i], &out->first_token_ms[i]);
    for (unsigned i = 0; s == TMM_OK && i < o->n_positions; i++) {
        s = tmm_bench_gen_cached(b, positions[i], &out->cached_ms[i]);
        /* the naive way: the whole prefix of position t through the model */
        if (s == TMM_OK)
            s = tmm_bench_gen_first_token(b, positions[i] + 1, &out->naive_ms[i]);
        if (s == TMM_OK && bd)
            s = tmm_bench_gen_cached(bd, positions[i], &out->distilled_ms[i]);
        if (positions[i] == 1000)
            out->speedup_at_1000 = out->naive_ms[i] / out->cached_ms[i];
    }
    if (s == TMM_OK && bd)
        s = measure_fidelity(b, bd, positions[o->n_positions - 1], &out->fidelity);
    return s;
}

tmm_status tmm_bench_generate(tmm_device *dev, const tmm_bench_generate_opts *o, tmm_bench_generate_result *out)
{
    memset(out, 0, sizeof *out);
    out->speedup_at_1000 = -1;
    if (o->n_prompts == 0 || o->n_positions == 0 || o->n_prompts > TMM_BENCH_MAX_POINTS ||
        o->n_positions > TMM_BENCH_MAX_POINTS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "1 to %d prompt lengths and positions", TMM_BENCH_MAX_POINTS);
    const tmm_checkpoint *ck = o->checkpoint;
    tmm_bench_gen b = { 0 }, bd = { 0 };
    tmm_distilled set = { 0 };
    tmm_status s;
    if (ck) {
        tmm_model_tokenizer tokenizer;
        s = tmm_model_tokenizer_pick(tmm_checkpoint_meta(ck, "tokenizer"), ck->table.config.vocab, &tokenizer);
        if (s == TMM_OK)
            s = tmm_distilled_load_dir(ck->dir, 0, &ck->table, ck->params, &set, &out->distilled);
        if (s == TMM_OK)
            s = tmm_bench_gen_open(dev, &ck->table, ck->params, tokenizer, o->impl, o->repeat, NULL, &b);
        if (s == TMM_OK && out->distilled)
            s = tmm_bench_gen_open(dev, &ck->table, ck->params, tokenizer, o->impl, o->repeat, &set, &bd);
    } else {
        s = tmm_bench_gen_random(dev, &o->config, o->impl, o->repeat, &b);
    }
    if (s == TMM_OK) {
        out->commands_per_token = tmm_gen_step_commands(b.gen);
        out->distilled_commands_per_token = out->distilled ? tmm_gen_step_commands(bd.gen) : 0;
        s = run(&b, out->distilled ? &bd : NULL, o, out);
    }
    tmm_bench_gen_close(&b);
    tmm_bench_gen_close(&bd);
    tmm_distilled_free(&set);
    return s;
}

const char *tmm_bench_generate_desc(const tmm_bench_generate_opts *o, char *buf, size_t size)
{
    const tmm_model_config *c = &o->config;
    char mix[64];
    snprintf(buf, size, "%s (%s): d %u, %u layers, %s, n %u, vocab %u", o->name ? o->name : "random model",
             tmm_arch_name(c->arch), c->d_model, c->n_layers, tmm_bench_mixing_desc(c, mix, sizeof mix), c->n_ctx,
             c->vocab);
    return buf;
}

char *tmm_bench_generate_json(const tmm_device *dev, const tmm_bench_generate_opts *o,
                              const tmm_bench_generate_result *r)
{
    const tmm_model_config *c = &o->config;
    const bool bd = r->distilled;
    char desc[192];
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
    cJSON_AddStringToObject(root, "model", tmm_bench_generate_desc(o, desc, sizeof desc));
    cJSON_AddStringToObject(root, "arch", tmm_arch_name(c->arch));
    if (tmm_arch_of(c->arch)->default_window)
        cJSON_AddNumberToObject(root, "window", c->window);
    cJSON *a = cJSON_AddArrayToObject(root, "first_token");
    for (unsigned i = 0; i < o->n_prompts; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "prompt", o->prompts[i]);
        cJSON_AddNumberToObject(e, "ms", r->first_token_ms[i]);
        cJSON_AddItemToArray(a, e);
    }
    a = cJSON_AddArrayToObject(root, "decode");
    for (unsigned i = 0; i < o->n_positions; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "position", o->positions[i]);
        cJSON_AddNumberToObject(e, "cached_ms", r->cached_ms[i]);
        cJSON_AddNumberToObject(e, "naive_ms", r->naive_ms[i]);
        cJSON_AddNumberToObject(e, "speedup", r->naive_ms[i] / r->cached_ms[i]);
        if (bd) {
            cJSON_AddNumberToObject(e, "distilled_ms", r->distilled_ms[i]);
            cJSON_AddNumberToObject(e, "distilled_speedup", r->cached_ms[i] / r->distilled_ms[i]);
        }
        cJSON_AddItemToArray(a, e);
    }
    if (bd) {
        const tmm_bench_fidelity *fid = &r->fidelity;
        cJSON *f = cJSON_AddObjectToObject(root, "distilled_fidelity");
        cJSON_AddNumberToObject(f, "steps", fid->steps);
        cJSON_AddNumberToObject(f, "max_abs_logit_diff", fid->max_dlogit);
        cJSON_AddNumberToObject(f, "mean_max_abs_logit_diff", fid->mean_dlogit);
        cJSON_AddNumberToObject(f, "argmax_agreement", (double)fid->agree / (fid->steps ? fid->steps : 1));
        if (fid->first_split == UINT32_MAX)
            cJSON_AddNullToObject(f, "first_different_position");
        else
            cJSON_AddNumberToObject(f, "first_different_position", fid->first_split);
    }
    cJSON_AddNumberToObject(root, "commands_per_token", r->commands_per_token);
    if (bd)
        cJSON_AddNumberToObject(root, "distilled_commands_per_token", r->distilled_commands_per_token);
    if (r->speedup_at_1000 > 0)
        cJSON_AddNumberToObject(root, "decode_speedup_at_1000", r->speedup_at_1000);
    else
        cJSON_AddNullToObject(root, "decode_speedup_at_1000");
    return tmm_bench_json_text(root);
}
