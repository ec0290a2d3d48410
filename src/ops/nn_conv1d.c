/* Causal depthwise conv1d with bias and optional SiLU (ssm_ops.h): forward,
 * backward (dx; dw and dbias as partial sums over segments of
 * TMM_CONV1D_COL_SEG rows combined by tmm_op_sum_cols), and the decoding
 * step and window fill. Rows go in chunks that fit one binding, each bound
 * with the K-1 neighbouring rows (halo) its taps read. Kernels:
 * shaders/conv1d_fwd.comp, conv1d_bwd_act.comp (with SiLU: g = dy silu'(pre) once
 * per element, into the scratch), conv1d_bwd_dx.comp, conv1d_bwd_params.comp,
 * conv1d_step.comp, conv1d_fill.comp. */
#include "nn_util.h"
#include "ssm_ops.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

static tmm_status check_k(const char *op, uint32_t K)
{
    if (K < 1 || K > TMM_CONV1D_MAX_K)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: kernel size K = %u is outside 1..%u", op, K,
                        TMM_CONV1D_MAX_K);
    return TMM_OK;
}

/* rows = batch * n, refused above UINT32_MAX. */
/* x of total floats, the weights w [C, K] and the bias [C]. */
static tmm_status check_inputs(tmm_device *dev, const char *op, tmm_view x, uint64_t total, tmm_view w,
                               tmm_view bias, uint32_t C, uint32_t K)
{
    TMM_TRY(tmm_op_need_floats(op, "x", x, total));
    TMM_TRY(tmm_op_need_bound(dev, op, "w", w, (uint64_t)C * K));
    return tmm_op_need_bound(dev, op, "bias", bias, C);
}

static tmm_status rows_of(const char *op, uint32_t batch, uint32_t n, uint32_t *rows)
{
    uint64_t rr = (uint64_t)batch * n;
    if (rr > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: batch * n = %llu rows, above %u", op, (unsigned long long)rr,
                        UINT32_MAX);
    *rows = (uint32_t)rr;
    return TMM_OK;
}

/* Rows per chunk when each chunk also binds `halo` extra rows of length C. */
static tmm_status chunk_rows(const tmm_device *dev, const char *op, uint32_t C, uint32_t halo, uint32_t rows,
                             uint64_t *per)
{
    uint64_t fit = UINT64_MAX;
    TMM_TRY(nn_fit_rows(dev, op, "x", C, &fit));
    if (fit <= halo)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: C = %u leaves %llu rows per binding, not more than the %u "
                        "neighbouring rows the taps read", op, C, (unsigned long long)fit, halo);
    *per = fit - halo < rows ? fit - halo : rows;
    return TMM_OK;
}

tmm_status tmm_op_conv1d_forward(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, uint32_t batch, uint32_t n,
                                 uint32_t C, uint32_t K, bool silu, tmm_view y)
{
    static const char *op = "conv1d_forward";
    uint32_t rows = 0;
    TMM_TRY(check_k(op, K));
    TMM_TRY(rows_of(op, batch, n, &rows));
    const uint64_t total = (uint64_t)rows * C;
    if (total == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(check_inputs(dev, op, x, total, w, bias, C, K));
    TMM_TRY(tmm_op_need_floats(op, "y", y, total));
    tmm_op_span all[] = { { "x", x, total }, { "w", w, (uint64_t)C * K }, { "bias", bias, C }, { "y", y, total } };
    TMM_TRY(tmm_op_no_overlap(op, &all[3], all, 4));
    uint64_t per = 0;
    TMM_TRY(chunk_rows(dev, op, C, K - 1, rows, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_conv1d_fwd, 4, 36, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        uint64_t xr0 = r0 >= K - 1 ? r0 - (K - 1) : 0;
        nn_bind bx = nn_rows(dev, x, xr0, r0 + nr - xr0, C), by = nn_rows(dev, y, r0, nr, C);
        struct {
            uint32_t rows, C, n, K, act, row0, x_row0, base_x, base_y;
        } push = { .rows = nr, .C = C, .n = n, .K = K, .act = silu, .row0 = (uint32_t)r0, .x_row0 = (uint32_t)xr0,
                   .base_x = bx.base, .base_y = by.base };
        tmm_arg args[4] = { tmm_in(bx.view), tmm_in(w), tmm_in(bias), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 4, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

static uint64_t n_segments(uint64_t rows) { return (rows + TMM_CONV1D_COL_SEG - 1) / TMM_CONV1D_COL_SEG; }

/* Scratch: with silu, g = dy silu'(pre) [rows, C]; then, with more than one
 * segment, the dw partial sums' region and dbias's. */
static uint64_t region_g(uint64_t rows, uint32_t C, bool silu) { return silu ? nn_aligned(rows * C) : 0; }
static uint64_t region_w(uint64_t nseg, uint32_t C, uint32_t K) { return nn_colsum_scratch(nseg, C * K, 1); }

uint64_t tmm_op_conv1d_backward_scratch(uint32_t batch, uint32_t n, uint32_t C, uint32_t K, bool silu)
{
    const uint64_t rows = (uint64_t)batch * n, nseg = n_segments(rows);
    if (K < 1 || K > TMM_CONV1D_MAX_K)
        return 0;
    const uint64_t sums = nseg <= 1 ? 0 : nn_aligned(region_w(nseg, C, K)) + nn_colsum_scratch(nseg, C, 1);
    return region_g(rows, C, silu) + sums;
}

/* g = dy silu'(pre) for every row, chunked like the forward. */
static tmm_status record_act(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, tmm_view dy, uint32_t rows,
                             uint32_t n, uint32_t C, uint32_t K, tmm_view g)
{
    tmm_device *dev = tmm_recorder_device(r);
    uint64_t per = 0;
    TMM_TRY(chunk_rows(dev, "conv1d_backward", C, K - 1, rows, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_conv1d_bwd_act, 5, 36, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        uint64_t xr0 = r0 >= K - 1 ? r0 - (K - 1) : 0;
        nn_bind bx = nn_rows(dev, x, xr0, r0 + nr - xr0, C), bdy = nn_rows(dev, dy, r0, nr, C);
        nn_bind bg = nn_rows(dev, g, r0, nr, C);
        struct {
            uint32_t rows, C, n, K, row0, x_row0, base_x, base_dy, base_g;
        } push = { .rows = nr, .C = C, .n = n, .K = K, .row0 = (uint32_t)r0, .x_row0 = (uint32_t)xr0,
                   .base_x = bx.base, .base_dy = bdy.base, .base_g = bg.base };
        tmm_arg args[5] = { tmm_in(bx.view), tmm_in(w), tmm_in(bias), tmm_in(bdy.view), tmm_out(bg.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 5, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_conv1d_backward(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, tmm_view dy, uint32_t batch,
                                  uint32_t n, uint32_t C, uint32_t K, bool silu, bool accumulate, tmm_view scratch,
                                  tmm_view dx, tmm_view dw, tmm_view dbias)
{
    static const char *op = "conv1d_backward";
    uint32_t rows = 0;
    TMM_TRY(check_k(op, K));
    TMM_TRY(rows_of(op, batch, n, &rows));
    if (C == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    const uint64_t nw = (uint64_t)C * K;
    TMM_TRY(tmm_op_need_bound(dev, op, "dw", dw, nw));
    TMM_TRY(tmm_op_need_bound(dev, op, "dbias", dbias, C));
    if (rows == 0) {
        if (!accumulate) {
            TMM_TRY(tmm_op_fill(r, dw, (uint32_t)nw, 0.0f));
            TMM_TRY(tmm_op_fill(r, dbias, C, 0.0f));
        }
        return TMM_OK;
    }
    const uint64_t total = (uint64_t)rows * C;
    const uint32_t nseg = (uint32_t)n_segments(rows);
    const bool direct = nseg == 1;
    TMM_TRY(tmm_op_need_floats(op, "x", x, total));
    TMM_TRY(tmm_op_need_bound(dev, op, "w", w, nw));
    TMM_TRY(tmm_op_need_bound(dev, op, "bias", bias, C));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, total));
    TMM_TRY(tmm_op_need_floats(op, "dx", dx, total));
    const uint64_t size_s = tmm_op_conv1d_backward_scratch(batch, n, C, K, silu);
    if (size_s)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, size_s));
    tmm_op_span all[] = { { "x", x, total },   { "w", w, nw },         { "bias", bias, C },
                          { "dy", dy, total }, { "dx", dx, total },    { "dw", dw, nw },
                          { "dbias", dbias, C }, { "scratch", scratch, size_s } };
    for (int i = 4; i < (size_s ? 8 : 7); i++)
        TMM_TRY(tmm_op_no_overlap(op, &all[i], all, size_s ? 8 : 7));
    uint64_t per = 0;
    TMM_TRY(chunk_rows(dev, op, C, K - 1, rows, &per));
    if (per < rows)
        per = nn_round_chunk(per);
    if (per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: C = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, C, (unsigned long long)per, TMM_NN_COL_SEG);
    const uint64_t at_w = region_g(rows, C, silu), size_w = region_w(nseg, C, K);
    tmm_view g = dy;
    if (silu) {
        g = tmm_op_sub(scratch, 0, total);
        TMM_TRY(record_act(r, x, w, bias, dy, rows, n, C, K, g));
    }
    tmm_view rw = direct ? (tmm_view){ 0 } : tmm_op_sub(scratch, at_w, size_w);
    tmm_view rb = direct ? (tmm_view){ 0 }
                         : tmm_op_sub(scratch, at_w + nn_aligned(size_w), nn_colsum_scratch(nseg, C, 1));
    tmm_view pw = direct ? dw : nn_colsum_plane(rw, 0, nseg, (uint32_t)nw);
    tmm_view pb = direct ? dbias : nn_colsum_plane(rb, 0, nseg, C);
    const tmm_access acc_param = direct && accumulate ? TMM_READ_WRITE : TMM_WRITE;

    tmm_pipeline *pp, *pd;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_conv1d_bwd_params, 4, 52, local_loop, NULL, 0, &pp));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_conv1d_bwd_dx, 3, 28, local_elem, NULL, 0, &pd));
    uint32_t seg0 = 0;
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        uint64_t xr0 = r0 >= K - 1 ? r0 - (K - 1) : 0;
        uint32_t ns = (uint32_t)n_segments(nr);
        /* parameter sums: x from K-1 rows back, g of the chunk */
        nn_bind bx = nn_rows(dev, x, xr0, r0 + nr - xr0, C), bg = nn_rows(dev, g, r0, nr, C);
        struct {
            uint32_t rows, C, n, K, row0, x_row0, base_x, base_g, seg, nseg, seg0, direct, accumulate;
        } pp_push = { .rows = nr, .C = C, .n = n, .K = K, .row0 = (uint32_t)r0, .x_row0 = (uint32_t)xr0,
                      .base_x = bx.base, .base_g = bg.base, .seg = TMM_CONV1D_COL_SEG, .nseg = ns, .seg0 = seg0,
                      .direct = direct, .accumulate = accumulate };
        tmm_arg pargs[4] = { tmm_in(bx.view), tmm_in(bg.view), { pw, acc_param }, { pb, acc_param } };
        TMM_TRY(tmm_record_dispatch(r, pp, pargs, 4, &pp_push, tmm_div_up((uint64_t)ns * C, NN_WG_LOOP), 1, 1));
        seg0 += ns;
        /* dx: g also K-1 rows ahead */
        uint64_t end = r0 + nr + (K - 1) < rows ? r0 + nr + (K - 1) : rows;
        nn_bind bg2 = nn_rows(dev, g, r0, end - r0, C), bdx = nn_rows(dev, dx, r0, nr, C);
        struct {
            uint32_t rows, C, n, K, row0, base_g, base_dx;
        } pd_push = { .rows = nr, .C = C, .n = n, .K = K, .row0 = (uint32_t)r0, .base_g = bg2.base,
                      .base_dx = bdx.base };
        tmm_arg dargs[3] = { tmm_in(w), tmm_in(bg2.view), tmm_out(bdx.view) };
        TMM_TRY(tmm_record_dispatch(r, pd, dargs, 3, &pd_push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    if (!direct) {
        TMM_TRY(nn_colsum_finish(r, rw, 1, nseg, (uint32_t)nw, accumulate, &dw));
        TMM_TRY(nn_colsum_finish(r, rb, 1, nseg, C, accumulate, &dbias));
    }
    return TMM_OK;
}

tmm_status tmm_op_conv1d_step(tmm_recorder *r, tmm_view x, tmm_view w, tmm_view bias, tmm_view pos, uint32_t batch,
                              uint32_t C, uint32_t K, bool silu, tmm_view window, tmm_view y)
{
    static const char *op = "conv1d_step";
    TMM_TRY(check_k(op, K));
    const uint64_t total = (uint64_t)batch * C, nwin = total * (K - 1);
    if (total == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(check_inputs(dev, op, x, total, w, bias, C, K));
    TMM_TRY(tmm_op_need_floats(op, "pos", pos, batch));
    if (nwin)
        TMM_TRY(tmm_op_need_floats(op, "window", window, nwin));
    TMM_TRY(tmm_op_need_floats(op, "y", y, total));
    tmm_op_span all[] = { { "x", x, total },         { "w", w, (uint64_t)C * K }, { "bias", bias, C },
                          { "pos", pos, batch },     { "window", window, nwin },  { "y", y, total } };
    TMM_TRY(tmm_op_no_overlap(op, &all[4], all, 6));
    TMM_TRY(tmm_op_no_overlap(op, &all[5], &all[1], 4));
    TMM_TRY(tmm_ssm_check_alias(op, all, 1, &all[5], 1));
    uint64_t per = batch;
    TMM_TRY(nn_fit_rows(dev, op, "x", C, &per));
    if (nwin)
        TMM_TRY(nn_fit_rows(dev, op, "window", (uint64_t)(K - 1) * C, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_conv1d_step, 6, 32, local_elem, NULL, 0, &p));
    for (uint64_t b0 = 0; b0 < batch; b0 += per) {
        uint32_t nb = (uint32_t)(batch - b0 < per ? batch - b0 : per);
        nn_bind bx = nn_rows(dev, x, b0, nb, C), bp = nn_rows(dev, pos, b0, nb, 1), by = nn_rows(dev, y, b0, nb, C);
        /* K = 1: no window; x stands in for it, never written */
        nn_bind bw = nwin ? nn_rows(dev, window, b0, nb, (uint64_t)(K - 1) * C) : bx;
        struct {
            uint32_t batch, C, K, act, base_x, base_pos, base_win, base_y;
        } push = { .batch = nb, .C = C, .K = K, .act = silu, .base_x = bx.base, .base_pos = bp.base,
                   .base_win = bw.base, .base_y = by.base };
        tmm_arg args[6] = { tmm_in(bx.view), tmm_in(w), tmm_in(bias), tmm_in(bp.view),
                            nwin ? tmm_inout(bw.view) : tmm_in(bw.view), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 6, &push, tmm_div_up((uint64_t)nb * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_conv1d_fill(tmm_recorder *r, tmm_view x, tmm_view len, uint32_t batch, uint32_t n, uint32_t C,
                              uint32_t K, tmm_view window)
{
    static const char *op = "conv1d_fill";
    TMM_TRY(check_k(op, K));
    const uint64_t wrow = (uint64_t)(K - 1) * C, nwin = batch * wrow;
    if (nwin == 0)
        return TMM_OK;
    TMM_TRY(tmm_op_need_floats(op, "window", window, nwin));
    if (n == 0) /* an empty prompt: nothing before position 0 */
        return tmm_record_fill_u32(r, tmm_op_sub(window, 0, nwin), 0);
    tmm_device *dev = tmm_recorder_device(r);
    const uint64_t seq = (uint64_t)n * C;
    TMM_TRY(tmm_op_need_floats(op, "x", x, batch * seq));
    TMM_TRY(tmm_op_need_floats(op, "len", len, batch));
    tmm_op_span all[] = { { "x", x, batch * seq }, { "len", len, batch }, { "window", window, nwin } };
    TMM_TRY(tmm_op_no_overlap(op, &all[2], all, 3));
    uint64_t per = batch;
    TMM_TRY(nn_fit_rows(dev, op, "x (one sequence)", seq, &per));
    TMM_TRY(nn_fit_rows(dev, op, "window", wrow, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_conv1d_fill, 3, 28, local_elem, NULL, 0, &p));
    for (uint64_t b0 = 0; b0 < batch; b0 += per) {
        uint32_t nb = (uint32_t)(batch - b0 < per ? batch - b0 : per);
        nn_bind bx = nn_rows(dev, x, b0, nb, seq), bl = nn_rows(dev, len, b0, nb, 1);
        nn_bind bw = nn_rows(dev, window, b0, nb, wrow);
        struct {
            uint32_t batch, n, C, K, base_x, base_len, base_win;
        } push = { .batch = nb, .n = n, .C = C, .K = K, .base_x = bx.base, .base_len = bl.base, .base_win = bw.base };
        tmm_arg args[3] = { tmm_in(bx.view), tmm_in(bl.view), tmm_out(bw.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up((uint64_t)nb * wrow, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}
