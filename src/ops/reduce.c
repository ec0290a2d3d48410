/* Deterministic sums: every output element is summed by one invocation in a
 * fixed order, so results are the same on every run (and every device with
 * IEEE float adds). A whole-tensor sum is a tree of chunk sums. */
#include "op_util.h"

#define SUM_CHUNK 256u
/* scratch levels start at multiples of this many floats (covers any
 * minStorageBufferOffsetAlignment up to 256 bytes) */
#define LEVEL_ALIGN 64u

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };

static tmm_status sum_chunks(tmm_recorder *r, tmm_view x, uint32_t n, uint32_t chunk, tmm_view out)
{
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sum_chunks, 2, 12, local_1d, NULL, 0, &p));
    uint32_t count = tmm_div_up(n, chunk);
    struct { uint32_t n, chunk, count; } push = { n, chunk, count };
    tmm_view in = { x.buffer, x.offset, (uint64_t)n * sizeof(float) };
    tmm_view o = { out.buffer, out.offset, (uint64_t)count * sizeof(float) };
    tmm_arg args[2] = { tmm_in(in), tmm_out(o) };
    return tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up(count, TMM_WG_1D), 1, 1);
}

uint64_t tmm_op_sum_scratch(uint32_t n)
{
    uint64_t total = 0;
    for (uint64_t m = n; m > SUM_CHUNK;) {
        m = (m + SUM_CHUNK - 1) / SUM_CHUNK;
        total += (m + LEVEL_ALIGN - 1) / LEVEL_ALIGN * LEVEL_ALIGN;
    }
    return total ? total : 1;
}

tmm_status tmm_op_sum(tmm_recorder *r, tmm_view x, uint32_t n, tmm_view scratch, tmm_view out)
{
    TMM_TRY(tmm_op_need("sum", "x", x, n ? n : 1));
    TMM_TRY(tmm_op_need("sum", "scratch", scratch, tmm_op_sum_scratch(n)));
    TMM_TRY(tmm_op_need("sum", "out", out, 1));
    if (n == 0)
        return tmm_op_fill(r, out, 1, 0.0f);
    tmm_view cur = x;
    uint64_t used = 0;
    while (n > SUM_CHUNK) {
        uint32_t count = tmm_div_up(n, SUM_CHUNK);
        tmm_view level = { scratch.buffer, scratch.offset + used * sizeof(float), (uint64_t)count * sizeof(float) };
        TMM_TRY(sum_chunks(r, cur, n, SUM_CHUNK, level));
        used += (count + LEVEL_ALIGN - 1) / LEVEL_ALIGN * LEVEL_ALIGN;
        cur = level;
        n = count;
    }
    return sum_chunks(r, cur, n, n, out);
}

tmm_status tmm_op_sum_rows(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, tmm_view out)
{
    TMM_TRY(tmm_op_need("sum_rows", "x", x, (uint64_t)rows * cols));
    TMM_TRY(tmm_op_need("sum_rows", "out", out, rows));
    if (rows == 0)
        return TMM_OK;
    if (cols == 0)
        return tmm_op_fill(r, out, rows, 0.0f);
    if ((uint64_t)rows * cols > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "sum_rows: more than 2^32 elements");
    return sum_chunks(r, x, rows * cols, cols, out);
}

tmm_status tmm_op_sum_cols(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t cols, tmm_view out)
{
    TMM_TRY(tmm_op_need("sum_cols", "x", x, (uint64_t)rows * cols));
    TMM_TRY(tmm_op_need("sum_cols", "out", out, cols));
    if (cols == 0)
        return TMM_OK;
    if (rows == 0)
        return tmm_op_fill(r, out, cols, 0.0f);
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_sum_cols, 2, 8, local_1d, NULL, 0, &p));
    struct { uint32_t rows, cols; } push = { rows, cols };
    tmm_view in = { x.buffer, x.offset, (uint64_t)rows * cols * sizeof(float) };
    tmm_view o = { out.buffer, out.offset, (uint64_t)cols * sizeof(float) };
    tmm_arg args[2] = { tmm_in(in), tmm_out(o) };
    return tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up(cols, TMM_WG_1D), 1, 1);
}
