#include "nn_util.h"

static uint64_t offset_align(const tmm_device *d)
{
    uint64_t a = d->info.min_storage_buffer_offset_alignment;
    return a < 4 ? 4 : a;
}

nn_bind nn_rows(const tmm_device *d, tmm_view v, uint64_t r0, uint64_t n, uint64_t len)
{
    uint64_t align = offset_align(d);
    uint64_t start = v.offset + r0 * len * 4;
    uint64_t at = start / align * align;
    nn_bind b = { { v.buffer, at, start - at + n * len * 4 }, (uint32_t)((start - at) / 4) };
    return b;
}

tmm_status nn_fit_rows(const tmm_device *d, const char *op, const char *name, uint64_t len, uint64_t *rows_per_bind)
{
    uint64_t range = d->info.max_storage_buffer_range;
    uint64_t lead = offset_align(d) - 4; /* worst case before an unaligned row start */
    uint64_t row = len * 4;
    if (row == 0)
        return TMM_OK;
    if (range < lead || (range - lead) / row == 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: one row of %s is %llu bytes, more than one binding can hold "
                        "(maxStorageBufferRange %llu bytes)", op, name, (unsigned long long)row,
                        (unsigned long long)range);
    uint64_t fit = (range - lead) / row;
    /* Element indices inside a binding are 32-bit in the shaders. */
    uint64_t max_elems = (uint64_t)UINT32_MAX / 2;
    if (fit * len > max_elems)
        fit = max_elems / len;
    if (fit < *rows_per_bind)
        *rows_per_bind = fit;
    return TMM_OK;
}

tmm_status nn_need(const char *op, const char *name, tmm_view v, uint64_t n)
{
    TMM_TRY(tmm_op_need(op, name, v, n));
    if (v.offset % 4)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s starts at byte offset %llu, not a multiple of 4", op, name,
                        (unsigned long long)v.offset);
    if (v.offset > v.buffer->size || v.size > v.buffer->size - v.offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s [%llu, +%llu) overruns its buffer of %llu bytes", op, name,
                        (unsigned long long)v.offset, (unsigned long long)v.size,
                        (unsigned long long)v.buffer->size);
    return TMM_OK;
}

tmm_status nn_need_bound(const tmm_device *d, const char *op, const char *name, tmm_view v, uint64_t n)
{
    TMM_TRY(nn_need(op, name, v, n));
    if (v.offset % offset_align(d))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s starts at byte offset %llu, not a multiple of the device's "
                        "minStorageBufferOffsetAlignment (%llu)", op, name, (unsigned long long)v.offset,
                        (unsigned long long)offset_align(d));
    return TMM_OK;
}

tmm_view nn_scratch_at(tmm_view scratch, uint64_t at, uint64_t n)
{
    tmm_view v = { scratch.buffer, scratch.offset + at * 4, n * 4 };
    return v;
}

uint64_t nn_col_segments(uint64_t rows, uint64_t chunk)
{
    uint64_t n = 0;
    for (uint64_t r0 = 0; r0 < rows; r0 += chunk) {
        uint64_t cnt = rows - r0 < chunk ? rows - r0 : chunk;
        n += (cnt + TMM_NN_COL_SEG - 1) / TMM_NN_COL_SEG;
    }
    return n;
}

uint64_t nn_colsum_scratch(uint64_t nseg, uint32_t d, uint32_t n_planes)
{
    return n_planes * nn_aligned(nseg * d) + nn_aligned(tmm_op_sum_cols_scratch((uint32_t)nseg, d)) + nn_aligned(d);
}

tmm_view nn_colsum_plane(tmm_view region, uint32_t p, uint64_t nseg, uint32_t d)
{
    return nn_scratch_at(region, p * nn_aligned(nseg * d), nseg * d);
}

tmm_status nn_colsum_finish(tmm_recorder *r, tmm_view region, uint32_t n_planes, uint32_t nseg, uint32_t d,
                            bool accumulate, const tmm_view *outs)
{
    uint64_t at = n_planes * nn_aligned((uint64_t)nseg * d);
    uint64_t n_sc = tmm_op_sum_cols_scratch(nseg, d);
    tmm_view sc = n_sc ? nn_scratch_at(region, at, n_sc) : (tmm_view){ 0 };
    tmm_view tmp = nn_scratch_at(region, at + nn_aligned(n_sc), d);
    for (uint32_t p = 0; p < n_planes; p++) {
        tmm_view plane = nn_colsum_plane(region, p, nseg, d);
        if (!accumulate) {
            TMM_TRY(tmm_op_sum_cols(r, plane, nseg, d, sc, outs[p]));
        } else {
            TMM_TRY(tmm_op_sum_cols(r, plane, nseg, d, sc, tmp));
            TMM_TRY(tmm_op_axpy(r, 1.0f, tmp, outs[p], d));
        }
    }
    return TMM_OK;
}
