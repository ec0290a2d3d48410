#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/rng.h"
#include "status.h"

tmm_model_config tmm_model_config_default(void)
{
    tmm_model_config c = { .vocab = 256, .d_model = 64, .n_ctx = 64, .n_layers = 2, .heads = 0,
                           .expansion = 4, .kernel = 1, .expanded = false, .frozen = false, .seed = 1 };
    return c;
}

tmm_status tmm_model_config_check(const tmm_model_config *c)
{
    const struct { const char *name; uint32_t value, lo, hi; } fields[] = {
        { "vocab", c->vocab, 2, TMM_MAX_VOCAB },          { "d_model", c->d_model, 1, TMM_MAX_D_MODEL },
        { "n_ctx", c->n_ctx, 1, TMM_MAX_N_CTX },          { "n_layers", c->n_layers, 1, TMM_MAX_LAYERS },
        { "heads", c->heads, 0, TMM_MAX_HEADS },          { "expansion", c->expansion, 1, TMM_MAX_EXPANSION },
        { "kernel", c->kernel, 1, TMM_MAX_KERNEL },
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value < fields[i].lo || fields[i].value > fields[i].hi)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s must be from %u to %u, got %u", fields[i].name, fields[i].lo,
                            fields[i].hi, fields[i].value);
    if (c->kernel > c->d_model)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel must be from 1 to d_model (%u), got %u", c->d_model,
                        c->kernel);
    if (c->heads && c->d_model % c->heads)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "d_model (%u) must be a multiple of heads (%u)", c->d_model,
                        c->heads);
    uint64_t e = (uint64_t)c->expansion * c->d_model;
    if (e > (1u << 24) || (uint64_t)c->vocab * c->d_model > (1ull << 31) ||
        (uint64_t)c->n_ctx * c->kernel * (c->heads ? c->heads : 1) > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    return TMM_OK;
}

typedef struct builder {
    tmm_param_table *t;
    uint32_t cap;
    tmm_status status;
} builder;

static int add(builder *b, const char *name, uint32_t ndim, const uint32_t *shape, tmm_init init,
               uint32_t fan_in, tmm_param_kind kind, bool trainable)
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
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->numel = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->numel *= shape[i];
    }
    p->offset = t->arena_floats;
    p->init = init;
    p->fan_in = fan_in;
    p->kind = kind;
    p->trainable = trainable;
    t->arena_floats += (p->numel + TMM_PARAM_ALIGN - 1) / TMM_PARAM_ALIGN * TMM_PARAM_ALIGN;
    return (int)t->count++;
}

static int add_block(builder *b, uint32_t l, const char *what, uint32_t ndim, const uint32_t *shape, tmm_init init,
                     uint32_t fan_in, tmm_param_kind kind, bool trainable)
{
    char name[TMM_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "blocks.%u.%s", l, what);
    return add(b, name, ndim, shape, init, fan_in, kind, trainable);
}

tmm_status tmm_param_table_build(const tmm_model_config *c, tmm_param_table *t)
{
    memset(t, 0, sizeof *t);
    TMM_TRY(tmm_model_config_check(c));
    t->config = *c;
    t->blocks = calloc(c->n_layers, sizeof *t->blocks);
    if (!t->blocks)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    builder b = { t, 0, TMM_OK };
    const uint32_t d = c->d_model, e = c->expansion * c->d_model, n = c->n_ctx, k = c->kernel;
    const uint32_t g = c->heads ? c->heads : 1;
    const bool tw = !c->frozen;
    uint32_t s[3];

    t->embed = add(&b, "embed.weight", 2, (s[0] = c->vocab, s[1] = d, s), TMM_INIT_NORMAL, 0, TMM_PARAM_EMBED, true);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        tmm_block_params *p = &t->blocks[l];
        p->in_w = p->in_b = p->w2 = p->beta2 = p->out_w = p->out_b = -1;
        p->ln1_w = add_block(&b, l, "ln1.weight", 1, (s[0] = d, s), TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true);
        p->ln1_b = add_block(&b, l, "ln1.bias", 1, (s[0] = d, s), TMM_INIT_ZERO, 0, TMM_PARAM_LN_BIAS, true);
        p->fc1_w = add_block(&b, l, "mlp.fc1.weight", 2, (s[0] = e, s[1] = d, s), TMM_INIT_KAIMING, d,
                             TMM_PARAM_LINEAR_WEIGHT, true);
        p->fc1_b = add_block(&b, l, "mlp.fc1.bias", 1, (s[0] = e, s), TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true);
        p->fc2_w = add_block(&b, l, "mlp.fc2.weight", 2, (s[0] = d, s[1] = e, s), TMM_INIT_KAIMING, e,
                             TMM_PARAM_LINEAR_WEIGHT, true);
        p->fc2_b = add_block(&b, l, "mlp.fc2.bias", 1, (s[0] = d, s), TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true);
        p->ln2_w = add_block(&b, l, "ln2.weight", 1, (s[0] = d, s), TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true);
        p->ln2_b = add_block(&b, l, "ln2.bias", 1, (s[0] = d, s), TMM_INIT_ZERO, 0, TMM_PARAM_LN_BIAS, true);
        if (c->heads) {
            p->in_w = add_block(&b, l, "mix.in.weight", 2, (s[0] = d, s[1] = d, s), TMM_INIT_KAIMING, d,
                                TMM_PARAM_LINEAR_WEIGHT, true);
            p->in_b = add_block(&b, l, "mix.in.bias", 1, (s[0] = d, s), TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true);
        }
        p->w = add_block(&b, l, "mix.w", 3, (s[0] = g, s[1] = k, s[2] = n, s), TMM_INIT_KAIMING, n,
                         TMM_PARAM_TOEPLITZ_W, tw);
        p->beta = add_block(&b, l, "mix.beta", 2, (s[0] = g, s[1] = n, s), TMM_INIT_ZERO, 0, TMM_PARAM_TOEPLITZ_BETA, tw);
        if (c->expanded) {
            p->w2 = add_block(&b, l, "mix.w2", 3, (s[0] = g, s[1] = k, s[2] = n, s), TMM_INIT_KAIMING, n,
                              TMM_PARAM_TOEPLITZ_W, tw);
            p->beta2 = add_block(&b, l, "mix.beta2", 2, (s[0] = g, s[1] = n, s), TMM_INIT_ZERO, 0,
                                 TMM_PARAM_TOEPLITZ_BETA, tw);
        }
        if (c->heads) {
            p->out_w = add_block(&b, l, "mix.out.weight", 2, (s[0] = d, s[1] = d, s), TMM_INIT_KAIMING, d,
                                 TMM_PARAM_LINEAR_WEIGHT, true);
            p->out_b = add_block(&b, l, "mix.out.bias", 1, (s[0] = d, s), TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true);
        }
    }
    t->head = add(&b, "lm_head.weight", 2, (s[0] = c->vocab, s[1] = d, s), TMM_INIT_KAIMING, d, TMM_PARAM_HEAD, true);
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

void tmm_param_init(const tmm_param_table *t, float *arena)
{
    memset(arena, 0, t->arena_floats * sizeof *arena);
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        float *x = arena + p->offset;
        uint64_t key = tmm_rng_key(t->config.seed, p->name);
        double std = p->init == TMM_INIT_KAIMING ? sqrt(2.0 / p->fan_in) : 1.0;
        for (uint64_t j = 0; j < p->numel; j++) {
            switch (p->init) {
            case TMM_INIT_ZERO: x[j] = 0.0f; break;
            case TMM_INIT_ONE: x[j] = 1.0f; break;
            case TMM_INIT_NORMAL:
            case TMM_INIT_KAIMING: x[j] = (float)(std * tmm_rng_normal(key, j)); break;
            }
        }
    }
}
