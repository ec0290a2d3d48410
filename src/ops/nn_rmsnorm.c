/* RMSNorm over the last axis (llama_ops.h): forward with saved rstd, backward
 * with deterministic row and column sums. Rows are processed in chunks that
 * fit one binding; each op records its phases chunk by chunk so that one
 * barrier separates phases. Kernels: shaders/rmsnorm_*.comp. */
#include "llama_ops.h"
#include "nn_util.h"

#include <math.h>

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };
static const uint32_t local_seg[3] = { TMM_NN_COL_SEG, 1, 1 };

static uint32_t n_chunks(uint32_t d) { return tmm_div_up(d, TMM_RMSNORM_CHUNK); }

static tmm_status check_width(const char *op, uint32_t d)
{
    if (d == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: d is 0", op);
    if (n_chunks(d) > TMM_MAX_LOOP)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: d = %u is above the supported %u", op, d,
                        TMM_RMSNORM_CHUNK * TMM_MAX_LOOP);
    return TMM_OK;
}

static bool same_view(tmm_view a, tmm_view b) { return a.buffer == b.buffer && a.offset == b.offset; }

/* Each of s[first..count) overlaps no other span; s[alias_out] may be exactly
 * s[alias_in] (alias_out < 0: no such exception). */
static tmm_status check_outputs(const char *op, tmm_op_span *s, size_t count, size_t first, int alias_out,
                                int alias_in)
{
    for (size_t i = first; i < count; i++) {
        uint64_t keep = 0;
        bool excuse = (int)i == alias_out && same_view(s[i].v, s[alias_in].v);
        if (excuse)
            keep = s[alias_in].n, s[alias_in].n = 0;
        tmm_status st = tmm_op_no_overlap(op, &s[i], s, count);
        if (excuse)
            s[alias_in].n = keep;
        TMM_TRY(st);
    }
    return TMM_OK;
}

uint64_t tmm_op_rmsnorm_forward_scratch(uint32_t rows, uint32_t d)
{
    uint32_t nc = n_chunks(d);
    return nc > 1 ? (uint64_t)rows * nc : 0;
}

tmm_status tmm_op_rmsnorm_forward(tmm_recorder *r, tmm_view x, tmm_view g, uint32_t rows, uint32_t d, float eps,
                                  tmm_view scratch, tmm_view y, tmm_view rstd)
{
    static const char *op = "rmsnorm_forward";
    TMM_TRY(check_width(op, d));
    if (!(eps > 0) || isinf(eps))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: eps must be positive and finite", op);
    if (rows == 0)
        return TMM_OK;
    const uint64_t n = (uint64_t)rows * d;
    const uint32_t nc = n_chunks(d);
    const uint64_t nsc = tmm_op_rmsnorm_forward_scratch(rows, d);
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "g", g, d));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    TMM_TRY(tmm_op_need_floats(op, "rstd", rstd, rows));
    if (nc > 1)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, nsc));
    tmm_op_span s[] = { { "x", x, n }, { "g", g, d }, { "y", y, n }, { "rstd", rstd, rows },
                        { "scratch", scratch, nsc } };
    TMM_TRY(check_outputs(op, s, 5, 2, 2, 0));
    g = tmm_op_sub(g, 0, d); /* bound: only the floats used */

    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    if (nc > 1)
        TMM_TRY(nn_fit_rows(dev, op, "scratch", nc, &per));

    const bool sg = tmm_op_rows_use_subgroups(dev);
    bool stats_done = false;
    if (sg)
        TMM_TRY(nn_norm_stats_sg(r, op, 1, x, rows, d, eps, rstd, rstd, &stats_done));
    if (!sg && rows <= NN_ROW_NORM_ROWS && 2ull * d <= TMM_MAX_LOOP && per == rows) {
        tmm_pipeline *pr;
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_row, 4, 24, local_loop, NULL, 0, &pr));
        nn_bind bx = nn_rows(dev, x, 0, rows, d), by = nn_rows(dev, y, 0, rows, d);
        nn_bind br = nn_rows(dev, rstd, 0, rows, 1);
        struct {
            uint32_t rows, d, base_x, base_r, base_y;
            float eps;
        } push = { .rows = rows, .d = d, .base_x = bx.base, .base_r = br.base, .base_y = by.base, .eps = eps };
        tmm_arg args[4] = { tmm_in(bx.view), tmm_in(g), tmm_out(br.view), tmm_out(by.view) };
        return tmm_record_dispatch(r, pr, args, 4, &push, tmm_div_up(rows, NN_WG_LOOP), 1, 1);
    }

    tmm_pipeline *ps, *pc = NULL, *pa;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_stats, 3, 32, local_loop, NULL, 0, &ps));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_apply, 4, 20, local_elem, NULL, 0, &pa));
    if (nc > 1)
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_combine, 2, 24, local_loop, NULL, 0, &pc));

    /* Phase 0: sums of squares (per chunk); 1: their combination into rstd
     * (several chunks only); 2: y. */
    for (int phase = stats_done ? 2 : 0; phase < 3; phase++) {
        if (phase == 1 && nc == 1)
            continue;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, d), br = nn_rows(dev, rstd, r0, nr, 1);
            nn_bind bp = nc > 1 ? nn_rows(dev, scratch, r0, nr, nc) : br; /* unused with one chunk */
            if (phase == 0) {
                struct {
                    uint32_t rows, d, chunk, nchunk, base_x, base_p, base_r;
                    float eps;
                } push = { .rows = nr, .d = d, .chunk = TMM_RMSNORM_CHUNK, .nchunk = nc, .base_x = bx.base,
                           .base_p = bp.base, .base_r = br.base, .eps = eps };
                /* with one chunk, Part and Rstd are the same binding: only Rstd is written */
                tmm_arg args[3] = { tmm_in(bx.view), tmm_out(bp.view), tmm_out(br.view) };
                TMM_TRY(tmm_record_dispatch(r, ps, args, 3, &push, tmm_div_up((uint64_t)nr * nc, NN_WG_LOOP), 1, 1));
            } else if (phase == 1) {
                struct {
                    uint32_t rows, d, nchunk, base_p, base_r;
                    float eps;
                } push = { .rows = nr, .d = d, .nchunk = nc, .base_p = bp.base, .base_r = br.base, .eps = eps };
                tmm_arg args[2] = { tmm_in(bp.view), tmm_out(br.view) };
                TMM_TRY(tmm_record_dispatch(r, pc, args, 2, &push, tmm_div_up(nr, NN_WG_LOOP), 1, 1));
            } else {
                nn_bind by = nn_rows(dev, y, r0, nr, d);
                struct {
                    uint32_t n, d, base_x, base_r, base_y;
                } push = { .n = nr * d, .d = d, .base_x = bx.base, .base_r = br.base, .base_y = by.base };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_in(g), tmm_in(br.view), tmm_out(by.view) };
                TMM_TRY(tmm_record_dispatch(r, pa, args, 4, &push, tmm_div_up((uint64_t)nr * d, TMM_WG_1D), 1, 1));
            }
        }
    }
    return TMM_OK;
}

/* Backward scratch: the row sums [rows], the chunks' partial row sums when a
 * row has several chunks, and the column-sum region when rows span several
 * segments; each region starts at an aligned offset. */
typedef struct bwd_layout {
    uint64_t sums, part, cols, total;
    uint32_t nseg;
} bwd_layout;

static bwd_layout bwd_layout_of(uint32_t rows, uint32_t d)
{
    bwd_layout l = { 0 };
    uint32_t nc = n_chunks(d);
    l.nseg = tmm_div_up(rows, TMM_NN_COL_SEG);
    l.sums = 0;
    l.part = nn_aligned(rows);
    l.cols = l.part + (nc > 1 ? nn_aligned((uint64_t)rows * nc) : 0);
    l.total = l.cols + (l.nseg > 1 ? nn_colsum_scratch(l.nseg, d, 1) : 0);
    return l;
}

uint64_t tmm_op_rmsnorm_backward_scratch(uint32_t rows, uint32_t d) { return bwd_layout_of(rows, d).total; }

/* The unfused backward over all rows, in three dispatches per binding. */
static tmm_status record_phases(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy, uint32_t rows,
                                uint32_t d, bool accumulate, tmm_view dx, tmm_view sums, tmm_view part, tmm_view plane,
                                uint64_t per, bool direct)
{
    tmm_device *dev = tmm_recorder_device(r);
    const uint32_t nc = n_chunks(d);
    tmm_pipeline *prow, *ppar, *pdx;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_bwd_rows, 5, 32, local_loop, NULL, 0, &prow));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_bwd_params, 4, 40, local_loop, NULL, 0, &ppar));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_bwd_dx, 6, 28, local_elem, NULL, 0, &pdx));

    /* Phase 0: row sums (chunks' partials); 1: column partial sums; 2: dx.
     * dx comes last so that it may overwrite dy. */
    for (int phase = 0; phase < 3; phase++) {
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, x, r0, nr, d), bdy = nn_rows(dev, dy, r0, nr, d);
            nn_bind br = nn_rows(dev, rstd, r0, nr, 1);
            if (phase == 0) {
                nn_bind bp = nn_rows(dev, part, r0, nr, nc);
                struct {
                    uint32_t rows, d, chunk, nchunk, base_x, base_dy, base_r, base_o;
                } push = { .rows = nr, .d = d, .chunk = TMM_RMSNORM_CHUNK, .nchunk = nc, .base_x = bx.base,
                           .base_dy = bdy.base, .base_r = br.base, .base_o = bp.base };
                tmm_arg args[5] = { tmm_in(bx.view), tmm_in(bdy.view), tmm_in(g), tmm_in(br.view), tmm_out(bp.view) };
                TMM_TRY(tmm_record_dispatch(r, prow, args, 5, &push, tmm_div_up((uint64_t)nr * nc, NN_WG_LOOP), 1,
                                            1));
            } else if (phase == 1) {
                uint32_t ns = tmm_div_up(nr, TMM_NN_COL_SEG);
                struct {
                    uint32_t rows, d, seg, nseg, seg0, direct, accumulate, base_x, base_dy, base_r;
                } push = { .rows = nr, .d = d, .seg = TMM_NN_COL_SEG, .nseg = ns, .seg0 = seg0, .direct = direct,
                           .accumulate = accumulate, .base_x = bx.base, .base_dy = bdy.base, .base_r = br.base };
                tmm_arg args[4] = { tmm_in(bx.view), tmm_in(bdy.view), tmm_in(br.view),
                                    { plane, direct && accumulate ? TMM_READ_WRITE : TMM_WRITE } };
                TMM_TRY(tmm_record_dispatch(r, ppar, args, 4, &push, tmm_div_up((uint64_t)ns * d, NN_WG_LOOP), 1, 1));
                seg0 += ns;
            } else {
                nn_bind bs = nn_rows(dev, sums, r0, nr, 1), bdx = nn_rows(dev, dx, r0, nr, d);
                struct {
                    uint32_t n, d, base_x, base_dy, base_r, base_s, base_dx;
                } push = { .n = nr * d, .d = d, .base_x = bx.base, .base_dy = bdy.base, .base_r = br.base,
                           .base_s = bs.base, .base_dx = bdx.base };
                tmm_arg args[6] = { tmm_in(bx.view), tmm_in(bdy.view), tmm_in(g),
                                    tmm_in(br.view), tmm_in(bs.view),  tmm_out(bdx.view) };
                TMM_TRY(tmm_record_dispatch(r, pdx, args, 6, &push, tmm_div_up((uint64_t)nr * d, TMM_WG_1D), 1, 1));
            }
        }
        if (phase == 0 && nc > 1)
            TMM_TRY(tmm_op_sum_rows(r, part, rows, nc, (tmm_view){ 0 }, sums));
    }
    return TMM_OK;
}

/* The fused kernel over the rows of one binding: a workgroup per segment. */
static tmm_status record_fused(tmm_recorder *r, tmm_pipeline *pf, nn_bind bx, nn_bind bdy, tmm_view g, nn_bind br,
                               nn_bind bdx, tmm_view plane, uint32_t nr, uint32_t d, uint32_t seg0, bool direct,
                               bool accumulate, bool add_dx)
{
    struct {
        uint32_t rows, d, seg0, direct, accumulate, add_dx, base_x, base_dy, base_r, base_dx;
    } push = { .rows = nr, .d = d, .seg0 = seg0, .direct = direct, .accumulate = accumulate, .add_dx = add_dx,
               .base_x = bx.base, .base_dy = bdy.base, .base_r = br.base, .base_dx = bdx.base };
    tmm_arg args[6] = { tmm_in(bx.view), tmm_in(bdy.view),
                        tmm_in(g),       tmm_in(br.view),
                        { plane, direct && accumulate ? TMM_READ_WRITE : TMM_WRITE },
                        { bdx.view, add_dx ? TMM_READ_WRITE : TMM_WRITE } };
    return tmm_record_dispatch(r, pf, args, 6, &push, tmm_div_up(nr, TMM_NN_COL_SEG), 1, 1);
}

static tmm_status rmsnorm_backward(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy, uint32_t rows,
                                   uint32_t d, bool accumulate, tmm_view scratch, tmm_view dx, tmm_view dg, bool fuse,
                                   bool add_dx)
{
    static const char *op = "rmsnorm_backward";
    TMM_TRY(check_width(op, d));
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_bound(dev, op, "dg", dg, d));
    dg = tmm_op_sub(dg, 0, d); /* bound: only the floats used */
    if (rows == 0)
        return accumulate ? TMM_OK : tmm_op_fill(r, dg, d, 0.0f);
    const uint64_t n = (uint64_t)rows * d;
    const uint32_t nc = n_chunks(d);
    const bwd_layout lay = bwd_layout_of(rows, d);
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "g", g, d));
    TMM_TRY(tmm_op_need_floats(op, "rstd", rstd, rows));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    TMM_TRY(tmm_op_need_floats(op, "dx", dx, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, lay.total));
    tmm_op_span s[] = { { "x", x, n },   { "g", g, d },   { "rstd", rstd, rows },       { "dy", dy, n },
                        { "dx", dx, n }, { "dg", dg, d }, { "scratch", scratch, lay.total } };
    TMM_TRY(check_outputs(op, s, 7, 4, 4, 3));
    g = tmm_op_sub(g, 0, d);

    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    if (nc > 1)
        TMM_TRY(nn_fit_rows(dev, op, "scratch", nc, &per));
    per = nn_round_chunk(per);
    if (per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: d = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, d, (unsigned long long)per, TMM_NN_COL_SEG);
    const bool direct = lay.nseg == 1;
    tmm_view sums = tmm_op_sub(scratch, lay.sums, rows);
    tmm_view part = nc > 1 ? tmm_op_sub(scratch, lay.part, (uint64_t)rows * nc) : sums;
    tmm_view region = direct ? (tmm_view){ 0 } : tmm_op_sub(scratch, lay.cols, nn_colsum_scratch(lay.nseg, d, 1));
    tmm_view plane = direct ? dg : nn_colsum_plane(region, 0, lay.nseg, d);

    if (fuse && d <= TMM_NN_NORM_FUSED_MAX_D) {
        tmm_pipeline *pf;
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_bwd_fused, 6, 40, local_seg, NULL, 0, &pf));
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            TMM_TRY(record_fused(r, pf, nn_rows(dev, x, r0, nr, d), nn_rows(dev, dy, r0, nr, d), g,
                                 nn_rows(dev, rstd, r0, nr, 1), nn_rows(dev, dx, r0, nr, d), plane, nr, d, seg0,
                                 direct, accumulate, add_dx));
            seg0 += tmm_div_up(nr, TMM_NN_COL_SEG);
        }
    } else if (add_dx) { /* dx into dy, then added */
        if (n > UINT32_MAX)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %llu elements with d above %u", op, (unsigned long long)n,
                            TMM_NN_NORM_FUSED_MAX_D);
        TMM_TRY(record_phases(r, x, g, rstd, dy, rows, d, accumulate, dy, sums, part, plane, per, direct));
        TMM_TRY(tmm_op_axpy(r, 1.0f, dy, dx, (uint32_t)n));
    } else {
        TMM_TRY(record_phases(r, x, g, rstd, dy, rows, d, accumulate, dx, sums, part, plane, per, direct));
    }
    if (!direct)
        TMM_TRY(nn_colsum_finish(r, region, 1, lay.nseg, d, accumulate, &dg));
    return TMM_OK;
}

tmm_status tmm_op_rmsnorm_backward(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy, uint32_t rows,
                                   uint32_t d, bool accumulate, tmm_view scratch, tmm_view dx, tmm_view dg)
{
    return rmsnorm_backward(r, x, g, rstd, dy, rows, d, accumulate, scratch, dx, dg, true, false);
}

tmm_status tmm_op_rmsnorm_backward_residual(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy,
                                            uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch, tmm_view dh,
                                            tmm_view dg)
{
    if (dy.buffer == dh.buffer && dy.offset < dh.offset + dh.size && dh.offset < dy.offset + dy.size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "rmsnorm_backward_residual: dh overlaps dy");
    return rmsnorm_backward(r, x, g, rstd, dy, rows, d, accumulate, scratch, dh, dg, true, true);
}

tmm_status tmm_op_rmsnorm_backward_unfused(tmm_recorder *r, tmm_view x, tmm_view g, tmm_view rstd, tmm_view dy,
                                           uint32_t rows, uint32_t d, bool accumulate, tmm_view scratch, tmm_view dx,
                                           tmm_view dg)
{
    return rmsnorm_backward(r, x, g, rstd, dy, rows, d, accumulate, scratch, dx, dg, false, false);
}
