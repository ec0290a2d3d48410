/* Softplus with optional bias (ssm_ops.h), through the bias + activation
 * driver of nn_gelu.c. Kernels: shaders/softplus_fwd.comp, softplus_bwd.comp,
 * softplus_bwd_bias.comp. */
#include "op_util.h"
#include "ssm_ops.h"

tmm_status tmm_op_softplus_forward(tmm_recorder *r, tmm_view x, tmm_view b, uint32_t rows, uint32_t C, tmm_view y)
{
    return tmm_ssm_bias_act_forward(r, "softplus_forward", &tmm_spv_softplus_fwd, x, b, rows, C, y);
}

uint64_t tmm_op_softplus_backward_scratch(uint32_t rows, uint32_t C)
{
    return tmm_ssm_bias_act_backward_scratch(rows, C);
}

tmm_status tmm_op_softplus_backward(tmm_recorder *r, tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C,
                                    bool accumulate, tmm_view scratch, tmm_view dx, tmm_view db)
{
    return tmm_ssm_bias_act_backward(r, "softplus_backward", &tmm_spv_softplus_bwd, &tmm_spv_softplus_bwd_bias, x, b,
                                     dy, rows, C, accumulate, scratch, dx, db);
}
