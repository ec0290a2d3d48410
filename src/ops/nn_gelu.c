/* GELU (exact erf) with optional bias (ssm_ops.h), and the bias + activation
 * driver it shares with softplus: element kernels over rows in chunks that
 * fit one binding; the bias gradient as partial sums over segments of
 * TMM_NN_COL_SEG rows (one invocation each) combined by tmm_op_sum_cols.
 * Kernels: shaders/gelu_fwd.comp, gelu_bwd.comp, gelu_bwd_bias.comp. */
#include "nn_util.h"
#include "ssm_ops.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

static uint32_t n_segments(uint32_t rows) { return tmm_div_up(rows, TMM_NN_COL_SEG); }

tmm_status tmm_ssm_bias_act_forward(tmm_recorder *r, const char *op, const tmm_spirv *fwd, tmm_view x, tmm_view b,
                                    uint32_t rows, uint32_t C, tmm_view y)
{
    if ((uint64_t)rows * C == 0)
        return TMM_OK;
    const uint64_t n = (uint64_t)rows * C;
    const bool has_b = !tmm_ssm_absent(b);
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    if (has_b)
        TMM_TRY(tmm_op_need_bound(dev, op, "b", b, C));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    tmm_op_span in[] = { { "x", x, n }, { "b", b, has_b ? C : 0 } };
    tmm_op_span out[] = { { "y", y, n } };
    TMM_TRY(tmm_op_no_overlap(op, &out[0], &in[1], 1));
    TMM_TRY(tmm_ssm_check_alias(op, in, 1, out, 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", C, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, fwd, 3, 20, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bx = nn_rows(dev, x, r0, nr, C), by = nn_rows(dev, y, r0, nr, C);
        struct {
            uint32_t n, d, has_b, base_x, base_y;
        } push = { .n = nr * C, .d = C, .has_b = has_b, .base_x = bx.base, .base_y = by.base };
        tmm_arg args[3] = { tmm_in(bx.view), tmm_in(has_b ? b : bx.view), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

uint64_t tmm_ssm_bias_act_backward_scratch(uint32_t rows, uint32_t C)
{
    uint32_t nseg = n_segments(rows);
    return nseg > 1 ? nn_colsum_scratch(nseg, C, 1) : 0;
}

tmm_status tmm_ssm_bias_act_backward(tmm_recorder *r, const char *op, const tmm_spirv *bwd, const tmm_spirv *bwd_bias,
                                     tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C, bool accumulate,
                                     tmm_view scratch, tmm_view dx, tmm_view db)
{
    if (C == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    const bool has_b = !tmm_ssm_absent(b), has_db = !tmm_ssm_absent(db);
    if (has_db)
        TMM_TRY(tmm_op_need_bound(dev, op, "db", db, C));
    if (rows == 0)
        return accumulate || !has_db ? TMM_OK : tmm_op_fill(r, db, C, 0.0f);
    const uint64_t n = (uint64_t)rows * C;
    const uint32_t nseg = n_segments(rows);
    const bool direct = nseg == 1;
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    if (has_b)
        TMM_TRY(tmm_op_need_bound(dev, op, "b", b, C));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    TMM_TRY(tmm_op_need_floats(op, "dx", dx, n));
    if (has_db && !direct)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_ssm_bias_act_backward_scratch(rows, C)));
    tmm_op_span all[] = { { "x", x, n }, { "dy", dy, n }, { "b", b, has_b ? C : 0 }, { "dx", dx, n },
                          { "db", db, has_db ? C : 0 } };
    TMM_TRY(tmm_op_no_overlap(op, &all[4], all, 5));
    TMM_TRY(tmm_op_no_overlap(op, &all[3], &all[2], 1));
    TMM_TRY(tmm_ssm_check_alias(op, all, 2, &all[3], 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", C, &per));
    per = nn_round_chunk(per);
    if (has_db && per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: C = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, C, (unsigned long long)per, TMM_NN_COL_SEG);
    tmm_view region = direct || !has_db ? (tmm_view){ 0 }
                                        : tmm_op_sub(scratch, 0, tmm_ssm_bias_act_backward_scratch(rows, C));
    tmm_view plane = direct ? db : nn_colsum_plane(region, 0, nseg, C);

    tmm_pipeline *pb = NULL, *pe;
    if (has_db)
        TMM_TRY(tmm_op_pipeline(r, bwd_bias, 4, 40, local_loop, NULL, 0, &pb));
    TMM_TRY(tmm_op_pipeline(r, bwd, 4, 24, local_elem, NULL, 0, &pe));
    /* The bias sums first: they read x and dy, which dx may overwrite. */
    for (int phase = has_db ? 0 : 1; phase < 2; phase++) {
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, C), bdy = nn_rows(dev, dy, r0, nr, C);
            tmm_view vb = has_b ? b : bx.view;
            if (phase == 0) {
                uint32_t ns = n_segments(nr);
                struct {
                    uint32_t rows, d, seg, nseg, seg0, direct, accumulate, has_b, base_x, base_dy;
                } push = { .rows = nr, .d = C, .seg = TMM_NN_COL_SEG, .nseg = ns, .seg0 = seg0, .direct = direct,
                           .accumulate = accumulate, .has_b = has_b, .base_x = bx.base, .base_dy = bdy.base };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_in(vb), tmm_in(bdy.view),
                                    { plane, direct && accumulate ? TMM_READ_WRITE : TMM_WRITE } };
                TMM_TRY(tmm_record_dispatch(r, pb, args, 4, &push, tmm_div_up((uint64_t)ns * C, NN_WG_LOOP), 1, 1));
                seg0 += ns;
            } else {
                nn_bind bdx = nn_rows(dev, dx, r0, nr, C);
                struct {
                    uint32_t n, d, has_b, base_x, base_dy, base_dx;
                } push = { .n = nr * C, .d = C, .has_b = has_b, .base_x = bx.base, .base_dy = bdy.base,
                           .base_dx = bdx.base };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_in(vb), tmm_in(bdy.view), tmm_out(bdx.view) };
                TMM_TRY(tmm_record_dispatch(r, pe, args, 4, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
            }
        }
    }
    if (has_db && !direct)
        TMM_TRY(nn_colsum_finish(r, region, 1, nseg, C, accumulate, &db));
    return TMM_OK;
}

tmm_status tmm_op_gelu_forward(tmm_recorder *r, tmm_view x, tmm_view b, uint32_t rows, uint32_t C, tmm_view y)
{
    return tmm_ssm_bias_act_forward(r, "gelu_forward", &tmm_spv_gelu_fwd, x, b, rows, C, y);
}

uint64_t tmm_op_gelu_backward_scratch(uint32_t rows, uint32_t C) { return tmm_ssm_bias_act_backward_scratch(rows, C); }

tmm_status tmm_op_gelu_backward(tmm_recorder *r, tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C,
                                bool accumulate, tmm_view scratch, tmm_view dx, tmm_view db)
{
    return tmm_ssm_bias_act_backward(r, "gelu_backward", &tmm_spv_gelu_bwd, &tmm_spv_gelu_bwd_bias, x, b, dy, rows, C,
                                     accumulate, scratch, dx, db);
}
