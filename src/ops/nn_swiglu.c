/* SwiGLU (llama_ops.h), forward and backward: one invocation per output
 * column j < f of a row; rows in chunks that fit one binding. Kernels:
 * shaders/swiglu_fwd.comp, shaders/swiglu_bwd.comp. */
#include "llama_ops.h"
#include "nn_util.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };

tmm_status tmm_op_swiglu_forward(tmm_recorder *r, tmm_view gu, uint32_t rows, uint32_t f, tmm_view y)
{
    static const char *op = "swiglu_forward";
    if ((uint64_t)rows * f == 0)
        return TMM_OK;
    const uint64_t n = (uint64_t)rows * f;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "gu", gu, 2 * n));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    tmm_op_span s[] = { { "gu", gu, 2 * n }, { "y", y, n } };
    TMM_TRY(tmm_op_no_overlap(op, &s[1], s, 2));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "gu", 2ull * f, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_swiglu_fwd, 2, 16, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bg = nn_rows(dev, gu, r0, nr, 2ull * f), by = nn_rows(dev, y, r0, nr, f);
        struct {
            uint32_t n, f, base_gu, base_y;
        } push = { .n = nr * f, .f = f, .base_gu = bg.base, .base_y = by.base };
        tmm_arg args[2] = { tmm_in(bg.view), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up((uint64_t)nr * f, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_swiglu_backward(tmm_recorder *r, tmm_view gu, tmm_view dy, uint32_t rows, uint32_t f,
                                  tmm_view dgu)
{
    static const char *op = "swiglu_backward";
    if ((uint64_t)rows * f == 0)
        return TMM_OK;
    const uint64_t n = (uint64_t)rows * f;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "gu", gu, 2 * n));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    TMM_TRY(tmm_op_need_floats(op, "dgu", dgu, 2 * n));
    /* dgu may be exactly gu, and overlaps nothing else */
    bool in_place = dgu.buffer == gu.buffer && dgu.offset == gu.offset;
    tmm_op_span s[] = { { "gu", gu, in_place ? 0 : 2 * n }, { "dy", dy, n }, { "dgu", dgu, 2 * n } };
    TMM_TRY(tmm_op_no_overlap(op, &s[2], s, 3));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "gu", 2ull * f, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_swiglu_bwd, 3, 20, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bg = nn_rows(dev, gu, r0, nr, 2ull * f), bdy = nn_rows(dev, dy, r0, nr, f);
        nn_bind bdg = nn_rows(dev, dgu, r0, nr, 2ull * f);
        struct {
            uint32_t n, f, base_gu, base_dy, base_dgu;
        } push = { .n = nr * f, .f = f, .base_gu = bg.base, .base_dy = bdy.base, .base_dgu = bdg.base };
        tmm_arg args[3] = { tmm_in(bg.view), tmm_in(bdy.view), tmm_out(bdg.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up((uint64_t)nr * f, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}
