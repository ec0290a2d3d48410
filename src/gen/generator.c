/* tmm_generator: prefill through the model's forward pass, then cached
 * decoding with one recorded step (include/tmm/generate.h).
 *
 * The step is the frame's (src/model/step.h): one position of every
 * sequence, each layer's mixer half through its mixer's decoder
 * (src/mixer/mixer.h), which keeps what the mixer needs of the positions so
 * far: the TMM's cache is the model's own activations (the Toeplitz inputs
 * [B, n, d] the forward leaves), so a prefill fills it. The generator only
 * orchestrates: prefills (bucketed by length), steps, sampling, tokenizers.
 *
 * Short prompts are prefilled by a model of a shorter context (the smallest
 * power of two from GEN_MIN_BUCKET that holds the longest prompt), made on
 * first use from the same weights with the Toeplitz w and beta cropped
 * (position t of a causal model never sees w or beta past t) and, for a
 * mixer whose function depends on the context length (Hyena), told the full
 * context's positions (set_positions); the decoder's prefill then takes the
 * state from it: the time to first token follows the prompt's length.
 *
 * Continuous batching (tmm_gen_restart, tmm_gen_prefill_slot) moves one
 * sequence at a time through the parts of the decoder's state
 * (mixer.h: state_parts): a restart zeroes the running ones of the
 * sequences restarting; a one-sequence prefill runs a model of batch 1 (a
 * bucket, or the full context) with a decoder of its own, then copies that
 * decoder's parts into the slot's, so the other slots keep theirs. */
#include "gen/generator.h"

#include <stdlib.h>
#include <string.h>

#include "mixer/toeplitz_mixer.h"
#include "model/arch.h"
#include "model/checkpoint.h"
#include "model/step.h"
#include "text/tokenizer.h"

#define GEN_MIN_BUCKET 32u
#define GEN_MAX_BUCKETS 26

/* A model that prefills, and the recording that moves its state into the
 * decoder; or, for one sequence (batch 1), its own decoder. */
typedef struct prefiller {
    tmm_model *model;
    tmm_recorder *prefill;
    tmm_mixer_decoder *decoder;
} prefiller;

struct tmm_generator {
    tmm_device *device;
    tmm_generator_info info;
    const tmm_arch_desc *arch;
    tmm_model *model;
    tmm_mixer_decoder *decoder;
    tmm_model_tokenizer tokenizer;
    tmm_tokenizer *text;      /* TMM_TOKENIZER_RUN: the run's tokenizer.json */
    uint32_t *pos;            /* host copy of every sequence's position */
    bool prefilled;
    uint32_t *prompt_tokens;  /* [B, n] staging for the prefill */
    int32_t *ignore;          /* [B, n] targets, none scored */

    tmm_buffer *lengths;      /* host-visible: the prompts' lengths, for the decoder's prefill */
    tmm_model_step *step;     /* the frame's decode step (model/step.h) */

    float *params;            /* host copy of the weights, to crop for buckets */
    tmm_toeplitz_impl mixer;
    prefiller main;           /* the model itself */
    prefiller buckets[GEN_MAX_BUCKETS];  /* bucket k: context GEN_MIN_BUCKET << k */
    prefiller ones[GEN_MAX_BUCKETS];     /* batch 1, context min(GEN_MIN_BUCKET << k, n) */
    tmm_buffer *one_length;              /* host-visible: the one sequence's length */
    tmm_decoder_part *parts;             /* the decoder's state (mixer.h) */
    uint32_t n_parts;
    tmm_distilled distilled;             /* a copy of the realizations (distilled), for the ones' decoders */
};

static tmm_view W(tmm_buffer *b) { return tmm_whole(b); }

static void prefiller_free(prefiller *p, bool own_model)
{
    tmm_recorder_destroy(p->prefill);
    if (p->decoder)
        tmm_model_mixer(p->model)->cls->decoder_destroy(p->decoder);
    if (own_model)
        tmm_model_destroy(p->model);
    p->prefill = NULL, p->model = NULL, p->decoder = NULL;
}

void tmm_generator_destroy(tmm_generator *g)
{
    if (!g)
        return;
    tmm_model_step_destroy(g->step);
    tmm_buffer_destroy(g->lengths);
    tmm_buffer_destroy(g->one_length);
    for (int k = 0; k < GEN_MAX_BUCKETS; k++)
        prefiller_free(&g->buckets[k], true), prefiller_free(&g->ones[k], true);
    prefiller_free(&g->main, false);
    if (g->decoder)
        tmm_model_mixer(g->model)->cls->decoder_destroy(g->decoder);
    tmm_model_destroy(g->model);
    free(g->pos), free(g->prompt_tokens), free(g->ignore), free(g->params), free(g->parts);
    tmm_distilled_free(&g->distilled);
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

/* A decoder over model m's mixer: distilled when the generator is. */
static tmm_status new_decoder(tmm_generator *g, tmm_model *m, tmm_mixer_decoder **out)
{
    tmm_view *x;
    TMM_TRY(mixer_inputs(m, &x));
    tmm_mixer *mx = tmm_model_mixer(m);
    tmm_status s = mx->cls->decoder_create(mx, x, out);
    free(x);
    if (s == TMM_OK && g->info.distilled)
        s = tmm_toeplitz_decoder_distill(*out, &g->distilled);
    return s;
}

/* A copy of the realizations, for the one-sequence decoders made later. */
static tmm_status copy_distilled(const tmm_param_table *t, const tmm_distilled *from, tmm_distilled *to)
{
    to->head = from->head;
    to->t = calloc(from->count ? from->count : 1, sizeof *to->t);
    if (!to->t)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < from->count; i++) {
        const tmm_distilled_tensor *a = &from->t[i];
        const tmm_param *p = &t->params[a->param];
        const uint64_t floats = (uint64_t)p->shape[0] * p->shape[1] * a->modes * 4;
        to->t[i] = (tmm_distilled_tensor){ a->param, a->modes, floats ? malloc(floats * sizeof(float)) : NULL };
        to->count = i + 1;
        if (floats && !to->t[i].data)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        if (floats)
            memcpy(to->t[i].data, a->data, floats * sizeof(float));
    }
    return TMM_OK;
}

/* The parts of the main decoder's state. */
static tmm_status list_parts(tmm_generator *g)
{
    const tmm_mixer_class *mc = tmm_model_mixer(g->model)->cls;
    g->n_parts = mc->state_parts(g->decoder, NULL, 0);
    g->parts = calloc(g->n_parts ? g->n_parts : 1, sizeof *g->parts);
    if (!g->parts)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    mc->state_parts(g->decoder, g->parts, g->n_parts);
    return TMM_OK;
}

/* The decoder over the main model's mixer (distilled: with these
 * realizations), its parts, and its prefill from the main model. */
static tmm_status make_decoder(tmm_generator *g, const tmm_distilled *distilled)
{
    const tmm_param_table *t = tmm_model_table(g->model);
    if (distilled && !g->arch->toeplitz)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "only a TMM can decode distilled, this is %s",
                        tmm_arch_name(g->arch->arch));
    if (distilled) {
        TMM_TRY(copy_distilled(t, distilled, &g->distilled));
        g->info.distilled = true;
        g->info.distill_head = distilled->head;
    }
    TMM_TRY(new_decoder(g, g->model, &g->decoder));
    TMM_TRY(list_parts(g));
    g->main.model = g->model;
    return record_prefill(g, &g->main);
}

tmm_status tmm_gen_create(tmm_device *device, const tmm_param_table *table, const float *params,
                          tmm_model_tokenizer tokenizer, uint32_t batch, tmm_toeplitz_impl mixer,
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
    g->info.tokenizer = tmm_model_tokenizer_name(tokenizer);
    g->info.eot = tokenizer == TMM_TOKENIZER_BYTES ? TMM_TEXT_EOT : UINT32_MAX;
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
        s = tmm_buffer_create(device, (uint64_t)batch * 4, TMM_MEMORY_HOST, &g->lengths);
    if (s == TMM_OK)
        s = tmm_buffer_create(device, 4, TMM_MEMORY_HOST, &g->one_length);
    if (s == TMM_OK)
        s = make_decoder(g, distilled);
    if (s == TMM_OK)
        s = tmm_model_step_create(device, g->model, g->decoder, batch, &g->step);
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
    tmm_model_tokenizer tokenizer;
    tmm_tokenizer *text = NULL;
    tmm_status s = tmm_model_tokenizer_pick(tmm_checkpoint_meta(&ck, "tokenizer"), ck.table.config.vocab, &tokenizer);
    if (s == TMM_OK && tokenizer == TMM_TOKENIZER_RUN)
        s = tmm_checkpoint_tokenizer(checkpoint, tmm_checkpoint_meta(&ck, "tokenizer_fingerprint"),
                                  ck.table.config.vocab, &text);
    tmm_distilled set = { 0 };
    bool distilled = false;
    if (s == TMM_OK)
        s = tmm_distilled_load_dir(ck.dir, load_flags, &ck.table, ck.params, &set, &distilled);
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
    for (int k = 0; k < GEN_MAX_BUCKETS; k++) {
        if (g->buckets[k].model)
            TMM_TRY(tmm_model_set_toeplitz_impl(g->buckets[k].model, impl));
        if (g->ones[k].model)
            TMM_TRY(tmm_model_set_toeplitz_impl(g->ones[k].model, impl));
    }
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

/* A model of context n_ctx <= n and `batch` sequences from the same weights,
 * into p->model. */
static tmm_status prefill_model(tmm_generator *g, uint32_t n_ctx, uint32_t batch, prefiller *p)
{
    tmm_model_config c = g->info.config;
    c.n_ctx = n_ctx;
    tmm_param_table part;
    TMM_TRY(tmm_param_table_build(&c, &part));
    float *cropped = malloc(part.arena_floats * sizeof *cropped);
    tmm_status s = cropped ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        crop_params(tmm_model_table(g->model), g->params, &part, cropped);
        s = tmm_model_create_impl(g->device, &c, batch, g->mixer, &p->model);
    }
    if (s == TMM_OK)
        s = tmm_model_write_params(p->model, cropped);
    tmm_mixer *mx = s == TMM_OK ? tmm_model_mixer(p->model) : NULL;
    if (mx && mx->cls->set_positions) /* the full context's positions (Hyena's filter) */
        s = mx->cls->set_positions(mx, g->info.config.n_ctx);
    free(cropped);
    tmm_param_table_free(&part);
    return s;
}

/* The model of bucket k, made on first use. */
static tmm_status bucket_model(tmm_generator *g, int k, prefiller **out)
{
    prefiller *bk = &g->buckets[k];
    *out = bk;
    if (bk->model)
        return TMM_OK;
    tmm_status s = prefill_model(g, GEN_MIN_BUCKET << k, g->info.batch, bk);
    if (s == TMM_OK)
        s = record_prefill(g, bk);
    if (s != TMM_OK)
        prefiller_free(bk, true);
    return s;
}

/* The one-sequence model of context min(GEN_MIN_BUCKET << k, n) and its
 * decoder, made on first use. */
static tmm_status one_model(tmm_generator *g, int k, prefiller **out)
{
    prefiller *one = &g->ones[k];
    *out = one;
    if (one->model)
        return TMM_OK;
    const uint32_t n = g->info.config.n_ctx, ns = (GEN_MIN_BUCKET << k) < n ? GEN_MIN_BUCKET << k : n;
    tmm_status s = prefill_model(g, ns, 1, one);
    if (s == TMM_OK)
        s = new_decoder(g, one->model, &one->decoder);
    if (s == TMM_OK && tmm_model_mixer(one->model)->cls->state_parts(one->decoder, NULL, 0) != g->n_parts)
        s = tmm_fail(TMM_ERR_UNSUPPORTED, "a one-sequence decoder lists other parts than the generator's");
    if (s != TMM_OK)
        prefiller_free(one, true);
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
    TMM_TRY(tmm_model_step_run(g->step, tokens, g->pos, logits));
    for (uint32_t b = 0; b < B; b++)
        g->pos[b]++;
    return TMM_OK;
}

/* Sequence b's bytes of a part. */
static tmm_view part_of(const tmm_decoder_part *p, uint32_t b)
{
    return tmm_sub(p->view.buffer, p->view.offset + (uint64_t)b * p->per, p->per);
}

/* Zeroes the running state of g's sequences flagged in restart (bool [B]). */
typedef struct restart_set {
    const tmm_generator *g;
    const bool *restart;
} restart_set;

static tmm_status record_zero(tmm_recorder *r, void *arg)
{
    const restart_set *set = arg;
    const tmm_generator *g = set->g;
    for (uint32_t b = 0; b < g->info.batch; b++)
        for (uint32_t i = 0; i < g->n_parts && set->restart[b]; i++)
            if (g->parts[i].running)
                TMM_TRY(tmm_record_fill_u32(r, part_of(&g->parts[i], b), 0));
    return TMM_OK;
}

bool tmm_gen_running_state(const tmm_generator *g)
{
    for (uint32_t i = 0; i < g->n_parts; i++)
        if (g->parts[i].running)
            return true;
    return false;
}

/* Before the first prefill or restart every sequence is at position 0. */
static void start(tmm_generator *g)
{
    if (!g->prefilled)
        memset(g->pos, 0, g->info.batch * sizeof *g->pos);
    g->prefilled = true;
}

tmm_status tmm_gen_restart(tmm_generator *g, const bool *restart)
{
    start(g);
    bool any = false;
    for (uint32_t b = 0; b < g->info.batch; b++)
        if (restart[b])
            g->pos[b] = 0, any = true;
    restart_set set = { g, restart };
    return any && tmm_gen_running_state(g) ? tmm_record_once(g->device, record_zero, &set) : TMM_OK;
}

/* The prefill of a one-sequence model into its own decoder, whose parts then
 * go to sequence b's of the generator's decoder. */
typedef struct slot_copy {
    const tmm_generator *g;
    prefiller *one;
    uint32_t b;
} slot_copy;

static tmm_status record_slot(tmm_recorder *r, void *arg)
{
    const slot_copy *c = arg;
    const tmm_generator *g = c->g;
    tmm_model *m = c->one->model;
    const tmm_mixer_class *mc = tmm_model_mixer(m)->cls;
    tmm_view *x;
    TMM_TRY(mixer_inputs(m, &x));
    tmm_decoder_part *from = calloc(g->n_parts ? g->n_parts : 1, sizeof *from);
    tmm_status s = from ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        s = mc->record_prefill(c->one->decoder, r, tmm_model_mixer(m), x, W(g->one_length));
    if (s == TMM_OK)
        mc->state_parts(c->one->decoder, from, g->n_parts);
    for (uint32_t i = 0; i < g->n_parts && s == TMM_OK; i++) {
        const tmm_view to = part_of(&g->parts[i], c->b);
        const uint64_t bytes = from[i].per < to.size ? from[i].per : to.size; /* a shorter context's prefix */
        s = tmm_record_copy(r, tmm_sub(from[i].view.buffer, from[i].view.offset, bytes),
                            tmm_sub(to.buffer, to.offset, bytes));
    }
    free(from), free(x);
    return s;
}

tmm_status tmm_gen_prefill_slot(tmm_generator *g, uint32_t b, const uint32_t *prompt, uint32_t len, uint32_t from,
                                float *logits)
{
    const uint32_t n = g->info.config.n_ctx;
    if (b >= g->info.batch)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "sequence %u of a batch of %u", b, g->info.batch);
    if (len == 0 || len > n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a prompt of %u tokens; it needs 1 to %u (the model's context)",
                        len, n);
    if (from >= len)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logits from position %u of a prompt of %u tokens", from, len);
    /* a distilled decoder's exact head must fit the context it prefills */
    const uint32_t need = g->info.distilled && g->info.distill_head > len ? g->info.distill_head : len;
    int k = 0;
    while ((GEN_MIN_BUCKET << k) < need && (GEN_MIN_BUCKET << k) < n)
        k++;
    prefiller *one;
    TMM_TRY(one_model(g, k, &one));
    const uint32_t ns = tmm_model_table(one->model)->config.n_ctx;
    memset(g->prompt_tokens, 0, (size_t)ns * sizeof *g->prompt_tokens);
    memcpy(g->prompt_tokens, prompt, (size_t)len * sizeof *g->prompt_tokens);
    TMM_TRY(tmm_model_set_batch(one->model, g->prompt_tokens, g->ignore));
    TMM_TRY(tmm_model_run(one->model, false));
    if (logits)
        TMM_TRY(tmm_model_logits_rows(one->model, from, len - from, logits));
    TMM_TRY(tmm_buffer_write(g->one_length, 0, &len, 4));
    slot_copy c = { g, one, b };
    TMM_TRY(tmm_record_once(g->device, record_slot, &c));
    start(g);
    g->pos[b] = len;
    return TMM_OK;
}

tmm_status tmm_tokenize(const tmm_generator *g, const char *text, size_t length, uint32_t **tokens,
                        uint32_t *count)
{
    if (g->text)
        return tmm_tokenizer_encode_prompt(g->text, text, length, tokens, count);
    return tmm_model_tokenizer_encode(g->tokenizer, g->info.config.vocab, text, length, tokens, count);
}

size_t tmm_detokenize(const tmm_generator *g, uint32_t token, char *buf, size_t size)
{
    if (g->text)
        return tmm_tokenizer_decode_token(g->text, token, buf, size);
    return tmm_model_tokenizer_decode(g->tokenizer, g->info.config.vocab, token, buf, size);
}

uint32_t tmm_gen_step_commands(const tmm_generator *g) { return tmm_model_step_commands(g->step); }
