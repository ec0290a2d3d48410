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

typedef struct reduce_push {
    uint32_t rows, cols, seg, nseg, base_x, base_o;
    uint32_t ld; /* sum_cols: elements between rows of x and of out */
} reduce_push;

/* One dispatch of a reduce kernel over rows [0, rows) of x and nseg outputs
 * per row (or per column group) at out, with (rows, cols, seg, nseg) as the
 * kernel sees them. */
static tmm_status reduce_dispatch(tmm_recorder *r, const tmm_spirv *spv, const uint32_t local[3], tmm_view x,
                                  uint64_t x_first, uint64_t x_count, tmm_view out, uint64_t o_first,
                                  uint64_t o_count, reduce_push push, uint32_t gx, uint32_t gy)
{
    tmm_device *dev = tmm_recorder_device(r);
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, spv, 2, sizeof push, local, NULL, 0, &p));
    tmm_view in = tmm_op_bind(dev, x, x_first, x_count, &push.base_x);
    tmm_view o = tmm_op_bind(dev, out, o_first, o_count, &push.base_o);
    tmm_arg args[2] = { tmm_in(in), tmm_out(o) };
    return tmm_record_dispatch(r, p, args, 2, &push, gx, gy, 1);
}

/* out[r*nseg + s] = sum of segment s of row r, in dispatches whose bindings
 * fit: groups of whole rows, or of a long row's segments. */
static tmm_status sum_segments(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, uint32_t seg,
                               tmm_view out)
{
    const uint64_t f = tmm_op_binding_floats(tmm_recorder_device(r));
    const uint32_t nseg = tmm_div_up(cols, seg);
    if (seg > f)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "sum: a segment of %u floats does not fit the device's "
                        "maxStorageBufferRange", seg);
    if (cols <= f) {
        const uint64_t per = f / cols; /* rows per binding */
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t rc = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            reduce_push push = { .rows = rc, .cols = cols, .seg = seg, .nseg = nseg };
            TMM_TRY(reduce_dispatch(r, &tmm_spv_sum_segments, local_1d, x, r0 * cols, (uint64_t)rc * cols, out,
                                    r0 * nseg, (uint64_t)rc * nseg, push,
                                    tmm_div_up((uint64_t)rc * nseg, TMM_WG_1D), 1));
        }
        return TMM_OK;
    }
    const uint64_t per = f / seg; /* segments per binding */
    for (uint64_t row = 0; row < rows; row++)
        for (uint64_t s0 = 0; s0 < nseg; s0 += per) {
            uint32_t ns = (uint32_t)(nseg - s0 < per ? nseg - s0 : per);
            uint64_t c0 = s0 * seg, cc = cols - c0 < (uint64_t)ns * seg ? cols - c0 : (uint64_t)ns * seg;
            reduce_push push = { .rows = 1, .cols = (uint32_t)cc, .seg = seg, .nseg = ns };
            TMM_TRY(reduce_dispatch(r, &tmm_spv_sum_segments, local_1d, x, row * cols + c0, cc, out,
                                    row * nseg + s0, ns, push, tmm_div_up(ns, TMM_WG_1D), 1));
        }
    return TMM_OK;
}

/* Reduces each row to one value, SEG (or TREE_SEG) terms per invocation per level. */
static tmm_status rows_in_levels(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, uint32_t seg,
                                 tmm_view scratch, tmm_view out)
{
    uint64_t used = 0;
    while (cols > seg) {
        uint32_t nseg = tmm_div_up(cols, seg);
        tmm_view level = tmm_op_sub(scratch, used, (uint64_t)rows * nseg);
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

/* out[s*cols + c] = sum of rows [s*seg, (s+1)*seg) of column c, in
 * dispatches whose bindings fit: groups of whole segments, or (when seg rows
 * are longer than a binding) one segment at a time in blocks of columns, rows
 * still cols apart. The sums are the same either way. */
static tmm_status sum_col_segments(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, uint32_t seg,
                                   tmm_view out)
{
    static const uint32_t local[3] = { 64, 4, 1 };
    const uint64_t f = tmm_op_binding_floats(tmm_recorder_device(r));
    const uint32_t nseg = tmm_div_up(rows, seg);
    const uint64_t per = f / ((uint64_t)seg * cols); /* whole segments per binding */
    const uint64_t width = per ? cols : f > (uint64_t)(seg - 1) * cols ? f - (uint64_t)(seg - 1) * cols : 0;
    if (width == 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "sum_cols: %u rows of %u floats do not fit the device's "
                        "maxStorageBufferRange even one column at a time", seg, cols);
    const uint64_t step = per ? per : 1;
    for (uint64_t s0 = 0; s0 < nseg; s0 += step)
        for (uint64_t c0 = 0; c0 < cols; c0 += width) {
            uint32_t ns = (uint32_t)(nseg - s0 < step ? nseg - s0 : step);
            uint64_t r0 = s0 * seg, rc = rows - r0 < (uint64_t)ns * seg ? rows - r0 : (uint64_t)ns * seg;
            uint32_t cc = (uint32_t)(cols - c0 < width ? cols - c0 : width);
            reduce_push push = { .rows = (uint32_t)rc, .cols = cc, .seg = seg, .nseg = ns, .ld = cols };
            TMM_TRY(reduce_dispatch(r, &tmm_spv_sum_cols, local, x, r0 * cols + c0, (rc - 1) * cols + cc, out,
                                    s0 * cols + c0, (uint64_t)(ns - 1) * cols + cc, push, tmm_div_up(cc, local[0]),
                                    tmm_div_up(ns, local[1])));
        }
    return TMM_OK;
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
        tmm_view level = tmm_op_sub(scratch, used, (uint64_t)nseg * cols);
        TMM_TRY(sum_col_segments(r, x, rows, cols, SEG, level));
        used += aligned((uint64_t)nseg * cols);
        x = level;
        rows = nseg;
    }
    return sum_col_segments(r, x, rows, cols, rows, out);
}
