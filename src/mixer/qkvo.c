/* The attention-family mixers' projections (qkvo.h). */
#include "mixer/qkvo.h"

#include "ops/op_util.h"
#include "ops/ops.h"

static const tmm_view none = { 0 };

void tmm_qkvo_declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx)
{
    const uint32_t d = c->d_model;
    const tmm_param_spec lin = { 2, { d, d }, TMM_INIT_SMALL, d, TMM_PARAM_LINEAR_WEIGHT, true };
    idx[QKVO_Q] = tmm_param_add(b, l, "attn.q.weight", lin);
    idx[QKVO_K] = tmm_param_add(b, l, "attn.k.weight", lin);
    idx[QKVO_V] = tmm_param_add(b, l, "attn.v.weight", lin);
    idx[QKVO_O] = tmm_param_add(b, l, "attn.o.weight", lin);
}

/* y (+)= x Wᵀ for the mixer's rows (matmul) or a step's batch (row kernel). */
static tmm_status project(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, int which, tmm_view x, bool step,
                          tmm_view y, bool accumulate)
{
    const uint32_t d = m->s.table->config.d_model;
    if (step)
        return tmm_op_linear_rows(rec->r, x, m->s.batch, d, d, tmm_mixer_param(m, l, which), none, y, accumulate);
    TMM_REC_OP(rec, "matmul", tmm_op_linear(rec->r, x, m->rows, d, d, tmm_mixer_weight(m, l, which), none, y,
                                            accumulate));
    return TMM_OK;
}

tmm_status tmm_qkvo_in(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view q, tmm_view k,
                       tmm_view v)
{
    TMM_TRY(project(m, rec, l, QKVO_Q, x, false, q, false));
    TMM_TRY(project(m, rec, l, QKVO_K, x, false, k, false));
    return project(m, rec, l, QKVO_V, x, false, v, false);
}

tmm_status tmm_qkvo_in_step(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x,
                            const tmm_row_rope *rope, tmm_view q, tmm_view k, tmm_view v)
{
    const uint32_t d = m->s.table->config.d_model;
    const tmm_row_act qk = rope ? TMM_ROW_ACT_ROPE : TMM_ROW_ACT_NONE;
    const tmm_row_group g[3] = { { tmm_mixer_param(m, l, QKVO_Q), none, q, d, qk },
                                 { tmm_mixer_param(m, l, QKVO_K), none, k, d, qk },
                                 { tmm_mixer_param(m, l, QKVO_V), none, v, d, TMM_ROW_ACT_NONE } };
    return tmm_op_linear_rows_group(rec->r, x, m->s.batch, d, g, 3, rope, none);
}

static uint64_t step_stride(const tmm_device *dev, uint32_t B, uint32_t d)
{
    const uint64_t align = tmm_op_offset_align(dev) / 4;
    return ((uint64_t)B * d + align - 1) / align * align;
}

uint64_t tmm_qkvo_step_floats(const tmm_device *dev, uint32_t B, uint32_t d) { return 3 * step_stride(dev, B, d); }

void tmm_qkvo_step_views(const tmm_device *dev, tmm_buffer *qkv, uint32_t B, uint32_t d, tmm_view out[3])
{
    for (uint64_t i = 0; i < 3; i++)
        out[i] = tmm_sub(qkv, i * step_stride(dev, B, d) * 4, (uint64_t)B * d * 4);
}

tmm_status tmm_qkvo_out(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view o, bool step, tmm_view h)
{
    return project(m, rec, l, QKVO_O, o, step, h, true);
}

tmm_status tmm_qkvo_in_backward(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dq,
                                tmm_view dk, tmm_view dv, tmm_view dx)
{
    const uint32_t N = m->rows, d = m->s.table->config.d_model;
    const int which[3] = { QKVO_Q, QKVO_K, QKVO_V };
    const tmm_view grads[3] = { dq, dk, dv };
    for (int i = 0; i < 3; i++) {
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(rec->r, grads[i], N, d, d, tmm_mixer_weight(m, l, which[i]), dx,
                                                       i > 0));
        TMM_REC_OP(rec, "matmul bwd",
                   tmm_op_linear_dw(rec->r, grads[i], x, N, d, d, tmm_mixer_grad(m, l, which[i]), rec->half_dw));
    }
    return TMM_OK;
}

tmm_status tmm_qkvo_out_backward(const tmm_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view o, tmm_view dh,
                                 tmm_view dout)
{
    const uint32_t N = m->rows, d = m->s.table->config.d_model;
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(rec->r, dh, N, d, d, tmm_mixer_weight(m, l, QKVO_O), dout, false));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(rec->r, dh, o, N, d, d, tmm_mixer_grad(m, l, QKVO_O), rec->half_dw));
    return TMM_OK;
}
