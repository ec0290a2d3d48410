/* pack16 / unpack16 against the C reference (ref_f32_to_16, ref_16_to_f32),
 * and the reference against the compiler's own _Float16 conversion and, for
 * bf16, against nearest-value rounding checked in double. */
#include <math.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ref/ref.h"

__extension__ typedef _Float16 half_t; /* GCC's and Clang's IEEE half (x86-64, aarch64) */

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static bool is_nan32(uint32_t u) { return (u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu); }

/* Awkward values: zeros, subnormal fp32, fp16's subnormal range and its
 * rounding ties, the largest finite fp16 and just past it, infinities, NaNs,
 * then random bit patterns. */
static void fill_values(uint32_t *u, size_t n, uint64_t seed)
{
    const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x33000000u /* 2^-25: tie to 0 */,
        0x33000001u, 0x33400000u /* 1.5 * 2^-25 */, 0x33800000u /* 2^-24 */, 0x38800000u /* 2^-14 */,
        0x387fe000u, 0x3f801000u /* 1 + 2^-11: tie, stays 1 */, 0x3f803000u /* 1 + 3 * 2^-11: tie, up */,
        0x477fe000u /* 65504 */, 0x477fefffu, 0x477ff000u /* tie: to infinity */, 0x47800000u, 0x7f7fffffu,
        0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffc12345u, 0x3f7fffffu, 0x3f808000u, 0x3f818000u,
    };
    size_t k = sizeof special / sizeof special[0];
    for (size_t i = 0; i < n; i++) {
        seed += 0x9e3779b97f4a7c15ull;
        uint64_t z = seed;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        /* half the random values in fp16's exponent range, where rounding matters */
        uint32_t r = (uint32_t)z;
        if (i & 1)
            r = (r & 0x80ffffffu) | ((uint32_t)(100 + (z >> 40) % 50) << 23);
        u[i] = i < k ? special[i] : r;
    }
}

/* The GPU's packed words for n values, and back. */
static void gpu_round_trip(const uint32_t *in, size_t n, tmm_precision f, uint32_t *words, uint32_t *out)
{
    const size_t w = tmm_pack16_words(n);
    tmm_buffer *x = h_buffer((const float *)in, n), *y = h_buffer(NULL, w), *z = h_buffer(NULL, n);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_pack16(r, tmm_whole(x), n, f, tmm_whole(y)));
    H_OK(tmm_op_unpack16(r, tmm_whole(y), n, f, tmm_whole(z)));
    h_run(r);
    h_read(y, (float *)words, w);
    h_read(z, (float *)out, n);
    tmm_buffer_destroy(x), tmm_buffer_destroy(y), tmm_buffer_destroy(z);
}

static void check_format(tmm_precision f, size_t n)
{
    uint32_t *in = malloc(n * 4), *words = malloc(n * 4), *out = malloc(n * 4);
    cr_assert(in && words && out);
    fill_values(in, n, 7 + (uint64_t)f);
    gpu_round_trip(in, n, f, words, out);
    for (size_t i = 0; i < n; i++) {
        uint16_t want = ref_f32_to_16(in[i], f);
        uint16_t got = (uint16_t)(words[i / 2] >> (16 * (i & 1)));
        cr_assert_eq(got, want, "%s of %08x (%g): got %04x, reference %04x", f == TMM_PRECISION_FP16 ? "fp16" : "bf16",
                     in[i], (double)float_of(in[i]), got, want);
        cr_assert_eq(out[i], ref_16_to_f32(want, f), "unpack of %04x: %08x", want, out[i]);
    }
    if (n & 1)
        cr_assert_eq(words[n / 2] >> 16, 0u, "the last word's unused half is zero");
    free(in), free(words), free(out);
}

H_TEST(pack16, fp16_matches_reference_at_odd_size) { check_format(TMM_PRECISION_FP16, 100003); }
H_TEST(pack16, bf16_matches_reference_at_odd_size) { check_format(TMM_PRECISION_BF16, 4097); }

/* The reference itself: fp16 against the compiler's _Float16 conversion
 * (round to nearest even), bf16 against the nearest bf16 value in double. */
Test(pack16, reference_rounds_to_nearest_even)
{
    enum { N = 1 << 20 };
    uint32_t *in = malloc(N * 4);
    cr_assert(in);
    fill_values(in, N, 99);
    for (size_t i = 0; i < N; i++) {
        float x = float_of(in[i]);
        half_t h = (half_t)x;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        uint16_t mine = ref_f32_to_16(in[i], TMM_PRECISION_FP16);
        if (is_nan32(in[i]))
            cr_assert((mine & 0x7c00u) == 0x7c00u && (mine & 0x3ffu), "NaN %08x -> %04x", in[i], mine);
        else
            cr_assert_eq(mine, hb, "fp16 of %08x (%g): %04x, the compiler's %04x", in[i], (double)x, mine, hb);
        float back = float_of(ref_16_to_f32(hb, TMM_PRECISION_FP16));
        if (!isnan(x))
            cr_assert(back == (float)h, "fp16 %04x back to fp32", hb);

        uint16_t b = ref_f32_to_16(in[i], TMM_PRECISION_BF16);
        if (is_nan32(in[i]) || isinf(x)) {
            cr_assert_eq(isnan(float_of(ref_16_to_f32(b, TMM_PRECISION_BF16))), isnan(x));
            continue;
        }
        double v = float_of(ref_16_to_f32(b, TMM_PRECISION_BF16));
        if (isinf(v)) { /* rounds up past bf16's largest finite value */
            cr_assert(fabs((double)x) >= 0x1.fefp127, "%g rounded to infinity", (double)x);
            continue;
        }
        double lo = float_of(ref_16_to_f32((uint16_t)(b - 1), TMM_PRECISION_BF16)),
               hi = float_of(ref_16_to_f32((uint16_t)(b + 1), TMM_PRECISION_BF16));
        double err = fabs(v - x);
        if ((b & 0x7fffu) != 0 && (b & 0x7fffu) != 0x7f7fu && !isinf(lo) && !isinf(hi) && !isnan(lo) && !isnan(hi)) {
            cr_assert(err <= fabs(lo - x) && err <= fabs(hi - x), "bf16 of %08x is not the nearest", in[i]);
            if (err == fabs(lo - x) || err == fabs(hi - x))
                cr_assert_eq(b & 1u, 0u, "bf16 tie of %08x not to even", in[i]);
        }
    }
    free(in);
}

/* Every fp16 bit pattern unpacks exactly and packs back to itself (NaNs: quiet). */
H_TEST(pack16, every_fp16_pattern_round_trips)
{
    enum { N = 65536 };
    uint32_t *words = malloc(N * 2), *back = malloc(N * 2);
    float *f = h_floats(N);
    cr_assert(words && back);
    for (uint32_t i = 0; i < N; i += 2)
        words[i / 2] = i | ((i + 1) << 16);
    tmm_buffer *x = h_buffer((const float *)words, N / 2), *y = h_buffer(NULL, N), *z = h_buffer(NULL, N / 2);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_unpack16(r, tmm_whole(x), N, TMM_PRECISION_FP16, tmm_whole(y)));
    H_OK(tmm_op_pack16(r, tmm_whole(y), N, TMM_PRECISION_FP16, tmm_whole(z)));
    h_run(r);
    h_read(y, f, N);
    h_read(z, (float *)back, N / 2);
    for (uint32_t i = 0; i < N; i++) {
        cr_assert_eq(bits_of(f[i]), ref_16_to_f32((uint16_t)i, TMM_PRECISION_FP16), "unpack %04x", i);
        uint16_t got = (uint16_t)(back[i / 2] >> (16 * (i & 1)));
        bool nan = (i & 0x7c00u) == 0x7c00u && (i & 0x3ffu);
        cr_assert_eq(got, nan ? (uint16_t)(i | 0x200u) : (uint16_t)i, "fp16 %04x packs back as %04x", i, got);
    }
    tmm_buffer_destroy(x), tmm_buffer_destroy(y), tmm_buffer_destroy(z);
    free(words), free(back), free(f);
}

H_TEST(pack16, refuses_bad_arguments)
{
    tmm_buffer *x = h_buffer(NULL, 9), *y = h_buffer(NULL, 4);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_pack16(r, tmm_whole(x), 9, TMM_PRECISION_FP32, tmm_whole(y)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_pack16(r, tmm_whole(x), 9, TMM_PRECISION_FP16, tmm_whole(y)), TMM_ERR_INVALID_ARGUMENT,
                 "9 values need 5 words");
    cr_assert_eq(tmm_op_unpack16(r, tmm_whole(y), 9, TMM_PRECISION_BF16, tmm_whole(x)), TMM_ERR_INVALID_ARGUMENT);
    H_OK(tmm_op_pack16(r, tmm_whole(x), 8, TMM_PRECISION_BF16, tmm_whole(y)));
    h_run(r);
    tmm_buffer_destroy(x), tmm_buffer_destroy(y);
}
