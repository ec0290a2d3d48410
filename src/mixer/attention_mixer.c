/* Softmax attention, the transformer's and the sliding-window transformer's
 * mixer (docs/baselines.md sections 1 and 2):
 *
 *     q = RoPE(x Wqᵀ), k = RoPE(x Wkᵀ), v = x Wvᵀ        H heads of dh = d/H
 *     o = causal softmax(q kᵀ / sqrt(dh)) v, per head, over the keys
 *         t - W < s <= t (W = window; 0: all s <= t)
 *     h += o Woᵀ
 *
 * Tensors (no biases, N(0, 0.02²)): blocks.L.attn.{q,k,v,o}.weight [d, d].
 * Activations kept per layer: q and k (after RoPE), v, o and the softmax's
 * log-sum-exp. Decoding: with full attention (or a window of at least n)
 * the cache is the k and v activations themselves [B, n, d]; with a window
 * W < n, a ring buffer of the last W keys and values per layer [B, W, d]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer/mixer_common.h"
#include "mixer/qkvo.h"
#include "ops/attention.h"
#include "ops/attention_step.h"
#include "ops/llama_ops.h"

typedef struct att_layer {
    tmm_buffer *q, *k, *v, *o, *lse;
} att_layer;

typedef struct att_mixer {
    tmm_mixer base;
    att_layer *layers;
    tmm_buffer *dq, *dk, *dv;  /* backward workspace [rows, d] */
    tmm_buffer *rope;          /* cos/sin table for n positions */
} att_mixer;

static tmm_status check(const tmm_model_config *c)
{
    const char *name = tmm_arch_name(c->arch);
    if (c->heads == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s needs heads >= 1 (--heads)", name);
    const uint32_t dh = c->d_model / c->heads;
    if (dh > TMM_ATTENTION_MAX_HEAD_DIM || dh % 2)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s needs an even head width d_model/heads of at most %u (RoPE "
                        "rotates channel pairs), got %u", name, TMM_ATTENTION_MAX_HEAD_DIM, dh);
    return TMM_OK;
}

static const tmm_model_config *config_of(const att_mixer *m) { return &m->base.s.table->config; }

static tmm_attention_desc desc_of(const att_mixer *m)
{
    const tmm_model_config *c = config_of(m);
    return (tmm_attention_desc){ .batch = m->base.s.batch, .n = c->n_ctx, .d = c->d_model, .heads = c->heads,
                                 .impl = TMM_ATTENTION_MEMORY_EFFICIENT, .window = c->window };
}

static void destroy(tmm_mixer *base)
{
    att_mixer *m = (att_mixer *)base;
    if (!m)
        return;
    for (uint32_t l = 0; m->layers && l < base->s.act_sets; l++) {
        const att_layer *a = &m->layers[l];
        tmm_buffer *const acts[] = { a->q, a->k, a->v, a->o, a->lse };
        tmm_mixer_buffers_destroy(acts, sizeof acts / sizeof acts[0]);
    }
    tmm_buffer *const work[] = { m->dq, m->dk, m->dv, m->rope };
    tmm_mixer_buffers_destroy(work, sizeof work / sizeof work[0]);
    free(m->layers);
    free(m);
}

/* Activations, workspace and the RoPE table, through the model's allocation (a dry run counts them). */
static tmm_status allocate(tmm_mixer *base)
{
    att_mixer *m = (att_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const tmm_allocation *al = base->s.alloc;
    const uint64_t rows_d = (uint64_t)base->rows * c->d_model;
    const tmm_attention_desc ad = desc_of(m);
    TMM_TRY(tmm_attention_check(NULL, &ad));
    if (!(m->layers = calloc(base->s.act_sets, sizeof *m->layers)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < base->s.act_sets; l++) {
        att_layer *a = &m->layers[l];
        tmm_buffer **acts[] = { &a->q, &a->k, &a->v, &a->o };
        for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
            TMM_TRY(tmm_alloc_act(al, l, acts[i], rows_d));
        TMM_TRY(tmm_alloc_act(al, l, &a->lse, tmm_op_attention_saved(&ad)));
    }
    TMM_TRY(tmm_alloc(al, &m->dq, rows_d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->dk, rows_d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->dv, rows_d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    const uint32_t dh = c->d_model / c->heads;
    const uint64_t table = tmm_rope_table_floats(c->n_ctx, dh);
    TMM_TRY(tmm_alloc(al, &m->rope, table, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    if (al->dry)
        return TMM_OK;
    float *host = malloc(table * sizeof *host);
    if (!host)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = tmm_rope_table(c->n_ctx, dh, TMM_ROPE_BASE, host);
    if (s == TMM_OK)
        s = tmm_buffer_write(m->rope, 0, host, table * 4);
    free(host);
    return s;
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    return tmm_mixer_create(&tmm_attention_mixer, s, sizeof(att_mixer), allocate, out);
}

static uint64_t scratch_floats(const tmm_mixer *base)
{
    tmm_attention_desc ad = desc_of((const att_mixer *)base);
    return tmm_op_attention_backward_scratch(&ad);
}

static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }

static const tmm_view none = { 0 };

/* x rotated in place by RoPE (or back, inverse) at the training positions. */
static tmm_status rope(const att_mixer *m, tmm_recorder *r, tmm_view x, bool inverse)
{
    const tmm_model_config *c = config_of(m);
    return tmm_op_rope(r, TMM_ROPE_SEQUENCE, x, A(m->rope), none, m->base.rows, c->d_model, c->heads, c->n_ctx,
                       inverse, x);
}

static tmm_status forward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view h)
{
    att_mixer *m = (att_mixer *)base;
    const tmm_attention_desc ad = desc_of(m);
    tmm_recorder *r = rec->r;
    att_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    TMM_TRY(tmm_qkvo_in(base, rec, l, x, A(a->q), A(a->k), A(a->v)));
    TMM_REC_OP(rec, "rope", rope(m, r, A(a->q), false));
    TMM_REC_OP(rec, "rope", rope(m, r, A(a->k), false));
    TMM_REC_OP(rec, "attention", tmm_op_attention_forward(r, &ad, A(a->q), A(a->k), A(a->v), A(a->o), A(a->lse)));
    return tmm_qkvo_out(base, rec, l, A(a->o), false, h);
}

static tmm_status backward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dh,
                           const tmm_view tmp[2], tmm_view *dx)
{
    att_mixer *m = (att_mixer *)base;
    const tmm_attention_desc ad = desc_of(m);
    tmm_recorder *r = rec->r;
    att_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view dout = tmp[0], dq = A(m->dq), dk = A(m->dk), dv = A(m->dv);
    TMM_TRY(tmm_qkvo_out_backward(base, rec, l, A(a->o), dh, dout));
    TMM_REC_OP(rec, "attention bwd", tmm_op_attention_backward(r, &ad, A(a->q), A(a->k), A(a->v), A(a->o),
                                                               A(a->lse), dout, rec->scratch, dq, dk, dv));
    TMM_REC_OP(rec, "rope bwd", rope(m, r, dq, true));
    TMM_REC_OP(rec, "rope bwd", rope(m, r, dk, true));
    *dx = tmp[1];
    return tmm_qkvo_in_backward(base, rec, l, x, dq, dk, dv, *dx);
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct att_decoder {
    att_mixer *m;
    tmm_attention_step_desc sd;
    bool ring;                 /* a window shorter than n: ring buffers of W positions */
    tmm_buffer **kc, **vc;     /* per layer, ring only: [B, W, d] */
    tmm_buffer *qkv, *o, *scratch; /* one position: q, k and v [B, d] (views qkv3), o [B, d] */
    tmm_view qkv3[3];
} att_decoder;

static void decoder_destroy(tmm_mixer_decoder *dd)
{
    att_decoder *dec = (att_decoder *)dd;
    if (!dec)
        return;
    const uint32_t L = config_of(dec->m)->n_layers;
    tmm_mixer_layer_buffers_free(dec->kc, L), tmm_mixer_layer_buffers_free(dec->vc, L);
    tmm_buffer *const step[] = { dec->qkv, dec->o, dec->scratch };
    tmm_mixer_buffers_destroy(step, sizeof step / sizeof step[0]);
    free(dec);
}

/* Layer l's caches: the ring buffers, or the k and v activations. */
static void caches(const att_decoder *dec, uint32_t l, tmm_view *kc, tmm_view *vc)
{
    *kc = A(dec->ring ? dec->kc[l] : dec->m->layers[l].k);
    *vc = A(dec->ring ? dec->vc[l] : dec->m->layers[l].v);
}

static tmm_status decoder_create(tmm_mixer *base, const tmm_view *x, tmm_mixer_decoder **out)
{
    (void)x;
    *out = NULL;
    att_mixer *m = (att_mixer *)base;
    const tmm_model_config *c = config_of(m);
    tmm_device *dev = base->s.alloc->device;
    att_decoder *dec = calloc(1, sizeof *dec);
    if (!dec)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    dec->m = m;
    dec->ring = c->window && c->window < c->n_ctx;
    dec->sd = (tmm_attention_step_desc){ .batch = base->s.batch, .d = c->d_model, .heads = c->heads,
                                         .capacity = dec->ring ? c->window : c->n_ctx, .window = c->window };
    const uint64_t Bd = (uint64_t)base->s.batch * c->d_model;
    const tmm_buffer_spec step[] = {
        { &dec->qkv, tmm_qkvo_step_floats(dev, base->s.batch, c->d_model) }, { &dec->o, Bd },
        { &dec->scratch, tmm_op_attention_step_scratch(dev, &dec->sd) },
    };
    tmm_status s = tmm_attention_step_check(NULL, &dec->sd);
    if (s == TMM_OK)
        s = tmm_mixer_buffers_create(dev, step, sizeof step / sizeof step[0]);
    if (s == TMM_OK)
        tmm_qkvo_step_views(dev, dec->qkv, base->s.batch, c->d_model, dec->qkv3);
    if (s == TMM_OK && dec->ring)
        s = tmm_mixer_layer_buffers(dev, c->n_layers, Bd * c->window, &dec->kc);
    if (s == TMM_OK && dec->ring)
        s = tmm_mixer_layer_buffers(dev, c->n_layers, Bd * c->window, &dec->vc);
    return tmm_mixer_decoder_done(base, (tmm_mixer_decoder *)dec, s, out);
}

static tmm_status record_prefill(tmm_mixer_decoder *dd, tmm_recorder *r, tmm_mixer *src_base, const tmm_view *src_x,
                                 tmm_view len)
{
    (void)src_x;
    att_decoder *dec = (att_decoder *)dd;
    att_mixer *src = (att_mixer *)src_base;
    const tmm_model_config *c = config_of(dec->m);
    const uint32_t ns = config_of(src)->n_ctx;
    if (dec->ring) {
        for (uint32_t l = 0; l < c->n_layers; l++)
            TMM_TRY(tmm_op_attention_cache_fill(r, &dec->sd, ns, len, A(src->layers[l].k), A(src->layers[l].v),
                                                A(dec->kc[l]), A(dec->vc[l])));
        return TMM_OK;
    }
    if (src == dec->m)
        return TMM_OK; /* the caches are these very activations */
    /* rows [0, ns) of each sequence into the main model's activations */
    const uint64_t n = c->n_ctx, d = c->d_model, bytes = (uint64_t)ns * d * 4;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        tmm_buffer *from[2] = { src->layers[l].k, src->layers[l].v }, *to[2] = { dec->m->layers[l].k,
                                                                                 dec->m->layers[l].v };
        for (int k = 0; k < 2; k++)
            for (uint64_t b = 0; b < dec->sd.batch; b++)
                TMM_TRY(tmm_record_copy(r, tmm_sub(from[k], b * bytes, bytes), tmm_sub(to[k], b * n * d * 4, bytes)));
    }
    return TMM_OK;
}

static tmm_status record_step(tmm_mixer_decoder *dd, const tmm_rec *rec, uint32_t l, tmm_view pos, tmm_view x,
                              tmm_view h)
{
    att_decoder *dec = (att_decoder *)dd;
    att_mixer *m = dec->m;
    const tmm_model_config *c = config_of(m);
    const uint32_t d = c->d_model;
    tmm_recorder *r = rec->r;
    const tmm_view q = dec->qkv3[0], k = dec->qkv3[1], v = dec->qkv3[2];
    tmm_view kc, vc;
    caches(dec, l, &kc, &vc);
    /* q and k rotated in their projections' dispatch */
    const tmm_row_rope rope = { A(m->rope), pos, d / c->heads, c->n_ctx };
    TMM_TRY(tmm_qkvo_in_step(&m->base, rec, l, x, &rope, q, k, v));
    TMM_TRY(tmm_op_attention_step_write(r, &dec->sd, pos, q, k, v, kc, vc, A(dec->scratch), A(dec->o)));
    return tmm_qkvo_out(&m->base, rec, l, A(dec->o), true, h);
}

/* Caches only: every layer's keys and values (a ring keeps position t at
 * t mod W, the activations at t: the same place for t < W). */
static uint32_t state_parts(tmm_mixer_decoder *dd, tmm_decoder_part *parts, uint32_t max)
{
    att_decoder *dec = (att_decoder *)dd;
    const tmm_model_config *c = config_of(dec->m);
    const uint64_t per = (uint64_t)dec->sd.capacity * c->d_model * 4;
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        tmm_view kc, vc;
        caches(dec, l, &kc, &vc);
        tmm_decoder_part_add(parts, max, &n, kc, per, false);
        tmm_decoder_part_add(parts, max, &n, vc, per, false);
    }
    return n;
}

/* Each query meets min(t + 1, W) keys (W = n without a window), for its
 * scores and its sum of values: 4 d FLOPs each. */
static double flops(const tmm_model_config *c, uint64_t *per_step)
{
    *per_step = 0;
    const double d = c->d_model, n = c->n_ctx;
    if (!c->window)
        return 2 * d * (n + 1);
    double keys = 0;
    for (uint32_t t = 0; t < c->n_ctx; t++)
        keys += t + 1 < c->window ? t + 1 : c->window;
    return 4 * d * keys / n;
}

static void describe(const tmm_model_config *c, char *buf, size_t size)
{
    if (c->window)
        snprintf(buf, size, "heads %u, window %u", c->heads, c->window);
    else
        snprintf(buf, size, "heads %u", c->heads);
}

const tmm_mixer_class tmm_attention_mixer = {
    TMM_MIXER_SLOTS,
    .declare = tmm_qkvo_declare,
    .state_parts = state_parts,
};
