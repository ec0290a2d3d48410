#include "op_util.h"

#include <string.h>

tmm_status tmm_op_pipeline(tmm_recorder *r, const tmm_spirv *spirv, uint32_t n_buffers, uint32_t push_size,
                           const uint32_t local[3], const uint32_t *extra, uint32_t n_extra, tmm_pipeline **out)
{
    tmm_kernel k = { .spirv = spirv, .n_buffers = n_buffers, .push_size = push_size, .n_spec = 3 + n_extra };
    if (k.n_spec > TMM_MAX_SPEC)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "too many specialization constants for %s", spirv->name);
    memcpy(k.spec, local, 3 * sizeof local[0]);
    if (n_extra)
        memcpy(k.spec + 3, extra, n_extra * sizeof extra[0]);
    return tmm_pipeline_get(tmm_recorder_device(r), &k, out);
}

tmm_status tmm_op_need(const char *op, const char *name, tmm_view v, uint64_t n)
{
    if (v.elem != TMM_ELEM_F32)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s holds 16-bit values; this op reads 32-bit floats", op,
                        name);
    if (!v.buffer || v.size / sizeof(float) < n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s holds %llu floats, needs %llu", op, name,
                        (unsigned long long)(v.buffer ? v.size / sizeof(float) : 0), (unsigned long long)n);
    return TMM_OK;
}

uint64_t tmm_op_chunk_elems(const tmm_device *d)
{
    uint64_t align = d->info.min_storage_buffer_offset_alignment;
    if (align < 4)
        align = 4;
    uint64_t bytes = d->info.max_storage_buffer_range / align * align;
    return bytes / sizeof(float);
}

uint64_t tmm_op_offset_align(const tmm_device *d)
{
    /* at least 16 bytes, so that a base % 4 == 0 tells a kernel that vec4 loads line up */
    uint64_t align = d->info.min_storage_buffer_offset_alignment;
    return align < 16 ? 16 : align;
}

uint64_t tmm_op_binding_floats(const tmm_device *d)
{
    uint64_t range = d->info.max_storage_buffer_range, align = tmm_op_offset_align(d);
    return range > align ? (range - (align - 4)) / sizeof(float) : 0;
}

tmm_view tmm_op_sub(tmm_view v, uint64_t first, uint64_t count)
{
    const uint64_t es = tmm_elem_size(v.elem);
    return (tmm_view){ v.buffer, v.offset + first * es, count * es, v.elem };
}

tmm_status tmm_op_need_bound(const tmm_device *d, const char *op, const char *name, tmm_view v, uint64_t n)
{
    TMM_TRY(tmm_op_need_floats(op, name, v, n));
    if (v.offset % tmm_op_offset_align(d))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s starts at byte offset %llu, not a multiple of the device's "
                        "minStorageBufferOffsetAlignment (%llu)", op, name, (unsigned long long)v.offset,
                        (unsigned long long)tmm_op_offset_align(d));
    return TMM_OK;
}

tmm_view tmm_op_bind(const tmm_device *d, tmm_view v, uint64_t first, uint64_t count, uint32_t *base)
{
    const uint64_t es = tmm_elem_size(v.elem);
    uint64_t start = v.offset + first * es, align = tmm_op_offset_align(d);
    uint64_t at = start / align * align;
    *base = (uint32_t)((start - at) / es);
    /* whole 32-bit words: a shader reads 16-bit values two at a time */
    return (tmm_view){ v.buffer, at, (start - at + count * es + 3) / 4 * 4, v.elem };
}

tmm_status tmm_op_need_floats(const char *op, const char *name, tmm_view v, uint64_t n)
{
    TMM_TRY(tmm_op_need(op, name, v, n));
    if (v.offset % sizeof(float))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s starts at byte offset %llu, not a multiple of 4", op, name,
                        (unsigned long long)v.offset);
    if (v.offset > v.buffer->size || v.size > v.buffer->size - v.offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s [%llu, +%llu) overruns its buffer of %llu bytes", op, name,
                        (unsigned long long)v.offset, (unsigned long long)v.size,
                        (unsigned long long)v.buffer->size);
    return TMM_OK;
}

tmm_status tmm_op_no_overlap(const char *op, const tmm_op_span *out, const tmm_op_span *all, size_t count)
{
    if (!out->n)
        return TMM_OK;
    uint64_t a0 = out->v.offset, a1 = a0 + out->n * sizeof(float);
    for (size_t i = 0; i < count; i++) {
        const tmm_op_span *o = &all[i];
        if (!o->n || o->v.buffer != out->v.buffer || o == out)
            continue;
        uint64_t b0 = o->v.offset, b1 = b0 + o->n * sizeof(float);
        if (a0 < b1 && b0 < a1)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s; outputs must not alias other arguments",
                            op, out->name, o->name);
    }
    return TMM_OK;
}
