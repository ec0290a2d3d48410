/* Batched matmul with optional transposes, bias and accumulation, in two
 * variants: REGISTER (shaders/matmul_reg.comp: register blocks, no shared
 * memory; fast on CPU devices) and TILED (shaders/matmul_tiled.comp:
 * shared-memory tiles; for GPUs). The batch runs on the z axis of the
 * dispatch. Each operand is bound from an aligned offset at or before its
 * batch 0 with at most maxStorageBufferRange bytes; when a batch does not fit
 * in one binding it is split over several dispatches. */
#include "op_util.h"

#include <string.h>

/* Register variant: each invocation computes a square block of C, 16 x 16
 * for large matmuls and 8 x 8 otherwise (BIG_BLOCK; the sizes are in
 * shaders/matmul_reg.comp). On llvmpipe every buffer load is a loop over the
 * SIMD lanes, so larger blocks run about twice as fast (26 against 14
 * GFLOP/s at 1024^3), but LLVM needs ~2 s instead of ~0.2 s to compile each
 * specialization. The large block is used from 2^26 multiply-adds per
 * dispatch (a few ms a call), where it pays for itself within a few hundred
 * calls. An 8 x 4 workgroup is four 8-wide SIMD rows on llvmpipe. */
#define REG_SMALL 8u
#define REG_BIG 16u
#define REG_BIG_MIN_SIDE 64u
#define REG_BIG_MIN_WORK (1ull << 26)
static const uint32_t reg_local[3] = { 8, 4, 1 };

/* Tiled variant: fixed in the shader (16 x 16 invocations, 64 x 64 tile). */
#define TILE 64u
static const uint32_t tiled_local[3] = { 16, 16, 1 };

enum { VEC_A = 1, VEC_B = 2, VEC_C = 4, BIG_BLOCK = 8 };

typedef struct matmul_push {
    uint32_t m, n, k;
    uint32_t stride_a, stride_b, stride_c;
    uint32_t base_a, base_b, base_c, base_bias;
} matmul_push;

const char *tmm_matmul_variant_name(tmm_matmul_variant v)
{
    switch (v) {
    case TMM_MATMUL_AUTO:
        return "auto";
    case TMM_MATMUL_REGISTER:
        return "register";
    case TMM_MATMUL_TILED:
        return "tiled";
    }
    return "invalid";
}

/* One operand: the caller's view, the floats one batch spans, the stride
 * between batches (elements; 0 when not batched) and the floats the whole
 * batch spans. */
typedef struct operand {
    const char *name;
    tmm_view view;
    uint64_t need1, stride, total;
} operand;

/* Floats no view can hold; marks a span that overflows 64-bit byte counts. */
#define TOO_MANY (UINT64_MAX / sizeof(float))

static operand make_operand(const char *name, tmm_view v, uint64_t need1, uint64_t stride, uint32_t batch)
{
    operand o = { name, v, need1, batch > 1 ? stride : 0, 0 };
    if (need1 && o.stride && (o.stride > TOO_MANY / (batch - 1) || (batch - 1) * o.stride > TOO_MANY - need1))
        o.total = TOO_MANY;
    else
        o.total = need1 ? (uint64_t)(batch - 1) * o.stride + need1 : 0;
    return o;
}

static tmm_status check_operand(const operand *o)
{
    if (o->total == 0)
        return TMM_OK;
    if (o->total >= TOO_MANY)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s would span more than 2^64 bytes (batch stride %llu)",
                        o->name, (unsigned long long)o->stride);
    TMM_TRY(tmm_op_need("matmul", o->name, o->view, o->total));
    if (o->view.offset % sizeof(float))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s starts at byte offset %llu, not a multiple of 4",
                        o->name, (unsigned long long)o->view.offset);
    if (o->view.offset > o->view.buffer->size || o->view.size > o->view.buffer->size - o->view.offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s overruns its buffer", o->name);
    return TMM_OK;
}

static bool overlaps(const operand *x, const operand *y)
{
    if (!x->total || !y->total || x->view.buffer != y->view.buffer)
        return false;
    uint64_t x0 = x->view.offset, x1 = x0 + x->total * sizeof(float);
    uint64_t y0 = y->view.offset, y1 = y0 + y->total * sizeof(float);
    return x0 < y1 && y0 < x1;
}

/* The binding of batches [b0, b0 + count) of an operand: from the largest
 * aligned offset at or before batch b0; *base is batch b0's element offset
 * in it. */
static tmm_view bind_range(const operand *o, uint64_t align, uint64_t b0, uint32_t count, uint32_t *base)
{
    uint64_t start = o->view.offset + b0 * o->stride * sizeof(float);
    uint64_t at = start / align * align;
    uint64_t span = (uint64_t)(count - 1) * o->stride + o->need1;
    *base = (uint32_t)((start - at) / sizeof(float));
    tmm_view v = { o->view.buffer, at, start - at + span * sizeof(float) };
    return v;
}

/* How many batches from b0 on fit in one binding of this operand. */
static tmm_status batches_that_fit(const operand *o, uint64_t align, uint64_t max_range, uint64_t b0,
                                   uint32_t *count)
{
    uint64_t start = o->view.offset + b0 * o->stride * sizeof(float);
    uint64_t lead = start - start / align * align;
    uint64_t one = lead + o->need1 * sizeof(float);
    if (one > max_range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "matmul: %s needs %llu bytes per batch, more than the device's "
                        "maxStorageBufferRange (%llu bytes); split the matmul", o->name,
                        (unsigned long long)one, (unsigned long long)max_range);
    if (o->stride) {
        uint64_t more = (max_range - one) / (o->stride * sizeof(float));
        if (more + 1 < *count)
            *count = (uint32_t)(more + 1);
    }
    return TMM_OK;
}

/* Whether an operand may be accessed as vec4 in a binding: its row stride,
 * batch stride (when more than one batch is bound) and base are multiples
 * of 4 floats. */
static bool vec4_ok(uint64_t row_stride, uint64_t stride, uint32_t count, uint32_t base)
{
    return row_stride % 4 == 0 && (count == 1 || stride % 4 == 0) && base % 4 == 0;
}

tmm_status tmm_op_matmul(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_view a, tmm_view b,
                         tmm_view bias, tmm_view c)
{
    if (!r || !desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: NULL recorder or descriptor");
    tmm_device *dev = tmm_recorder_device(r);
    tmm_matmul_variant variant = desc->variant;
    if (variant == TMM_MATMUL_AUTO)
        variant = dev->info.type == TMM_DEVICE_CPU ? TMM_MATMUL_REGISTER : TMM_MATMUL_TILED;
    if (variant != TMM_MATMUL_REGISTER && variant != TMM_MATMUL_TILED)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: unknown variant %d", (int)desc->variant);

    const uint64_t m = desc->m, n = desc->n, k = desc->k;
    const uint32_t batch = desc->batch ? desc->batch : 1;
    const bool has_bias = bias.size != 0;
    if (m == 0 || n == 0)
        return TMM_OK; /* C is empty: nothing is read or written */
    if (batch > 1 && desc->stride_c < m * n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: stride_c %llu is less than m*n = %llu, so the batches "
                        "of C would overlap", (unsigned long long)desc->stride_c, (unsigned long long)(m * n));
    operand oa = make_operand("a", a, m * k, desc->stride_a, batch);
    operand ob = make_operand("b", b, k * n, desc->stride_b, batch);
    operand obias = make_operand("bias", bias, has_bias ? n : 0, 0, 1);
    operand oc = make_operand("c", c, m * n, desc->stride_c, batch);
    TMM_TRY(check_operand(&oa));
    TMM_TRY(check_operand(&ob));
    TMM_TRY(check_operand(&obias));
    TMM_TRY(check_operand(&oc));
    if (overlaps(&oa, &oc) || overlaps(&ob, &oc) || overlaps(&obias, &oc))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: c overlaps %s; the output must not alias an input",
                        overlaps(&oa, &oc) ? "a" : overlaps(&ob, &oc) ? "b" : "bias");

    uint64_t align = dev->info.min_storage_buffer_offset_alignment;
    if (align < 16)
        align = 16; /* so that base % 4 tells whether vec4 access lines up */
    const uint64_t max_range = dev->info.max_storage_buffer_range;

    const bool reg = variant == TMM_MATMUL_REGISTER;
    tmm_pipeline *pipes[16] = { 0 };
    for (uint32_t b0 = 0; b0 < batch;) {
        uint32_t count = batch - b0;
        TMM_TRY(batches_that_fit(&oc, align, max_range, b0, &count));
        if (k) {
            TMM_TRY(batches_that_fit(&oa, align, max_range, b0, &count));
            TMM_TRY(batches_that_fit(&ob, align, max_range, b0, &count));
        }
        if (has_bias)
            TMM_TRY(batches_that_fit(&obias, align, max_range, 0, &count));

        matmul_push push = { (uint32_t)m, (uint32_t)n, (uint32_t)k, 0, 0, 0, 0, 0, 0, 0 };
        tmm_view vc = bind_range(&oc, align, b0, count, &push.base_c);
        /* With k == 0 (A and B empty) and without bias, C stands in for the
         * unused bindings; the shader does not read them. */
        tmm_view va = vc, vb = vc, vbias = vc;
        if (k) {
            va = bind_range(&oa, align, b0, count, &push.base_a);
            vb = bind_range(&ob, align, b0, count, &push.base_b);
        }
        if (has_bias)
            vbias = bind_range(&obias, align, 0, 1, &push.base_bias);
        if (count > 1) {
            push.stride_a = (uint32_t)oa.stride;
            push.stride_b = (uint32_t)ob.stride;
            push.stride_c = (uint32_t)oc.stride;
        }

        uint32_t flags = 0; /* spec constant 7 of matmul_reg.comp */
        if (reg) {
            if (k && vec4_ok(desc->trans_a ? m : k, oa.stride, count, push.base_a))
                flags |= VEC_A;
            if (k && vec4_ok(desc->trans_b ? k : n, ob.stride, count, push.base_b))
                flags |= VEC_B;
            if (vec4_ok(n, oc.stride, count, push.base_c))
                flags |= VEC_C;
            if (m >= REG_BIG_MIN_SIDE && n >= REG_BIG_MIN_SIDE && (double)(m * n) * (double)(k * count) >= (double)REG_BIG_MIN_WORK)
                flags |= BIG_BLOCK;
        }
        tmm_pipeline *p = pipes[flags];
        if (!p) {
            uint32_t spec[5] = { desc->trans_a, desc->trans_b, has_bias, desc->accumulate, flags };
            if (reg)
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_matmul_reg, 4, sizeof push, reg_local, spec, 5, &p));
            else
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_matmul_tiled, 4, sizeof push, tiled_local, spec, 4, &p));
            pipes[flags] = p;
        }
        tmm_arg args[4] = { tmm_in(va), tmm_in(vb), tmm_in(vbias),
                            desc->accumulate ? tmm_inout(vc) : tmm_out(vc) };
        uint32_t gx, gy;
        if (reg) {
            uint32_t block = flags & BIG_BLOCK ? REG_BIG : REG_SMALL;
            gx = tmm_div_up(n, block * reg_local[0]);
            gy = tmm_div_up(m, block * reg_local[1]);
        } else {
            gx = tmm_div_up(n, TILE);
            gy = tmm_div_up(m, TILE);
        }
        TMM_TRY(tmm_record_dispatch(r, p, args, 4, &push, gx, gy, count));
        b0 += count;
    }
    return TMM_OK;
}
