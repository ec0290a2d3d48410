/* Sine layer y = sin(omega (x + c)) (ssm_ops.h), forward and backward:
 * element kernels over rows in chunks that fit one binding; domega and dc as
 * partial sums over segments of TMM_NN_COL_SEG rows combined by
 * tmm_op_sum_cols. Kernels: shaders/sine_fwd.comp, sine_bwd.comp,
 * sine_bwd_params.comp. */
#include "nn_util.h"
#include "ssm_ops.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

static uint32_t n_segments(uint32_t rows) { return tmm_div_up(rows, TMM_NN_COL_SEG); }

tmm_status tmm_op_sine_forward(tmm_recorder *r, tmm_view x, tmm_view omega, tmm_view c, uint32_t rows, uint32_t C,
                               tmm_view y)
{
    static const char *op = "sine_forward";
    const uint64_t n = (uint64_t)rows * C;
    if (n == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "omega", omega, C));
    TMM_TRY(tmm_op_need_bound(dev, op, "c", c, C));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    tmm_op_span in[] = { { "x", x, n }, { "omega", omega, C }, { "c", c, C } }, out[] = { { "y", y, n } };
    TMM_TRY(tmm_op_no_overlap(op, &out[0], &in[1], 2));
    TMM_TRY(tmm_ssm_check_alias(op, in, 1, out, 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", C, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sine_fwd, 4, 16, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bx = nn_rows(dev, x, r0, nr, C), by = nn_rows(dev, y, r0, nr, C);
        struct {
            uint32_t n, d, base_x, base_y;
        } push = { .n = nr * C, .d = C, .base_x = bx.base, .base_y = by.base };
        tmm_arg args[4] = { tmm_in(bx.view), tmm_in(omega), tmm_in(c), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 4, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

uint64_t tmm_op_sine_backward_scratch(uint32_t rows, uint32_t C)
{
    uint32_t nseg = n_segments(rows);
    return nseg > 1 ? nn_colsum_scratch(nseg, C, 2) : 0;
}

tmm_status tmm_op_sine_backward(tmm_recorder *r, tmm_view x, tmm_view omega, tmm_view c, tmm_view dy, uint32_t rows,
                                uint32_t C, bool accumulate, tmm_view scratch, tmm_view dx, tmm_view domega,
                                tmm_view dc)
{
    static const char *op = "sine_backward";
    if (C == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_bound(dev, op, "domega", domega, C));
    TMM_TRY(tmm_op_need_bound(dev, op, "dc", dc, C));
    if (rows == 0) {
        if (!accumulate) {
            TMM_TRY(tmm_op_fill(r, domega, C, 0.0f));
            TMM_TRY(tmm_op_fill(r, dc, C, 0.0f));
        }
        return TMM_OK;
    }
    const uint64_t n = (uint64_t)rows * C;
    const uint32_t nseg = n_segments(rows);
    const bool direct = nseg == 1;
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "omega", omega, C));
    TMM_TRY(tmm_op_need_bound(dev, op, "c", c, C));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    TMM_TRY(tmm_op_need_floats(op, "dx", dx, n));
    if (!direct)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_op_sine_backward_scratch(rows, C)));
    tmm_op_span all[] = { { "x", x, n },      { "dy", dy, n }, { "omega", omega, C }, { "c", c, C },
                          { "domega", domega, C }, { "dc", dc, C }, { "dx", dx, n } };
    TMM_TRY(tmm_op_no_overlap(op, &all[4], all, 7));
    TMM_TRY(tmm_op_no_overlap(op, &all[5], all, 7));
    TMM_TRY(tmm_op_no_overlap(op, &all[6], &all[2], 4));
    TMM_TRY(tmm_ssm_check_alias(op, all, 2, &all[6], 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", C, &per));
    per = nn_round_chunk(per);
    if (per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: C = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, C, (unsigned long long)per, TMM_NN_COL_SEG);
    tmm_view region = direct ? (tmm_view){ 0 } : tmm_op_sub(scratch, 0, tmm_op_sine_backward_scratch(rows, C));
    tmm_view pw = direct ? domega : nn_colsum_plane(region, 0, nseg, C);
    tmm_view pc = direct ? dc : nn_colsum_plane(region, 1, nseg, C);
    const tmm_access acc_param = direct && accumulate ? TMM_READ_WRITE : TMM_WRITE;

    tmm_pipeline *pp, *pe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sine_bwd_params, 6, 36, local_loop, NULL, 0, &pp));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sine_bwd, 5, 20, local_elem, NULL, 0, &pe));
    /* The parameter sums first: they read x and dy, which dx may overwrite. */
    for (int phase = 0; phase < 2; phase++) {
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, C), bdy = nn_rows(dev, dy, r0, nr, C);
            if (phase == 0) {
                uint32_t ns = n_segments(nr);
                struct {
                    uint32_t rows, d, seg, nseg, seg0, direct, accumulate, base_x, base_dy;
                } push = { .rows = nr, .d = C, .seg = TMM_NN_COL_SEG, .nseg = ns, .seg0 = seg0, .direct = direct,
                           .accumulate = accumulate, .base_x = bx.base, .base_dy = bdy.base };
                tmm_arg args[6] = { tmm_in(bx.view), tmm_in(omega), tmm_in(c), tmm_in(bdy.view),
                                    { pw, acc_param }, { pc, acc_param } };
                TMM_TRY(tmm_record_dispatch(r, pp, args, 6, &push, tmm_div_up((uint64_t)ns * C, NN_WG_LOOP), 1, 1));
                seg0 += ns;
            } else {
                nn_bind bdx = nn_rows(dev, dx, r0, nr, C);
                struct {
                    uint32_t n, d, base_x, base_dy, base_dx;
                } push = { .n = nr * C, .d = C, .base_x = bx.base, .base_dy = bdy.base, .base_dx = bdx.base };
                tmm_arg args[5] = { tmm_in(bx.view), tmm_in(omega), tmm_in(c), tmm_in(bdy.view), tmm_out(bdx.view) };
                TMM_TRY(tmm_record_dispatch(r, pe, args, 5, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
            }
        }
    }
    if (!direct)
        TMM_TRY(nn_colsum_finish(r, region, 2, nseg, C, accumulate, (tmm_view[2]){ domega, dc }));
    return TMM_OK;
}
