#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/rng.h"
#include "status.h"

tmm_model_config tmm_model_config_default(void)
{
    tmm_model_config c = { .vocab = 256, .d_model = 64, .n_ctx = 64, .n_layers = 2, .heads = 0,
                           .expansion = 4, .kernel = 1, .expanded = false, .frozen = false, .seed = 1 };
    return c;
}

void tmm_model_config_resolve(tmm_model_config *c)
{
    const tmm_arch_desc *a = tmm_arch_of(c->arch);
    if (!a)
        return;
    const uint32_t inner = a->heads == TMM_HEADS_OF_64_INNER ? 2 * c->d_model : c->d_model;
    if (a->heads == TMM_HEADS_NONE)
        c->heads = 0; /* a preset's or a flag's heads do not apply */
    else if (a->heads != TMM_HEADS_AS_GIVEN && c->heads == 0 && c->d_model)
        c->heads = inner % 64 == 0 ? inner / 64 : 1;
    if (c->window == 0)
        c->window = a->default_window;
    if (c->state == 0)
        c->state = a->default_state;
}

static bool has_window(const tmm_arch_desc *d) { return d->default_window != 0; }
static bool has_state(const tmm_arch_desc *d) { return d->default_state != 0; }
static bool is_toeplitz(const tmm_arch_desc *d) { return d->toeplitz; }

tmm_status tmm_model_config_check(const tmm_model_config *c)
{
    if (!tmm_arch_name(c->arch))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unknown architecture %d", (int)c->arch);
    if (!tmm_arch_of(c->arch))
        return tmm_fail(TMM_ERR_UNSUPPORTED, "the %s architecture is not built yet", tmm_arch_name(c->arch));
    const struct { const char *name; uint32_t value, lo, hi; } fields[] = {
        { "vocab", c->vocab, 2, TMM_MAX_VOCAB },          { "d_model", c->d_model, 1, TMM_MAX_D_MODEL },
        { "n_ctx", c->n_ctx, 1, TMM_MAX_N_CTX },          { "n_layers", c->n_layers, 1, TMM_MAX_LAYERS },
        { "heads", c->heads, 0, TMM_MAX_HEADS },          { "expansion", c->expansion, 1, TMM_MAX_EXPANSION },
        { "kernel", c->kernel, 1, TMM_MAX_KERNEL },       { "state", c->state, 0, TMM_MAX_STATE },
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value < fields[i].lo || fields[i].value > fields[i].hi)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s must be from %u to %u, got %u", fields[i].name, fields[i].lo,
                            fields[i].hi, fields[i].value);
    const tmm_arch_desc *a = tmm_arch_of(c->arch);
    const char *name = tmm_arch_name(c->arch);
    char which[64];
    if (c->heads && a->heads != TMM_HEADS_OF_64_INNER && c->d_model % c->heads) /* inner heads: the mixer checks */
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "d_model (%u) must be a multiple of heads (%u)", c->d_model,
                        c->heads);
    if ((uint64_t)c->expansion * c->d_model > (1u << 24) || (uint64_t)c->vocab * c->d_model > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    if (c->window && !a->default_window)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "window is for sliding-window attention (%s), not %s",
                        tmm_arch_names_where(has_window, which, sizeof which), name);
    if (!c->window && a->default_window)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s needs a window of at least 1 (--window W)", name);
    if (c->state && !a->default_state)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "state is the SSM state size of %s, not of %s",
                        tmm_arch_names_where(has_state, which, sizeof which), name);
    if ((unsigned)c->init >= TMM_INIT_SCHEME_COUNT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "init must be arch or torch (tmm_init_scheme), got %d", (int)c->init);
    if (!a->toeplitz && (c->kernel != 1 || c->expanded || c->frozen))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel, expanded and frozen are variants of the TMM (%s), not of %s",
                        tmm_arch_names_where(is_toeplitz, which, sizeof which), name);
    return a->mixer->check(c);
}

struct tmm_param_builder {
    tmm_param_table *t;
    uint32_t cap;
    tmm_status status;
};

int tmm_param_add(tmm_param_builder *b, uint32_t layer, const char *what, tmm_param_spec spec)
{
    tmm_param_table *t = b->t;
    if (b->status != TMM_OK)
        return -1;
    if (t->count == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 64;
        tmm_param *p = realloc(t->params, cap * sizeof *p);
        if (!p) {
            b->status = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            return -1;
        }
        t->params = p;
        b->cap = cap;
    }
    tmm_param *p = &t->params[t->count];
    memset(p, 0, sizeof *p);
    int len = layer == UINT32_MAX ? snprintf(p->name, sizeof p->name, "%s", what)
                                   : snprintf(p->name, sizeof p->name, "blocks.%u.%s", layer, what);
    if (len < 0 || (size_t)len >= sizeof p->name) {
        b->status = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tensor name %s of layer %u is too long", what, layer);
        return -1;
    }
    p->ndim = spec.ndim;
    p->numel = 1;
    for (uint32_t i = 0; i < spec.ndim; i++) {
        p->shape[i] = spec.shape[i];
        p->numel *= spec.shape[i];
    }
    p->offset = t->arena_floats;
    p->init = spec.init;
    p->fan_in = spec.fan_in;
    p->kind = spec.kind;
    p->trainable = spec.trainable;
    t->arena_floats += (p->numel + TMM_PARAM_ALIGN - 1) / TMM_PARAM_ALIGN * TMM_PARAM_ALIGN;
    return (int)t->count++;
}

/* A norm's gain (and LayerNorm's bias) as blocks.<layer>.<name>.weight/.bias. */
static void add_norm(tmm_param_builder *b, const tmm_arch_desc *a, uint32_t layer, const char *name, uint32_t d,
                     int *w, int *bias)
{
    char what[TMM_PARAM_NAME_MAX];
    snprintf(what, sizeof what, "%s.weight", name);
    *w = tmm_param_add(b, layer, what, (tmm_param_spec){ 1, { d }, TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true });
    *bias = -1;
    if (a->norm == TMM_NORM_LAYER) {
        snprintf(what, sizeof what, "%s.bias", name);
        *bias = tmm_param_add(b, layer, what, (tmm_param_spec){ 1, { d }, TMM_INIT_ZERO, 0, TMM_PARAM_LN_BIAS, true });
    }
}

static tmm_param_spec linear_weight(const tmm_arch_desc *a, uint32_t out, uint32_t in)
{
    return (tmm_param_spec){ 2, { out, in }, a->linear_init, in, TMM_PARAM_LINEAR_WEIGHT, true };
}

static void add_mlp(tmm_param_builder *b, const tmm_arch_desc *a, uint32_t l, uint32_t d, uint32_t e,
                    tmm_block_params *p)
{
    const tmm_param_spec bias_d = { 1, { d }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec bias_e = { 1, { e }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    if (a->mlp == TMM_MLP_NONE)
        return; /* no MLP, no MLP norm */
    add_norm(b, a, l, a->mlp_norm_name, d, &p->mlp_norm_w, &p->mlp_norm_b);
    if (a->mlp == TMM_MLP_SILU || a->mlp == TMM_MLP_GELU) {
        p->mlp_in_w = tmm_param_add(b, l, "mlp.fc1.weight", linear_weight(a, e, d));
        p->mlp_in_b = tmm_param_add(b, l, "mlp.fc1.bias", bias_e);
        p->mlp_out_w = tmm_param_add(b, l, "mlp.fc2.weight", linear_weight(a, d, e));
        p->mlp_out_b = tmm_param_add(b, l, "mlp.fc2.bias", bias_d);
    } else {
        /* rows 0..e-1 are Wgate, e..2e-1 Wup: one matmul gives SwiGLU's input */
        p->mlp_in_w = tmm_param_add(b, l, "mlp.gate_up.weight", linear_weight(a, 2 * e, d));
        p->mlp_out_w = tmm_param_add(b, l, "mlp.down.weight", linear_weight(a, d, e));
    }
}

static void add_mixer(tmm_param_builder *b, const tmm_arch_desc *a, const tmm_model_config *c, uint32_t l,
                      tmm_block_params *p)
{
    add_norm(b, a, l, a->mix_norm_name, c->d_model, &p->mix_norm_w, &p->mix_norm_b);
    a->mixer->declare(b, c, l, p->mix);
}

tmm_status tmm_param_table_build(const tmm_model_config *c, tmm_param_table *t)
{
    memset(t, 0, sizeof *t);
    TMM_TRY(tmm_model_config_check(c));
    t->config = *c;
    t->blocks = calloc(c->n_layers, sizeof *t->blocks);
    if (!t->blocks)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_param_builder b = { t, 0, TMM_OK };
    const tmm_arch_desc *a = tmm_arch_of(c->arch);
    const uint32_t d = c->d_model, e = c->expansion * c->d_model;

    t->embed = tmm_param_add(&b, UINT32_MAX, "embed.weight",
                             (tmm_param_spec){ 2, { c->vocab, d }, a->embed_init, 0, TMM_PARAM_EMBED, true });
    for (uint32_t l = 0; l < c->n_layers; l++) {
        tmm_block_params *p = &t->blocks[l];
        memset(p, -1, sizeof *p);  /* every index -1 until declared */
        if (a->mixer_first) {
            add_mixer(&b, a, c, l, p);
            add_mlp(&b, a, l, d, e, p);
        } else {
            add_mlp(&b, a, l, d, e, p);
            add_mixer(&b, a, c, l, p);
        }
    }
    t->final_norm_w = -1;
    if (a->final_norm) {
        int bias;
        add_norm(&b, a, UINT32_MAX, "final_norm", d, &t->final_norm_w, &bias);
    }
    tmm_param_spec head = linear_weight(a, c->vocab, d);
    head.kind = TMM_PARAM_HEAD;
    t->head = tmm_param_add(&b, UINT32_MAX, "lm_head.weight", head);
    if (b.status != TMM_OK) {
        tmm_param_table_free(t);
        return b.status;
    }
    return TMM_OK;
}

void tmm_param_table_free(tmm_param_table *t)
{
    free(t->params);
    free(t->blocks);
    memset(t, 0, sizeof *t);
}

int tmm_param_find(const tmm_param_table *t, const char *name)
{
    for (uint32_t i = 0; i < t->count; i++)
        if (strcmp(t->params[i].name, name) == 0)
            return (int)i;
    return -1;
}

uint64_t tmm_model_param_count(const tmm_model_config *c)
{
    tmm_param_table t;
    if (tmm_param_table_build(c, &t) != TMM_OK)
        return 0;
    uint64_t total = 0;
    for (uint32_t i = 0; i < t.count; i++)
        total += t.params[i].numel;
    tmm_param_table_free(&t);
    return total;
}

/* softplus⁻¹(y) = y + ln(1 - e^-y) = ln(e^y - 1), stable for small y */
static double inverse_softplus(double y) { return y + log(-expm1(-y)); }

/* PyTorch's defaults: its
 * Linear and Conv1d draw weights (and biases; ours start at 0 under every
 * scheme) from U(±1/sqrt(fan_in)), its Embedding from N(0, 1); a Toeplitz
 * vector, a bare Parameter there, is counted as a weight of fan_in n. */
tmm_init tmm_param_init_of(const tmm_param_table *t, const tmm_param *p)
{
    if (t->config.init != TMM_INIT_SCHEME_TORCH)
        return p->init;
    if (p->kind == TMM_PARAM_EMBED)
        return TMM_INIT_NORMAL;
    if ((p->init == TMM_INIT_KAIMING || p->init == TMM_INIT_SMALL) && p->fan_in > 0)
        return TMM_INIT_UNIFORM;
    return p->init;
}

void tmm_param_init(const tmm_param_table *t, float *arena)
{
    memset(arena, 0, t->arena_floats * sizeof *arena);
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        float *x = arena + p->offset;
        uint64_t key = tmm_rng_key(t->config.seed, p->name);
        const tmm_init init = tmm_param_init_of(t, p);
        double std = init == TMM_INIT_KAIMING ? sqrt(2.0 / p->fan_in) : init == TMM_INIT_SMALL ? 0.02 : 1.0;
        double bound = init == TMM_INIT_UNIFORM ? 1.0 / sqrt((double)p->fan_in) : 0.0;
        for (uint64_t j = 0; j < p->numel; j++) {
            switch (init) {
            case TMM_INIT_ZERO: x[j] = 0.0f; break;
            case TMM_INIT_ONE: x[j] = 1.0f; break;
            case TMM_INIT_NORMAL:
            case TMM_INIT_KAIMING:
            case TMM_INIT_SMALL: x[j] = (float)(std * tmm_rng_normal(key, j)); break;
            case TMM_INIT_UNIFORM: x[j] = (float)(bound * (2.0 * tmm_rng_uniform(key, j) - 1.0)); break;
            case TMM_INIT_A_LOG: x[j] = (float)log(1.0 + 15.0 * tmm_rng_uniform(key, j)); break;
            case TMM_INIT_DT_BIAS: {
                double lo = log(1e-3), hi = log(1e-1);
                double dt0 = fmax(exp(lo + (hi - lo) * tmm_rng_uniform(key, j)), 1e-4);
                x[j] = (float)inverse_softplus(dt0);
                break;
            }
            }
        }
    }
}
