/* tmm_op_matmul against ref_matmul, for both variants: transposes, bias,
 * accumulation, batches with strides (and stride 0), edge shapes, zero
 * sizes, bad arguments, and batches split over several bindings.
 *
 * Tolerance: inputs are uniform in [-1, 1), so each of the k products has
 * magnitude <= 1 and the partial sums grow like sqrt(k)/3. Each fma step
 * rounds with an error <= 2^-24 times the partial sum; with random signs the
 * k roundings add up to ~2^-24 * k/3 (4e-6 at k = 421, the largest k here),
 * whatever the order of summation (blocks, tiles). atol = 1e-5 * sqrt(k)
 * (2e-4 at k = 421, 1e-5 at k = 1) is over 25 times that for every k used,
 * and for the sweeps (k <= 100) it even bounds the worst case of all
 * roundings having one sign (2^-24 * k * sqrt(k)/3). rtol = 1e-5 (~170 ulp)
 * covers the rounding of the bias and accumulate additions on outputs far
 * from zero. The reference sums in double: exact to well below these bounds.
 *
 * The register kernel has two block sizes (8 x 8, and 16 x 16 from 2^26
 * multiply-adds with m, n >= 64); each is swept over edge shapes. A 16 x 16
 * specialization takes llvmpipe ~2 s to compile, so those tests use few
 * shapes and specializations.
 *
 * B may be a 16-bit view (fp16 or bf16): B's values are then rounded to the
 * format first (the C reference, ref_f32_to_16) and the reference uses the
 * rounded values, so the tolerance is the same; and the result must equal,
 * bit for bit, the fp32 matmul of those values (the kernel widens each value
 * exactly as it loads it and sums in the same order).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/matmul_paths.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/ssm_ops.h"
#include "ref/ref.h"

static const uint32_t sizes[] = { 1, 3, 17, 64, 65, 100 };
#define N_SIZES (sizeof sizes / sizeof sizes[0])

typedef struct mm_opts {
    bool bias;
    uint32_t a_offset, b_offset, c_offset; /* elements before each operand in its buffer */
    tmm_elem b_elem;                       /* B stored in 16 bits (fp16, bf16) */
    tmm_elem a_round;                      /* A rounded to fp16 or bf16 first (the cooperative-matrix kernel does) */
    tmm_elem b_round;                      /* B (fp32) rounded so first (the kernel with half_inputs) */
} mm_opts;

/* x rounded to a 16-bit format and the 16-bit words of all n values of x
 * (two per uint32, the lower index in the low half). */
static uint32_t *round_to_16(float *x, uint64_t n, tmm_elem e)
{
    const tmm_precision f = e == TMM_ELEM_F16 ? TMM_PRECISION_FP16 : TMM_PRECISION_BF16;
    uint32_t *w = calloc(n / 2 + 1, sizeof *w);
    cr_assert(w);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        uint16_t h = ref_f32_to_16(bits, f);
        bits = ref_16_to_f32(h, f);
        memcpy(&x[i], &bits, 4);
        w[i / 2] |= (uint32_t)h << (16 * (i % 2));
    }
    return w;
}

static uint64_t span(uint32_t batch, uint64_t stride, uint64_t one)
{
    return one ? (uint64_t)(batch - 1) * stride + one : 0;
}

/* Runs one matmul on the device and compares all of C (including the gaps
 * between batches, which must keep their old values) with the reference. */
static void check(const tmm_matmul_desc *d, const mm_opts *o, uint64_t seed)
{
    const uint32_t batch = d->batch ? d->batch : 1;
    const uint64_t m = d->m, n = d->n, k = d->k;
    uint32_t lda, ldb, ldc;
    tmm_matmul_leading(d, &lda, &ldb, &ldc);
    /* one batch of a stored matrix: its rows, the last one only as long as a row of the matrix */
    const uint64_t one_a = m && k ? (d->trans_a ? (k - 1) * lda + m : (m - 1) * lda + k) : 0;
    const uint64_t one_b = k && n ? (d->trans_b ? (n - 1) * ldb + k : (k - 1) * ldb + n) : 0;
    const uint64_t na = span(batch, d->stride_a, one_a), nb = span(batch, d->stride_b, one_b);
    const uint64_t nc = span(batch, d->stride_c, (m - 1) * ldc + n), nbias = o->bias ? n : 0;
    const uint64_t ta = o->a_offset + na, tb = o->b_offset + nb, tc = o->c_offset + nc;

    float *a = h_floats(ta), *b = h_floats(tb), *bias = h_floats(nbias), *c = h_floats(tc), *want = h_floats(tc);
    h_rand(a, ta, seed, -1, 1);
    h_rand(b, tb, seed + 1, -1, 1);
    h_rand(bias, nbias, seed + 2, -1, 1);
    h_rand(c, tc, seed + 3, -1, 1);
    uint32_t *b16 = o->b_elem ? round_to_16(b, tb, o->b_elem) : NULL;
    if (o->a_round)
        free(round_to_16(a, ta, o->a_round));
    if (o->b_round)
        free(round_to_16(b, tb, o->b_round));
    memcpy(want, c, tc * sizeof *c);
    ref_matmul(d, a + o->a_offset, b + o->b_offset, o->bias ? bias : NULL, want + o->c_offset);

    tmm_buffer *ba = h_buffer(a, ta), *bb = h_buffer(b, tb), *bbias = h_buffer(bias, nbias), *bc = h_buffer(c, tc);
    tmm_view va = tmm_sub(ba, o->a_offset * sizeof(float), na * sizeof(float));
    tmm_view vb = tmm_sub(bb, o->b_offset * sizeof(float), nb * sizeof(float));
    tmm_view vc = tmm_sub(bc, o->c_offset * sizeof(float), nc * sizeof(float));
    tmm_view vbias = o->bias ? tmm_whole(bbias) : (tmm_view){ 0 };
    tmm_buffer *bb16 = NULL;
    float *c32 = NULL;
    if (b16) {
        /* the fp32 matmul of the rounded values first: the 16-bit one must equal it (not the
         * cooperative-matrix kernel's, which sums in another order and takes fp16 B only) */
        if (d->variant != TMM_MATMUL_COOPMAT) {
            c32 = h_floats(tc);
            tmm_recorder *r = h_begin();
            H_OK(tmm_op_matmul(r, d, va, vb, vbias, vc));
            h_run(r);
            h_read(bc, c32, tc);
            H_OK(tmm_buffer_write(bc, 0, c, tc * sizeof *c));
        }
        bb16 = h_buffer((float *)b16, tb / 2 + 1);
        vb = (tmm_view){ .buffer = bb16, .offset = o->b_offset * 2ull, .size = nb * 2, .elem = o->b_elem };
    }
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_matmul(r, d, va, vb, vbias, vc));
    h_run(r);
    h_read(bc, c, tc);

    char what[128];
    snprintf(what, sizeof what, "%s %c%c %llux%llux%llu b%u%s%s%s", tmm_matmul_variant_name(d->variant),
             d->trans_a ? 't' : 'n', d->trans_b ? 't' : 'n', (unsigned long long)m, (unsigned long long)n,
             (unsigned long long)k, batch, o->bias ? " bias" : "", d->accumulate ? " acc" : "",
             o->b_elem == TMM_ELEM_F16 ? " B fp16" : o->b_elem == TMM_ELEM_BF16 ? " B bf16" : "");
    h_compare(what, c, want, tc, 1e-5 * sqrt((double)(k ? k : 1)), 1e-5);
    if (c32)
        cr_assert(memcmp(c, c32, tc * sizeof *c) == 0, "%s: differs from the fp32 matmul of the same values", what);

    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bbias);
    tmm_buffer_destroy(bc);
    tmm_buffer_destroy(bb16);
    free(b16);
    free(c32);
    free(a);
    free(b);
    free(bias);
    free(c);
    free(want);
}

static void check_simple(tmm_matmul_variant v, bool ta, bool tb, uint32_t m, uint32_t n, uint32_t k, bool bias,
                         bool acc, uint64_t seed)
{
    tmm_matmul_desc d = { .m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .accumulate = acc, .variant = v };
    mm_opts o = { .bias = bias };
    check(&d, &o, seed);
}

/* Every shape from sizes^3 for one transpose combination. The sanitizer
 * build takes every other size (1, 17, 65): the host's path is the same for
 * every shape of the sweep, and the suite runs them all on the same kernels. */
static void sweep(tmm_matmul_variant v, bool ta, bool tb)
{
    uint64_t seed = 1000 * (ta * 2 + tb + 1);
    const size_t step = H_SANITIZED ? 2 : 1;
    for (size_t i = 0; i < N_SIZES; i += step)
        for (size_t j = 0; j < N_SIZES; j += step)
            for (size_t l = 0; l < N_SIZES; l += step)
                check_simple(v, ta, tb, sizes[i], sizes[j], sizes[l], false, false, seed++);
}

/* ---- register variant ---------------------------------------------------- */

H_TEST(matmul_register, shapes_nn) { sweep(TMM_MATMUL_REGISTER, false, false); }
H_TEST(matmul_register, shapes_tn) { sweep(TMM_MATMUL_REGISTER, true, false); }
H_TEST(matmul_register, shapes_nt) { sweep(TMM_MATMUL_REGISTER, false, true); }
H_TEST(matmul_register, shapes_tt) { sweep(TMM_MATMUL_REGISTER, true, true); }

/* 16 x 16 blocks: shapes past 2^26 multiply-adds that are not multiples of
 * the block, the workgroup tile (64 x 128) or 4 (scalar loads), and
 * multiples of 4 that are not multiples of 16 (vec4 loads). */
static void big_blocks(bool ta, bool tb, uint64_t seed)
{
    check_simple(TMM_MATMUL_REGISTER, ta, tb, 401, 403, 417, false, false, seed);
    check_simple(TMM_MATMUL_REGISTER, ta, tb, 404, 420, 396, false, false, seed + 1);
}

H_TEST(matmul_register, big_blocks_n) { big_blocks(false, false, 81); big_blocks(false, true, 83); }
H_TEST(matmul_register, big_blocks_t) { big_blocks(true, false, 85); big_blocks(true, true, 87); }

H_TEST(matmul_register, big_blocks_batched)
{
    /* 64 batches of 64 x 68 x 256 (over 2^26 multiply-adds in all: 16 x 16
     * blocks, see src/ops/matmul.c), B shared */
    tmm_matmul_desc d = { .m = 64, .n = 68, .k = 256, .batch = 64, .accumulate = true,
                          .variant = TMM_MATMUL_REGISTER };
    d.stride_a = 64 * 256 + 4;
    d.stride_b = 0;
    d.stride_c = 64 * 68;
    mm_opts o = { .bias = true, .a_offset = 4 };
    check(&d, &o, 91);
    /* one large matmul with bias and accumulation, sizes not multiples of 4 */
    d = (tmm_matmul_desc){ .m = 403, .n = 397, .k = 421, .trans_b = true, .accumulate = true,
                           .variant = TMM_MATMUL_REGISTER };
    o = (mm_opts){ .bias = true, .c_offset = 1 };
    check(&d, &o, 92);
}

H_TEST(matmul_register, bias_and_accumulate)
{
    static const uint32_t shapes[][3] = { { 1, 1, 1 }, { 3, 17, 65 }, { 65, 100, 64 }, { 64, 64, 64 }, { 100, 3, 17 } };
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint32_t *sh = shapes[s];
        check_simple(TMM_MATMUL_REGISTER, false, false, sh[0], sh[1], sh[2], true, false, seed++);
        check_simple(TMM_MATMUL_REGISTER, true, true, sh[0], sh[1], sh[2], false, true, seed++);
        check_simple(TMM_MATMUL_REGISTER, true, false, sh[0], sh[1], sh[2], true, true, seed++);
    }
}

/* Batched, with gaps between batches, broadcast operands (stride 0) and
 * operands at odd offsets in their buffers. */
static void batched(tmm_matmul_variant v)
{
    tmm_matmul_desc d = { .m = 17, .n = 33, .k = 10, .batch = 3, .variant = v };
    mm_opts o = { .bias = true };
    d.stride_a = 17 * 10 + 5;
    d.stride_b = 0; /* one B for all batches */
    d.stride_c = 17 * 33 + 3;
    check(&d, &o, 11);

    d.trans_a = true;
    d.stride_a = 0; /* one A for all batches */
    d.stride_b = 33 * 10;
    d.accumulate = true;
    o = (mm_opts){ .bias = false, .a_offset = 1, .b_offset = 2, .c_offset = 3 };
    check(&d, &o, 12);

    /* vec4-friendly sizes and strides, 4 batches, B transposed */
    d = (tmm_matmul_desc){ .m = 20, .n = 36, .k = 44, .batch = 4, .trans_b = true, .variant = v };
    d.stride_a = 20 * 44 + 4;
    d.stride_b = 36 * 44;
    d.stride_c = 20 * 36 + 8;
    o = (mm_opts){ .bias = true, .a_offset = 4, .b_offset = 8, .c_offset = 12 };
    check(&d, &o, 13);
    /* the same at offsets that are not multiples of 4 floats */
    o = (mm_opts){ .bias = true, .a_offset = 1, .b_offset = 3, .c_offset = 5 };
    check(&d, &o, 14);
}

H_TEST(matmul_register, batched_strides) { batched(TMM_MATMUL_REGISTER); }

/* Several workgroups along x, y and z (8 x 8 blocks: the tile is 32 x 64). */
H_TEST(matmul_register, large)
{
    tmm_matmul_desc d = { .m = 200, .n = 150, .k = 70, .batch = 2, .variant = TMM_MATMUL_REGISTER };
    d.stride_a = 200 * 70;
    d.stride_b = 150 * 70;
    d.stride_c = 200 * 150;
    mm_opts o = { .bias = true };
    check(&d, &o, 21);
    d.trans_a = d.trans_b = true;
    check(&d, &o, 22);
    d = (tmm_matmul_desc){ .m = 200, .n = 152, .k = 72, .variant = TMM_MATMUL_REGISTER };
    check(&d, &o, 23);
}

/* ---- tiled variant (slow on lavapipe: modest shapes) ----------------------- */

H_TEST(matmul_tiled, shapes_nn) { sweep(TMM_MATMUL_TILED, false, false); }
H_TEST(matmul_tiled, shapes_tn) { sweep(TMM_MATMUL_TILED, true, false); }
H_TEST(matmul_tiled, shapes_nt) { sweep(TMM_MATMUL_TILED, false, true); }
H_TEST(matmul_tiled, shapes_tt) { sweep(TMM_MATMUL_TILED, true, true); }

H_TEST(matmul_tiled, bias_and_accumulate)
{
    static const uint32_t shapes[][3] = { { 1, 1, 1 }, { 3, 17, 65 }, { 65, 100, 64 }, { 100, 3, 17 } };
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const uint32_t *sh = shapes[s];
        check_simple(TMM_MATMUL_TILED, false, false, sh[0], sh[1], sh[2], true, false, seed++);
        check_simple(TMM_MATMUL_TILED, true, true, sh[0], sh[1], sh[2], false, true, seed++);
        check_simple(TMM_MATMUL_TILED, false, true, sh[0], sh[1], sh[2], true, true, seed++);
    }
}

H_TEST(matmul_tiled, batched_strides) { batched(TMM_MATMUL_TILED); }

/* Several 64 x 64 tiles in x and y, two batches in z. */
H_TEST(matmul_tiled, large)
{
    tmm_matmul_desc d = { .m = 130, .n = 70, .k = 40, .batch = 2, .variant = TMM_MATMUL_TILED };
    d.stride_a = 130 * 40;
    d.stride_b = 70 * 40;
    d.stride_c = 130 * 70;
    mm_opts o = { .bias = true };
    check(&d, &o, 31);
    d.trans_a = true;
    check(&d, &o, 32);
}

/* Tile shapes forced through the tuning, each on shapes that are not
 * multiples of its tile, in every layout, with bias and accumulation: 4 x 4
 * invocations of 3 x 3 outputs and k steps of 5 (each invocation stages a
 * partial share), 8 x 8 of 2 x 2 with k steps of 4, 8 x 8 of 8 x 8 (the
 * big-product shape) with k steps of 8, and 16 x 16 of 1. */
H_TEST(matmul_tiled, device_tile_shapes)
{
    static const tmm_matmul_tile tiles[] = { { 4, 3, 5 }, { 8, 2, 4 }, { 8, 8, 8 }, { 16, 1, 16 } };
    static const uint32_t shapes[][3] = { { 13, 29, 11 }, { 70, 9, 23 }, { 1, 1, 1 } };
    const tmm_device_info *info = tmm_device_get_info(h_dev);
    uint64_t seed = 7000;
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        cr_assert(tmm_matmul_tile_fits(info, tiles[t]), "tile %u/%u/%u", tiles[t].ts, tiles[t].per, tiles[t].bk);
        memcpy(h_dev->tuning.matmul_tile, &tiles[t], sizeof tiles[t]);
        tmm_matmul_tile got = tmm_matmul_tile_for(info, &h_dev->tuning, 5, 5);
        cr_assert(memcmp(&got, &tiles[t], sizeof got) == 0);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int l = 0; l < 4; l++)
                check_simple(TMM_MATMUL_TILED, l & 1, l >> 1, shapes[s][0], shapes[s][1], shapes[s][2], l == 1,
                             l == 2, seed++);
    }
    memset(h_dev->tuning.matmul_tile, 0, sizeof h_dev->tuning.matmul_tile);
}

/* The default tile from the limits: 16 x 16 invocations where 256 are
 * allowed, 8 x 8 outputs each from 1024 x 1024 outputs, the largest k step
 * that fits the shared memory; a forced tile the device cannot run is
 * ignored. */
Test(matmul_tile, from_device_limits)
{
    tmm_device_info info = { .max_workgroup_size = { 1024, 1024, 64 }, .max_workgroup_invocations = 1024,
                             .max_shared_memory = 49152, .subgroup_size = 32, .subgroup_size_max = 64 };
    tmm_matmul_tile t = tmm_matmul_tile_for(&info, NULL, 4096, 4096);
    cr_assert(t.ts == 16 && t.per == 8 && t.bk == 16, "%u %u %u", t.ts, t.per, t.bk);
    t = tmm_matmul_tile_for(&info, NULL, 4096, 100);
    cr_assert(t.ts == 16 && t.per == 4 && t.bk == 16, "%u %u %u", t.ts, t.per, t.bk);
    info.max_shared_memory = 16384; /* Vulkan's minimum */
    t = tmm_matmul_tile_for(&info, NULL, 4096, 4096);
    cr_assert(t.ts == 16 && t.per == 8 && t.bk == 8, "%u %u %u", t.ts, t.per, t.bk);
    info.max_workgroup_invocations = 128; /* Vulkan's minimum */
    t = tmm_matmul_tile_for(&info, NULL, 64, 64);
    cr_assert(t.ts == 8 && t.per == 4 && t.bk == 16, "%u %u %u", t.ts, t.per, t.bk);
    info.max_workgroup_invocations = 1024;
    info.subgroup_size_max = 512; /* 256 invocations would hold part of a subgroup */
    t = tmm_matmul_tile_for(&info, NULL, 64, 64);
    cr_assert(t.ts == 8, "%u", t.ts);
    info.max_workgroup_invocations = 128;
    tmm_device_tuning tuning = { .matmul_tile = { 32, 4, 16 } }; /* 1024 invocations: too many */
    t = tmm_matmul_tile_for(&info, &tuning, 64, 64);
    cr_assert(t.ts == 8 && t.per == 4 && t.bk == 16, "%u %u %u", t.ts, t.per, t.bk);
}

/* ---- cooperative matrices ------------------------------------------------ */

/* The cooperative-matrix kernel (fp16 or bf16 A and B, fp32 sums) where the
 * device has it for that format: every layout on sizes around its 64 x 64
 * tiles and 32-long k steps, bias and accumulation, batches with strides, B
 * at an odd offset. The reference takes A rounded as the kernel rounds it;
 * the products of 16-bit values are exact in fp32, so the tolerance is the
 * fp32 one. */
static void need_coopmat(tmm_elem h)
{
    if (!tmm_matmul_coopmat_use(h_dev, h == TMM_ELEM_BF16))
        cr_skip_test("skipped: %s", h == TMM_ELEM_BF16 && h_dev->info.coopmat_shape[0] &&
                                            !h_dev->info.coopmat_bf16_shape[0]
                                        ? "the device has no bf16 cooperative matrices"
                                    : h_dev->info.coopmat_note[0] ? h_dev->info.coopmat_note
                                                                  : "the kernel failed its self-check here");
}

static void coopmat_check(tmm_matmul_desc d, mm_opts o, uint64_t seed, tmm_elem h)
{
    d.variant = TMM_MATMUL_COOPMAT;
    o.b_elem = h;
    o.a_round = h;
    check(&d, &o, seed);
}

static void coopmat_shapes(tmm_elem h)
{
    need_coopmat(h);
    static const uint32_t s[] = { 1, 17, 65, 100 };
    uint64_t seed = 9000;
    for (int l = 0; l < 4; l++)
        for (size_t i = 0; i < 4; i++)
            for (size_t j = 0; j < 4; j++)
                for (size_t q = 0; q < 4; q++)
                    coopmat_check((tmm_matmul_desc){ .m = s[i], .n = s[j], .k = s[q], .trans_a = l & 1,
                                                     .trans_b = l >> 1 },
                                  (mm_opts){ .b_offset = (uint32_t)(i + j) % 2 }, seed++, h);
}

static void coopmat_bias_accumulate_batched(tmm_elem h)
{
    need_coopmat(h);
    coopmat_check((tmm_matmul_desc){ .m = 130, .n = 70, .k = 33, .trans_b = true, .accumulate = true },
                  (mm_opts){ .bias = true, .b_offset = 3 }, 1, h);
    coopmat_check((tmm_matmul_desc){ .m = 33, .n = 20, .k = 12, .trans_a = true, .accumulate = true },
                  (mm_opts){ .bias = true }, 2, h);
    tmm_matmul_desc d = { .m = 67, .n = 45, .k = 40, .batch = 3, .stride_a = 67 * 40 + 5, .stride_b = 45 * 40,
                          .stride_c = 67 * 45 + 1 };
    coopmat_check(d, (mm_opts){ 0 }, 3, h);
    /* AUTO takes it for a 16-bit B */
    d.variant = TMM_MATMUL_AUTO;
    check(&d, &(mm_opts){ .b_elem = h, .a_round = h }, 4);
}

/* With half_inputs it takes an fp32 B (16-bit training's weight gradients,
 * dyᵀ · x): every layout, rounded as the kernel rounds; AUTO takes it too. */
static void coopmat_fp32_b(tmm_elem h)
{
    need_coopmat(h);
    static const uint32_t s[] = { 1, 33, 100 };
    uint64_t seed = 9500;
    for (int l = 0; l < 4; l++)
        for (size_t i = 0; i < 3; i++)
            for (size_t q = 0; q < 3; q++) {
                tmm_matmul_desc d = { .m = s[i], .n = s[2 - i], .k = s[q], .trans_a = l & 1, .trans_b = l >> 1,
                                      .half_inputs = h, .variant = l == 3 ? TMM_MATMUL_AUTO : TMM_MATMUL_COOPMAT };
                check(&d, &(mm_opts){ .a_round = h, .b_round = h, .b_offset = (uint32_t)q }, seed++);
            }
}

H_TEST(matmul_coopmat, shapes_every_layout) { coopmat_shapes(TMM_ELEM_F16); }
H_TEST(matmul_coopmat, bias_accumulate_batched) { coopmat_bias_accumulate_batched(TMM_ELEM_F16); }
H_TEST(matmul_coopmat, fp32_b_with_half_inputs) { coopmat_fp32_b(TMM_ELEM_F16); }
H_TEST(matmul_coopmat, bf16_shapes_every_layout) { coopmat_shapes(TMM_ELEM_BF16); }
H_TEST(matmul_coopmat, bf16_bias_accumulate_batched) { coopmat_bias_accumulate_batched(TMM_ELEM_BF16); }
H_TEST(matmul_coopmat, bf16_fp32_b_with_half_inputs) { coopmat_fp32_b(TMM_ELEM_BF16); }

/* Elsewhere half_inputs changes nothing: AUTO keeps the fp32 kernel, whose
 * product is the same to the bit; asking for the cooperative-matrix kernel
 * with an fp32 B but no half_inputs fails on every device. */
H_TEST(matmul_coopmat, half_inputs_without_it)
{
    tmm_matmul_desc d = { .m = 37, .n = 21, .k = 50, .trans_a = true };
    float *a = h_floats(37 * 50), *b = h_floats(50 * 21), *c1 = h_floats(37 * 21), *c2 = h_floats(37 * 21);
    h_rand(a, 37 * 50, 1, -1, 1);
    h_rand(b, 50 * 21, 2, -1, 1);
    tmm_buffer *ba = h_buffer(a, 37 * 50), *bb = h_buffer(b, 50 * 21), *bc = h_buffer(NULL, 37 * 21);
    d.variant = TMM_MATMUL_COOPMAT;
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_matmul(r, &d, tmm_whole(ba), tmm_whole(bb), (tmm_view){ 0 }, tmm_whole(bc)),
                 TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "half_inputs"), "%s", tmm_last_error());
    tmm_recorder_destroy(r);
    for (tmm_elem h = TMM_ELEM_F16; h <= TMM_ELEM_BF16; h++) {
        if (tmm_matmul_coopmat_use(h_dev, h == TMM_ELEM_BF16))
            continue;
        for (int half = 0; half < 2; half++) {
            d.variant = TMM_MATMUL_AUTO;
            d.half_inputs = half ? h : TMM_ELEM_F32;
            r = h_begin();
            H_OK(tmm_op_matmul(r, &d, tmm_whole(ba), tmm_whole(bb), (tmm_view){ 0 }, tmm_whole(bc)));
            h_run(r);
            h_read(bc, half ? c2 : c1, 37 * 21);
        }
        cr_assert(memcmp(c1, c2, 37 * 21 * sizeof *c1) == 0, "half_inputs changed the fp32 kernel's product");
    }
    d.half_inputs = (tmm_elem)7;
    r = h_begin();
    cr_assert_eq(tmm_op_matmul(r, &d, tmm_whole(ba), tmm_whole(bb), (tmm_view){ 0 }, tmm_whole(bc)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "unknown element format"), "%s", tmm_last_error());
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bc);
    free(a), free(b), free(c1), free(c2);
}

/* Where the device lacks it, asking for it fails and AUTO does not take it;
 * TMM_DISABLE_COOPMAT turns it off on every device. */
Test(matmul_coopmat, refused_where_absent_and_switch)
{
    setenv("TMM_DISABLE_COOPMAT", "1", 1);
    tmm_device_info *infos;
    uint32_t count, preferred;
    H_OK(tmm_device_list(&infos, &count, &preferred));
    for (uint32_t i = 0; i < count; i++) {
        cr_assert_eq(infos[i].coopmat_shape[0], 0u);
        cr_assert(strstr(infos[i].coopmat_note, "TMM_DISABLE_COOPMAT"), "%s", infos[i].coopmat_note);
    }
    free(infos);
    unsetenv("TMM_DISABLE_COOPMAT");
    /* TMM_COOPMAT_EXTENSION keeps one extension, and names one of the two */
    setenv("TMM_COOPMAT_EXTENSION", "XYZ", 1);
    H_OK(tmm_device_list(&infos, &count, &preferred));
    for (uint32_t i = 0; i < count; i++) {
        cr_assert_eq(infos[i].coopmat_shape[0], 0u);
        cr_assert(strstr(infos[i].coopmat_note, "TMM_COOPMAT_EXTENSION=XYZ names no extension"), "%s",
                  infos[i].coopmat_note);
    }
    free(infos);
    setenv("TMM_COOPMAT_EXTENSION", "KHR", 1);
    H_OK(tmm_device_list(&infos, &count, &preferred));
    for (uint32_t i = 0; i < count; i++)
        cr_assert(infos[i].coopmat_shape[0] ? strcmp(infos[i].coopmat_extension, "VK_KHR_cooperative_matrix") == 0
                                            : strstr(infos[i].coopmat_note, "VK_NV_cooperative_matrix: not the one") !=
                                                  NULL,
                  "%s: %s", infos[i].coopmat_extension, infos[i].coopmat_note);
    free(infos);
    unsetenv("TMM_COOPMAT_EXTENSION");
}

H_TEST(matmul_coopmat, explicit_request_without_it_fails)
{
    if (h_dev->info.coopmat_shape[0])
        cr_skip_test("skipped: the device has the cooperative-matrix path");
    float x[4] = { 1, 2, 3, 4 };
    tmm_buffer *ba = h_buffer(x, 4), *bb = h_buffer(x, 2), *bc = h_buffer(NULL, 4);
    tmm_matmul_desc d = { .m = 2, .n = 2, .k = 2, .variant = TMM_MATMUL_COOPMAT };
    tmm_view vb = { .buffer = bb, .offset = 0, .size = 8, .elem = TMM_ELEM_F16 };
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_matmul(r, &d, tmm_whole(ba), vb, (tmm_view){ 0 }, tmm_whole(bc)), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "cooperative-matrix"), "%s", tmm_last_error());
    printf("explicit coopmat here: %s\n", tmm_last_error());
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bc);
}

/* ---- both ------------------------------------------------------------------ */

/* Workgroup ids past a split: one workgroup per vkCmdDispatchBase. */
H_TEST(matmul, split_dispatch)
{
    tmm_device_set_dispatch_limit(h_dev, 1, 1, 1);
    tmm_matmul_desc d = { .m = 130, .n = 140, .k = 9, .batch = 2, .variant = TMM_MATMUL_REGISTER };
    d.stride_a = 130 * 9;
    d.stride_b = 0;
    d.stride_c = 130 * 140;
    mm_opts o = { .bias = true };
    check(&d, &o, 41);
    d.variant = TMM_MATMUL_TILED;
    check(&d, &o, 42);
}

/* k == 0: C = bias (or 0), or C += bias when accumulating; m or n == 0: no-op. */
H_TEST(matmul, zero_sizes)
{
    for (int v = TMM_MATMUL_REGISTER; v <= TMM_MATMUL_TILED; v++) {
        check_simple((tmm_matmul_variant)v, false, false, 5, 7, 0, true, false, 51);
        check_simple((tmm_matmul_variant)v, false, false, 5, 7, 0, false, false, 52);
        check_simple((tmm_matmul_variant)v, true, false, 5, 7, 0, true, true, 53);
        check_simple((tmm_matmul_variant)v, false, true, 5, 7, 0, false, true, 54);
    }
    /* nothing to compute: empty views are fine */
    tmm_matmul_desc d = { .m = 0, .n = 5, .k = 3 };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_matmul(r, &d, (tmm_view){ 0 }, (tmm_view){ 0 }, (tmm_view){ 0 }, (tmm_view){ 0 }));
    d = (tmm_matmul_desc){ .m = 4, .n = 0, .k = 3, .batch = 5 };
    H_OK(tmm_op_matmul(r, &d, (tmm_view){ 0 }, (tmm_view){ 0 }, (tmm_view){ 0 }, (tmm_view){ 0 }));
    cr_assert_eq(tmm_recorder_dispatches(r), 0);
    h_run(r);
}

/* AUTO picks REGISTER on CPU devices (lavapipe) and TILED elsewhere; both
 * give the same result here. */
H_TEST(matmul, auto_variant)
{
    cr_assert_str_eq(tmm_matmul_variant_name(TMM_MATMUL_AUTO), "auto");
    cr_assert_str_eq(tmm_matmul_variant_name(TMM_MATMUL_REGISTER), "register");
    cr_assert_str_eq(tmm_matmul_variant_name(TMM_MATMUL_TILED), "tiled");
    check_simple(TMM_MATMUL_AUTO, false, true, 33, 20, 12, true, false, 61);
}

static tmm_status try_matmul(const tmm_matmul_desc *d, tmm_view a, tmm_view b, tmm_view bias, tmm_view c)
{
    tmm_recorder *r = h_begin();
    tmm_status s = tmm_op_matmul(r, d, a, b, bias, c);
    h_run(r);
    return s;
}

H_TEST(matmul, bad_arguments)
{
    const uint32_t m = 6, n = 5, k = 4;
    tmm_buffer *ba = h_buffer(NULL, m * k), *bb = h_buffer(NULL, k * n), *bc = h_buffer(NULL, 2 * m * n);
    tmm_buffer *bbias = h_buffer(NULL, n);
    tmm_view a = tmm_whole(ba), b = tmm_whole(bb), c = tmm_sub(bc, 0, m * n * sizeof(float)), none = { 0 };
    tmm_view small = tmm_sub(bc, 0, (m * n - 1) * sizeof(float));
    for (int v = TMM_MATMUL_AUTO; v <= TMM_MATMUL_TILED; v++) {
        tmm_matmul_desc d = { .m = m, .n = n, .k = k, .variant = (tmm_matmul_variant)v };
        H_OK(try_matmul(&d, a, b, none, c));
        cr_assert_eq(try_matmul(&d, tmm_sub(ba, 0, 4), b, none, c), TMM_ERR_INVALID_ARGUMENT, "A too small");
        cr_assert_eq(try_matmul(&d, a, tmm_sub(bb, 0, 4), none, c), TMM_ERR_INVALID_ARGUMENT, "B too small");
        cr_assert_eq(try_matmul(&d, a, b, none, small), TMM_ERR_INVALID_ARGUMENT, "C too small");
        cr_assert_eq(try_matmul(&d, a, b, tmm_sub(bbias, 0, 4), c), TMM_ERR_INVALID_ARGUMENT, "bias too small");
        cr_assert_eq(try_matmul(&d, none, b, none, c), TMM_ERR_INVALID_ARGUMENT, "no A");
        cr_assert_eq(try_matmul(&d, a, b, none, none), TMM_ERR_INVALID_ARGUMENT, "no C");
        cr_assert_eq(try_matmul(&d, a, b, none, tmm_sub(bc, 2, m * n * sizeof(float))), TMM_ERR_INVALID_ARGUMENT,
                     "C not float-aligned");
        /* the view claims more than its buffer holds */
        cr_assert_eq(try_matmul(&d, a, b, none, tmm_sub(bc, m * n * sizeof(float), 2 * m * n * sizeof(float))),
                     TMM_ERR_INVALID_ARGUMENT, "C overruns its buffer");
        d.trans_a = true; /* the same floats are needed either way */
        cr_assert_eq(try_matmul(&d, tmm_sub(ba, 0, (m * k - 1) * sizeof(float)), b, none, c),
                     TMM_ERR_INVALID_ARGUMENT, "transposed A too small");
        d.trans_a = false;
        /* two batches need stride * (batch - 1) + m * k floats */
        d.batch = 2;
        d.stride_c = m * n;
        d.stride_a = 1;
        cr_assert_eq(try_matmul(&d, a, b, none, tmm_whole(bc)), TMM_ERR_INVALID_ARGUMENT, "batched A too small");
        d.stride_a = 0;
        H_OK(try_matmul(&d, a, b, none, tmm_whole(bc)));
        d.stride_c = m * n - 1; /* batches of C would overlap */
        cr_assert_eq(try_matmul(&d, a, b, none, tmm_whole(bc)), TMM_ERR_INVALID_ARGUMENT, "C batches overlap");
        d.batch = 1;
        /* the output may not alias an input */
        cr_assert_eq(try_matmul(&d, tmm_sub(bc, 0, m * k * sizeof(float)), b, none,
                                tmm_sub(bc, 4 * sizeof(float), m * n * sizeof(float))),
                     TMM_ERR_INVALID_ARGUMENT, "C aliases A");
    }
    tmm_matmul_desc d = { .m = m, .n = n, .k = k, .variant = (tmm_matmul_variant)7 };
    cr_assert_eq(try_matmul(&d, a, b, none, c), TMM_ERR_INVALID_ARGUMENT, "unknown variant");
    cr_assert_eq(tmm_op_matmul(NULL, &d, a, b, none, c), TMM_ERR_INVALID_ARGUMENT);
    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bc);
    tmm_buffer_destroy(bbias);
}

/* A batch whose A spans more than maxStorageBufferRange (128 MiB on
 * lavapipe) is split over dispatches, each binding from an aligned offset;
 * the odd stride makes the later chunks start mid-alignment. The short mode
 * (h_full) lowers the range to 4 MiB, which takes the same splits on 32x less
 * data; the full mode meets the device's own limit. */
H_TEST(matmul, batch_larger_than_binding)
{
    const tmm_device_info saved = h_dev->info;
    if (!h_full())
        h_dev->info.max_storage_buffer_range = 4u << 20;
    const tmm_device_info *info = tmm_device_get_info(h_dev);
    tmm_matmul_desc d = { .m = 1000, .n = 3, .k = 1024, .variant = TMM_MATMUL_REGISTER };
    d.stride_a = (uint64_t)d.m * d.k + 1;
    d.stride_b = (uint64_t)d.k * d.n;
    d.stride_c = (uint64_t)d.m * d.n;
    uint64_t per_batch = d.stride_a * sizeof(float);
    d.batch = (uint32_t)(info->max_storage_buffer_range / per_batch + 3);
    if ((uint64_t)d.batch * per_batch > 512ull << 20) {
        cr_log_info("maxStorageBufferRange is %llu bytes: skipping the split test",
                    (unsigned long long)info->max_storage_buffer_range);
        h_dev->info = saved;
        return;
    }
    mm_opts o = { .bias = true };
    check(&d, &o, 71);
    /* a single matrix over the limit is computed in blocks of k, accumulating */
    tmm_matmul_desc big = { .m = 1, .n = 1, .k = (uint32_t)(info->max_storage_buffer_range / 4 + 1) };
    check(&big, &(mm_opts){ .bias = true }, 73);
    h_dev->info = saved;
}

/* A single matrix larger than a binding (the MLP of a large model: [B*n, 4d]
 * floats can pass maxStorageBufferRange) is computed in blocks of C and k.
 * Forced here with a 4 KiB binding range and 256-byte alignment, so every
 * operand spans several bindings and pieces start mid-alignment; the blocks
 * sum k in another order than one dispatch, within the same tolerance. */
H_TEST(matmul, matrix_larger_than_binding)
{
    const tmm_device_info saved = h_dev->info;
    h_dev->info.max_storage_buffer_range = 4096;
    h_dev->info.min_storage_buffer_offset_alignment = 256;
    for (int v = 0; v < 2; v++) {
        tmm_matmul_variant variant = v ? TMM_MATMUL_TILED : TMM_MATMUL_REGISTER;
        mm_opts plain = { 0 }, with_bias = { .bias = true, .a_offset = 3, .b_offset = 1, .c_offset = 5 };
        /* rows of C: activations times weights (nt), gradients times weights (nn) */
        tmm_matmul_desc nt = { .m = 100, .n = 17, .k = 37, .trans_b = true, .variant = variant };
        check(&nt, &with_bias, 301);
        tmm_matmul_desc nn = { .m = 91, .n = 20, .k = 40, .accumulate = true, .variant = variant };
        check(&nn, &plain, 303);
        /* k: weight gradients summed over rows (tn); the bias is added once */
        tmm_matmul_desc tn = { .m = 13, .n = 9, .k = 300, .trans_a = true, .variant = variant };
        check(&tn, &with_bias, 305);
        tn.accumulate = true;
        check(&tn, &plain, 307);
        /* batches that are each too large, with strides that leave gaps */
        tmm_matmul_desc batched = { .m = 40, .n = 20, .k = 33, .trans_b = true, .batch = 3,
                                    .stride_a = 40 * 33 + 7, .stride_b = 0, .stride_c = 40 * 20 + 2,
                                    .variant = variant };
        check(&batched, &plain, 309);
    }
    /* both transposed, and blocks of C in both directions (a row of C longer than a binding) */
    tmm_matmul_desc tt = { .m = 40, .n = 37, .k = 41, .trans_a = true, .trans_b = true };
    check(&tt, &(mm_opts){ .bias = true, .c_offset = 1 }, 311);
    tmm_matmul_desc wide = { .m = 3, .n = 1500, .k = 5, .trans_b = true, .accumulate = true };
    check(&wide, &(mm_opts){ .bias = true }, 313);
    /* leading dimensions: a block of a larger matrix, as a caller may pass */
    tmm_matmul_desc ld = { .m = 7, .n = 9, .k = 11, .lda = 13, .ldb = 12, .ldc = 10 };
    check(&ld, &(mm_opts){ 0 }, 315);
    h_dev->info = saved;
}

/* ---- B in 16 bits --------------------------------------------------------- */

/* Edge shapes, B at an odd offset (its words straddle two values), for both
 * transposes of B and, for one format each, A transposed and bias with
 * accumulation. */
static void shapes16(tmm_matmul_variant v, tmm_elem e)
{
    static const uint32_t s16[] = { 1, 3, 17, 65 };
    uint64_t seed = 500 + 100 * e;
    for (int tb = 0; tb < 2; tb++)
        for (size_t i = 0; i < 4; i++)
            for (size_t j = 0; j < 4; j++)
                for (size_t l = 0; l < 4; l++) {
                    tmm_matmul_desc d = { .m = s16[i], .n = s16[j], .k = s16[l], .trans_b = tb, .variant = v };
                    check(&d, &(mm_opts){ .b_offset = (uint32_t)(i + j) % 2, .b_elem = e }, seed++);
                }
    tmm_matmul_desc d = { .m = 33, .n = 20, .k = 12, .trans_a = true, .accumulate = true, .variant = v };
    check(&d, &(mm_opts){ .bias = true, .b_offset = 3, .b_elem = e }, seed++);
}

H_TEST(matmul_16bit, register_fp16) { shapes16(TMM_MATMUL_REGISTER, TMM_ELEM_F16); }
H_TEST(matmul_16bit, register_bf16) { shapes16(TMM_MATMUL_REGISTER, TMM_ELEM_BF16); }
H_TEST(matmul_16bit, tiled_fp16) { shapes16(TMM_MATMUL_TILED, TMM_ELEM_F16); }
H_TEST(matmul_16bit, tiled_bf16) { shapes16(TMM_MATMUL_TILED, TMM_ELEM_BF16); }

/* Values whose conversion is not a plain shift: fp16 subnormals, the largest
 * finite values and zeros of both signs, through the scalar and the uvec2 loads. */
H_TEST(matmul_16bit, special_values)
{
    const uint32_t k = 8, n = 8;
    float a[8], b[64];
    for (uint32_t i = 0; i < k; i++)
        a[i] = 1.0f; /* C = the column sums of B: exact for these values */
    for (uint32_t i = 0; i < k * n; i++)
        b[i] = (i % 4 == 0) ? 65504.0f : (i % 4 == 1) ? ldexpf((float)(i + 1), -24) : (i % 4 == 2) ? -0.0f : -ldexpf(1, -14);
    uint32_t *w = round_to_16(b, k * n, TMM_ELEM_F16);
    tmm_buffer *ba = h_buffer(a, k), *bb = h_buffer((float *)w, k * n / 2), *bc = h_buffer(NULL, n);
    for (int vec = 0; vec < 2; vec++) {
        /* n a multiple of 4 reads B in groups of 4 (uvec2); an odd start does not */
        tmm_matmul_desc d = { .m = 1, .n = vec ? n : n - 1, .k = vec ? k : k - 1, .variant = TMM_MATMUL_REGISTER };
        tmm_view vb = { .buffer = bb, .offset = vec ? 0 : 2, .size = vec ? k * n * 2 : (k * n - 1) * 2,
                        .elem = TMM_ELEM_F16 };
        if (!vec)
            d.ldb = n;
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_matmul(r, &d, tmm_whole(ba), vb, (tmm_view){ 0 }, tmm_whole(bc)));
        h_run(r);
        float c[8];
        h_read(bc, c, n);
        for (uint32_t j = 0; j < d.n; j++) {
            double want = 0;
            for (uint32_t l = 0; l < d.k; l++)
                want += b[(vec ? 0 : 1) + l * n + j];
            cr_assert_eq(c[j], (float)want, "column %u (%s): %.9g, want %.9g", j, vec ? "uvec2" : "scalar", c[j],
                         want);
        }
    }
    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bc);
    free(w);
}

/* Batches of B at odd strides, the 16 x 16 register blocks with uvec2 loads,
 * and matrices larger than a binding (blocks of C and k over 16-bit B). */
H_TEST(matmul_16bit, batched_big_and_blocked)
{
    for (int v = TMM_MATMUL_REGISTER; v <= TMM_MATMUL_TILED; v++) {
        tmm_matmul_desc d = { .m = 17, .n = 33, .k = 10, .batch = 3, .trans_b = v == TMM_MATMUL_TILED,
                              .variant = (tmm_matmul_variant)v };
        d.stride_a = 17 * 10 + 5;
        d.stride_b = 33 * 10 + 1;
        d.stride_c = 17 * 33 + 3;
        check(&d, &(mm_opts){ .bias = true, .b_offset = 1, .b_elem = TMM_ELEM_BF16 }, 601 + v);
    }
    tmm_matmul_desc big = { .m = 404, .n = 420, .k = 396, .trans_b = true, .variant = TMM_MATMUL_REGISTER };
    check(&big, &(mm_opts){ .b_elem = TMM_ELEM_F16 }, 611);
    const tmm_device_info saved = h_dev->info;
    h_dev->info.max_storage_buffer_range = 4096;
    h_dev->info.min_storage_buffer_offset_alignment = 256;
    for (int v = TMM_MATMUL_REGISTER; v <= TMM_MATMUL_TILED; v++) {
        tmm_matmul_desc nt = { .m = 100, .n = 17, .k = 37, .trans_b = true, .variant = (tmm_matmul_variant)v };
        check(&nt, &(mm_opts){ .bias = true, .b_offset = 1, .b_elem = TMM_ELEM_F16 }, 621 + v);
        tmm_matmul_desc nn = { .m = 9, .n = 1500, .k = 5, .accumulate = true, .variant = (tmm_matmul_variant)v };
        check(&nn, &(mm_opts){ .b_offset = 3, .b_elem = TMM_ELEM_BF16 }, 623 + v);
        tmm_matmul_desc tn = { .m = 13, .n = 9, .k = 3000, .trans_a = true, .variant = (tmm_matmul_variant)v };
        check(&tn, &(mm_opts){ .b_elem = TMM_ELEM_F16 }, 625 + v);
    }
    h_dev->info = saved;
}

H_TEST(matmul_16bit, bad_arguments)
{
    const uint32_t m = 6, n = 5, k = 4;
    tmm_buffer *ba = h_buffer(NULL, m * k), *bb = h_buffer(NULL, k * n), *bc = h_buffer(NULL, m * n);
    tmm_view a = tmm_whole(ba), c = tmm_whole(bc), none = { 0 };
    tmm_view b = { .buffer = bb, .size = k * n * 2, .elem = TMM_ELEM_F16 };
    tmm_matmul_desc d = { .m = m, .n = n, .k = k };
    H_OK(try_matmul(&d, a, b, none, c));
    tmm_view short_b = b, odd_b = b, bad_b = b, a16 = a, c16 = c;
    short_b.size -= 2;
    odd_b.offset = 1;
    bad_b.elem = (tmm_elem)7;
    a16.elem = TMM_ELEM_BF16;
    c16.elem = TMM_ELEM_F16;
    cr_assert_eq(try_matmul(&d, a, short_b, none, c), TMM_ERR_INVALID_ARGUMENT, "B too small");
    cr_assert_eq(try_matmul(&d, a, odd_b, none, c), TMM_ERR_INVALID_ARGUMENT, "B at an odd byte");
    cr_assert_eq(try_matmul(&d, a, bad_b, none, c), TMM_ERR_INVALID_ARGUMENT, "unknown format");
    cr_assert_eq(try_matmul(&d, a16, b, none, c), TMM_ERR_INVALID_ARGUMENT, "16-bit A");
    cr_assert_eq(try_matmul(&d, a, b, none, c16), TMM_ERR_INVALID_ARGUMENT, "16-bit C");
    /* every other op reads 32-bit floats and says so */
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_copy(r, b, c, 4), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "16-bit"), "%s", tmm_last_error());
    h_run(r);
    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bc);
}

/* ---- the activation's gradient in the epilogue ------------------------------
 *
 * C = (A·B) * act'(C + bias) in place (ops.h, tmm_matmul_epilogue): against
 * the reference on edge shapes (scalar and vec4 stores, both block sizes);
 * against linear_dx followed by the activation's own backward, bit for bit
 * (the same sums, the same derivative code: shaders/silu.glsl, gelu.glsl);
 * the reference's factor by finite differences; the refusals. */

H_TEST(matmul_epilogue, matches_reference)
{
    static const uint32_t shapes[][3] = { { 1, 1, 1 }, { 37, 45, 19 }, { 65, 64, 100 }, { 1100, 260, 256 } };
    for (int v = TMM_MATMUL_REGISTER; v <= TMM_MATMUL_TILED; v++)
        for (int e = TMM_MATMUL_EPI_SILU_GRAD; e <= TMM_MATMUL_EPI_GELU_GRAD; e++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                if (v == TMM_MATMUL_TILED && shapes[s][0] > 100)
                    continue; /* the large shape is for the register kernel's 16 x 16 blocks */
                tmm_matmul_desc d = { .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                                      .variant = (tmm_matmul_variant)v, .epilogue = (tmm_matmul_epilogue)e };
                check(&d, &(mm_opts){ .bias = true }, 700 + 10 * (uint64_t)s + 2 * (uint64_t)e + (uint64_t)v);
            }
}

/* linear_dx_act against linear_dx then the activation's backward (the MLP's
 * unfused path), on one device, rows and widths off the block sizes. */
static void check_dx_act(tmm_matmul_epilogue act, uint32_t rows, uint32_t in, uint32_t out, uint64_t seed)
{
    const size_t na = (size_t)rows * in, ny = (size_t)rows * out, nw = (size_t)out * in;
    float *a = h_floats(na), *dy = h_floats(ny), *w = h_floats(nw), *b = h_floats(in);
    h_rand(a, na, seed, -4, 4);
    h_rand(dy, ny, seed + 1, -1, 1);
    h_rand(w, nw, seed + 2, -1, 1);
    h_rand(b, in, seed + 3, -1, 1);
    tmm_buffer *ba = h_buffer(a, na), *bdy = h_buffer(dy, ny), *bw = h_buffer(w, nw), *bb = h_buffer(b, in);
    tmm_buffer *bge = h_buffer(NULL, na), *bdb = h_buffer(NULL, in);
    uint64_t ns = act == TMM_MATMUL_EPI_SILU_GRAD ? tmm_op_bias_silu_backward_scratch(rows, in)
                                                   : tmm_op_gelu_backward_scratch(rows, in);
    tmm_buffer *sc = h_buffer(NULL, ns ? ns : 1);
    cr_assert(tmm_op_linear_dx_act_fits(h_dev, rows, in, out));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_dx(r, tmm_whole(bdy), rows, in, out, tmm_whole(bw), tmm_whole(bge), false));
    if (act == TMM_MATMUL_EPI_SILU_GRAD)
        H_OK(tmm_op_bias_silu_backward(r, tmm_whole(ba), tmm_whole(bb), tmm_whole(bge), rows, in, false,
                                       tmm_whole(sc), tmm_whole(bge), tmm_whole(bdb)));
    else
        H_OK(tmm_op_gelu_backward(r, tmm_whole(ba), tmm_whole(bb), tmm_whole(bge), rows, in, false, tmm_whole(sc),
                                  tmm_whole(bge), tmm_whole(bdb)));
    H_OK(tmm_op_linear_dx_act(r, tmm_whole(bdy), rows, in, out, tmm_whole(bw), tmm_whole(bb), act, tmm_whole(ba)));
    h_run(r);
    float *fused = h_floats(na), *unfused = h_floats(na);
    h_read(ba, fused, na);
    h_read(bge, unfused, na);
    for (size_t i = 0; i < na; i++)
        cr_assert(memcmp(&fused[i], &unfused[i], sizeof(float)) == 0, "%s rows %u in %u out %u: da[%zu] fused %.9g, "
                  "unfused %.9g", act == TMM_MATMUL_EPI_SILU_GRAD ? "silu" : "gelu", rows, in, out, i,
                  (double)fused[i], (double)unfused[i]);
    tmm_buffer *bufs[] = { ba, bdy, bw, bb, bge, bdb, sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(a), free(dy), free(w), free(b), free(fused), free(unfused);
}

H_TEST(matmul_epilogue, same_as_unfused)
{
    for (int e = TMM_MATMUL_EPI_SILU_GRAD; e <= TMM_MATMUL_EPI_GELU_GRAD; e++) {
        check_dx_act((tmm_matmul_epilogue)e, 33, 70, 13, 810 + (uint64_t)e);
        check_dx_act((tmm_matmul_epilogue)e, 1030, 256, 128, 820 + (uint64_t)e); /* 16 x 16 blocks, vec4 stores */
    }
}

/* The reference's factor is dL/dC for L = sum (A·B) ⊙ act(C + bias). */
H_TEST(matmul_epilogue, reference_by_finite_differences)
{
    const uint32_t m = 3, n = 4, k = 2;
    float a[6], b[8], bias[4], c[12], g[12];
    h_rand(a, 6, 901, -1, 1);
    h_rand(b, 8, 902, -1, 1);
    h_rand(bias, 4, 903, -1, 1);
    h_rand(c, 12, 904, -3, 3);
    for (int e = TMM_MATMUL_EPI_SILU_GRAD; e <= TMM_MATMUL_EPI_GELU_GRAD; e++) {
        tmm_matmul_desc d = { .m = m, .n = n, .k = k, .epilogue = (tmm_matmul_epilogue)e };
        memcpy(g, c, sizeof c);
        ref_matmul(&d, a, b, bias, g);
        for (uint32_t i = 0; i < m * n; i++) {
            double p = 0, l[2];
            for (uint32_t q = 0; q < k; q++)
                p += (double)a[i / n * k + q] * b[q * n + i % n];
            for (int side = 0; side < 2; side++) {
                double u = (double)c[i] + bias[i % n] + (side ? 1e-6 : -1e-6);
                l[side] = p * (e == TMM_MATMUL_EPI_SILU_GRAD ? u / (1 + exp(-u)) : u * 0.5 * erfc(-u / sqrt(2)));
            }
            double fd = (l[1] - l[0]) / 2e-6;
            cr_assert(fabs(g[i] - fd) <= 1e-5 * (1 + fabs(fd)), "epilogue %d, C[%u]: %.9g, finite differences %.9g",
                      e, i, (double)g[i], fd);
        }
    }
}

H_TEST(matmul_epilogue, bad_arguments)
{
    tmm_buffer *ba = h_buffer(NULL, 6), *bb = h_buffer(NULL, 6), *bc = h_buffer(NULL, 4), *bbias = h_buffer(NULL, 2);
    tmm_view none = { 0 };
    tmm_matmul_desc d = { .m = 2, .n = 2, .k = 3, .epilogue = TMM_MATMUL_EPI_SILU_GRAD };
    cr_assert_eq(try_matmul(&d, tmm_whole(ba), tmm_whole(bb), none, tmm_whole(bc)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "needs the bias"), "%s", tmm_last_error());
    d.accumulate = true;
    cr_assert_eq(try_matmul(&d, tmm_whole(ba), tmm_whole(bb), tmm_whole(bbias), tmm_whole(bc)),
                 TMM_ERR_INVALID_ARGUMENT);
    d.accumulate = false;
    d.epilogue = (tmm_matmul_epilogue)9;
    cr_assert_eq(try_matmul(&d, tmm_whole(ba), tmm_whole(bb), tmm_whole(bbias), tmm_whole(bc)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "unknown epilogue"), "%s", tmm_last_error());
    tmm_buffer_destroy(ba), tmm_buffer_destroy(bb), tmm_buffer_destroy(bc), tmm_buffer_destroy(bbias);
}

/* ---- the activation in the forward's epilogue ------------------------------
 *
 * C = A·B and Z = act(C + bias) in one pass (tmm_op_matmul_act; the MLP's
 * first layer): against the matmul without bias followed by the activation's
 * own forward (tmm_op_bias_silu_forward, tmm_op_gelu_forward: the MLP's
 * unfused path), bit for bit, and against the reference (C: ref_matmul; Z:
 * the activation of C + bias in double), on edge shapes: scalar and vec4
 * stores, both register blocks, a Z not aligned for vec4, batches with gaps
 * (which keep their values in C and Z). The cooperative-matrix kernel takes
 * A and B rounded to fp16 first (half_inputs). */

static double act_d(tmm_matmul_epilogue act, double u)
{
    return act == TMM_MATMUL_EPI_SILU ? u / (1 + exp(-u)) : u * 0.5 * erfc(-u / sqrt(2));
}

typedef struct act_case {
    uint32_t m, n, k, batch;
    bool trans_b;
    uint32_t z_offset; /* floats before Z in its buffer */
} act_case;

static void check_act(tmm_matmul_variant v, tmm_matmul_epilogue act, act_case t, uint64_t seed)
{
    const uint32_t batch = t.batch ? t.batch : 1;
    const uint64_t m = t.m, n = t.n, k = t.k, one_c = m * n;
    tmm_matmul_desc d = { .m = t.m, .n = t.n, .k = t.k, .trans_b = t.trans_b, .batch = batch,
                          .stride_a = m * k, .stride_c = one_c + (batch > 1 ? 3 : 0), .variant = v,
                          .half_inputs = v == TMM_MATMUL_COOPMAT ? TMM_ELEM_F16 : TMM_ELEM_F32 };
    const uint64_t na = batch * m * k, nb = n * k, nc = span(batch, d.stride_c, one_c), nz = t.z_offset + nc;
    float *a = h_floats(na), *b = h_floats(nb), *bias = h_floats(n), *c = h_floats(nc), *z = h_floats(nz);
    h_rand(a, na, seed, -1, 1);
    h_rand(b, nb, seed + 1, -1, 1);
    h_rand(bias, n, seed + 2, -1, 1);
    h_rand(c, nc, seed + 3, -1, 1);
    h_rand(z, nz, seed + 4, -1, 1);
    if (v == TMM_MATMUL_COOPMAT) {
        free(round_to_16(a, na, TMM_ELEM_F16));
        free(round_to_16(b, nb, TMM_ELEM_F16));
    }
    float *want = h_floats(nc), *got_c = h_floats(nc), *got_z = h_floats(nz);
    memcpy(want, c, nc * sizeof *c);
    ref_matmul(&d, a, b, NULL, want);

    tmm_buffer *ba = h_buffer(a, na), *bb = h_buffer(b, nb), *bbias = h_buffer(bias, n), *bc = h_buffer(c, nc);
    tmm_buffer *bz = h_buffer(z, nz);
    tmm_view vz = tmm_sub(bz, t.z_offset * sizeof(float), nc * sizeof(float));
    d.epilogue = act;
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_matmul_act(r, &d, tmm_whole(ba), tmm_whole(bb), tmm_whole(bbias), tmm_whole(bc), vz));
    h_run(r);
    h_read(bc, got_c, nc);
    h_read(bz, got_z, nz);

    char what[96];
    snprintf(what, sizeof what, "%s %s %llux%llux%llu b%u z+%u", tmm_matmul_variant_name(v),
             act == TMM_MATMUL_EPI_SILU ? "silu" : "gelu", (unsigned long long)m, (unsigned long long)n,
             (unsigned long long)k, batch, t.z_offset);
    h_compare(what, got_c, want, nc, 1e-5 * sqrt((double)k), 1e-5);
    for (uint64_t i = 0; i < nc; i++) {
        const bool inside = i % d.stride_c < one_c;
        const double zw = inside ? act_d(act, (double)got_c[i] + bias[i % d.stride_c % n]) : z[t.z_offset + i];
        cr_assert(fabs(got_z[t.z_offset + i] - zw) <= 1e-6 + 1e-6 * fabs(zw), "%s: Z[%llu] %.9g, want %.9g", what,
                  (unsigned long long)i, (double)got_z[t.z_offset + i], zw);
    }
    for (uint32_t i = 0; i < t.z_offset; i++)
        cr_assert(got_z[i] == z[i], "%s: Z's buffer changed before Z", what);

    if (batch == 1) { /* the unfused path: the same sums, then the activation's kernel */
        float *c2 = h_floats(nc), *z2 = h_floats(nc);
        tmm_buffer *bc2 = h_buffer(c, nc), *bz2 = h_buffer(NULL, nc);
        d.epilogue = TMM_MATMUL_EPI_NONE;
        r = h_begin();
        H_OK(tmm_op_matmul(r, &d, tmm_whole(ba), tmm_whole(bb), (tmm_view){ 0 }, tmm_whole(bc2)));
        if (act == TMM_MATMUL_EPI_SILU)
            H_OK(tmm_op_bias_silu_forward(r, tmm_whole(bc2), tmm_whole(bbias), t.m, t.n, tmm_whole(bz2)));
        else
            H_OK(tmm_op_gelu_forward(r, tmm_whole(bc2), tmm_whole(bbias), t.m, t.n, tmm_whole(bz2)));
        h_run(r);
        h_read(bc2, c2, nc);
        h_read(bz2, z2, nc);
        cr_assert(memcmp(got_c, c2, nc * sizeof *c2) == 0, "%s: C differs from the unfused matmul's", what);
        for (uint64_t i = 0; i < nc; i++)
            cr_assert(memcmp(&got_z[t.z_offset + i], &z2[i], sizeof *z2) == 0, "%s: Z[%llu] fused %.9g, unfused %.9g",
                      what, (unsigned long long)i, (double)got_z[t.z_offset + i], (double)z2[i]);
        tmm_buffer_destroy(bc2), tmm_buffer_destroy(bz2);
        free(c2), free(z2);
    }
    tmm_buffer *bufs[] = { ba, bb, bbias, bc, bz };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(a), free(b), free(bias), free(c), free(z), free(want), free(got_c), free(got_z);
}

static void act_cases(tmm_matmul_variant v, const act_case *cases, size_t n_cases, uint64_t seed)
{
    for (int e = TMM_MATMUL_EPI_SILU; e <= TMM_MATMUL_EPI_GELU; e++)
        for (size_t i = 0; i < n_cases; i++)
            check_act(v, (tmm_matmul_epilogue)e, cases[i], seed + 10 * i + (uint64_t)e);
}

/* the small shapes every kernel runs: scalar stores (n odd), vec4 ones, a
 * misaligned Z, a batch of B broadcast with gaps between the Cs */
static const act_case small_act_cases[] = {
    { 37, 45, 19, 1, true, 0 }, { 33, 16, 70, 1, true, 0 }, { 33, 16, 70, 1, true, 1 }, { 17, 20, 9, 3, false, 2 },
};
#define N_SMALL_ACT (sizeof small_act_cases / sizeof small_act_cases[0])

H_TEST(matmul_epilogue, forward_register)
{
    act_cases(TMM_MATMUL_REGISTER, small_act_cases, N_SMALL_ACT, 1000);
    /* 16 x 16 blocks (2^26 multiply-adds), the MLP's layout; vec4 stores, then a Z that is not aligned for them */
    static const act_case big[] = { { 1030, 256, 256, 1, true, 0 }, { 1030, 256, 256, 1, true, 1 } };
    act_cases(TMM_MATMUL_REGISTER, big, 2, 1100);
}

H_TEST(matmul_epilogue, forward_tiled) { act_cases(TMM_MATMUL_TILED, small_act_cases, N_SMALL_ACT, 1200); }

H_TEST(matmul_epilogue, forward_coopmat)
{
    need_coopmat(TMM_ELEM_F16);
    act_cases(TMM_MATMUL_COOPMAT, small_act_cases, N_SMALL_ACT, 1300);
}

static tmm_status try_act(const tmm_matmul_desc *d, tmm_view a, tmm_view b, tmm_view bias, tmm_view c, tmm_view z)
{
    tmm_recorder *r = h_begin();
    tmm_status s = tmm_op_matmul_act(r, d, a, b, bias, c, z);
    h_run(r);
    return s;
}

H_TEST(matmul_epilogue, forward_bad_arguments)
{
    tmm_buffer *ba = h_buffer(NULL, 6), *bb = h_buffer(NULL, 6), *bc = h_buffer(NULL, 8), *bbias = h_buffer(NULL, 2);
    tmm_view none = { 0 }, a = tmm_whole(ba), b = tmm_whole(bb), bias = tmm_whole(bbias);
    tmm_view c = tmm_sub(bc, 0, 16), z = tmm_sub(bc, 16, 16);
    tmm_matmul_desc d = { .m = 2, .n = 2, .k = 3, .epilogue = TMM_MATMUL_EPI_SILU };
    H_OK(try_act(&d, a, b, bias, c, z));
    cr_assert_eq(try_act(&d, a, b, bias, c, none), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "needs its output z"), "%s", tmm_last_error());
    cr_assert_eq(try_act(&d, a, b, none, c, z), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "needs the bias"), "%s", tmm_last_error());
    cr_assert_eq(try_act(&d, a, b, bias, c, tmm_sub(bc, 16, 12)), TMM_ERR_INVALID_ARGUMENT, "z too small");
    cr_assert_eq(try_act(&d, a, b, bias, c, tmm_sub(bc, 8, 16)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "z overlaps"), "%s", tmm_last_error());
    cr_assert_eq(try_act(&d, a, b, bias, c, (tmm_view){ .buffer = bc, .offset = 16, .size = 8, .elem = TMM_ELEM_F16 }),
                 TMM_ERR_INVALID_ARGUMENT, "16-bit z");
    d.epilogue = TMM_MATMUL_EPI_SILU_GRAD;
    cr_assert_eq(try_act(&d, a, b, bias, c, z), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "only for a forward"), "%s", tmm_last_error());
    d.epilogue = TMM_MATMUL_EPI_NONE;
    cr_assert_eq(try_act(&d, a, b, bias, c, z), TMM_ERR_INVALID_ARGUMENT);
    /* more than one pass: k beyond one dispatch's sum */
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_linear_act(r, a, 1, 20000, 1, b, bias, TMM_MATMUL_EPI_GELU_GRAD, c, z),
                 TMM_ERR_INVALID_ARGUMENT);
    h_run(r);
    cr_assert(!tmm_op_linear_act_fits(h_dev, 1, 20000, 1));
    cr_assert(tmm_op_linear_act_fits(h_dev, 4096, 128, 256));
    tmm_buffer *big = h_buffer(NULL, 20000);
    d = (tmm_matmul_desc){ .m = 1, .n = 1, .k = 20000, .epilogue = TMM_MATMUL_EPI_GELU };
    cr_assert_eq(try_act(&d, tmm_whole(big), tmm_whole(big), bias, c, z), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "needs one pass"), "%s", tmm_last_error());
    tmm_buffer_destroy(ba), tmm_buffer_destroy(bb), tmm_buffer_destroy(bc), tmm_buffer_destroy(bbias);
    tmm_buffer_destroy(big);
}

/* The register kernel sums Aᵀ·B in blocks of 2048 of k (matmul.c,
 * REG_TRANS_A_MAX_K): k past one and several blocks, with bias and
 * accumulation (the bias in the first block only), the large blocks, and a
 * batched one (which keeps one sum). */
H_TEST(matmul_register, trans_a_in_blocks_of_k)
{
    tmm_matmul_desc d1 = { .m = 37, .n = 45, .k = 2049, .trans_a = true, .variant = TMM_MATMUL_REGISTER };
    check(&d1, &(mm_opts){ .bias = true }, 951);
    tmm_matmul_desc d2 = { .m = 13, .n = 9, .k = 6000, .trans_a = true, .accumulate = true,
                           .variant = TMM_MATMUL_REGISTER };
    check(&d2, &(mm_opts){ .bias = true }, 952);
    tmm_matmul_desc d3 = { .m = 128, .n = 100, .k = 4500, .trans_a = true, .trans_b = true,
                           .variant = TMM_MATMUL_REGISTER };
    check(&d3, &(mm_opts){ 0 }, 953);
    tmm_matmul_desc d4 = { .m = 20, .n = 7, .k = 2100, .trans_a = true, .batch = 2, .stride_a = 20 * 2100,
                           .stride_b = 7 * 2100, .stride_c = 150, .variant = TMM_MATMUL_REGISTER };
    check(&d4, &(mm_opts){ .bias = true }, 954);
}
