/* Fused bias + SiLU, forward and backward (input and bias gradients). */
#include "nn_util.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

tmm_status tmm_op_bias_silu_forward(tmm_recorder *r, tmm_view x, tmm_view b, uint32_t rows, uint32_t d, tmm_view y)
{
    static const char *op = "bias_silu_forward";
    if ((uint64_t)rows * d == 0)
        return TMM_OK;
    const uint64_t n = (uint64_t)rows * d;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "b", b, d));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_silu_fwd, 3, 16, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bx = nn_rows(dev, x, r0, nr, d), by = nn_rows(dev, y, r0, nr, d);
        struct { uint32_t n, d, base_x, base_y; } push = { .n = nr * d, .d = d, .base_x = bx.base,
                                                           .base_y = by.base };
        tmm_arg args[3] = { tmm_in(bx.view), tmm_in(b), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up((uint64_t)nr * d, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

static uint32_t n_segments(uint32_t rows) { return tmm_div_up(rows, TMM_NN_COL_SEG); }

uint64_t tmm_op_bias_silu_backward_scratch(uint32_t rows, uint32_t d)
{
    uint32_t nseg = n_segments(rows);
    return nseg > 1 ? nn_colsum_scratch(nseg, d, 1) : 0;
}

tmm_status tmm_op_bias_silu_backward(tmm_recorder *r, tmm_view x, tmm_view b, tmm_view dy, uint32_t rows, uint32_t d,
                                     bool accumulate, tmm_view scratch, tmm_view da, tmm_view db)
{
    static const char *op = "bias_silu_backward";
    if (d == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_bound(dev, op, "db", db, d));
    if (rows == 0)
        return accumulate ? TMM_OK : tmm_op_fill(r, db, d, 0.0f);
    const uint64_t n = (uint64_t)rows * d;
    const uint32_t nseg = n_segments(rows);
    const bool direct = nseg == 1;
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "b", b, d));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    TMM_TRY(tmm_op_need_floats(op, "da", da, n));
    if (!direct)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_op_bias_silu_backward_scratch(rows, d)));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    per = nn_round_chunk(per);
    if (per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: d = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, d, (unsigned long long)per, TMM_NN_COL_SEG);
    tmm_view region = direct ? (tmm_view){ 0 } : tmm_op_sub(scratch, 0, tmm_op_bias_silu_backward_scratch(rows, d));
    tmm_view plane = direct ? db : nn_colsum_plane(region, 0, nseg, d);

    tmm_pipeline *pb, *pe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_silu_bwd_bias, 4, 36, local_loop, NULL, 0, &pb));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_silu_bwd, 4, 20, local_elem, NULL, 0, &pe));
    /* The bias sums first: they read dy, which da may overwrite. */
    for (int phase = 0; phase < 2; phase++) {
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, d), bdy = nn_rows(dev, dy, r0, nr, d);
            if (phase == 0) {
                uint32_t ns = n_segments(nr);
                struct {
                    uint32_t rows, d, seg, nseg, seg0, direct, accumulate, base_x, base_dy;
                } push = { .rows = nr, .d = d, .seg = TMM_NN_COL_SEG, .nseg = ns, .seg0 = seg0, .direct = direct,
                           .accumulate = accumulate, .base_x = bx.base, .base_dy = bdy.base };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_in(b), tmm_in(bdy.view),
                                    { plane, direct && accumulate ? TMM_READ_WRITE : TMM_WRITE } };
                TMM_TRY(tmm_record_dispatch(r, pb, args, 4, &push, tmm_div_up((uint64_t)ns * d, NN_WG_LOOP), 1, 1));
                seg0 += ns;
            } else {
                nn_bind bda = nn_rows(dev, da, r0, nr, d);
                struct { uint32_t n, d, base_x, base_dy, base_da; } push = { .n = nr * d, .d = d, .base_x = bx.base,
                                                                             .base_dy = bdy.base,
                                                                             .base_da = bda.base };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_in(b), tmm_in(bdy.view), tmm_out(bda.view) };
                TMM_TRY(tmm_record_dispatch(r, pe, args, 4, &push, tmm_div_up((uint64_t)nr * d, TMM_WG_1D), 1, 1));
            }
        }
    }
    if (!direct)
        TMM_TRY(nn_colsum_finish(r, region, 1, nseg, d, accumulate, &db));
    return TMM_OK;
}
