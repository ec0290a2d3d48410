/* tmm_generator: prefill through the model's forward pass, then cached
 * decoding with one recorded step (include/tmm/generate.h).
 *
 * The cache is the model's own activations: the forward leaves every layer's
 * Toeplitz inputs [B, n, d] in buffers (tmm_model_mixer_inputs), which is
 * exactly what decoding needs. A step writes the new position's inputs into
 * those rows and reads rows 0..t, so rows after a prompt (computed from
 * padding by the prefill) are always overwritten before they are read.
 *
 * Short prompts are prefilled by a model of a shorter context (the smallest
 * power of two from GEN_MIN_BUCKET that holds the longest prompt), made on
 * first use from the same weights with w and beta cropped (position t of a
 * causal model never sees w or beta past t), and its caches are copied into
 * the main ones: the time to first token follows the prompt's length. The
 * step is recorded once; per step the host writes the tokens and positions
 * (two small host-visible buffers), submits, and reads [B, V] logits. */
#include "gen/generator.h"

#include <stdlib.h>
#include <string.h>

#include "ops/decode_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "train/checkpoint.h"
#include "train/data.h"

#define GEN_MIN_BUCKET 32u
#define GEN_MAX_BUCKETS 26

struct tmm_generator {
    tmm_device *device;
    tmm_generator_info info;
    tmm_model *model;
    tmm_gen_tokenizer tokenizer;
    uint32_t *pos;            /* host copy of every sequence's position */
    bool prefilled;
    uint32_t *prompt_tokens;  /* [B, n] staging for the prefill */
    int32_t *ignore;          /* [B, n] targets, none scored */

    /* one position per sequence: [B, d] / [B, e] activations */
    tmm_buffer *h, *x, *mean, *rstd, *f, *z, *u, *y1, *q, *y2, *zeros_d;
    tmm_buffer *tokens, *positions, *logits;  /* host-visible */
    tmm_buffer *ln_scratch, *step_scratch;
    tmm_recorder *step;

    float *params;            /* host copy of the weights, to crop for buckets */
    tmm_mixer_impl mixer;
    struct bucket {           /* bucket k: context GEN_MIN_BUCKET << k */
        tmm_model *model;
        tmm_recorder *copy;   /* its caches into the main ones */
    } buckets[GEN_MAX_BUCKETS];
};

static const tmm_view none = { NULL, 0, 0 };

static tmm_view param(tmm_generator *g, int idx)
{
    const tmm_param *p = &tmm_model_table(g->model)->params[idx];
    return tmm_sub(tmm_model_param_buffer(g->model), p->offset * 4, p->numel * 4);
}

/* The Toeplitz layers' shape for one step of every sequence. */
static tmm_toeplitz_desc step_desc(const tmm_generator *g)
{
    const tmm_model_config *c = &g->info.config;
    return (tmm_toeplitz_desc){ .batch = g->info.batch, .n = c->n_ctx, .d = c->d_model,
                                .groups = c->heads ? c->heads : 1, .taps = c->kernel };
}

static tmm_view W(tmm_buffer *b) { return tmm_whole(b); }

/* The step: embedding of the new tokens, every block for one position, the
 * LM head. Mirrors the model's forward (src/model/model.c record_forward). */
static tmm_status record_step(tmm_generator *g)
{
    const tmm_model_config *c = &g->info.config;
    const tmm_param_table *t = tmm_model_table(g->model);
    const uint32_t B = g->info.batch, d = c->d_model, e = c->expansion * d, V = c->vocab;
    const tmm_toeplitz_desc td = step_desc(g);
    tmm_recorder *r = g->step;
    tmm_view pos = W(g->positions), lns = W(g->ln_scratch), sts = W(g->step_scratch);

    TMM_TRY(tmm_recorder_begin(r));
    TMM_TRY(tmm_op_embedding_forward(r, W(g->tokens), param(g, t->embed), B, V, d, W(g->h)));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &t->blocks[l];
        tmm_view cache1, cache2;
        TMM_TRY(tmm_model_mixer_inputs(g->model, l, &cache1, &cache2));
        TMM_TRY(tmm_op_layernorm_forward(r, W(g->h), param(g, bp->ln1_w), param(g, bp->ln1_b), B, d,
                                         TMM_NN_LAYERNORM_EPS, lns, W(g->x), W(g->mean), W(g->rstd)));
        TMM_TRY(tmm_op_linear_rows(r, W(g->x), B, d, e, param(g, bp->fc1_w), none, W(g->f), false));
        TMM_TRY(tmm_op_bias_silu_forward(r, W(g->f), param(g, bp->fc1_b), B, e, W(g->z)));
        /* the residual stream h is only added to from here on: no copies */
        TMM_TRY(tmm_op_linear_rows(r, W(g->z), B, e, d, param(g, bp->fc2_w), param(g, bp->fc2_b), W(g->h), true));
        TMM_TRY(tmm_op_layernorm_forward(r, W(g->h), param(g, bp->ln2_w), param(g, bp->ln2_b), B, d,
                                         TMM_NN_LAYERNORM_EPS, lns, W(g->x), W(g->mean), W(g->rstd)));
        tmm_view u = W(g->x);
        if (c->heads) {
            TMM_TRY(tmm_op_linear_rows(r, u, B, d, d, param(g, bp->in_w), param(g, bp->in_b), W(g->u), false));
            u = W(g->u);
        }
        TMM_TRY(tmm_op_cache_write(r, &td, pos, u, cache1));
        TMM_TRY(tmm_op_toeplitz_step(r, &td, pos, cache1, param(g, bp->w), param(g, bp->beta), sts, W(g->y1)));
        tmm_view mix = W(g->y1);
        if (c->expanded) {
            TMM_TRY(tmm_op_bias_silu_forward(r, W(g->y1), W(g->zeros_d), B, d, W(g->q)));
            TMM_TRY(tmm_op_cache_write(r, &td, pos, W(g->q), cache2));
            TMM_TRY(tmm_op_toeplitz_step(r, &td, pos, cache2, param(g, bp->w2), param(g, bp->beta2), sts,
                                         W(g->y2)));
            mix = W(g->y2);
        }
        if (c->heads)
            TMM_TRY(tmm_op_linear_rows(r, mix, B, d, d, param(g, bp->out_w), param(g, bp->out_b), W(g->h), true));
        else
            TMM_TRY(tmm_op_axpy(r, 1.0f, mix, W(g->h), (uint64_t)B * d));
    }
    TMM_TRY(tmm_op_linear_rows(r, W(g->h), B, d, V, param(g, t->head), none, W(g->logits), false));
    return tmm_recorder_end(r);
}

static tmm_status allocate(tmm_generator *g)
{
    const tmm_model_config *c = &g->info.config;
    const uint64_t B = g->info.batch, d = c->d_model, e = (uint64_t)c->expansion * d, V = c->vocab;
    const tmm_toeplitz_desc td = step_desc(g);
    struct { tmm_buffer **b; uint64_t floats; tmm_memory_kind kind; } all[] = {
        { &g->h, B * d, TMM_MEMORY_DEVICE },       { &g->x, B * d, TMM_MEMORY_DEVICE },
        { &g->mean, B, TMM_MEMORY_DEVICE },        { &g->rstd, B, TMM_MEMORY_DEVICE },
        { &g->f, B * e, TMM_MEMORY_DEVICE },       { &g->z, B * e, TMM_MEMORY_DEVICE },
        { &g->u, B * d, TMM_MEMORY_DEVICE },
        { &g->y1, B * d, TMM_MEMORY_DEVICE },      { &g->q, B * d, TMM_MEMORY_DEVICE },
        { &g->y2, B * d, TMM_MEMORY_DEVICE },      { &g->zeros_d, d, TMM_MEMORY_DEVICE },
        { &g->tokens, B, TMM_MEMORY_HOST },        { &g->positions, B, TMM_MEMORY_HOST },
        { &g->logits, B * V, TMM_MEMORY_HOST },
        { &g->ln_scratch, tmm_op_layernorm_forward_scratch((uint32_t)B, (uint32_t)d), TMM_MEMORY_DEVICE },
        { &g->step_scratch, tmm_op_toeplitz_step_scratch(&td), TMM_MEMORY_DEVICE },
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        TMM_TRY(tmm_buffer_create(g->device, (all[i].floats ? all[i].floats : 1) * 4, all[i].kind, all[i].b));
    float *zeros = calloc(d, sizeof *zeros);
    if (!zeros)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = tmm_buffer_write(g->zeros_d, 0, zeros, d * 4);
    free(zeros);
    return s;
}

void tmm_generator_destroy(tmm_generator *g)
{
    if (!g)
        return;
    tmm_recorder_destroy(g->step);
    tmm_buffer *all[] = { g->h, g->x, g->mean, g->rstd, g->f, g->z, g->u, g->y1, g->q, g->y2, g->zeros_d,
                          g->tokens, g->positions, g->logits, g->ln_scratch, g->step_scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    for (int k = 0; k < GEN_MAX_BUCKETS; k++) {
        tmm_recorder_destroy(g->buckets[k].copy);
        tmm_model_destroy(g->buckets[k].model);
    }
    tmm_model_destroy(g->model);
    free(g->pos), free(g->prompt_tokens), free(g->ignore), free(g->params);
    free(g);
}

tmm_status tmm_gen_create(tmm_device *device, const tmm_param_table *table, const float *params,
                          tmm_gen_tokenizer tokenizer, uint32_t batch, tmm_mixer_impl mixer, tmm_generator **out)
{
    *out = NULL;
    if (batch == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the batch of a generator must be at least 1");
    tmm_generator *g = calloc(1, sizeof *g);
    if (!g)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    g->device = device;
    g->mixer = mixer;
    g->info.config = table->config;
    g->info.batch = batch;
    g->tokenizer = tokenizer;
    g->info.tokenizer = tmm_gen_tokenizer_name(tokenizer);
    g->info.eot = tokenizer == TMM_GEN_TOKENIZER_BYTES ? TMM_TEXT_EOT : UINT32_MAX;
    const uint64_t rows = (uint64_t)batch * table->config.n_ctx;
    g->pos = calloc(batch, sizeof *g->pos);
    g->prompt_tokens = malloc(rows * sizeof *g->prompt_tokens);
    g->ignore = malloc(rows * sizeof *g->ignore);
    g->params = malloc(table->arena_floats * sizeof *g->params);
    tmm_status s = TMM_OK;
    if (!g->pos || !g->prompt_tokens || !g->ignore || !g->params)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    else
        for (uint64_t i = 0; i < rows; i++)
            g->ignore[i] = TMM_TARGET_IGNORE;
    if (s == TMM_OK)
        memcpy(g->params, params, table->arena_floats * sizeof *g->params);
    if (s == TMM_OK)
        s = tmm_model_create_impl(device, &table->config, batch, mixer, &g->model);
    if (s == TMM_OK)
        s = tmm_model_write_params(g->model, params);
    if (s == TMM_OK)
        s = allocate(g);
    if (s == TMM_OK)
        s = tmm_recorder_create(device, &g->step);
    if (s == TMM_OK)
        s = record_step(g);
    if (s != TMM_OK) {
        tmm_generator_destroy(g);
        return s;
    }
    *out = g;
    return TMM_OK;
}

tmm_status tmm_generator_load(tmm_device *device, const char *checkpoint, uint32_t batch, tmm_mixer_impl mixer,
                              tmm_generator **out)
{
    return tmm_gen_load(device, checkpoint, batch, mixer, 0, out);
}

tmm_status tmm_gen_load(tmm_device *device, const char *checkpoint, uint32_t batch, tmm_mixer_impl mixer,
                        unsigned load_flags, tmm_generator **out)
{
    *out = NULL;
    tmm_checkpoint ck;
    TMM_TRY(tmm_checkpoint_load(checkpoint, NULL, load_flags & ~(unsigned)TMM_CHECKPOINT_STATE, &ck));
    tmm_gen_tokenizer tokenizer;
    tmm_status s = tmm_gen_tokenizer_pick(tmm_checkpoint_meta(&ck, "tokenizer"), ck.table.config.vocab, &tokenizer);
    if (s == TMM_OK)
        s = tmm_gen_create(device, &ck.table, ck.params, tokenizer, batch, mixer, out);
    if (s == TMM_OK)
        (*out)->info.step = ck.step;
    tmm_checkpoint_free(&ck);
    return s;
}

const tmm_generator_info *tmm_generator_get_info(const tmm_generator *g) { return &g->info; }

tmm_status tmm_generator_set_mixer(tmm_generator *g, tmm_mixer_impl impl)
{
    g->mixer = impl;
    TMM_TRY(tmm_model_set_toeplitz_impl(g->model, impl));
    for (int k = 0; k < GEN_MAX_BUCKETS; k++)
        if (g->buckets[k].model)
            TMM_TRY(tmm_model_set_toeplitz_impl(g->buckets[k].model, impl));
    return TMM_OK;
}

/* The weights of a shorter context: the same tensors with every Toeplitz
 * vector and beta row cut to its first n_short entries. */
static void crop_params(const tmm_param_table *full, const float *src, const tmm_param_table *part, float *dst)
{
    const uint64_t n = full->config.n_ctx, ns = part->config.n_ctx;
    memset(dst, 0, part->arena_floats * sizeof *dst);
    for (uint32_t i = 0; i < part->count; i++) {
        const tmm_param *p = &part->params[i], *q = &full->params[i];
        if (p->kind == TMM_PARAM_TOEPLITZ_W || p->kind == TMM_PARAM_TOEPLITZ_BETA) {
            for (uint64_t r = 0; r < p->numel / ns; r++)
                memcpy(dst + p->offset + r * ns, src + q->offset + r * n, ns * sizeof *dst);
        } else {
            memcpy(dst + p->offset, src + q->offset, p->numel * sizeof *dst);
        }
    }
}

/* Copies sequence b's rows [0, ns) of every cache of `from` into the main model's. */
static tmm_status record_cache_copy(tmm_generator *g, tmm_model *from, uint32_t ns, tmm_recorder *r)
{
    const tmm_model_config *c = &g->info.config;
    const uint64_t n = c->n_ctx, d = c->d_model, bytes = (uint64_t)ns * d * 4;
    TMM_TRY(tmm_recorder_begin(r));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        tmm_view src[2], dst[2];
        TMM_TRY(tmm_model_mixer_inputs(from, l, &src[0], &src[1]));
        TMM_TRY(tmm_model_mixer_inputs(g->model, l, &dst[0], &dst[1]));
        for (int k = 0; k < (c->expanded ? 2 : 1); k++)
            for (uint64_t b = 0; b < g->info.batch; b++)
                TMM_TRY(tmm_record_copy(r, tmm_sub(src[k].buffer, src[k].offset + b * bytes, bytes),
                                        tmm_sub(dst[k].buffer, dst[k].offset + b * n * d * 4, bytes)));
    }
    return tmm_recorder_end(r);
}

/* The model of bucket k, made on first use. */
static tmm_status bucket_model(tmm_generator *g, int k, struct bucket **out)
{
    struct bucket *bk = &g->buckets[k];
    *out = bk;
    if (bk->model)
        return TMM_OK;
    tmm_model_config c = g->info.config;
    c.n_ctx = GEN_MIN_BUCKET << k;
    tmm_param_table part;
    TMM_TRY(tmm_param_table_build(&c, &part));
    float *cropped = malloc(part.arena_floats * sizeof *cropped);
    tmm_status s = cropped ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        crop_params(tmm_model_table(g->model), g->params, &part, cropped);
        s = tmm_model_create_impl(g->device, &c, g->info.batch, g->mixer, &bk->model);
    }
    if (s == TMM_OK)
        s = tmm_model_write_params(bk->model, cropped);
    if (s == TMM_OK)
        s = tmm_recorder_create(g->device, &bk->copy);
    if (s == TMM_OK)
        s = record_cache_copy(g, bk->model, c.n_ctx, bk->copy);
    free(cropped);
    tmm_param_table_free(&part);
    if (s != TMM_OK) {
        tmm_recorder_destroy(bk->copy);
        tmm_model_destroy(bk->model);
        bk->copy = NULL, bk->model = NULL;
    }
    return s;
}

uint32_t tmm_generator_position(const tmm_generator *g, uint32_t b)
{
    return g->prefilled && b < g->info.batch ? g->pos[b] : 0;
}

tmm_status tmm_generator_prefill(tmm_generator *g, const uint32_t *const *prompts, const uint32_t *lengths,
                                 float *logits)
{
    const uint32_t B = g->info.batch, n = g->info.config.n_ctx, V = g->info.config.vocab;
    uint32_t longest = 0;
    for (uint32_t b = 0; b < B; b++) {
        if (lengths[b] == 0 || lengths[b] > n)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "prompt %u has %u tokens; it needs 1 to %u (the model's "
                            "context)", b, lengths[b], n);
        longest = lengths[b] > longest ? lengths[b] : longest;
    }
    int k = 0;
    while ((GEN_MIN_BUCKET << k) < longest)
        k++;
    struct bucket *bk = NULL;
    g->prefilled = false;
    if ((GEN_MIN_BUCKET << k) < n)
        TMM_TRY(bucket_model(g, k, &bk));
    tmm_model *m = bk ? bk->model : g->model;
    const uint32_t len = bk ? GEN_MIN_BUCKET << k : n;
    for (uint32_t b = 0; b < B; b++) {
        memset(g->prompt_tokens + (size_t)b * len, 0, (size_t)len * sizeof *g->prompt_tokens);
        memcpy(g->prompt_tokens + (size_t)b * len, prompts[b], lengths[b] * sizeof *g->prompt_tokens);
    }
    TMM_TRY(tmm_model_set_batch(m, g->prompt_tokens, g->ignore));
    TMM_TRY(tmm_model_run(m, false));
    if (bk)
        TMM_TRY(tmm_recorder_run(bk->copy));
    for (uint32_t b = 0; b < B; b++) {
        if (logits)
            TMM_TRY(tmm_model_logits_rows(m, (uint64_t)b * len + lengths[b] - 1, 1, logits + (size_t)b * V));
        g->pos[b] = lengths[b];
    }
    g->prefilled = true;
    return TMM_OK;
}

tmm_status tmm_generator_step(tmm_generator *g, const uint32_t *tokens, float *logits)
{
    const uint32_t B = g->info.batch, n = g->info.config.n_ctx, V = g->info.config.vocab;
    if (!g->prefilled)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_generator_step before tmm_generator_prefill");
    for (uint32_t b = 0; b < B; b++) {
        if (g->pos[b] >= n)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "sequence %u fills the model's context of %u tokens; "
                            "prefill a shorter window to go on", b, n);
        if (tokens[b] >= V)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "token %u of sequence %u is outside the vocabulary of %u",
                            tokens[b], b, V);
    }
    TMM_TRY(tmm_buffer_write(g->tokens, 0, tokens, (uint64_t)B * 4));
    TMM_TRY(tmm_buffer_write(g->positions, 0, g->pos, (uint64_t)B * 4));
    TMM_TRY(tmm_recorder_run(g->step));
    for (uint32_t b = 0; b < B; b++)
        g->pos[b]++;
    return logits ? tmm_buffer_read(g->logits, 0, logits, (uint64_t)B * V * 4) : TMM_OK;
}

tmm_status tmm_tokenize(const tmm_generator *g, const char *text, size_t length, uint32_t **tokens,
                        uint32_t *count)
{
    return tmm_gen_tokenize(g->tokenizer, g->info.config.vocab, text, length, tokens, count);
}

size_t tmm_detokenize(const tmm_generator *g, uint32_t token, char *buf, size_t size)
{
    return tmm_gen_detokenize(g->tokenizer, g->info.config.vocab, token, buf, size);
}
