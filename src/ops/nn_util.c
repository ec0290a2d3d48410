#include "nn_util.h"

nn_bind nn_rows(const tmm_device *d, tmm_view v, uint64_t r0, uint64_t n, uint64_t len)
{
    nn_bind b;
    b.view = tmm_op_bind(d, v, r0 * len, n * len, &b.base);
    return b;
}

tmm_status nn_fit_rows(const tmm_device *d, const char *op, const char *name, uint64_t len, uint64_t *rows_per_bind)
{
    uint64_t range = d->info.max_storage_buffer_range;
    uint64_t lead = tmm_op_offset_align(d) - 4; /* worst case before an unaligned row start */
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
    return tmm_op_sub(region, p * nn_aligned(nseg * d), nseg * d);
}

tmm_status nn_colsum_finish(tmm_recorder *r, tmm_view region, uint32_t n_planes, uint32_t nseg, uint32_t d,
                            bool accumulate, const tmm_view *outs)
{
    uint64_t at = n_planes * nn_aligned((uint64_t)nseg * d);
    uint64_t n_sc = tmm_op_sum_cols_scratch(nseg, d);
    tmm_view sc = n_sc ? tmm_op_sub(region, at, n_sc) : (tmm_view){ 0 };
    tmm_view tmp = tmm_op_sub(region, at + nn_aligned(n_sc), d);
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

bool tmm_op_row_subgroups_for(const tmm_device_info *i, uint32_t variant)
{
    const bool has = i->subgroup_in_compute && i->subgroup_size >= 4 && i->subgroup_size <= 128 &&
                     (i->subgroup_operations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                     (i->subgroup_operations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    switch (variant) {
    case 1: return false;
    case 2: return has;
    default: return has && i->type != TMM_DEVICE_CPU;
    }
}

bool tmm_op_rows_use_subgroups(const tmm_device *dev)
{
    return tmm_op_row_subgroups_for(&dev->info, dev->tuning.reduce_variant);
}

uint32_t tmm_op_sg_workgroup(const tmm_device_info *info)
{
    const uint32_t s = info->subgroup_size;
    return s * s < 256 ? s * s : 256;
}

tmm_status nn_norm_stats_sg(tmm_recorder *r, const char *op, uint32_t kind, tmm_view x, uint32_t rows, uint32_t d,
                            float eps, tmm_view mean, tmm_view rstd, bool *done)
{
    tmm_device *dev = tmm_recorder_device(r);
    const uint32_t wg = tmm_op_sg_workgroup(&dev->info);
    *done = false;
    if (tmm_div_up(d, wg) > TMM_MAX_LOOP)
        return TMM_OK;
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", d, &per));
    TMM_TRY(nn_fit_rows(dev, op, "rstd", 1, &per));
    const uint32_t local[3] = { wg, 1, 1 }, spec = kind;
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_norm_stats_sg, 3, 24, local, &spec, 1, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        const uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bx = nn_rows(dev, x, r0, nr, d), br = nn_rows(dev, rstd, r0, nr, 1);
        nn_bind bm = kind == 0 ? nn_rows(dev, mean, r0, nr, 1) : br; /* RMSNorm writes no mean */
        struct {
            uint32_t rows, d, base_x, base_m, base_r;
            float eps;
        } push = { .rows = nr, .d = d, .base_x = bx.base, .base_m = bm.base, .base_r = br.base, .eps = eps };
        tmm_arg args[3] = { tmm_in(bx.view), tmm_out(bm.view), tmm_out(br.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, nr < 65535 ? nr : 65535, tmm_div_up(nr, 65535), 1));
    }
    *done = true;
    return TMM_OK;
}
