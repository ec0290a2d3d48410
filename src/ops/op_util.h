/* Shared host-side helpers for ops. */
#ifndef TMM_OP_UTIL_H
#define TMM_OP_UTIL_H

#include "ops.h"
#include "tmm_shaders.h"

#define TMM_WG_1D 256 /* workgroup size of the simple 1-D kernels */

/* The pipeline of a kernel with workgroup size (lx, ly, lz) and optional
 * extra specialization constants (ids 3, 4, ...). */
tmm_status tmm_op_pipeline(tmm_recorder *r, const tmm_spirv *spirv, uint32_t n_buffers, uint32_t push_size,
                           const uint32_t local[3], const uint32_t *extra, uint32_t n_extra, tmm_pipeline **out);

/* Fails unless view holds at least n floats (and is not a 16-bit view). */
tmm_status tmm_op_need(const char *op, const char *name, tmm_view v, uint64_t n);

/* tmm_op_need, and the view starts at a float boundary inside its buffer. */
tmm_status tmm_op_need_floats(const char *op, const char *name, tmm_view v, uint64_t n);

/* A view and how many floats of it an op uses (0: not used). */
typedef struct tmm_op_span {
    const char *name;
    tmm_view v;
    uint64_t n;
} tmm_op_span;

/* Fails when the floats `out` uses overlap those of any other of `all`
 * (`out` may be one of them). */
tmm_status tmm_op_no_overlap(const char *op, const tmm_op_span *out, const tmm_op_span *all, size_t count);

/* Elements per chunk for elementwise ops so that every bound range stays
 * within maxStorageBufferRange and chunk offsets keep the offset alignment. */
uint64_t tmm_op_chunk_elems(const tmm_device *d);

/* Bindings. A view is bound from the largest offset at or before its first
 * float that the device allows (minStorageBufferOffsetAlignment, at least 16
 * bytes so that vec4 loads can tell from the base whether they line up); the
 * shader gets the float's index in the binding as its base. */
uint64_t tmm_op_offset_align(const tmm_device *d);
/* Floats one binding holds wherever they start: maxStorageBufferRange less
 * what aligning the binding's start down may add in front. */
uint64_t tmm_op_binding_floats(const tmm_device *d);
/* The binding of elements [first, first + count) of view v (floats, or
 * 16-bit values of a 16-bit view, in whole 32-bit words); *base is the
 * index of `first` in it. */
tmm_view tmm_op_bind(const tmm_device *d, tmm_view v, uint64_t first, uint64_t count, uint32_t *base);
/* The elements [first, first + count) of view v as a view (no binding rules). */
tmm_view tmm_op_sub(tmm_view v, uint64_t first, uint64_t count);
/* tmm_op_need_floats, and the view may be bound as given (its offset is
 * aligned): for views bound whole. */
tmm_status tmm_op_need_bound(const tmm_device *d, const char *op, const char *name, tmm_view v, uint64_t n);

#endif
