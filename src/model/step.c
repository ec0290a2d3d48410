/* The cached decode step (step.h). */
#include "model/step.h"

#include <stdlib.h>

#include "model/frame.h"
#include "ops/decode_ops.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

struct tmm_model_step {
    tmm_model *model;
    const tmm_arch_desc *arch;
    tmm_mixer_decoder *decoder;
    uint32_t batch;
    /* one position per sequence: [B, d] / [B, e] activations */
    tmm_buffer *h, *x, *mean, *rstd, *f, *z;
    tmm_buffer *tokens, *positions, *logits; /* host-visible */
    tmm_buffer *ln_scratch;
    tmm_recorder *r;
};

static const tmm_view none = { 0 };

static tmm_view W(tmm_buffer *b) { return tmm_whole(b); }

/* Tensor idx of the fp32 arena (an empty view for none). */
static tmm_view param(const tmm_model_step *s, int idx)
{
    if (idx < 0)
        return none;
    const tmm_param *p = &tmm_model_table(s->model)->params[idx];
    return tmm_sub(tmm_model_param_buffer(s->model), p->offset * 4, p->numel * 4);
}

static tmm_status norm(const tmm_model_step *s, const tmm_rec *rec, int w, int b)
{
    return tmm_frame_norm(rec, s->arch, s->batch, tmm_model_table(s->model)->config.d_model, W(s->h), param(s, w),
                          param(s, b), W(s->x), W(s->mean), W(s->rstd));
}

static tmm_status record(tmm_model_step *s)
{
    const tmm_param_table *t = tmm_model_table(s->model);
    const tmm_model_config *c = &t->config;
    const uint32_t B = s->batch, d = c->d_model, e = c->expansion * d, V = c->vocab;
    const tmm_mixer_class *mc = tmm_model_mixer(s->model)->cls;
    const tmm_rec rec = { s->r, false, W(s->ln_scratch), TMM_ELEM_F32 };
    bool mixer_half[2];
    const uint32_t halves = tmm_frame_halves(s->arch, mixer_half);

    TMM_TRY(tmm_recorder_begin(s->r));
    TMM_TRY(tmm_op_embedding_forward(s->r, W(s->tokens), param(s, t->embed), B, V, d, W(s->h)));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &t->blocks[l];
        for (uint32_t i = 0; i < halves; i++) {
            if (mixer_half[i]) {
                TMM_TRY(norm(s, &rec, bp->mix_norm_w, bp->mix_norm_b));
                TMM_TRY(mc->record_step(s->decoder, &rec, l, W(s->positions), W(s->x), W(s->h)));
            } else {
                const tmm_frame_mlp mlp = { param(s, bp->mlp_in_w), param(s, bp->mlp_in_b), param(s, bp->mlp_out_w),
                                            param(s, bp->mlp_out_b), W(s->f), W(s->z) };
                TMM_TRY(norm(s, &rec, bp->mlp_norm_w, bp->mlp_norm_b));
                TMM_TRY(tmm_frame_mlp_forward(&rec, s->arch, B, d, e, true, W(s->x), &mlp, W(s->h)));
            }
        }
    }
    tmm_view head_in = W(s->h);
    if (s->arch->final_norm) {
        TMM_TRY(norm(s, &rec, t->final_norm_w, -1));
        head_in = W(s->x);
    }
    TMM_TRY(tmm_op_linear_rows(s->r, head_in, B, d, V, param(s, t->head), none, W(s->logits), false));
    return tmm_recorder_end(s->r);
}

tmm_status tmm_model_step_create(tmm_device *device, tmm_model *model, tmm_mixer_decoder *decoder, uint32_t batch, tmm_model_step **out)
{
    *out = NULL;
    tmm_model_step *s = calloc(1, sizeof *s);
    if (!s)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    const tmm_model_config *c = &tmm_model_table(model)->config;
    s->model = model, s->arch = tmm_arch_of(c->arch), s->decoder = decoder, s->batch = batch;
    const uint64_t B = batch, d = c->d_model, e = (uint64_t)c->expansion * d, V = c->vocab;
    struct { tmm_buffer **b; uint64_t floats; tmm_memory_kind kind; } all[] = {
        { &s->h, B * d, TMM_MEMORY_DEVICE },     { &s->x, B * d, TMM_MEMORY_DEVICE },
        { &s->mean, B, TMM_MEMORY_DEVICE },      { &s->rstd, B, TMM_MEMORY_DEVICE },
        { &s->f, 2 * B * e, TMM_MEMORY_DEVICE }, { &s->z, B * e, TMM_MEMORY_DEVICE },
        { &s->tokens, B, TMM_MEMORY_HOST },      { &s->positions, B, TMM_MEMORY_HOST },
        { &s->logits, B * V, TMM_MEMORY_HOST },
        { &s->ln_scratch, tmm_op_layernorm_forward_scratch((uint32_t)B, (uint32_t)d) +
                              tmm_op_rmsnorm_forward_scratch((uint32_t)B, (uint32_t)d), TMM_MEMORY_DEVICE },
    };
    tmm_status st = TMM_OK;
    for (size_t i = 0; st == TMM_OK && i < sizeof all / sizeof all[0]; i++)
        st = tmm_buffer_create(device, (all[i].floats ? all[i].floats : 1) * 4, all[i].kind, all[i].b);
    if (st == TMM_OK)
        st = tmm_recorder_create(device, &s->r);
    if (st == TMM_OK)
        st = record(s);
    if (st != TMM_OK) {
        tmm_model_step_destroy(s);
        return st;
    }
    *out = s;
    return TMM_OK;
}

tmm_status tmm_model_step_run(tmm_model_step *s, const uint32_t *tokens, const uint32_t *positions, float *logits)
{
    const uint64_t B = s->batch, V = tmm_model_table(s->model)->config.vocab;
    TMM_TRY(tmm_buffer_write(s->tokens, 0, tokens, B * 4));
    TMM_TRY(tmm_buffer_write(s->positions, 0, positions, B * 4));
    TMM_TRY(tmm_recorder_run(s->r));
    return logits ? tmm_buffer_read(s->logits, 0, logits, B * V * 4) : TMM_OK;
}

void tmm_model_step_destroy(tmm_model_step *s)
{
    if (!s)
        return;
    tmm_recorder_destroy(s->r);
    tmm_buffer *all[] = { s->h, s->x, s->mean, s->rstd, s->f, s->z, s->tokens, s->positions, s->logits,
                          s->ln_scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(s);
}

uint32_t tmm_model_step_commands(const tmm_model_step *s) { return tmm_recorder_commands(s->r); }
