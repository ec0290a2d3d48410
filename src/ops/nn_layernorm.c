/* LayerNorm over the last axis: forward with saved mean and rstd, backward
 * with deterministic row and column sums. Rows are processed in chunks that
 * fit one binding; each op records its phases chunk by chunk so that one
 * barrier separates phases. */
#include "nn_util.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };
static const uint32_t local_seg[3] = { TMM_NN_COL_SEG, 1, 1 };

static uint32_t n_chunks(uint32_t d) { return tmm_div_up(d, TMM_NN_LN_CHUNK); }

static tmm_status check_width(const char *op, uint32_t d)
{
    if (n_chunks(d) > TMM_NN_MAX_LOOP)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: d = %u is above the supported %u", op, d,
                        TMM_NN_LN_CHUNK * TMM_NN_MAX_LOOP);
    return TMM_OK;
}

uint64_t tmm_op_layernorm_forward_scratch(uint32_t rows, uint32_t d)
{
    uint32_t nc = n_chunks(d);
    return nc > 1 ? 2ull * rows * nc : 0;
}

tmm_status tmm_op_layernorm_forward(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view beta, uint32_t rows,
                                    uint32_t d, float eps, tmm_view scratch, tmm_view y, tmm_view mean,
                                    tmm_view rstd)
{
    static const char *op = "layernorm_forward";
    if (rows == 0)
        return TMM_OK;
    if (d == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: d is 0", op);
    if (!(eps > 0))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: eps must be positive", op);
    TMM_TRY(check_width(op, d));
    const uint64_t n = (uint64_t)rows * d;
    const uint32_t nc = n_chunks(d);
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "gamma", gamma, d));
    TMM_TRY(tmm_op_need_bound(dev, op, "beta", beta, d));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    TMM_TRY(tmm_op_need_floats(op, "mean", mean, rows));
    TMM_TRY(tmm_op_need_floats(op, "rstd", rstd, rows));
    if (nc > 1)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_op_layernorm_forward_scratch(rows, d)));

    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    TMM_TRY(nn_fit_rows(dev, op, "mean", 1, &per));
    if (nc > 1)
        TMM_TRY(nn_fit_rows(dev, op, "scratch", 2ull * nc, &per));
    const bool sg = tmm_op_rows_use_subgroups(dev);
    bool stats_done = false;
    if (sg)
        TMM_TRY(nn_norm_stats_sg(r, op, 0, x, rows, d, eps, mean, rstd, &stats_done));
    if (!sg && rows <= NN_ROW_NORM_ROWS && 3ull * d <= TMM_MAX_LOOP && per == rows) {
        tmm_pipeline *pr;
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_row, 6, 28, local_loop, NULL, 0, &pr));
        nn_bind bx = nn_rows(dev, x, 0, rows, d), by = nn_rows(dev, y, 0, rows, d);
        nn_bind bm = nn_rows(dev, mean, 0, rows, 1), br = nn_rows(dev, rstd, 0, rows, 1);
        struct {
            uint32_t rows, d, base_x, base_m, base_r, base_y;
            float eps;
        } push = { .rows = rows, .d = d, .base_x = bx.base, .base_m = bm.base, .base_r = br.base, .base_y = by.base,
                   .eps = eps };
        tmm_arg args[6] = { tmm_in(bx.view), tmm_in(gamma), tmm_in(beta), tmm_out(bm.view), tmm_out(br.view),
                            tmm_out(by.view) };
        return tmm_record_dispatch(r, pr, args, 6, &push, tmm_div_up(rows, NN_WG_LOOP), 1, 1);
    }

    tmm_pipeline *ps, *pc, *pa;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_stats, 4, 36, local_loop, NULL, 0, &ps));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_apply, 6, 24, local_elem, NULL, 0, &pa));
    if (nc > 1)
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_combine, 3, 32, local_loop, NULL, 0, &pc));

    for (int phase = stats_done ? 2 : 0; phase < 3; phase++)
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, d), by = nn_rows(dev, y, r0, nr, d);
            nn_bind bm = nn_rows(dev, mean, r0, nr, 1), br = nn_rows(dev, rstd, r0, nr, 1);
            nn_bind bp = nc > 1 ? nn_rows(dev, scratch, r0, nr, 2ull * nc) : bm; /* unused with one chunk */
            if (phase == 0) {
                struct {
                    uint32_t rows, d, chunk, nchunk, base_x, base_p, base_m, base_r;
                    float eps;
                } push = { .rows = nr, .d = d, .chunk = TMM_NN_LN_CHUNK, .nchunk = nc, .base_x = bx.base,
                           .base_p = bp.base, .base_m = bm.base, .base_r = br.base, .eps = eps };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_out(bp.view), tmm_out(bm.view), tmm_out(br.view) };
                TMM_TRY(tmm_record_dispatch(r, ps, args, 4, &push, tmm_div_up((uint64_t)nr * nc, NN_WG_LOOP), 1, 1));
            } else if (phase == 1 && nc > 1) {
                struct {
                    uint32_t rows, d, chunk, nchunk, base_p, base_m, base_r;
                    float eps;
                } push = { .rows = nr, .d = d, .chunk = TMM_NN_LN_CHUNK, .nchunk = nc, .base_p = bp.base,
                           .base_m = bm.base, .base_r = br.base, .eps = eps };
                tmm_arg args[3] = { tmm_in(bp.view), tmm_out(bm.view), tmm_out(br.view) };
                TMM_TRY(tmm_record_dispatch(r, pc, args, 3, &push, tmm_div_up(nr, NN_WG_LOOP), 1, 1));
            } else if (phase == 2) {
                struct {
                    uint32_t n, d, base_x, base_m, base_r, base_y;
                } push = { .n = nr * d, .d = d, .base_x = bx.base, .base_m = bm.base, .base_r = br.base,
                           .base_y = by.base };
                tmm_arg args[6] = { tmm_in(bx.view), tmm_in(gamma),   tmm_in(beta),
                                    tmm_in(bm.view), tmm_in(br.view), tmm_out(by.view) };
                TMM_TRY(tmm_record_dispatch(r, pa, args, 6, &push, tmm_div_up((uint64_t)nr * d, TMM_WG_1D), 1, 1));
            }
        }
    return TMM_OK;
}

/* Backward scratch: row sums [2 rows], the chunks' partial row sums when a
 * row has several chunks, and the column-sum region when rows span several
 * segments. */
typedef struct ln_bwd_layout {
    uint64_t sums, part, cols, total;
    uint32_t nseg;
} ln_bwd_layout;

static ln_bwd_layout bwd_layout(uint32_t rows, uint32_t d)
{
    ln_bwd_layout l = { 0 };
    uint32_t nc = n_chunks(d);
    l.nseg = tmm_div_up(rows, TMM_NN_COL_SEG);
    l.sums = 0;
    l.part = nn_aligned(2ull * rows);
    l.cols = l.part + (nc > 1 ? nn_aligned(2ull * rows * nc) : 0);
    l.total = l.cols + (l.nseg > 1 ? nn_colsum_scratch(l.nseg, d, 2) : 0);
    return l;
}

uint64_t tmm_op_layernorm_backward_scratch(uint32_t rows, uint32_t d) { return bwd_layout(rows, d).total; }

/* The unfused backward over all rows, in three dispatches per binding. */
static tmm_status record_phases(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean, tmm_view rstd,
                                tmm_view dy, uint32_t rows, uint32_t d, bool accumulate, tmm_view dx, tmm_view sums,
                                tmm_view part, const tmm_view planes[2], uint64_t per, bool direct)
{
    tmm_device *dev = tmm_recorder_device(r);
    const uint32_t nc = n_chunks(d);
    tmm_pipeline *prow, *ppar, *pdx;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_bwd_rows, 6, 36, local_loop, NULL, 0, &prow));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_bwd_params, 6, 44, local_loop, NULL, 0, &ppar));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_bwd_dx, 7, 32, local_elem, NULL, 0, &pdx));

    /* Phase 0: row sums (chunks' partials); 1: column partial sums; 2: dx.
     * dx comes last so that it may overwrite dy. */
    for (int phase = 0; phase < 3; phase++) {
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, d), bdy = nn_rows(dev, dy, r0, nr, d);
            nn_bind bdx = nn_rows(dev, dx, r0, nr, d);
            nn_bind bm = nn_rows(dev, mean, r0, nr, 1), br = nn_rows(dev, rstd, r0, nr, 1);
            nn_bind bs = nn_rows(dev, sums, r0, nr, 2), bp = nn_rows(dev, part, r0, nr, 2ull * nc);
            if (phase == 0) {
                struct {
                    uint32_t rows, d, chunk, nchunk, base_x, base_dy, base_m, base_r, base_o;
                } push = { .rows = nr, .d = d, .chunk = TMM_NN_LN_CHUNK, .nchunk = nc, .base_x = bx.base,
                           .base_dy = bdy.base, .base_m = bm.base, .base_r = br.base, .base_o = bp.base };
                tmm_arg args[6] = { tmm_in(bx.view), tmm_in(bdy.view), tmm_in(gamma),
                                    tmm_in(bm.view), tmm_in(br.view),  tmm_out(bp.view) };
                TMM_TRY(tmm_record_dispatch(r, prow, args, 6, &push, tmm_div_up((uint64_t)nr * nc, NN_WG_LOOP), 1,
                                            1));
            } else if (phase == 1) {
                uint32_t nseg = tmm_div_up(nr, TMM_NN_COL_SEG);
                struct {
                    uint32_t rows, d, seg, nseg, seg0, direct, accumulate, base_x, base_dy, base_m, base_r;
                } push = { .rows = nr, .d = d, .seg = TMM_NN_COL_SEG, .nseg = nseg, .seg0 = seg0, .direct = direct,
                           .accumulate = accumulate, .base_x = bx.base, .base_dy = bdy.base, .base_m = bm.base,
                           .base_r = br.base };
                tmm_access acc = direct && accumulate ? TMM_READ_WRITE : TMM_WRITE;
                tmm_arg args[6] = { tmm_in(bx.view), tmm_in(bdy.view), tmm_in(bm.view), tmm_in(br.view),
                                    { planes[0], acc }, { planes[1], acc } };
                TMM_TRY(tmm_record_dispatch(r, ppar, args, 6, &push, tmm_div_up((uint64_t)nseg * d, NN_WG_LOOP), 1,
                                            1));
                seg0 += nseg;
            } else {
                struct {
                    uint32_t n, d, base_x, base_dy, base_m, base_r, base_s, base_dx;
                } push = { .n = nr * d, .d = d, .base_x = bx.base, .base_dy = bdy.base, .base_m = bm.base,
                           .base_r = br.base, .base_s = bs.base, .base_dx = bdx.base };
                tmm_arg args[7] = { tmm_in(bx.view), tmm_in(bdy.view), tmm_in(gamma),   tmm_in(bm.view),
                                    tmm_in(br.view), tmm_in(bs.view),  tmm_out(bdx.view) };
                TMM_TRY(tmm_record_dispatch(r, pdx, args, 7, &push, tmm_div_up((uint64_t)nr * d, TMM_WG_1D), 1, 1));
            }
        }
        if (phase == 0 && nc > 1)
            TMM_TRY(tmm_op_sum_rows(r, part, 2 * rows, nc, (tmm_view){ 0 }, sums));
    }
    return TMM_OK;
}

/* The fused kernel over the rows of one binding: a workgroup per segment. */
static tmm_status record_fused(tmm_recorder *r, tmm_pipeline *pf, nn_bind bx, nn_bind bdy, tmm_view gamma, nn_bind bm,
                               nn_bind br, nn_bind bdx, const tmm_view planes[2], uint32_t nr, uint32_t d,
                               uint32_t seg0, bool direct, bool accumulate, bool add_dx)
{
    struct {
        uint32_t rows, d, seg0, direct, accumulate, add_dx, base_x, base_dy, base_m, base_r, base_dx;
    } push = { .rows = nr, .d = d, .seg0 = seg0, .direct = direct, .accumulate = accumulate, .add_dx = add_dx,
               .base_x = bx.base, .base_dy = bdy.base, .base_m = bm.base, .base_r = br.base, .base_dx = bdx.base };
    tmm_access acc = direct && accumulate ? TMM_READ_WRITE : TMM_WRITE;
    tmm_access out = add_dx ? TMM_READ_WRITE : TMM_WRITE;
    tmm_arg args[8] = { tmm_in(bx.view),   tmm_in(bdy.view), tmm_in(gamma),        tmm_in(bm.view),
                        tmm_in(br.view), { planes[0], acc }, { planes[1], acc }, { bdx.view, out } };
    return tmm_record_dispatch(r, pf, args, 8, &push, tmm_div_up(nr, TMM_NN_COL_SEG), 1, 1);
}

static tmm_status layernorm_backward(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean, tmm_view rstd,
                                     tmm_view dy, uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch,
                                     tmm_view dx, tmm_view dgamma, tmm_view dbeta, bool fuse, bool add_dx)
{
    static const char *op = "layernorm_backward";
    if (d == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: d is 0", op);
    TMM_TRY(check_width(op, d));
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_bound(dev, op, "dgamma", dgamma, d));
    TMM_TRY(tmm_op_need_bound(dev, op, "dbeta", dbeta, d));
    if (rows == 0) {
        if (!accumulate) {
            TMM_TRY(tmm_op_fill(r, dgamma, d, 0.0f));
            TMM_TRY(tmm_op_fill(r, dbeta, d, 0.0f));
        }
        return TMM_OK;
    }
    const uint64_t n = (uint64_t)rows * d;
    const uint32_t nc = n_chunks(d);
    const ln_bwd_layout lay = bwd_layout(rows, d);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "gamma", gamma, d));
    TMM_TRY(tmm_op_need_floats(op, "mean", mean, rows));
    TMM_TRY(tmm_op_need_floats(op, "rstd", rstd, rows));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    TMM_TRY(tmm_op_need_floats(op, "dx", dx, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, lay.total));

    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    TMM_TRY(nn_fit_rows(dev, op, "the row sums", 2, &per));
    if (nc > 1)
        TMM_TRY(nn_fit_rows(dev, op, "scratch", 2ull * nc, &per));
    per = nn_round_chunk(per);
    if (per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: d = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, d, (unsigned long long)per, TMM_NN_COL_SEG);
    const bool direct = lay.nseg == 1;
    tmm_view sums = tmm_op_sub(scratch, lay.sums, 2ull * rows);
    tmm_view part = nc > 1 ? tmm_op_sub(scratch, lay.part, 2ull * rows * nc) : sums;
    tmm_view region = direct ? (tmm_view){ 0 } : tmm_op_sub(scratch, lay.cols, nn_colsum_scratch(lay.nseg, d, 2));
    tmm_view planes[2] = { dgamma, dbeta };
    if (!direct) {
        planes[0] = nn_colsum_plane(region, 0, lay.nseg, d);
        planes[1] = nn_colsum_plane(region, 1, lay.nseg, d);
    }

    if (fuse && d <= TMM_NN_NORM_FUSED_MAX_D) {
        tmm_pipeline *pf;
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_layernorm_bwd_fused, 8, 44, local_seg, NULL, 0, &pf));
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            TMM_TRY(record_fused(r, pf, nn_rows(dev, x, r0, nr, d), nn_rows(dev, dy, r0, nr, d), gamma,
                                 nn_rows(dev, mean, r0, nr, 1), nn_rows(dev, rstd, r0, nr, 1),
                                 nn_rows(dev, dx, r0, nr, d), planes, nr, d, seg0, direct, accumulate, add_dx));
            seg0 += tmm_div_up(nr, TMM_NN_COL_SEG);
        }
    } else if (add_dx) { /* dx into dy, then added */
        if (n > UINT32_MAX)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %llu elements with d above %u", op, (unsigned long long)n,
                            TMM_NN_NORM_FUSED_MAX_D);
        TMM_TRY(record_phases(r, x, gamma, mean, rstd, dy, rows, d, accumulate, dy, sums, part, planes, per, direct));
        TMM_TRY(tmm_op_axpy(r, 1.0f, dy, dx, (uint32_t)n));
    } else {
        TMM_TRY(record_phases(r, x, gamma, mean, rstd, dy, rows, d, accumulate, dx, sums, part, planes, per, direct));
    }
    if (!direct)
        TMM_TRY(nn_colsum_finish(r, region, 2, lay.nseg, d, accumulate, (tmm_view[2]){ dgamma, dbeta }));
    return TMM_OK;
}

tmm_status tmm_op_layernorm_backward(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean, tmm_view rstd,
                                     tmm_view dy, uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch,
                                     tmm_view dx, tmm_view dgamma, tmm_view dbeta)
{
    return layernorm_backward(r, x, gamma, mean, rstd, dy, rows, d, accumulate, scratch, dx, dgamma, dbeta, true,
                              false);
}

tmm_status tmm_op_layernorm_backward_residual(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean,
                                              tmm_view rstd, tmm_view dy, uint32_t rows, uint32_t d, bool accumulate,
                                              tmm_view scratch, tmm_view dh, tmm_view dgamma, tmm_view dbeta)
{
    if (dy.buffer == dh.buffer && dy.offset < dh.offset + dh.size && dh.offset < dy.offset + dy.size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "layernorm_backward_residual: dh overlaps dy");
    return layernorm_backward(r, x, gamma, mean, rstd, dy, rows, d, accumulate, scratch, dh, dgamma, dbeta, true,
                              true);
}

tmm_status tmm_op_layernorm_backward_unfused(tmm_recorder *r, tmm_view x, tmm_view gamma, tmm_view mean,
                                             tmm_view rstd, tmm_view dy, uint32_t rows, uint32_t d, bool accumulate,
                                             tmm_view scratch, tmm_view dx, tmm_view dgamma, tmm_view dbeta)
{
    return layernorm_backward(r, x, gamma, mean, rstd, dy, rows, d, accumulate, scratch, dx, dgamma, dbeta, false,
                              false);
}
