/* A block's shared pieces (frame.h). */
#include "model/frame.h"

#include "ops/decode_ops.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/ssm_ops.h"

uint32_t tmm_frame_halves(const tmm_arch_desc *a, bool mixer_half[2])
{
    mixer_half[0] = a->mixer_first || a->mlp == TMM_MLP_NONE;
    mixer_half[1] = !mixer_half[0];
    return a->mlp == TMM_MLP_NONE ? 1 : 2;
}

tmm_status tmm_frame_norm(const tmm_rec *rec, const tmm_arch_desc *a, uint32_t rows, uint32_t d, tmm_view h,
                          tmm_view w, tmm_view b, tmm_view y, tmm_view mean, tmm_view rstd)
{
    if (a->norm == TMM_NORM_RMS)
        TMM_REC_OP(rec, "rmsnorm", tmm_op_rmsnorm_forward(rec->r, h, w, rows, d, (float)a->norm_eps, rec->scratch, y,
                                                          rstd));
    else
        TMM_REC_OP(rec, "layernorm", tmm_op_layernorm_forward(rec->r, h, w, b, rows, d, (float)a->norm_eps,
                                                              rec->scratch, y, mean, rstd));
    return TMM_OK;
}

tmm_status tmm_frame_mlp_forward(const tmm_rec *rec, const tmm_arch_desc *a, uint32_t rows, uint32_t d, uint32_t e,
                                 bool few_rows, tmm_view x, const tmm_frame_mlp *mlp, tmm_view h)
{
    static const tmm_view none = { 0 };
    tmm_status (*linear)(tmm_recorder *, tmm_view, uint32_t, uint32_t, uint32_t, tmm_view, tmm_view, tmm_view,
                         bool) = few_rows ? tmm_op_linear_rows : tmm_op_linear;
    tmm_recorder *r = rec->r;
    const tmm_device *dev = tmm_recorder_device(r);
    if (a->mlp == TMM_MLP_SWIGLU && few_rows) { /* a decode step: the gate, up and SwiGLU in one dispatch */
        const tmm_row_group g = { mlp->w_in, none, mlp->z, e, TMM_ROW_ACT_SWIGLU };
        TMM_REC_OP(rec, "matmul", tmm_op_linear_rows_group(r, x, rows, d, &g, 1, NULL, mlp->act));
    } else if (a->mlp == TMM_MLP_SWIGLU) {
        TMM_REC_OP(rec, "matmul", linear(r, x, rows, d, 2 * e, mlp->w_in, none, mlp->act, false));
        TMM_REC_OP(rec, "swiglu", tmm_op_swiglu_forward(r, mlp->act, rows, e, mlp->z));
    } else if (few_rows) { /* a decode step: the activation in the linear layer's dispatch */
        const tmm_row_act act = a->mlp == TMM_MLP_GELU ? TMM_ROW_ACT_GELU : TMM_ROW_ACT_SILU;
        TMM_REC_OP(rec, "matmul", tmm_op_linear_rows_act(r, x, rows, d, e, mlp->w_in, mlp->b_in, act, mlp->z));
    } else if (!dev->tuning.no_fused_act && tmm_op_linear_act_fits(dev, rows, d, e)) {
        /* the activation in the matmul's epilogue: a for the backward, z = act(a + b1) */
        const tmm_matmul_epilogue act = a->mlp == TMM_MLP_GELU ? TMM_MATMUL_EPI_GELU : TMM_MATMUL_EPI_SILU;
        TMM_REC_OP(rec, "matmul", tmm_op_linear_act(r, x, rows, d, e, mlp->w_in, mlp->b_in, act, mlp->act, mlp->z));
    } else {
        TMM_REC_OP(rec, "matmul", linear(r, x, rows, d, e, mlp->w_in, none, mlp->act, false));
        if (a->mlp == TMM_MLP_GELU)
            TMM_REC_OP(rec, "gelu", tmm_op_gelu_forward(r, mlp->act, mlp->b_in, rows, e, mlp->z));
        else
            TMM_REC_OP(rec, "silu", tmm_op_bias_silu_forward(r, mlp->act, mlp->b_in, rows, e, mlp->z));
    }
    TMM_REC_OP(rec, "matmul", linear(r, mlp->z, rows, e, d, mlp->w_out, mlp->b_out, h, true));
    return TMM_OK;
}
