/* Batched matmul with optional transposes, bias and accumulation, in three
 * variants: REGISTER (shaders/matmul_reg.comp: register blocks, no shared
 * memory; fast on CPU devices), TILED (shaders/matmul_tiled.comp:
 * shared-memory tiles shaped by the device's limits, tmm_matmul_tile_for;
 * for GPUs) and COOPMAT (cooperative matrices for fp16 B on GPUs that have
 * them: matmul_coopmat.c). The batch runs on the z axis of the dispatch. Each operand is bound from an aligned offset at or before its
 * batch 0 with at most maxStorageBufferRange bytes; batches that do not fit
 * together are split over several dispatches, and a single matrix that does
 * not fit is computed in blocks of C and of k (accumulating into C), every
 * operand bound as a block of rows of its full leading dimension. B may be a
 * 16-bit view (fp16 or bf16, tmm_elem): its values are widened as they load;
 * A, bias and C are fp32. */
#include "matmul_paths.h"
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

/* The most of k one dispatch sums: each invocation loops over k in steps of 4
 * (bk >= 4 in the tiled kernel), and llvmpipe ends an invocation's loops after
 * 65535 iterations in all (DEVELOPERS.md): longer sums run in blocks of k,
 * accumulating into C. */
#define MATMUL_MAX_K (4u * TMM_MAX_LOOP)
/* The register kernel's Aᵀ·B (weight gradients: k = rows, long) streams
 * k-long panels of A and B per SIMD row of a workgroup; past the CPU's cache
 * they come from memory again for each. Summed in blocks of 2048 of k
 * (accumulating into C), Aᵀ·B runs at A·B's rate: measured on lavapipe,
 * 512 x 256 x 8192 went from 1.4x A·B's time to 0.9-1x, 256 x 128 x 4096
 * from 1.1x to 1x; blocks of 1024 lost at the smaller shape (more
 * dispatches of few workgroups). A·B and A·Bᵀ did not gain. Unbatched only. */
#define REG_TRANS_A_MAX_K 2048u

/* The most of k one dispatch sums for this matmul (batched ones would take
 * a dispatch per batch and block: they keep the longer sums). */
static uint32_t max_k_of(const tmm_matmul_desc *d, tmm_matmul_variant variant)
{
    const bool one = d->batch <= 1;
    return d->trans_a && one && variant == TMM_MATMUL_REGISTER ? REG_TRANS_A_MAX_K : MATMUL_MAX_K;
}

/* Tiled variant: products of at least TILE_BIG_SIDE^2 outputs take 8 x 8
 * outputs per invocation (tmm_matmul_tile_for). */
#define TILE_BIG_SIDE 1024u

static uint32_t tile_shared_bytes(tmm_matmul_tile t) { return 2u * t.bk * (t.ts * t.per + 1u) * 4u; }

bool tmm_matmul_tile_fits(const tmm_device_info *info, tmm_matmul_tile t)
{
    return t.ts >= 1 && t.ts <= 32 && t.per >= 1 && t.per <= 8 && t.bk >= 4 && t.bk <= 32 &&
           t.ts <= info->max_workgroup_size[0] && t.ts <= info->max_workgroup_size[1] &&
           t.ts * t.ts <= info->max_workgroup_invocations && tile_shared_bytes(t) <= info->max_shared_memory;
}

tmm_matmul_tile tmm_matmul_tile_for(const tmm_device_info *info, const tmm_device_tuning *tuning, uint64_t m,
                                    uint64_t n)
{
    tmm_matmul_tile t = { tuning ? tuning->matmul_tile[0] : 0, tuning ? tuning->matmul_tile[1] : 0,
                          tuning ? tuning->matmul_tile[2] : 0 };
    if (t.ts && tmm_matmul_tile_fits(info, t))
        return t;
    /* whole subgroups: 256 invocations hold whole subgroups of every size the driver may use up to 256 */
    const uint32_t sg_max = info->subgroup_size_max > info->subgroup_size ? info->subgroup_size_max
                                                                          : info->subgroup_size;
    t.ts = tmm_matmul_tile_fits(info, (tmm_matmul_tile){ 16, 1, 4 }) && (sg_max == 0 || 256 % sg_max == 0) ? 16 : 8;
    t.per = m >= TILE_BIG_SIDE && n >= TILE_BIG_SIDE ? 8 : 4;
    t.bk = 16;
    while (t.bk > 4 && !tmm_matmul_tile_fits(info, t))
        t.bk /= 2;
    if (!tmm_matmul_tile_fits(info, t))
        t.per = 4, t.bk = 8; /* 8.3 KiB with 16 x 16: within Vulkan's minimum of 16 KiB */
    return t;
}

enum { VEC_A = 1, VEC_B = 2, VEC_C = 4, BIG_BLOCK = 8 };

typedef struct matmul_push {
    uint32_t m, n, k;
    uint32_t stride_a, stride_b, stride_c;
    uint32_t base_a, base_b, base_c, base_bias, base_z;
    uint32_t lda, ldb, ldc;
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
    case TMM_MATMUL_COOPMAT:
        return "coopmat";
    }
    return "invalid";
}

/* One operand: the caller's view, the elements one batch spans, the stride
 * between batches (elements; 0 when not batched), the elements the whole
 * batch spans and the bytes of one element. */
typedef struct operand {
    const char *name;
    tmm_view view;
    uint64_t need1, stride, total, es;
} operand;

/* Floats no view can hold; marks a span that overflows 64-bit byte counts. */
#define TOO_MANY (UINT64_MAX / sizeof(float))

static operand make_operand(const char *name, tmm_view v, uint64_t need1, uint64_t stride, uint32_t batch)
{
    operand o = { name, v, need1, batch > 1 ? stride : 0, 0, tmm_elem_size(v.elem) };
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
    if (!o->view.buffer || o->view.size / o->es < o->total)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s holds %llu elements, needs %llu", o->name,
                        (unsigned long long)(o->view.buffer ? o->view.size / o->es : 0),
                        (unsigned long long)o->total);
    if (o->view.offset % o->es)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s starts at byte offset %llu, not a multiple of %llu",
                        o->name, (unsigned long long)o->view.offset, (unsigned long long)o->es);
    if (o->view.offset > o->view.buffer->size || o->view.size > o->view.buffer->size - o->view.offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s overruns its buffer", o->name);
    return TMM_OK;
}

static bool overlaps(const operand *x, const operand *y)
{
    if (!x->total || !y->total || x->view.buffer != y->view.buffer)
        return false;
    uint64_t x0 = x->view.offset, x1 = x0 + x->total * x->es;
    uint64_t y0 = y->view.offset, y1 = y0 + y->total * y->es;
    return x0 < y1 && y0 < x1;
}

/* The binding of batches [b0, b0 + count) of an operand: from the largest
 * aligned offset at or before batch b0; *base is batch b0's element offset
 * in it. */
static tmm_view bind_range(const tmm_device *dev, const operand *o, uint64_t b0, uint32_t count, uint32_t *base)
{
    return tmm_op_bind(dev, o->view, b0 * o->stride, (uint64_t)(count - 1) * o->stride + o->need1, base);
}

/* How many batches from b0 on fit in one binding of this operand. */
static tmm_status batches_that_fit(const operand *o, uint64_t align, uint64_t max_range, uint64_t b0,
                                   uint32_t *count)
{
    uint64_t start = o->view.offset + b0 * o->stride * o->es;
    uint64_t lead = start - start / align * align;
    uint64_t one = (lead + o->need1 * o->es + 3) / 4 * 4;
    if (one > max_range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "matmul: %s needs %llu bytes per batch, more than the device's "
                        "maxStorageBufferRange (%llu bytes); split the matmul", o->name,
                        (unsigned long long)one, (unsigned long long)max_range);
    if (o->stride) {
        uint64_t more = (max_range - one) / (o->stride * o->es);
        if (more + 1 < *count)
            *count = (uint32_t)(more + 1);
    }
    return TMM_OK;
}

/* Whether an operand may be accessed as vec4 (16-bit: uvec2) in a binding:
 * its row stride, batch stride (when more than one batch is bound) and base
 * are multiples of 4 elements. */
static bool vec4_ok(uint64_t row_stride, uint64_t stride, uint32_t count, uint32_t base)
{
    return row_stride % 4 == 0 && (count == 1 || stride % 4 == 0) && base % 4 == 0;
}

void tmm_matmul_leading(const tmm_matmul_desc *d, uint32_t *lda, uint32_t *ldb, uint32_t *ldc)
{
    *lda = d->lda ? d->lda : d->trans_a ? d->m : d->k;
    *ldb = d->ldb ? d->ldb : d->trans_b ? d->k : d->n;
    *ldc = d->ldc ? d->ldc : d->n;
}

/* Floats spanned by a stored matrix of `rows` rows of `cols`, rows ld apart. */
static uint64_t span_of(uint64_t rows, uint64_t cols, uint64_t ld)
{
    return rows && cols ? (rows - 1) * ld + cols : 0;
}

/* The three operands of one matmul (or block of one), one batch each. */
typedef struct geometry {
    uint64_t span_a, span_b, span_c;
    uint32_t lda, ldb, ldc;
} geometry;

static geometry geometry_of(const tmm_matmul_desc *d)
{
    geometry g;
    tmm_matmul_leading(d, &g.lda, &g.ldb, &g.ldc);
    g.span_a = d->trans_a ? span_of(d->k, d->m, g.lda) : span_of(d->m, d->k, g.lda);
    g.span_b = d->trans_b ? span_of(d->n, d->k, g.ldb) : span_of(d->k, d->n, g.ldb);
    g.span_c = span_of(d->m, d->n, g.ldc);
    return g;
}

/* The 16-bit format the cooperative-matrix kernel would round A and B to:
 * B's own, or the caller's half_inputs for an fp32 B (F32: none). */
static tmm_elem coopmat_format(const tmm_matmul_desc *desc, tmm_view b)
{
    return b.elem != TMM_ELEM_F32 ? b.elem : desc->half_inputs;
}

/* Records batches of a validated matmul whose single matrices each fit a
 * binding; z, the forward epilogue's output, is laid out as c. */
static tmm_status record_batches(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_matmul_variant variant,
                                 tmm_view a, tmm_view b, tmm_view bias, tmm_view c, tmm_view z)
{
    tmm_device *dev = tmm_recorder_device(r);
    const uint64_t m = desc->m, n = desc->n, k = desc->k;
    const uint32_t batch = desc->batch ? desc->batch : 1;
    const bool has_bias = bias.size != 0, has_z = z.size != 0;
    const geometry g = geometry_of(desc);
    operand oa = make_operand("a", a, g.span_a, desc->stride_a, batch);
    operand ob = make_operand("b", b, g.span_b, desc->stride_b, batch);
    operand obias = make_operand("bias", bias, has_bias ? n : 0, 0, 1);
    operand oc = make_operand("c", c, g.span_c, desc->stride_c, batch);
    operand oz = make_operand("z", z, has_z ? g.span_c : 0, desc->stride_c, batch);
    const uint64_t align = tmm_op_offset_align(dev), max_range = dev->info.max_storage_buffer_range;
    const bool reg = variant == TMM_MATMUL_REGISTER, coop = variant == TMM_MATMUL_COOPMAT;
    const tmm_matmul_tile tile = tmm_matmul_tile_for(&dev->info, &dev->tuning, m, n);
    const uint32_t tiled_local[3] = { tile.ts, tile.ts, 1 };
    uint32_t tile_m = tile.ts * tile.per, tile_n = tile_m;
    tmm_pipeline *pipes[16] = { 0 };
    tmm_record_flops(r, 2.0 * (double)m * (double)n * (double)k * batch);
    for (uint32_t b0 = 0; b0 < batch;) {
        uint32_t count = batch - b0;
        TMM_TRY(batches_that_fit(&oc, align, max_range, b0, &count));
        if (k) {
            TMM_TRY(batches_that_fit(&oa, align, max_range, b0, &count));
            TMM_TRY(batches_that_fit(&ob, align, max_range, b0, &count));
        }
        if (has_bias)
            TMM_TRY(batches_that_fit(&obias, align, max_range, 0, &count));
        if (has_z)
            TMM_TRY(batches_that_fit(&oz, align, max_range, b0, &count));

        matmul_push push = { .m = (uint32_t)m, .n = (uint32_t)n, .k = (uint32_t)k,
                             .lda = g.lda, .ldb = g.ldb, .ldc = g.ldc };
        tmm_view vc = bind_range(dev, &oc, b0, count, &push.base_c);
        /* C's first float stands in for the unused bindings (A and B with
         * k == 0, the bias, Z); the shader does not access them. */
        const tmm_view unused = tmm_op_sub(vc, 0, 1);
        tmm_view va = unused, vb = unused, vbias = unused, vz = unused;
        if (k) {
            va = bind_range(dev, &oa, b0, count, &push.base_a);
            vb = bind_range(dev, &ob, b0, count, &push.base_b);
        }
        if (has_bias)
            vbias = bind_range(dev, &obias, 0, 1, &push.base_bias);
        if (has_z)
            vz = bind_range(dev, &oz, b0, count, &push.base_z);
        if (count > 1) {
            push.stride_a = (uint32_t)oa.stride;
            push.stride_b = (uint32_t)ob.stride;
            push.stride_c = (uint32_t)oc.stride;
        }

        uint32_t flags = 0; /* spec constant 7 of matmul_reg.comp */
        if (reg) {
            /* along m (A transposed) and n (B not), the shader clamps edge groups
             * of 4 to end at m or n: those must be multiples of 4 too */
            if (k && vec4_ok(g.lda, oa.stride, count, push.base_a) && (!desc->trans_a || m % 4 == 0))
                flags |= VEC_A;
            if (k && vec4_ok(g.ldb, ob.stride, count, push.base_b) && (desc->trans_b || n % 4 == 0))
                flags |= VEC_B;
            if (vec4_ok(g.ldc, oc.stride, count, push.base_c) &&
                (!has_z || vec4_ok(g.ldc, oz.stride, count, push.base_z)))
                flags |= VEC_C;
            if (m >= REG_BIG_MIN_SIDE && n >= REG_BIG_MIN_SIDE &&
                (double)(m * n) * (double)(k * count) >= (double)REG_BIG_MIN_WORK)
                flags |= BIG_BLOCK;
        }
        tmm_pipeline *p = pipes[flags];
        if (!p) {
            /* ids 3-9 (matmul_common.glsl); FLAGS (id 7) is the register variant's only, PER and BK
             * (10, 11) the tiled one's; the cooperative-matrix kernel adds its shape (10-14) */
            const bool epi = desc->epilogue != TMM_MATMUL_EPI_NONE;
            uint32_t spec[9] = { desc->trans_a, desc->trans_b, has_bias && !epi, desc->accumulate, flags, b.elem,
                                 desc->epilogue, tile.per, tile.bk };
            if (reg)
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_matmul_reg, 5, sizeof push, reg_local, spec, 7, &p));
            else if (coop)
                TMM_TRY(tmm_matmul_coopmat_pipeline(r, spec, sizeof push, coopmat_format(desc, b) == TMM_ELEM_BF16,
                                                    &p, &tile_m, &tile_n));
            else
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_matmul_tiled, 5, sizeof push, tiled_local, spec, 9, &p));
            pipes[flags] = p;
        }
        const bool reads_c = desc->accumulate || tmm_matmul_epilogue_is_grad(desc->epilogue);
        tmm_arg args[5] = { tmm_in(va), tmm_in(vb), tmm_in(vbias), reads_c ? tmm_inout(vc) : tmm_out(vc),
                            has_z ? tmm_out(vz) : tmm_in(vz) };
        uint32_t gx, gy;
        if (reg) {
            uint32_t block = flags & BIG_BLOCK ? REG_BIG : REG_SMALL;
            gx = tmm_div_up(n, block * reg_local[0]);
            gy = tmm_div_up(m, block * reg_local[1]);
        } else {
            gx = tmm_div_up(n, tile_n);
            gy = tmm_div_up(m, tile_m);
        }
        TMM_TRY(tmm_record_dispatch(r, p, args, 5, &push, gx, gy, count));
        b0 += count;
    }
    return TMM_OK;
}

/* Shrinks *x to at most limit (at least 1); true when it changed. */
static bool shrink(uint64_t *x, uint64_t limit)
{
    if (limit < 1)
        limit = 1;
    if (*x <= limit)
        return false;
    *x = limit;
    return true;
}

/* A block size (mc, nc, kc) whose operands each span at most f floats: rows
 * of a block run the full leading dimension, so a block of r rows and c
 * columns spans (r - 1) * ld + c. Each rule lowers the dimension that makes a
 * span too long, until all fit (the sizes only fall, so this ends). */
static void block_size(const tmm_matmul_desc *d, const geometry *g, uint64_t f, uint32_t max_k, uint64_t *mc,
                       uint64_t *nc, uint64_t *kc)
{
    *mc = d->m, *nc = d->n, *kc = d->k < max_k ? d->k : max_k;
    for (bool changed = true; changed;) {
        changed = false;
        if (span_of(*mc, *nc, g->ldc) > f)
            changed |= *nc > f ? shrink(nc, f) : shrink(mc, (f - *nc) / g->ldc + 1);
        if (*kc && !d->trans_a && span_of(*mc, *kc, g->lda) > f)
            changed |= *kc > f ? shrink(kc, f) : shrink(mc, (f - *kc) / g->lda + 1);
        if (*kc && d->trans_a && span_of(*kc, *mc, g->lda) > f)
            changed |= *mc > f ? shrink(mc, f) : shrink(kc, (f - *mc) / g->lda + 1);
        if (*kc && !d->trans_b && span_of(*kc, *nc, g->ldb) > f)
            changed |= *nc > f ? shrink(nc, f) : shrink(kc, (f - *nc) / g->ldb + 1);
        if (*kc && d->trans_b && span_of(*nc, *kc, g->ldb) > f)
            changed |= *kc > f ? shrink(kc, f) : shrink(nc, (f - *kc) / g->ldb + 1);
    }
}

/* One matrix (batch 1) too large for a binding, as blocks of C (rows, then
 * columns), each summed over blocks of k in order, accumulating into C after
 * the first (which alone adds the bias). */
static tmm_status record_blocks(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_matmul_variant variant,
                                tmm_view a, tmm_view b, tmm_view bias, tmm_view c, uint64_t f)
{
    const geometry g = geometry_of(desc);
    uint64_t mc, nc, kc;
    block_size(desc, &g, f, max_k_of(desc, variant), &mc, &nc, &kc);
    const uint64_t m = desc->m, n = desc->n, k = desc->k;
    tmm_matmul_desc piece = *desc;
    piece.batch = 1;
    piece.lda = g.lda, piece.ldb = g.ldb, piece.ldc = g.ldc;
    for (uint64_t i0 = 0; i0 < m; i0 += mc)
        for (uint64_t j0 = 0; j0 < n; j0 += nc)
            for (uint64_t k0 = 0; k0 == 0 || k0 < k; k0 += kc ? kc : 1) {
                piece.m = (uint32_t)(m - i0 < mc ? m - i0 : mc);
                piece.n = (uint32_t)(n - j0 < nc ? n - j0 : nc);
                piece.k = (uint32_t)(k - k0 < kc ? k - k0 : kc);
                piece.accumulate = desc->accumulate || k0 > 0;
                const geometry pg = geometry_of(&piece);
                uint64_t a0 = desc->trans_a ? k0 * g.lda + i0 : i0 * g.lda + k0;
                uint64_t b0 = desc->trans_b ? j0 * g.ldb + k0 : k0 * g.ldb + j0;
                const tmm_view none = { 0 };
                tmm_view pb = bias.size && k0 == 0 ? tmm_op_sub(bias, j0, piece.n) : none;
                TMM_TRY(record_batches(r, &piece, variant, tmm_op_sub(a, a0, pg.span_a),
                                       tmm_op_sub(b, b0, pg.span_b), pb,
                                       tmm_op_sub(c, i0 * g.ldc + j0, pg.span_c), none));
            }
    return TMM_OK;
}

bool tmm_matmul_epilogue_is_grad(tmm_matmul_epilogue e)
{
    return e == TMM_MATMUL_EPI_SILU_GRAD || e == TMM_MATMUL_EPI_GELU_GRAD;
}

tmm_status tmm_op_matmul(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_view a, tmm_view b,
                         tmm_view bias, tmm_view c)
{
    return tmm_op_matmul_act(r, desc, a, b, bias, c, (tmm_view){ 0 });
}

/* The epilogue's own conditions: a bias, no accumulate, and z (laid out as C,
 * apart from every operand) exactly for the forward epilogues. */
static tmm_status check_epilogue(const tmm_matmul_desc *d, const operand *oa, const operand *ob,
                                 const operand *obias, const operand *oc, const operand *oz)
{
    if ((unsigned)d->epilogue > TMM_MATMUL_EPI_GELU)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: unknown epilogue %d", (int)d->epilogue);
    const bool act = d->epilogue == TMM_MATMUL_EPI_SILU || d->epilogue == TMM_MATMUL_EPI_GELU;
    if (d->epilogue && (!obias->total || d->accumulate))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: an activation's epilogue needs the bias and no "
                        "accumulate");
    if (act != (oz->view.size != 0))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, act ? "matmul: a forward activation epilogue needs its output z"
                                                      : "matmul: z is only for a forward activation epilogue");
    TMM_TRY(check_operand(oz));
    if (overlaps(oz, oa) || overlaps(oz, ob) || overlaps(oz, obias) || overlaps(oz, oc))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: z overlaps another operand");
    return TMM_OK;
}

tmm_status tmm_op_matmul_act(tmm_recorder *r, const tmm_matmul_desc *desc, tmm_view a, tmm_view b,
                             tmm_view bias, tmm_view c, tmm_view z)
{
    if (!r || !desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: NULL recorder or descriptor");
    tmm_device *dev = tmm_recorder_device(r);
    tmm_matmul_variant variant = desc->variant;
    if ((unsigned)variant > TMM_MATMUL_COOPMAT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: unknown variant %d", (int)desc->variant);
    if ((unsigned)desc->half_inputs > TMM_ELEM_BF16 || (unsigned)b.elem > TMM_ELEM_BF16)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: unknown element format (half_inputs %d, b %d)",
                        (int)desc->half_inputs, (int)b.elem);
    /* the kernel rounds both operands to a 16-bit format: exact for B in it, allowed by the caller for fp32;
     * asked (and self-checked at its first use) only where the variant may take it */
    const tmm_elem h = coopmat_format(desc, b);
    const bool may_take = variant == TMM_MATMUL_COOPMAT || (variant == TMM_MATMUL_AUTO && !dev->tuning.no_coopmat);
    const bool coop_ok = may_take && h != TMM_ELEM_F32 && tmm_matmul_coopmat_use(dev, h == TMM_ELEM_BF16);
    if (variant == TMM_MATMUL_COOPMAT && !coop_ok)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "matmul: no cooperative-matrix kernel for this product: %s",
                        h == TMM_ELEM_F32 ? "b is neither a 16-bit view nor an fp32 one with half_inputs"
                        : h == TMM_ELEM_BF16 && !dev->info.coopmat_bf16_shape[0] && dev->info.coopmat_shape[0]
                            ? "the device has no bf16 cooperative matrices"
                        : dev->info.coopmat_note[0] ? dev->info.coopmat_note
                                                    : "it failed its self-check on this device");
    if (variant == TMM_MATMUL_AUTO)
        variant = coop_ok                            ? TMM_MATMUL_COOPMAT
                  : dev->info.type == TMM_DEVICE_CPU ? TMM_MATMUL_REGISTER
                                                     : TMM_MATMUL_TILED;

    const uint64_t m = desc->m, n = desc->n, k = desc->k;
    const uint32_t batch = desc->batch ? desc->batch : 1;
    const bool has_bias = bias.size != 0;
    if (m == 0 || n == 0)
        return TMM_OK; /* C is empty: nothing is read or written */
    if (a.elem != TMM_ELEM_F32 || bias.elem != TMM_ELEM_F32 || c.elem != TMM_ELEM_F32 || z.elem != TMM_ELEM_F32)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: %s is a 16-bit view; only b may be one",
                        a.elem != TMM_ELEM_F32      ? "a"
                        : bias.elem != TMM_ELEM_F32 ? "bias"
                        : c.elem != TMM_ELEM_F32    ? "c"
                                                    : "z");
    const geometry g = geometry_of(desc);
    if (g.lda < (desc->trans_a ? m : k) || g.ldb < (desc->trans_b ? k : n) || g.ldc < n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: a leading dimension (lda %u, ldb %u, ldc %u) is shorter "
                        "than its rows", g.lda, g.ldb, g.ldc);
    if (batch > 1 && desc->stride_c < g.span_c)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: stride_c %llu is less than the %llu floats C spans, so "
                        "the batches of C would overlap", (unsigned long long)desc->stride_c,
                        (unsigned long long)g.span_c);
    operand oa = make_operand("a", a, g.span_a, desc->stride_a, batch);
    operand ob = make_operand("b", b, g.span_b, desc->stride_b, batch);
    operand obias = make_operand("bias", bias, has_bias ? n : 0, 0, 1);
    operand oc = make_operand("c", c, g.span_c, desc->stride_c, batch);
    operand oz = make_operand("z", z, z.size ? g.span_c : 0, desc->stride_c, batch);
    TMM_TRY(check_operand(&oa));
    TMM_TRY(check_operand(&ob));
    TMM_TRY(check_operand(&obias));
    TMM_TRY(check_operand(&oc));
    if (overlaps(&oa, &oc) || overlaps(&ob, &oc) || overlaps(&obias, &oc))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "matmul: c overlaps %s; the output must not alias an input",
                        overlaps(&oa, &oc) ? "a" : overlaps(&ob, &oc) ? "b" : "bias");
    TMM_TRY(check_epilogue(desc, &oa, &ob, &obias, &oc, &oz));

    const uint64_t f = tmm_op_binding_floats(dev);
    if (f == 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "matmul: the device's maxStorageBufferRange (%llu bytes) holds no "
                        "float", (unsigned long long)dev->info.max_storage_buffer_range);
    const uint32_t max_k = max_k_of(desc, variant);
    if (g.span_a <= f && g.span_b <= f && g.span_c <= f && (!has_bias || n <= f) && k <= max_k)
        return record_batches(r, desc, variant, a, b, bias, c, z);
    if (desc->epilogue) /* blocks of k would apply it to partial sums */
        return tmm_fail(TMM_ERR_UNSUPPORTED, "matmul: an epilogue needs one pass, but a matrix is larger than a "
                        "binding or k = %llu is above %u", (unsigned long long)k, max_k);
    /* a single matrix is larger than a binding, or k is too long for one sum: each batch in blocks */
    for (uint32_t i = 0; i < batch; i++)
        TMM_TRY(record_blocks(r, desc, variant, tmm_op_sub(a, i * oa.stride, g.span_a),
                              tmm_op_sub(b, i * ob.stride, g.span_b), bias, tmm_op_sub(c, i * oc.stride, g.span_c), f));
    return TMM_OK;
}

tmm_status tmm_op_linear(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                         tmm_view bias, tmm_view y, bool accumulate)
{
    tmm_matmul_desc d = { .m = rows, .n = out, .k = in, .trans_b = true, .batch = 1, .accumulate = accumulate };
    return tmm_op_matmul(r, &d, x, w, bias, y);
}

tmm_status tmm_op_linear_dx(tmm_recorder *r, tmm_view dy, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                            tmm_view dx, bool accumulate)
{
    tmm_matmul_desc d = { .m = rows, .n = in, .k = out, .batch = 1, .accumulate = accumulate };
    return tmm_op_matmul(r, &d, dy, w, (tmm_view){ 0 }, dx);
}

tmm_status tmm_op_linear_dw(tmm_recorder *r, tmm_view dy, tmm_view x, uint32_t rows, uint32_t in, uint32_t out,
                            tmm_view dw, tmm_elem half)
{
    tmm_matmul_desc d = { .m = out, .n = in, .k = rows, .trans_a = true, .batch = 1, .half_inputs = half };
    return tmm_op_matmul(r, &d, dy, x, (tmm_view){ 0 }, dw);
}

/* Whether a linear layer's [rows, k] · [k, n] (its forward or dx, not a weight
 * gradient) takes one pass: k within one dispatch's sum, each of the three
 * matrices within a binding. */
static bool linear_one_pass(const tmm_device *dev, uint32_t rows, uint32_t k, uint32_t n)
{
    const uint64_t f = tmm_op_binding_floats(dev);
    return k <= MATMUL_MAX_K && (uint64_t)rows * k <= f && (uint64_t)k * n <= f && (uint64_t)rows * n <= f;
}

bool tmm_op_linear_act_fits(const tmm_device *dev, uint32_t rows, uint32_t in, uint32_t out)
{
    return linear_one_pass(dev, rows, in, out);
}

tmm_status tmm_op_linear_act(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                             tmm_view b, tmm_matmul_epilogue act, tmm_view a, tmm_view z)
{
    if (act != TMM_MATMUL_EPI_SILU && act != TMM_MATMUL_EPI_GELU)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "linear_act: the activation is neither SiLU nor GELU");
    tmm_matmul_desc d = { .m = rows, .n = out, .k = in, .trans_b = true, .batch = 1, .epilogue = act };
    return tmm_op_matmul_act(r, &d, x, w, b, a, z);
}

bool tmm_op_linear_dx_act_fits(const tmm_device *dev, uint32_t rows, uint32_t in, uint32_t out)
{
    return linear_one_pass(dev, rows, out, in);
}

tmm_status tmm_op_linear_dx_act(tmm_recorder *r, tmm_view dy, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                                tmm_view b, tmm_matmul_epilogue act, tmm_view a)
{
    if (!tmm_matmul_epilogue_is_grad(act))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "linear_dx_act: the epilogue is not an activation's gradient");
    tmm_matmul_desc d = { .m = rows, .n = in, .k = out, .batch = 1, .epilogue = act };
    return tmm_op_matmul(r, &d, dy, w, b, a);
}
