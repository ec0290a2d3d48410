/* RoPE (llama_ops.h): the host-computed cos/sin table and the rotation, one
 * invocation per channel pair, rows in chunks that fit one binding. Kernel:
 * shaders/rope.comp. */
#include "llama_ops.h"
#include "nn_util.h"

#include <math.h>

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };

uint64_t tmm_rope_table_floats(uint32_t n, uint32_t dh) { return (uint64_t)n * dh; }

tmm_status tmm_rope_table(uint32_t n, uint32_t dh, double base, float *out)
{
    if (dh == 0 || dh % 2)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "rope_table: the head width %u is not a positive even number", dh);
    if (!(base > 0) || isinf(base))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "rope_table: the base %g is not finite and positive", base);
    const uint32_t half = dh / 2;
    for (uint32_t i = 0; i < half; i++) {
        double freq = pow(base, -2.0 * (double)i / (double)dh);
        for (uint32_t t = 0; t < n; t++) {
            double theta = (double)t * freq;
            uint64_t at = 2 * ((uint64_t)t * half + i);
            out[at] = (float)cos(theta);
            out[at + 1] = (float)sin(theta);
        }
    }
    return TMM_OK;
}

tmm_status tmm_op_rope(tmm_recorder *r, tmm_rope_mode mode, tmm_view x, tmm_view table, tmm_view pos, uint32_t rows,
                       uint32_t d, uint32_t heads, uint32_t n, bool inverse, tmm_view y)
{
    static const char *op = "rope";
    if (mode != TMM_ROPE_SEQUENCE && mode != TMM_ROPE_POSITIONS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown position mode %d", op, (int)mode);
    if (heads == 0 || d == 0 || d % heads)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u heads do not divide d = %u channels", op, heads, d);
    const uint32_t dh = d / heads;
    if (dh % 2)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the head width d / heads = %u is odd", op, dh);
    if (n == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the table has no positions (n = 0)", op);
    if (rows == 0)
        return TMM_OK;
    const uint64_t nx = (uint64_t)rows * d, nt = tmm_rope_table_floats(n, dh);
    const bool positions = mode == TMM_ROPE_POSITIONS;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "x", x, nx));
    TMM_TRY(tmm_op_need_bound(dev, op, "table", table, nt));
    if (nt * sizeof(float) > dev->info.max_storage_buffer_range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the table of %u positions x %u floats (%llu bytes) does not fit "
                        "the device's maxStorageBufferRange (%llu bytes)", op, n, dh,
                        (unsigned long long)(nt * sizeof(float)),
                        (unsigned long long)dev->info.max_storage_buffer_range);
    if (positions)
        TMM_TRY(tmm_op_need_floats(op, "pos", pos, rows));
    TMM_TRY(tmm_op_need_floats(op, "y", y, nx));
    /* y may be exactly x, and overlaps nothing else */
    bool in_place = y.buffer == x.buffer && y.offset == x.offset;
    tmm_op_span s[] = { { "x", x, in_place ? 0 : nx }, { "table", table, nt }, { "pos", pos, positions ? rows : 0 },
                        { "y", y, nx } };
    TMM_TRY(tmm_op_no_overlap(op, &s[3], s, 4));

    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rope, 4, 40, local_elem, NULL, 0, &p));
    tmm_view bt = tmm_op_sub(table, 0, nt);
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bx = nn_rows(dev, x, r0, nr, d), by = nn_rows(dev, y, r0, nr, d);
        /* without positions the kernel reads no pos: x's binding (at least nr words) stands in */
        nn_bind bp = positions ? nn_rows(dev, pos, r0, nr, 1) : bx;
        struct {
            uint32_t rows, d, half_dh, npos, row0, mode, inverse, base_x, base_p, base_y;
        } push = { .rows = nr, .d = d, .half_dh = dh / 2, .npos = n, .row0 = (uint32_t)r0, .mode = positions,
                   .inverse = inverse, .base_x = bx.base, .base_p = bp.base, .base_y = by.base };
        tmm_arg args[4] = { tmm_in(bx.view), tmm_in(bt), tmm_in(bp.view), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 4, &push, tmm_div_up((uint64_t)nr * (d / 2), TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}
