/* The TMM's mixer (toeplitz_mixer.h, docs/model.md):
 *
 *     u  = x                      (flat)   or  x · Winᵀ + bin   (heads)
 *     y1 = T(u)                   causal Toeplitz, G groups, k taps, + beta
 *     y  = y1                     or  T2(silu(y1))              (expanded)
 *     h += y                      (flat)   or  y · Woutᵀ + bout (heads)
 *
 * Activations kept per layer: v = u (heads), y1, q = silu(y1) and y2
 * (expanded). The Toeplitz layers run direct or through an FFT plan
 * (toeplitz_select.h picks by the device's measured crossover). Decoding keeps
 * every layer's Toeplitz inputs [B, n, d] as its cache: they are exactly the
 * forward's activations (u1 = x or v, u2 = q), so a prefill fills it. */
#include "mixer/toeplitz_mixer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer/mixer_common.h"
#include "ops/decode_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/toeplitz_fft.h"
#include "ops/tz_ssm_ops.h"

typedef struct tz_layer {
    tmm_buffer *v, *y1, *q, *y2;
} tz_layer;

typedef struct tz_mixer {
    tmm_mixer base;
    tz_layer *layers;
    tmm_toeplitz_fft *fft;   /* the plan, when the FFT path is chosen */
    tmm_buffer *zeros_d;     /* the bias of silu(y1) (expanded) */
    tmm_buffer *dummy_d;     /* its gradient, not used */
} tz_mixer;

static const tmm_view none = { 0 };

static tmm_status check(const tmm_model_config *c)
{
    if (c->kernel > c->d_model)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel must be from 1 to d_model (%u), got %u", c->d_model,
                        c->kernel);
    if ((uint64_t)c->n_ctx * c->kernel * (c->heads ? c->heads : 1) > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    return TMM_OK;
}

static void declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx)
{
    const uint32_t d = c->d_model, n = c->n_ctx, k = c->kernel, g = c->heads ? c->heads : 1;
    const bool tw = !c->frozen;
    const tmm_param_spec lin = { 2, { d, d }, TMM_INIT_KAIMING, d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec bias = { 1, { d }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec w = { 3, { g, k, n }, TMM_INIT_KAIMING, n, TMM_PARAM_TOEPLITZ_W, tw };
    const tmm_param_spec beta = { 2, { g, n }, TMM_INIT_ZERO, 0, TMM_PARAM_TOEPLITZ_BETA, tw };
    if (c->heads) {
        idx[TMM_TZ_IN_W] = tmm_param_add(b, l, "mix.in.weight", lin);
        idx[TMM_TZ_IN_B] = tmm_param_add(b, l, "mix.in.bias", bias);
    }
    idx[TMM_TZ_W] = tmm_param_add(b, l, "mix.w", w);
    idx[TMM_TZ_BETA] = tmm_param_add(b, l, "mix.beta", beta);
    if (c->expanded) {
        idx[TMM_TZ_W2] = tmm_param_add(b, l, "mix.w2", w);
        idx[TMM_TZ_BETA2] = tmm_param_add(b, l, "mix.beta2", beta);
    }
    if (c->heads) {
        idx[TMM_TZ_OUT_W] = tmm_param_add(b, l, "mix.out.weight", lin);
        idx[TMM_TZ_OUT_B] = tmm_param_add(b, l, "mix.out.bias", bias);
    }
}

static const tmm_model_config *config_of(const tz_mixer *m) { return &m->base.s.table->config; }

static tmm_toeplitz_desc desc_of(const tz_mixer *m, tmm_toeplitz_impl impl)
{
    const tmm_model_config *c = config_of(m);
    return (tmm_toeplitz_desc){ .batch = m->base.s.batch, .n = c->n_ctx, .d = c->d_model,
                                .groups = c->heads ? c->heads : 1, .taps = c->kernel, .impl = impl };
}

/* The choice of impl and its FFT plan (AUTO: the device's crossover as measured, for the TMM's shapes). */
static tmm_status set_impl(tmm_mixer *base, tmm_toeplitz_impl impl)
{
    tz_mixer *m = (tz_mixer *)base;
    return tmm_mixer_toeplitz_plan(base, impl, 1, desc_of(m, impl), &m->fft);
}

static void destroy(tmm_mixer *base)
{
    tz_mixer *m = (tz_mixer *)base;
    if (!m)
        return;
    tmm_toeplitz_fft_destroy(m->fft);
    for (uint32_t l = 0; m->layers && l < base->s.act_sets; l++) {
        const tz_layer *a = &m->layers[l];
        tmm_buffer *const acts[] = { a->v, a->y1, a->q, a->y2 };
        tmm_mixer_buffers_destroy(acts, sizeof acts / sizeof acts[0]);
    }
    tmm_buffer_destroy(m->zeros_d);
    tmm_buffer_destroy(m->dummy_d);
    free(m->layers);
    free(m);
}

/* Activations, the zero bias and the FFT plan, through the model's allocation (a dry run counts them). */
static tmm_status allocate(tmm_mixer *base)
{
    tz_mixer *m = (tz_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const tmm_allocation *al = base->s.alloc;
    const uint64_t rows_d = (uint64_t)base->rows * c->d_model;
    if (!(m->layers = calloc(base->s.act_sets, sizeof *m->layers)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < base->s.act_sets; l++) {
        tz_layer *a = &m->layers[l];
        if (c->heads)
            TMM_TRY(tmm_alloc_act(al, l, &a->v, rows_d));
        TMM_TRY(tmm_alloc_act(al, l, &a->y1, rows_d));
        if (c->expanded) {
            TMM_TRY(tmm_alloc_act(al, l, &a->q, rows_d));
            TMM_TRY(tmm_alloc_act(al, l, &a->y2, rows_d));
        }
    }
    if (c->expanded) {
        TMM_TRY(tmm_alloc(al, &m->zeros_d, c->d_model, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
        TMM_TRY(tmm_alloc(al, &m->dummy_d, c->d_model, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
        if (!al->dry)
            TMM_TRY(tmm_mixer_write_zeros(m->zeros_d, c->d_model));
    }
    return set_impl(base, base->s.impl);
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    return tmm_mixer_create(&tmm_toeplitz_mixer, s, sizeof(tz_mixer), allocate, out);
}

static uint64_t scratch_floats(const tmm_mixer *base)
{
    const tz_mixer *m = (const tz_mixer *)base;
    /* the direct path's, whatever the choice now: set_impl may switch to it */
    tmm_toeplitz_desc td = desc_of(m, TMM_TOEPLITZ_DIRECT);
    return tmm_op_toeplitz_backward_scratch(base->s.alloc->device, &td,
                                            config_of(m)->frozen ? TMM_TOEPLITZ_SKIP_PARAMS : 0);
}

static tmm_view P(const tz_mixer *m, uint32_t l, int which) { return tmm_mixer_param(&m->base, l, which); }
static tmm_view G(const tz_mixer *m, uint32_t l, int which) { return tmm_mixer_grad(&m->base, l, which); }
static tmm_view W(const tz_mixer *m, uint32_t l, int which) { return tmm_mixer_weight(&m->base, l, which); }

static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }

static tmm_status toeplitz_fwd(tz_mixer *m, tmm_recorder *r, tmm_view u, tmm_view w, tmm_view beta, tmm_view y)
{
    if (m->fft)
        return tmm_toeplitz_fft_record_forward(r, m->fft, u, w, beta, y);
    tmm_toeplitz_desc td = desc_of(m, m->base.s.impl);
    return tmm_op_toeplitz_forward(r, &td, u, w, beta, y);
}

static tmm_status toeplitz_bwd(tz_mixer *m, tmm_recorder *r, tmm_view scratch, tmm_view u, tmm_view w,
                               tmm_view gy, tmm_view du, tmm_view dw, tmm_view dbeta)
{
    const uint32_t flags = config_of(m)->frozen ? TMM_TOEPLITZ_SKIP_PARAMS : 0;
    if (m->fft)
        return tmm_toeplitz_fft_record_backward(r, m->fft, flags, u, w, gy, du, dw, dbeta);
    tmm_toeplitz_desc td = desc_of(m, m->base.s.impl);
    return tmm_op_toeplitz_backward(r, &td, flags, u, w, gy, scratch, du, dw, dbeta);
}

static tmm_status forward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view h)
{
    tz_mixer *m = (tz_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const uint32_t N = base->rows, d = c->d_model;
    tmm_recorder *r = rec->r;
    tz_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view u = x;
    if (c->heads) {
        TMM_REC_OP(rec, "matmul", tmm_op_linear(r, u, N, d, d, W(m, l, TMM_TZ_IN_W), P(m, l, TMM_TZ_IN_B), A(a->v),
                                                false));
        u = A(a->v);
    }
    TMM_REC_OP(rec, "toeplitz", toeplitz_fwd(m, r, u, P(m, l, TMM_TZ_W), P(m, l, TMM_TZ_BETA), A(a->y1)));
    tmm_view mix = A(a->y1);
    if (c->expanded) {
        TMM_REC_OP(rec, "silu", tmm_op_bias_silu_forward(r, A(a->y1), A(m->zeros_d), N, d, A(a->q)));
        TMM_REC_OP(rec, "toeplitz", toeplitz_fwd(m, r, A(a->q), P(m, l, TMM_TZ_W2), P(m, l, TMM_TZ_BETA2), A(a->y2)));
        mix = A(a->y2);
    }
    if (c->heads)
        TMM_REC_OP(rec, "matmul", tmm_op_linear(r, mix, N, d, d, W(m, l, TMM_TZ_OUT_W), P(m, l, TMM_TZ_OUT_B), h,
                                                true));
    else
        TMM_REC_OP(rec, "residual", tmm_op_axpy(r, 1.0f, mix, h, (uint64_t)N * d));
    return TMM_OK;
}

static tmm_status backward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dh,
                           const tmm_view tmp[2], tmm_view *dx)
{
    tz_mixer *m = (tz_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const uint32_t N = base->rows, d = c->d_model;
    tmm_recorder *r = rec->r;
    tz_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view mix = A(c->expanded ? a->y2 : a->y1);
    tmm_view dmix = dh;
    if (c->heads) {
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, dh, N, d, d, W(m, l, TMM_TZ_OUT_W), tmp[0], false));
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, dh, mix, N, d, d, G(m, l, TMM_TZ_OUT_W), rec->half_dw));
        TMM_REC_OP(rec, "bias grad bwd", tmm_op_sum_cols(r, dh, N, d, rec->scratch, G(m, l, TMM_TZ_OUT_B)));
        dmix = tmp[0];
    }
    tmm_view dy1 = dmix;
    if (c->expanded) {
        tmm_view dq = c->heads ? tmp[1] : tmp[0];
        TMM_REC_OP(rec, "toeplitz bwd", toeplitz_bwd(m, r, rec->scratch, A(a->q), P(m, l, TMM_TZ_W2), dmix, dq,
                                                     G(m, l, TMM_TZ_W2), G(m, l, TMM_TZ_BETA2)));
        TMM_REC_OP(rec, "silu bwd", tmm_op_bias_silu_backward(r, A(a->y1), A(m->zeros_d), dq, N, d, false,
                                                              rec->scratch, dq, A(m->dummy_d)));
        dy1 = dq;
    }
    /* the Toeplitz layer's du goes into the tmp that dy1 is not */
    tmm_view du = dy1.buffer == tmp[0].buffer ? tmp[1] : tmp[0];
    tmm_view u = c->heads ? A(a->v) : x;
    TMM_REC_OP(rec, "toeplitz bwd", toeplitz_bwd(m, r, rec->scratch, u, P(m, l, TMM_TZ_W), dy1, du,
                                                 G(m, l, TMM_TZ_W), G(m, l, TMM_TZ_BETA)));
    *dx = du;
    if (c->heads) {
        *dx = du.buffer == tmp[0].buffer ? tmp[1] : tmp[0];
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, du, N, d, d, W(m, l, TMM_TZ_IN_W), *dx, false));
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, du, x, N, d, d, G(m, l, TMM_TZ_IN_W), rec->half_dw));
        TMM_REC_OP(rec, "bias grad bwd", tmm_op_sum_cols(r, du, N, d, rec->scratch, G(m, l, TMM_TZ_IN_B)));
    }
    return TMM_OK;
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct tz_decoder {
    tz_mixer *m;
    tmm_view *cache1, *cache2;   /* per layer: the Toeplitz inputs [B, n, d] */
    tmm_buffer *u, *y1, *q, *y2, *scratch;  /* one position: [B, d] */
    /* distilled (tmm distill): per Toeplitz layer 2l + k its modes and states */
    uint32_t head, *nmodes;
    tmm_buffer **modes, **state;
} tz_decoder;

static void decoder_destroy(tmm_mixer_decoder *dd)
{
    tz_decoder *dec = (tz_decoder *)dd;
    if (!dec)
        return;
    tmm_buffer *const step[] = { dec->u, dec->y1, dec->q, dec->y2, dec->scratch };
    tmm_mixer_buffers_destroy(step, sizeof step / sizeof step[0]);
    for (uint32_t i = 0; dec->modes && i < 2 * config_of(dec->m)->n_layers; i++)
        tmm_buffer_destroy(dec->modes[i]), tmm_buffer_destroy(dec->state[i]);
    free(dec->cache1), free(dec->cache2), free(dec->nmodes), free(dec->modes), free(dec->state);
    free(dec);
}

static tmm_toeplitz_desc step_desc(const tz_mixer *m)
{
    tmm_toeplitz_desc td = desc_of(m, TMM_TOEPLITZ_DIRECT);
    return td;
}

/* The cache of each layer: its Toeplitz inputs as the forward leaves them. */
static void caches_of(const tz_mixer *m, const tmm_view *x, tmm_view *c1, tmm_view *c2)
{
    const tmm_model_config *c = config_of(m);
    for (uint32_t l = 0; l < c->n_layers; l++) {
        c1[l] = c->heads ? A(m->layers[l].v) : x[l];
        c2[l] = c->expanded ? A(m->layers[l].q) : none;
    }
}

static tmm_status decoder_create(tmm_mixer *base, const tmm_view *x, tmm_mixer_decoder **out)
{
    *out = NULL;
    tz_mixer *m = (tz_mixer *)base;
    const tmm_model_config *c = config_of(m);
    tz_decoder *dec = calloc(1, sizeof *dec);
    if (!dec)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    dec->m = m;
    dec->cache1 = calloc(c->n_layers, sizeof *dec->cache1);
    dec->cache2 = calloc(c->n_layers, sizeof *dec->cache2);
    tmm_status s = dec->cache1 && dec->cache2 ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_device *dev = base->s.alloc->device;
    const uint64_t Bd = (uint64_t)base->s.batch * c->d_model;
    const tmm_toeplitz_desc td = step_desc(m);
    const tmm_buffer_spec step[] = {
        { &dec->u, Bd }, { &dec->y1, Bd }, { &dec->q, Bd }, { &dec->y2, Bd },
        { &dec->scratch, tmm_op_toeplitz_step_scratch(&td) },
    };
    if (s == TMM_OK) {
        caches_of(m, x, dec->cache1, dec->cache2);
        s = tmm_mixer_buffers_create(dev, step, sizeof step / sizeof step[0]);
    }
    return tmm_mixer_decoder_done(base, (tmm_mixer_decoder *)dec, s, out);
}

static tmm_status copy_caches(tz_decoder *dec, tmm_recorder *r, tz_mixer *src, const tmm_view *src_x);
static tmm_status record_ssm_prefill(tz_decoder *dec, tmm_recorder *r, tmm_view len);

/* The caches are the main model's activations: after a forward of a shorter
 * model, its rows [0, ns) of each sequence are copied in. A distilled
 * decoder then sets its states from them. */
static tmm_status record_prefill(tmm_mixer_decoder *dd, tmm_recorder *r, tmm_mixer *src_base, const tmm_view *src_x,
                                 tmm_view len)
{
    tz_decoder *dec = (tz_decoder *)dd;
    tz_mixer *src = (tz_mixer *)src_base;
    if (src != dec->m)
        TMM_TRY(copy_caches(dec, r, src, src_x));
    return dec->modes ? record_ssm_prefill(dec, r, len) : TMM_OK;
}

static tmm_status copy_caches(tz_decoder *dec, tmm_recorder *r, tz_mixer *src, const tmm_view *src_x)
{
    const tmm_model_config *c = config_of(dec->m);
    const uint64_t n = c->n_ctx, d = c->d_model, ns = config_of(src)->n_ctx, bytes = ns * d * 4;
    tmm_view *s1 = calloc(c->n_layers, sizeof *s1), *s2 = calloc(c->n_layers, sizeof *s2);
    tmm_status s = s1 && s2 ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        caches_of(src, src_x, s1, s2);
    for (uint32_t l = 0; l < c->n_layers && s == TMM_OK; l++) {
        const tmm_view from[2] = { s1[l], s2[l] }, to[2] = { dec->cache1[l], dec->cache2[l] };
        for (int k = 0; k < (c->expanded ? 2 : 1) && s == TMM_OK; k++)
            for (uint64_t b = 0; b < src->base.s.batch && s == TMM_OK; b++)
                s = tmm_record_copy(r, tmm_sub(from[k].buffer, from[k].offset + b * bytes, bytes),
                                    tmm_sub(to[k].buffer, to[k].offset + b * n * d * 4, bytes));
    }
    free(s1), free(s2);
    return s;
}

/* The state-space form of Toeplitz layer k (0: w, 1: w2) of layer l. */
static tmm_tz_ssm_desc ssm_desc(const tz_decoder *dec, uint32_t l, uint32_t k)
{
    return (tmm_tz_ssm_desc){ step_desc(dec->m), dec->head, dec->nmodes[2 * l + k] };
}

static tmm_status record_ssm_prefill(tz_decoder *dec, tmm_recorder *r, tmm_view len)
{
    const tmm_model_config *c = config_of(dec->m);
    for (uint32_t l = 0; l < c->n_layers; l++)
        for (uint32_t k = 0; k < (c->expanded ? 2u : 1u); k++) {
            const tmm_tz_ssm_desc sd = ssm_desc(dec, l, k);
            TMM_TRY(tmm_op_tz_ssm_prefill(r, &sd, len, k ? dec->cache2[l] : dec->cache1[l],
                                          A(dec->modes[2 * l + k]), A(dec->state[2 * l + k])));
        }
    return TMM_OK;
}

/* y = Toeplitz layer k of layer l at the new positions, u their inputs:
 * the cached dot product, or the state-space step when distilled. */
static tmm_status toeplitz_step(tz_decoder *dec, tmm_recorder *r, uint32_t l, uint32_t k, tmm_view pos, tmm_view u,
                                tmm_view y)
{
    tz_mixer *m = dec->m;
    const tmm_view cache = k ? dec->cache2[l] : dec->cache1[l];
    const tmm_view w = P(m, l, k ? TMM_TZ_W2 : TMM_TZ_W), beta = P(m, l, k ? TMM_TZ_BETA2 : TMM_TZ_BETA);
    if (dec->modes) {
        const tmm_tz_ssm_desc sd = ssm_desc(dec, l, k);
        return tmm_op_tz_ssm_step(r, &sd, pos, u, cache, w, beta, A(dec->modes[2 * l + k]),
                                  A(dec->state[2 * l + k]), y);
    }
    const tmm_toeplitz_desc td = step_desc(m);
    return tmm_op_toeplitz_step(r, &td, pos, u, cache, w, beta, A(dec->scratch), y);
}

/* Uploads the modes of every Toeplitz layer (at least one mode each: a
 * layer without any runs one zero mode) and makes their states. */
tmm_status tmm_toeplitz_decoder_distill(tmm_mixer_decoder *dd, const tmm_distilled *set)
{
    tz_decoder *dec = (tz_decoder *)dd;
    tz_mixer *m = dec->m;
    const tmm_model_config *c = config_of(m);
    const tmm_param_table *t = m->base.s.table;
    tmm_device *dev = m->base.s.alloc->device;
    const uint32_t L = c->n_layers;
    if (dec->modes)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the decoder is distilled already");
    dec->head = set->head;
    dec->nmodes = calloc(2 * L, sizeof *dec->nmodes);
    dec->modes = calloc(2 * L, sizeof *dec->modes);
    dec->state = calloc(2 * L, sizeof *dec->state);
    if (!dec->nmodes || !dec->modes || !dec->state)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t k = 0; k < (c->expanded ? 2u : 1u); k++) {
            const int idx = t->blocks[l].mix[k ? TMM_TZ_W2 : TMM_TZ_W];
            const tmm_distilled_tensor *dt = tmm_distilled_find(set, idx);
            if (!dt)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the distilled set has no modes for %s",
                                t->params[idx].name);
            const uint32_t M = dt->modes ? dt->modes : 1, i = 2 * l + k;
            dec->nmodes[i] = M;
            const tmm_tz_ssm_desc sd = ssm_desc(dec, l, k);
            TMM_TRY(tmm_tz_ssm_check(&sd));
            const uint64_t floats = (uint64_t)t->params[idx].shape[0] * t->params[idx].shape[1] * M * 4;
            TMM_TRY(tmm_buffer_create(dev, floats * 4, TMM_MEMORY_DEVICE, &dec->modes[i]));
            TMM_TRY(tmm_buffer_create(dev, tmm_tz_ssm_state_floats(&sd) * 4, TMM_MEMORY_DEVICE, &dec->state[i]));
            float *data = calloc(floats, sizeof *data);
            if (!data)
                return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            if (dt->modes)
                memcpy(data, dt->data, floats * sizeof *data);
            tmm_status s = tmm_buffer_write(dec->modes[i], 0, data, floats * 4);
            free(data);
            TMM_TRY(s);
        }
    return TMM_OK;
}

static tmm_status record_step(tmm_mixer_decoder *dd, const tmm_rec *rec, uint32_t l, tmm_view pos, tmm_view x,
                              tmm_view h)
{
    tz_decoder *dec = (tz_decoder *)dd;
    tz_mixer *m = dec->m;
    const tmm_model_config *c = config_of(m);
    const uint32_t B = m->base.s.batch, d = c->d_model;
    tmm_recorder *r = rec->r;
    tmm_view u = x;
    if (c->heads) {
        TMM_TRY(tmm_op_linear_rows(r, u, B, d, d, P(m, l, TMM_TZ_IN_W), P(m, l, TMM_TZ_IN_B), A(dec->u), false));
        u = A(dec->u);
    }
    TMM_TRY(toeplitz_step(dec, r, l, 0, pos, u, A(dec->y1)));
    tmm_view mix = A(dec->y1);
    if (c->expanded) {
        TMM_TRY(tmm_op_bias_silu_forward(r, A(dec->y1), A(m->zeros_d), B, d, A(dec->q)));
        TMM_TRY(toeplitz_step(dec, r, l, 1, pos, A(dec->q), A(dec->y2)));
        mix = A(dec->y2);
    }
    if (c->heads)
        return tmm_op_linear_rows(r, mix, B, d, d, P(m, l, TMM_TZ_OUT_W), P(m, l, TMM_TZ_OUT_B), h, true);
    return tmm_op_axpy(r, 1.0f, mix, h, (uint64_t)B * d);
}

/* The caches (the Toeplitz inputs) of every layer and, distilled, the
 * states of its Toeplitz layers (running). */
static uint32_t state_parts(tmm_mixer_decoder *dd, tmm_decoder_part *parts, uint32_t max)
{
    tz_decoder *dec = (tz_decoder *)dd;
    const tmm_model_config *c = config_of(dec->m);
    const uint32_t K = c->expanded ? 2u : 1u;
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++)
        for (uint32_t k = 0; k < K; k++) {
            tmm_decoder_part_add(parts, max, &n, k ? dec->cache2[l] : dec->cache1[l],
                                 (uint64_t)c->n_ctx * c->d_model * 4, false);
            if (dec->modes) {
                const tmm_tz_ssm_desc sd = ssm_desc(dec, l, k);
                tmm_decoder_part_add(parts, max, &n, A(dec->state[2 * l + k]),
                                     tmm_tz_ssm_state_floats(&sd) / sd.tz.batch * 4, true);
            }
        }
    return n;
}

static double flops(const tmm_model_config *c, uint64_t *per_step)
{
    *per_step = 0;
    return (double)c->d_model * (c->kernel ? c->kernel : 1) * (c->n_ctx + 1.0) * (c->expanded ? 2 : 1);
}

static void describe(const tmm_model_config *c, char *buf, size_t size)
{
    if (c->heads == 0)
        snprintf(buf, size, "flat, kernel %u", c->kernel);
    else
        snprintf(buf, size, "heads %u", c->heads);
}

const tmm_mixer_class tmm_toeplitz_mixer = {
    TMM_MIXER_SLOTS,
    .declare = declare,
    .set_toeplitz_impl = set_impl,
    .state_parts = state_parts,
};
