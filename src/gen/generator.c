/* tmm_generator: prefill through the model's forward pass, then cached
 * decoding with one recorded step (include/tmm/generate.h).
 *
 * The step is the model's frame for one position of every sequence
 * (embedding, each block's two halves, final norm, LM head); each layer's
 * mixer half goes through its mixer's decoder (src/mixer/mixer.h), which
 * keeps what the mixer needs of the positions so far: the TMM's cache is the
 * model's own activations (the Toeplitz inputs [B, n, d] the forward leaves),
 * so a prefill fills it.
 *
 * Short prompts are prefilled by a model of a shorter context (the smallest
 * power of two from GEN_MIN_BUCKET that holds the longest prompt), made on
 * first use from the same weights with the Toeplitz w and beta cropped
 * (position t of a causal model never sees w or beta past t) and, for a
 * mixer whose function depends on the context length (Hyena), told the full
 * context's positions (set_positions); the decoder's prefill then takes the
 * state from it: the time to first token follows the prompt's length. The step is recorded once; per step the host writes the
 * tokens and positions (two small host-visible buffers), submits, and reads
 * [B, V] logits. */
#include "gen/generator.h"

#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "ops/decode_ops.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/ssm_ops.h"
#include "text/tokenizer.h"
#include "train/checkpoint.h"
#include "train/data.h"

#define GEN_MIN_BUCKET 32u
#define GEN_MAX_BUCKETS 26

/* A model that prefills, and the recording that moves its state into the decoder. */
typedef struct prefiller {
    tmm_model *model;
    tmm_recorder *prefill;
} prefiller;

struct tmm_generator {
    tmm_device *device;
    tmm_generator_info info;
    const tmm_arch_desc *arch;
    tmm_model *model;
    tmm_mixer_decoder *decoder;
    tmm_gen_tokenizer tokenizer;
    tmm_tokenizer *text;      /* TMM_GEN_TOKENIZER_TEXT: the run's tokenizer.json */
    uint32_t *pos;            /* host copy of every sequence's position */
    bool prefilled;
    uint32_t *prompt_tokens;  /* [B, n] staging for the prefill */
    int32_t *ignore;          /* [B, n] targets, none scored */

    /* one position per sequence: [B, d] / [B, e] activations */
    tmm_buffer *h, *x, *mean, *rstd, *f, *z;
    tmm_buffer *tokens, *positions, *lengths, *logits;  /* host-visible */
    tmm_buffer *ln_scratch;
    tmm_recorder *step;

    float *params;            /* host copy of the weights, to crop for buckets */
    tmm_toeplitz_impl mixer;
    prefiller main;           /* the model itself */
    prefiller buckets[GEN_MAX_BUCKETS];  /* bucket k: context GEN_MIN_BUCKET << k */
};

static const tmm_view none = { 0 };

static tmm_view param(tmm_generator *g, int idx)
{
    if (idx < 0)
        return none;
    const tmm_param *p = &tmm_model_table(g->model)->params[idx];
    return tmm_sub(tmm_model_param_buffer(g->model), p->offset * 4, p->numel * 4);
}

static tmm_view W(tmm_buffer *b) { return tmm_whole(b); }

/* x = Norm(h) for the B rows of a step. */
static tmm_status step_norm(tmm_generator *g, tmm_recorder *r, int w, int b)
{
    const uint32_t B = g->info.batch, d = g->info.config.d_model;
    if (g->arch->norm == TMM_NORM_RMS)
        return tmm_op_rmsnorm_forward(r, W(g->h), param(g, w), B, d, (float)g->arch->norm_eps, W(g->ln_scratch), W(g->x),
                                      W(g->rstd));
    return tmm_op_layernorm_forward(r, W(g->h), param(g, w), param(g, b), B, d, (float)g->arch->norm_eps,
                                    W(g->ln_scratch), W(g->x), W(g->mean), W(g->rstd));
}

/* h += MLP(x) for the B rows of a step. */
static tmm_status step_mlp(tmm_generator *g, tmm_recorder *r, const tmm_block_params *bp)
{
    const tmm_model_config *c = &g->info.config;
    const uint32_t B = g->info.batch, d = c->d_model, e = c->expansion * d;
    if (g->arch->mlp == TMM_MLP_SWIGLU) {
        TMM_TRY(tmm_op_linear_rows(r, W(g->x), B, d, 2 * e, param(g, bp->mlp_in_w), none, W(g->f), false));
        TMM_TRY(tmm_op_swiglu_forward(r, W(g->f), B, e, W(g->z)));
    } else {
        TMM_TRY(tmm_op_linear_rows(r, W(g->x), B, d, e, param(g, bp->mlp_in_w), none, W(g->f), false));
        if (g->arch->mlp == TMM_MLP_GELU)
            TMM_TRY(tmm_op_gelu_forward(r, W(g->f), param(g, bp->mlp_in_b), B, e, W(g->z)));
        else
            TMM_TRY(tmm_op_bias_silu_forward(r, W(g->f), param(g, bp->mlp_in_b), B, e, W(g->z)));
    }
    return tmm_op_linear_rows(r, W(g->z), B, e, d, param(g, bp->mlp_out_w), param(g, bp->mlp_out_b), W(g->h), true);
}

/* The step: embedding of the new tokens, every block for one position, the
 * LM head. Mirrors the model's forward (src/model/model.c record_forward);
 * the residual stream h is only added to: no copies. */
static tmm_status record_step(tmm_generator *g)
{
    const tmm_model_config *c = &g->info.config;
    const tmm_param_table *t = tmm_model_table(g->model);
    const uint32_t B = g->info.batch, d = c->d_model, V = c->vocab;
    tmm_recorder *r = g->step;
    const tmm_mixer_class *mc = tmm_model_mixer(g->model)->cls;
    const tmm_rec rec = { r, false, none };

    TMM_TRY(tmm_recorder_begin(r));
    TMM_TRY(tmm_op_embedding_forward(r, W(g->tokens), param(g, t->embed), B, V, d, W(g->h)));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &t->blocks[l];
        for (int i = 0; i < (g->arch->mlp == TMM_MLP_NONE ? 1 : 2); i++) {
            if ((i == 0) == g->arch->mixer_first) {
                TMM_TRY(step_norm(g, r, bp->mix_norm_w, bp->mix_norm_b));
                TMM_TRY(mc->record_step(g->decoder, &rec, l, W(g->positions), W(g->x), W(g->h)));
            } else {
                TMM_TRY(step_norm(g, r, bp->mlp_norm_w, bp->mlp_norm_b));
                TMM_TRY(step_mlp(g, r, bp));
            }
        }
    }
    tmm_view head_in = W(g->h);
    if (g->arch->final_norm) {
        TMM_TRY(step_norm(g, r, t->final_norm_w, -1));
        head_in = W(g->x);
    }
    TMM_TRY(tmm_op_linear_rows(r, head_in, B, d, V, param(g, t->head), none, W(g->logits), false));
    return tmm_recorder_end(r);
}

static tmm_status allocate(tmm_generator *g)
{
    const tmm_model_config *c = &g->info.config;
    const uint64_t B = g->info.batch, d = c->d_model, e = (uint64_t)c->expansion * d, V = c->vocab;
    struct { tmm_buffer **b; uint64_t floats; tmm_memory_kind kind; } all[] = {
        { &g->h, B * d, TMM_MEMORY_DEVICE },       { &g->x, B * d, TMM_MEMORY_DEVICE },
        { &g->mean, B, TMM_MEMORY_DEVICE },        { &g->rstd, B, TMM_MEMORY_DEVICE },
        { &g->f, 2 * B * e, TMM_MEMORY_DEVICE },   { &g->z, B * e, TMM_MEMORY_DEVICE },
        { &g->tokens, B, TMM_MEMORY_HOST },        { &g->positions, B, TMM_MEMORY_HOST },
        { &g->lengths, B, TMM_MEMORY_HOST },       { &g->logits, B * V, TMM_MEMORY_HOST },
        { &g->ln_scratch, tmm_op_layernorm_forward_scratch((uint32_t)B, (uint32_t)d) +
                              tmm_op_rmsnorm_forward_scratch((uint32_t)B, (uint32_t)d), TMM_MEMORY_DEVICE },
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        TMM_TRY(tmm_buffer_create(g->device, (all[i].floats ? all[i].floats : 1) * 4, all[i].kind, all[i].b));
    return TMM_OK;
}

static void prefiller_free(prefiller *p, bool own_model)
{
    tmm_recorder_destroy(p->prefill);
    if (own_model)
        tmm_model_destroy(p->model);
    p->prefill = NULL, p->model = NULL;
}

void tmm_generator_destroy(tmm_generator *g)
{
    if (!g)
        return;
    tmm_recorder_destroy(g->step);
    tmm_buffer *all[] = { g->h, g->x, g->mean, g->rstd, g->f, g->z, g->tokens, g->positions, g->lengths,
                          g->logits, g->ln_scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    for (int k = 0; k < GEN_MAX_BUCKETS; k++)
        prefiller_free(&g->buckets[k], true);
    prefiller_free(&g->main, false);
    if (g->decoder)
        tmm_model_mixer(g->model)->cls->decoder_destroy(g->decoder);
    tmm_model_destroy(g->model);
    free(g->pos), free(g->prompt_tokens), free(g->ignore), free(g->params);
    tmm_tokenizer_free(g->text);
    free(g);
}

/* The mixer inputs of every layer of `m`, as its forward leaves them. */
static tmm_status mixer_inputs(tmm_model *m, tmm_view **out)
{
    const uint32_t L = tmm_model_table(m)->config.n_layers;
    *out = malloc(L * sizeof **out);
    if (!*out)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < L; l++)
        (*out)[l] = tmm_model_mixer_input(m, l);
    return TMM_OK;
}

/* The recording that moves a prefill of p->model into the decoder. */
static tmm_status record_prefill(tmm_generator *g, prefiller *p)
{
    tmm_view *x;
    TMM_TRY(mixer_inputs(p->model, &x));
    tmm_mixer *mx = tmm_model_mixer(g->model);
    tmm_status s = tmm_recorder_create(g->device, &p->prefill);
    if (s == TMM_OK)
        s = tmm_recorder_begin(p->prefill);
    if (s == TMM_OK)
        s = mx->cls->record_prefill(g->decoder, p->prefill, tmm_model_mixer(p->model), x, W(g->lengths));
    if (s == TMM_OK)
        s = tmm_recorder_end(p->prefill);
    free(x);
    return s;
}

/* The decoder over the main model's mixer (distilled: with these
 * realizations), and its prefill from the main model. */
static tmm_status make_decoder(tmm_generator *g, const tmm_distilled *distilled)
{
    tmm_view *x;
    TMM_TRY(mixer_inputs(g->model, &x));
    tmm_mixer *mx = tmm_model_mixer(g->model);
    tmm_status s = mx->cls->decoder_create(mx, x, &g->decoder);
    free(x);
    if (s == TMM_OK && distilled) {
        s = mx->cls->decoder_distill ? mx->cls->decoder_distill(g->decoder, distilled)
                                     : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "only a TMM can decode distilled, "
                                                "this is %s", tmm_arch_name(g->arch->arch));
        g->info.distilled = true;
        g->info.distill_head = distilled->head;
    }
    g->main.model = g->model;
    return s == TMM_OK ? record_prefill(g, &g->main) : s;
}

tmm_status tmm_gen_create(tmm_device *device, const tmm_param_table *table, const float *params,
                          tmm_gen_tokenizer tokenizer, uint32_t batch, tmm_toeplitz_impl mixer,
                          const tmm_distilled *distilled, tmm_generator **out)
{
    *out = NULL;
    if (batch == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the batch of a generator must be at least 1");
    tmm_generator *g = calloc(1, sizeof *g);
    if (!g)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    g->device = device;
    g->mixer = mixer;
    g->arch = tmm_arch_of(table->config.arch);
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
        s = make_decoder(g, distilled);
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

tmm_status tmm_generator_load(tmm_device *device, const char *checkpoint, uint32_t batch, tmm_toeplitz_impl mixer,
                              tmm_generator **out)
{
    return tmm_gen_load(device, checkpoint, batch, mixer, 0, out);
}

tmm_status tmm_gen_load(tmm_device *device, const char *checkpoint, uint32_t batch, tmm_toeplitz_impl mixer,
                        unsigned load_flags, tmm_generator **out)
{
    *out = NULL;
    tmm_checkpoint ck;
    TMM_TRY(tmm_checkpoint_load(checkpoint, NULL, load_flags & ~(unsigned)(TMM_CHECKPOINT_STATE | TMM_LOAD_EXACT),
                                &ck));
    tmm_gen_tokenizer tokenizer;
    tmm_tokenizer *text = NULL;
    tmm_status s = tmm_gen_tokenizer_pick(tmm_checkpoint_meta(&ck, "tokenizer"), ck.table.config.vocab, &tokenizer);
    if (s == TMM_OK && tokenizer == TMM_GEN_TOKENIZER_TEXT)
        s = tmm_gen_run_tokenizer(checkpoint, tmm_checkpoint_meta(&ck, "tokenizer_fingerprint"),
                                  ck.table.config.vocab, &text);
    tmm_distilled set = { 0 };
    bool distilled = false;
    if (s == TMM_OK && !(load_flags & TMM_LOAD_EXACT))
        s = tmm_distilled_load_dir(ck.dir, &ck.table, ck.params, &set, &distilled);
    if (s == TMM_OK)
        s = tmm_gen_create(device, &ck.table, ck.params, tokenizer, batch, mixer, distilled ? &set : NULL, out);
    tmm_distilled_free(&set);
    if (s == TMM_OK) {
        (*out)->info.step = ck.step;
        if (text) {
            (*out)->text = text;
            (*out)->info.tokenizer = tmm_tokenizer_kind(text);
            (*out)->info.eot = tmm_tokenizer_eot(text);
            text = NULL;
        }
    }
    tmm_tokenizer_free(text);
    tmm_checkpoint_free(&ck);
    return s;
}

const tmm_generator_info *tmm_generator_get_info(const tmm_generator *g) { return &g->info; }

tmm_status tmm_generator_set_toeplitz_impl(tmm_generator *g, tmm_toeplitz_impl impl)
{
    g->mixer = impl;
    TMM_TRY(tmm_model_set_toeplitz_impl(g->model, impl));
    for (int k = 0; k < GEN_MAX_BUCKETS; k++)
        if (g->buckets[k].model)
            TMM_TRY(tmm_model_set_toeplitz_impl(g->buckets[k].model, impl));
    return TMM_OK;
}

tmm_status tmm_generator_set_mixer(tmm_generator *g, tmm_toeplitz_impl impl)
{
    return tmm_generator_set_toeplitz_impl(g, impl);
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

/* The model of bucket k, made on first use. */
static tmm_status bucket_model(tmm_generator *g, int k, prefiller **out)
{
    prefiller *bk = &g->buckets[k];
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
    tmm_mixer *mx = s == TMM_OK ? tmm_model_mixer(bk->model) : NULL;
    if (mx && mx->cls->set_positions) /* the full context's positions (Hyena's filter) */
        s = mx->cls->set_positions(mx, g->info.config.n_ctx);
    if (s == TMM_OK)
        s = record_prefill(g, bk);
    free(cropped);
    tmm_param_table_free(&part);
    if (s != TMM_OK)
        prefiller_free(bk, true);
    return s;
}

uint32_t tmm_generator_position(const tmm_generator *g, uint32_t b)
{
    return g->prefilled && b < g->info.batch ? g->pos[b] : 0;
}

/* The forward pass of the sequences through the shortest prefill model that
 * holds the longest (*out); the decoder's state is then not theirs. */
static tmm_status forward(tmm_generator *g, const uint32_t *const *seqs, const uint32_t *lengths, prefiller **out)
{
    const uint32_t B = g->info.batch, n = g->info.config.n_ctx;
    uint32_t longest = 0;
    for (uint32_t b = 0; b < B; b++) {
        if (lengths[b] == 0 || lengths[b] > n)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "sequence %u has %u tokens; it needs 1 to %u (the model's "
                            "context)", b, lengths[b], n);
        longest = lengths[b] > longest ? lengths[b] : longest;
    }
    int k = 0;
    while ((GEN_MIN_BUCKET << k) < longest)
        k++;
    prefiller *p = &g->main;
    g->prefilled = false;
    if ((GEN_MIN_BUCKET << k) < n)
        TMM_TRY(bucket_model(g, k, &p));
    tmm_model *m = p->model;
    const uint32_t len = tmm_model_table(m)->config.n_ctx;
    for (uint32_t b = 0; b < B; b++) {
        memset(g->prompt_tokens + (size_t)b * len, 0, (size_t)len * sizeof *g->prompt_tokens);
        memcpy(g->prompt_tokens + (size_t)b * len, seqs[b], lengths[b] * sizeof *g->prompt_tokens);
    }
    TMM_TRY(tmm_model_set_batch(m, g->prompt_tokens, g->ignore));
    TMM_TRY(tmm_model_run(m, false));
    *out = p;
    return TMM_OK;
}

tmm_status tmm_generator_prefill(tmm_generator *g, const uint32_t *const *prompts, const uint32_t *lengths,
                                 float *logits)
{
    const uint32_t B = g->info.batch, V = g->info.config.vocab;
    prefiller *p;
    TMM_TRY(forward(g, prompts, lengths, &p));
    const uint32_t len = tmm_model_table(p->model)->config.n_ctx;
    TMM_TRY(tmm_buffer_write(g->lengths, 0, lengths, (uint64_t)B * 4));
    TMM_TRY(tmm_recorder_run(p->prefill));
    for (uint32_t b = 0; b < B; b++) {
        if (logits)
            TMM_TRY(tmm_model_logits_rows(p->model, (uint64_t)b * len + lengths[b] - 1, 1, logits + (size_t)b * V));
        g->pos[b] = lengths[b];
    }
    g->prefilled = true;
    return TMM_OK;
}

tmm_status tmm_gen_forward(tmm_generator *g, const uint32_t *const *seqs, const uint32_t *lengths,
                           tmm_model **model, uint32_t *row_len)
{
    prefiller *p;
    TMM_TRY(forward(g, seqs, lengths, &p));
    *model = p->model;
    *row_len = tmm_model_table(p->model)->config.n_ctx;
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
    if (g->text)
        return tmm_gen_tokenize_text(g->text, text, length, tokens, count);
    return tmm_gen_tokenize(g->tokenizer, g->info.config.vocab, text, length, tokens, count);
}

size_t tmm_detokenize(const tmm_generator *g, uint32_t token, char *buf, size_t size)
{
    if (g->text)
        return tmm_gen_detokenize_text(g->text, token, buf, size);
    return tmm_gen_detokenize(g->tokenizer, g->info.config.vocab, token, buf, size);
}
