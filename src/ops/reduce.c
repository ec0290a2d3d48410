/* Deterministic sums. Every partial sum is taken by one invocation in a fixed
 * order, so results are identical from run to run. One invocation never sums
 * more than SEG terms (lavapipe caps loop iterations per invocation, see
 * shaders/loop_limit.glsl); longer sums go through levels of partial sums in
 * the scratch buffer, each level starting at an aligned offset. */
#include "op_util.h"

#define SEG TMM_MAX_LOOP  /* terms per invocation */
#define TREE_SEG 256u    /* fan-in of the whole-tensor sum tree */
#define LEVEL_ALIGN 64u  /* floats: covers minStorageBufferOffsetAlignment up to 256 bytes */

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };

static uint64_t aligned(uint64_t n) { return (n + LEVEL_ALIGN - 1) / LEVEL_ALIGN * LEVEL_ALIGN; }

static tmm_view level_view(tmm_view scratch, uint64_t at, uint64_t n)
{
    tmm_view v = { scratch.buffer, scratch.offset + at * sizeof(float), n * sizeof(float) };
    return v;
}

/* out[r*nseg + s] = sum of segment s of row r */
static tmm_status sum_segments(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, uint32_t seg,
                               tmm_view out)
{
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sum_segments, 2, 16, local_1d, NULL, 0, &p));
    uint32_t nseg = tmm_div_up(cols, seg);
    struct { uint32_t rows, cols, seg, nseg; } push = { rows, cols, seg, nseg };
    tmm_view in = { x.buffer, x.offset, (uint64_t)rows * cols * sizeof(float) };
    tmm_view o = { out.buffer, out.offset, (uint64_t)rows * nseg * sizeof(float) };
    tmm_arg args[2] = { tmm_in(in), tmm_out(o) };
    return tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up((uint64_t)rows * nseg, TMM_WG_1D), 1, 1);
}

/* Reduces each row to one value, SEG (or TREE_SEG) terms per invocation per level. */
static tmm_status rows_in_levels(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, uint32_t seg,
                                 tmm_view scratch, tmm_view out)
{
    uint64_t used = 0;
    while (cols > seg) {
        uint32_t nseg = tmm_div_up(cols, seg);
        tmm_view level = level_view(scratch, used, (uint64_t)rows * nseg);
        TMM_TRY(sum_segments(r, x, rows, cols, seg, level));
        used += aligned((uint64_t)rows * nseg);
        x = level;
        cols = nseg;
    }
    return sum_segments(r, x, rows, cols, cols, out);
}

static uint64_t rows_scratch(uint64_t rows, uint64_t cols, uint32_t seg)
{
    uint64_t total = 0;
    while (cols > seg) {
        cols = (cols + seg - 1) / seg;
        total += aligned(rows * cols);
    }
    return total;
}

uint64_t tmm_op_sum_scratch(uint32_t n) { return rows_scratch(1, n, TREE_SEG); }
uint64_t tmm_op_sum_rows_scratch(uint32_t rows, uint32_t cols) { return rows_scratch(rows, cols, SEG); }
uint64_t tmm_op_sum_cols_scratch(uint32_t rows, uint32_t cols) { return rows_scratch(cols, rows, SEG); }

/* A scratch view may be empty when no scratch is needed. */
static tmm_status need_scratch(const char *op, tmm_view scratch, uint64_t n)
{
    return n ? tmm_op_need(op, "scratch", scratch, n) : TMM_OK;
}

tmm_status tmm_op_sum(tmm_recorder *r, tmm_view x, uint32_t n, tmm_view scratch, tmm_view out)
{
    TMM_TRY(tmm_op_need("sum", "x", x, n));
    TMM_TRY(need_scratch("sum", scratch, tmm_op_sum_scratch(n)));
    TMM_TRY(tmm_op_need("sum", "out", out, 1));
    if (n == 0)
        return tmm_op_fill(r, out, 1, 0.0f);
    return rows_in_levels(r, x, 1, n, TREE_SEG, scratch, out);
}

tmm_status tmm_op_sum_rows(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, tmm_view scratch,
                           tmm_view out)
{
    TMM_TRY(tmm_op_need("sum_rows", "x", x, (uint64_t)rows * cols));
    TMM_TRY(need_scratch("sum_rows", scratch, tmm_op_sum_rows_scratch(rows, cols)));
    TMM_TRY(tmm_op_need("sum_rows", "out", out, rows));
    if (rows == 0)
        return TMM_OK;
    if (cols == 0)
        return tmm_op_fill(r, out, rows, 0.0f);
    return rows_in_levels(r, x, rows, cols, SEG, scratch, out);
}

/* out[s*cols + c] = sum of rows [s*seg, (s+1)*seg) of column c */
static tmm_status sum_col_segments(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, uint32_t seg,
                                   tmm_view out)
{
    tmm_pipeline *p;
    static const uint32_t local[3] = { 64, 4, 1 };
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sum_cols, 2, 16, local, NULL, 0, &p));
    uint32_t nseg = tmm_div_up(rows, seg);
    struct { uint32_t rows, cols, seg, nseg; } push = { rows, cols, seg, nseg };
    tmm_view in = { x.buffer, x.offset, (uint64_t)rows * cols * sizeof(float) };
    tmm_view o = { out.buffer, out.offset, (uint64_t)nseg * cols * sizeof(float) };
    tmm_arg args[2] = { tmm_in(in), tmm_out(o) };
    return tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up(cols, local[0]), tmm_div_up(nseg, local[1]), 1);
}

tmm_status tmm_op_sum_cols(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, tmm_view scratch,
                           tmm_view out)
{
    TMM_TRY(tmm_op_need("sum_cols", "x", x, (uint64_t)rows * cols));
    TMM_TRY(need_scratch("sum_cols", scratch, tmm_op_sum_cols_scratch(rows, cols)));
    TMM_TRY(tmm_op_need("sum_cols", "out", out, cols));
    if (cols == 0)
        return TMM_OK;
    if (rows == 0)
        return tmm_op_fill(r, out, cols, 0.0f);
    uint64_t used = 0;
    while (rows > SEG) {
        uint32_t nseg = tmm_div_up(rows, SEG);
        tmm_view level = level_view(scratch, used, (uint64_t)nseg * cols);
        TMM_TRY(sum_col_segments(r, x, rows, cols, SEG, level));
        used += aligned((uint64_t)nseg * cols);
        x = level;
        rows = nseg;
    }
    return sum_col_segments(r, x, rows, cols, rows, out);
}
