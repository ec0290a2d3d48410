/* Causal linear attention as a mixer (docs/baselines.md section 3):
 *
 *     q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ        H heads of dh = d/H, no RoPE
 *     y_t = (φ(q_t)ᵀ S_t) / (φ(q_t)ᵀ z_t + 1e-6), S_t = Σ_{s<=t} φ(k_s) v_sᵀ,
 *     z_t = Σ_{s<=t} φ(k_s), φ = elu + 1     (ops/linear_attention.h, chunked)
 *     h += y Woᵀ
 *
 * Tensors: blocks.L.attn.{q,k,v,o}.weight [d, d] (qkvo.h). Activations kept
 * per layer: q, k, v, y and what the chunked op saves. Decoding keeps the
 * constant-size state S [B, H, dh, dh] and z [B, H, dh] per layer: O(dh²) per
 * head and token at every position. */
#include <stdio.h>
#include <stdlib.h>

#include "mixer/mixer_common.h"
#include "mixer/qkvo.h"
#include "ops/linear_attention.h"

typedef struct lin_layer {
    tmm_buffer *q, *k, *v, *y, *saved;
} lin_layer;

typedef struct lin_mixer {
    tmm_mixer base;
    lin_layer *layers;
    tmm_buffer *dq, *dk, *dv;  /* backward workspace [rows, d] */
} lin_mixer;

static tmm_status check(const tmm_model_config *c)
{
    if (c->heads == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "linear needs heads >= 1 (--heads)");
    if (c->d_model / c->heads > TMM_LINATTN_MAX_HEAD_DIM)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "linear needs a head width d_model/heads of at most %u, got %u",
                        TMM_LINATTN_MAX_HEAD_DIM, c->d_model / c->heads);
    return TMM_OK;
}

static const tmm_model_config *config_of(const lin_mixer *m) { return &m->base.s.table->config; }

static tmm_linear_attention_desc desc_of(const lin_mixer *m, uint32_t n)
{
    const tmm_model_config *c = config_of(m);
    return (tmm_linear_attention_desc){ .batch = m->base.s.batch, .n = n, .d = c->d_model, .heads = c->heads };
}

static void destroy(tmm_mixer *base)
{
    lin_mixer *m = (lin_mixer *)base;
    if (!m)
        return;
    for (uint32_t l = 0; m->layers && l < base->s.act_sets; l++) {
        const lin_layer *a = &m->layers[l];
        tmm_buffer *const acts[] = { a->q, a->k, a->v, a->y, a->saved };
        tmm_mixer_buffers_destroy(acts, sizeof acts / sizeof acts[0]);
    }
    tmm_buffer *const work[] = { m->dq, m->dk, m->dv };
    tmm_mixer_buffers_destroy(work, sizeof work / sizeof work[0]);
    free(m->layers);
    free(m);
}

/* Activations and workspace, through the model's allocation (a dry run counts them). */
static tmm_status allocate(tmm_mixer *base)
{
    lin_mixer *m = (lin_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const tmm_allocation *al = base->s.alloc;
    const uint64_t rows_d = (uint64_t)base->rows * c->d_model;
    const tmm_linear_attention_desc ld = desc_of(m, c->n_ctx);
    TMM_TRY(tmm_linear_attention_check(NULL, &ld));
    if (!(m->layers = calloc(base->s.act_sets, sizeof *m->layers)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < base->s.act_sets; l++) {
        lin_layer *a = &m->layers[l];
        tmm_buffer **acts[] = { &a->q, &a->k, &a->v, &a->y };
        for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
            TMM_TRY(tmm_alloc_act(al, l, acts[i], rows_d));
        TMM_TRY(tmm_alloc_act(al, l, &a->saved, tmm_op_linear_attention_saved(&ld)));
    }
    TMM_TRY(tmm_alloc(al, &m->dq, rows_d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->dk, rows_d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    return tmm_alloc(al, &m->dv, rows_d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE);
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    return tmm_mixer_create(&tmm_linear_mixer, s, sizeof(lin_mixer), allocate, out);
}

static uint64_t scratch_floats(const tmm_mixer *base)
{
    const lin_mixer *m = (const lin_mixer *)base;
    tmm_linear_attention_desc ld = desc_of(m, config_of(m)->n_ctx);
    return tmm_op_linear_attention_backward_scratch(&ld);
}

static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }

static tmm_status forward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view h)
{
    lin_mixer *m = (lin_mixer *)base;
    const tmm_linear_attention_desc ld = desc_of(m, config_of(m)->n_ctx);
    lin_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    TMM_TRY(tmm_qkvo_in(base, rec, l, x, A(a->q), A(a->k), A(a->v)));
    TMM_REC_OP(rec, "linear attention", tmm_op_linear_attention_forward(rec->r, &ld, A(a->q), A(a->k), A(a->v),
                                                                        A(a->y), A(a->saved)));
    return tmm_qkvo_out(base, rec, l, A(a->y), false, h);
}

static tmm_status backward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dh,
                           const tmm_view tmp[2], tmm_view *dx)
{
    lin_mixer *m = (lin_mixer *)base;
    const tmm_linear_attention_desc ld = desc_of(m, config_of(m)->n_ctx);
    lin_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view dy = tmp[0], dq = A(m->dq), dk = A(m->dk), dv = A(m->dv);
    TMM_TRY(tmm_qkvo_out_backward(base, rec, l, A(a->y), dh, dy));
    TMM_REC_OP(rec, "linear attention bwd",
               tmm_op_linear_attention_backward(rec->r, &ld, A(a->q), A(a->k), A(a->v), A(a->saved), dy,
                                                rec->scratch, dq, dk, dv));
    *dx = tmp[1];
    return tmm_qkvo_in_backward(base, rec, l, x, dq, dk, dv, *dx);
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct lin_decoder {
    lin_mixer *m;
    tmm_buffer **S, **z;                 /* per layer: [B, H, dh, dh], [B, H, dh] */
    tmm_buffer *qkv, *y;                 /* one position: q, k and v [B, d] (views qkv3), y [B, d] */
    tmm_view qkv3[3];
} lin_decoder;

static void decoder_destroy(tmm_mixer_decoder *dd)
{
    lin_decoder *dec = (lin_decoder *)dd;
    if (!dec)
        return;
    const uint32_t L = config_of(dec->m)->n_layers;
    tmm_mixer_layer_buffers_free(dec->S, L), tmm_mixer_layer_buffers_free(dec->z, L);
    tmm_buffer *const step[] = { dec->qkv, dec->y };
    tmm_mixer_buffers_destroy(step, sizeof step / sizeof step[0]);
    free(dec);
}

static tmm_status decoder_create(tmm_mixer *base, const tmm_view *x, tmm_mixer_decoder **out)
{
    (void)x;
    *out = NULL;
    lin_mixer *m = (lin_mixer *)base;
    const tmm_model_config *c = config_of(m);
    tmm_device *dev = base->s.alloc->device;
    const uint64_t B = base->s.batch, d = c->d_model, dh = d / c->heads;
    lin_decoder *dec = calloc(1, sizeof *dec);
    if (!dec)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    dec->m = m;
    const tmm_buffer_spec step[] = { { &dec->qkv, tmm_qkvo_step_floats(dev, (uint32_t)B, (uint32_t)d) },
                                     { &dec->y, B * d } };
    tmm_status s = tmm_mixer_buffers_create(dev, step, sizeof step / sizeof step[0]);
    if (s == TMM_OK)
        tmm_qkvo_step_views(dev, dec->qkv, (uint32_t)B, (uint32_t)d, dec->qkv3);
    if (s == TMM_OK)
        s = tmm_mixer_layer_buffers(dev, c->n_layers, B * d * dh, &dec->S);
    if (s == TMM_OK)
        s = tmm_mixer_layer_buffers(dev, c->n_layers, B * d, &dec->z);
    return tmm_mixer_decoder_done(base, (tmm_mixer_decoder *)dec, s, out);
}

/* The state after the prompts: the sums over their positions of src's keys and values. */
static tmm_status record_prefill(tmm_mixer_decoder *dd, tmm_recorder *r, tmm_mixer *src_base, const tmm_view *src_x,
                                 tmm_view len)
{
    (void)src_x;
    lin_decoder *dec = (lin_decoder *)dd;
    lin_mixer *src = (lin_mixer *)src_base;
    const tmm_linear_attention_desc ld = desc_of(src, config_of(src)->n_ctx);
    for (uint32_t l = 0; l < config_of(dec->m)->n_layers; l++)
        TMM_TRY(tmm_op_linear_attention_state(r, &ld, len, A(src->layers[l].k), A(src->layers[l].v),
                                              A(dec->S[l]), A(dec->z[l])));
    return TMM_OK;
}

static tmm_status record_step(tmm_mixer_decoder *dd, const tmm_rec *rec, uint32_t l, tmm_view pos, tmm_view x,
                              tmm_view h)
{
    (void)pos; /* the state is the same size at every position */
    lin_decoder *dec = (lin_decoder *)dd;
    lin_mixer *m = dec->m;
    const tmm_linear_attention_desc ld = desc_of(m, 1);
    const tmm_view q = dec->qkv3[0], k = dec->qkv3[1], v = dec->qkv3[2];
    TMM_TRY(tmm_qkvo_in_step(&m->base, rec, l, x, NULL, q, k, v));
    TMM_TRY(tmm_op_linear_attention_step(rec->r, &ld, q, k, v, A(dec->S[l]), A(dec->z[l]),
                                         A(dec->y)));
    return tmm_qkvo_out(&m->base, rec, l, A(dec->y), true, h);
}

/* The running sums S and z of every layer. */
static uint32_t state_parts(tmm_mixer_decoder *dd, tmm_decoder_part *parts, uint32_t max)
{
    lin_decoder *dec = (lin_decoder *)dd;
    const tmm_model_config *c = config_of(dec->m);
    const uint64_t d = c->d_model, dh = d / c->heads;
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        tmm_decoder_part_add(parts, max, &n, A(dec->S[l]), d * dh * 4, true);
        tmm_decoder_part_add(parts, max, &n, A(dec->z[l]), d * 4, true);
    }
    return n;
}

/* The state update and read-out: 4 d (d / heads) per token. */
static double flops(const tmm_model_config *c, uint64_t *per_step)
{
    *per_step = 0;
    const double d = c->d_model;
    return 4 * d * (d / (c->heads ? c->heads : 1));
}

static void describe(const tmm_model_config *c, char *buf, size_t size) { snprintf(buf, size, "heads %u", c->heads); }

const tmm_mixer_class tmm_linear_mixer = {
    TMM_MIXER_SLOTS,
    .declare = tmm_qkvo_declare,
    .state_parts = state_parts,
};
