/* Batched real FFTs through VkFFT (runtime/fft.c): spectra against a direct
 * double-precision DFT, round trips, replay of recorded FFTs, plan lifetimes
 * and argument checks.
 *
 * Tolerances. Inputs are uniform in [-1, 1) (rms 1/sqrt(3)). A float32 FFT
 * of length n has a roundoff error per output of about
 * eps * log2(n) * sqrt(n) * rms(x) (each of the log2(n) stages adds a relative
 * error of order eps to outputs of magnitude ~ sqrt(n) * rms(x); the plans'
 * twiddles come from tables computed in double, so they add less). So the
 * spectrum is compared with
 *     atol = 4 * eps * (ceil(log2 n) + 1) * sqrt(n),  rtol = 0
 * (about 7x that estimate with rms < 0.6, and 8-30x the deviations measured
 * on lavapipe; a wrong twiddle, bin, stride or row gives errors of order
 * sqrt(n)). The normalized round trip divides that error by about sqrt(n):
 *     atol = 4 * eps * (ceil(log2 n) + 1) on values of magnitude < 1
 * (4-40x the measured deviations; the tightest is n = 1001 = 7*11*13).
 * The double-precision DFT reference is exact to about 1e-13 relative. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fft.h"
#include "harness.h"

#define GUARD 12345.0f
#define PI 3.14159265358979323846
#define TAIL 4 /* guard floats after the bound part of each buffer */

static double log2_ceil(uint32_t n) { return ceil(log2((double)n)); }
static double spectrum_atol(uint32_t n) { return 4.0 * FLT_EPSILON * (log2_ceil(n) + 1) * sqrt((double)n); }
static double roundtrip_atol(uint32_t n) { return 4.0 * FLT_EPSILON * (log2_ceil(n) + 1); }

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Direct DFT of each row in double precision: out holds (n/2+1) complex per row. */
static void dft_rows(const float *x, uint32_t n, uint32_t batch, float *out)
{
    uint32_t m = tmm_fft_complex_count(n);
    double *c = malloc(n * sizeof *c), *s = malloc(n * sizeof *s);
    cr_assert(c && s);
    for (uint32_t j = 0; j < n; j++) {
        c[j] = cos(2.0 * PI * j / n);
        s[j] = sin(2.0 * PI * j / n);
    }
    for (uint32_t b = 0; b < batch; b++) {
        const float *row = x + (size_t)b * n;
        for (uint32_t k = 0; k < m; k++) {
            double re = 0, im = 0;
            uint32_t idx = 0; /* j*k mod n */
            for (uint32_t j = 0; j < n; j++) {
                re += row[j] * c[idx];
                im -= row[j] * s[idx];
                idx += k;
                if (idx >= n)
                    idx -= n;
            }
            out[((size_t)b * m + k) * 2] = (float)re;
            out[((size_t)b * m + k) * 2 + 1] = (float)im;
        }
    }
    free(c);
    free(s);
}

/* One FFT setup. Both buffers hold tmm_fft_complex_bytes (the plan's rule)
 * plus TAIL guard floats; everything past each view starts as GUARD and must
 * stay so (for the real buffer that includes the part VkFFT binds but must
 * not write). */
typedef struct fft_case {
    uint32_t n, batch;
    size_t real_floats, complex_floats; /* view sizes in floats */
    size_t total;                       /* each buffer's size in floats */
    tmm_buffer *real, *complex;
    tmm_view real_view, complex_view;
    tmm_fft_plan *plan;
    double plan_s;
} fft_case;

static tmm_status case_try_open(fft_case *t, uint32_t n, uint32_t batch)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    t->batch = batch;
    t->real_floats = (size_t)n * batch;
    t->complex_floats = tmm_fft_complex_bytes(n, batch) / 4;
    t->total = t->complex_floats + TAIL;
    float *guard = h_floats(t->total);
    for (size_t i = 0; i < t->total; i++)
        guard[i] = GUARD;
    t->real = h_buffer(guard, t->total);
    t->complex = h_buffer(guard, t->total);
    free(guard);
    t->real_view = tmm_sub(t->real, 0, tmm_fft_real_bytes(n, batch));
    t->complex_view = tmm_sub(t->complex, 0, tmm_fft_complex_bytes(n, batch));
    double t0 = now_s();
    tmm_status s = tmm_fft_plan_create(h_dev, n, batch, t->real_view, t->complex_view, &t->plan);
    t->plan_s = now_s() - t0;
    return s;
}

static void case_open(fft_case *t, uint32_t n, uint32_t batch) { H_OK(case_try_open(t, n, batch)); }

static void case_close(fft_case *t)
{
    tmm_fft_plan_destroy(t->plan);
    tmm_buffer_destroy(t->real);
    tmm_buffer_destroy(t->complex);
}

/* Reads a view's floats and checks the guards behind it. */
static void read_view(tmm_buffer *b, size_t total, size_t count, float *out, const char *what)
{
    float *all = h_floats(total);
    h_read(b, all, total);
    for (size_t i = count; i < total; i++)
        cr_assert_eq(all[i], GUARD, "%s buffer: float %zu past the view was overwritten (%g)", what, i,
                     (double)all[i]);
    memcpy(out, all, count * sizeof *out);
    free(all);
}

static void read_real(fft_case *t, float *out) { read_view(t->real, t->total, t->real_floats, out, "real"); }
static void read_complex(fft_case *t, float *out)
{
    read_view(t->complex, t->total, t->complex_floats, out, "complex");
}

/* R2C alone (spectrum against the DFT, input untouched), then NaN-fill ->
 * R2C -> copy of the spectrum -> C2R in one recording: the round trip, and
 * the ordering of FFTs against the recorder's own commands both ways. */
static void run_roundtrip(fft_case *t, uint64_t seed)
{
    uint32_t n = t->n, batch = t->batch;
    float *x = h_floats(t->real_floats), *got = h_floats(t->complex_floats), *ref = h_floats(t->complex_floats);
    float *back = h_floats(t->real_floats);
    h_rand(x, t->real_floats, seed, -1.0f, 1.0f);
    H_OK(tmm_buffer_write(t->real, 0, x, t->real_floats * 4));

    tmm_recorder *r = h_begin();
    H_OK(tmm_record_fft_r2c(r, t->plan, t->real_view, t->complex_view));
    double t0 = now_s();
    h_run(r);
    double run_s = now_s() - t0;
    read_complex(t, got);
    dft_rows(x, n, batch, ref);
    char what[96];
    snprintf(what, sizeof what, "r2c n=%u batch=%u", n, batch);
    h_compare(what, got, ref, t->complex_floats, spectrum_atol(n), 0);
    read_real(t, back);
    cr_assert(memcmp(back, x, t->real_floats * sizeof *x) == 0, "n=%u: R2C modified its input", n);

    tmm_buffer *snap = h_buffer(NULL, t->complex_floats);
    r = h_begin();
    H_OK(tmm_record_fill_u32(r, t->complex_view, 0x7fc00000u)); /* NaN */
    H_OK(tmm_record_fft_r2c(r, t->plan, t->real_view, t->complex_view));
    H_OK(tmm_record_copy(r, t->complex_view, tmm_whole(snap)));
    H_OK(tmm_record_fft_c2r(r, t->plan, t->complex_view, t->real_view));
    h_run(r);
    h_read(snap, got, t->complex_floats);
    snprintf(what, sizeof what, "r2c before copy n=%u batch=%u", n, batch);
    h_compare(what, got, ref, t->complex_floats, spectrum_atol(n), 0);
    read_real(t, back);
    snprintf(what, sizeof what, "c2r(r2c(x)) n=%u batch=%u", n, batch);
    h_compare(what, back, x, t->real_floats, roundtrip_atol(n), 0);
    printf("  n=%-5u batch=%-3u plan %.3f s, first r2c run %.3f s\n", n, batch, t->plan_s, run_s);

    tmm_buffer_destroy(snap);
    free(x);
    free(got);
    free(ref);
    free(back);
}

static void check_roundtrip(uint32_t n, uint32_t batch, uint64_t seed)
{
    fft_case t;
    case_open(&t, n, batch);
    run_roundtrip(&t, seed);
    case_close(&t);
}

/* Powers of two, even and odd lengths with factors 3..13, odd and even
 * batches (VkFFT merges pairs of rows, so odd batches take another path). */
H_TEST(fft, roundtrip_small)
{
    check_roundtrip(2, 3, 1);
    check_roundtrip(8, 4, 2);
    check_roundtrip(14, 5, 3);
    check_roundtrip(15, 7, 4);
    check_roundtrip(64, 3, 5);
}

/* Up to several passes: 8192 reals exceed one pass on lavapipe (32 KiB of
 * shared memory = 4096 complex), so it runs VkFFT's multi-upload R2C. */
H_TEST(fft, roundtrip_large)
{
    check_roundtrip(200, 6, 6);
    check_roundtrip(1001, 2, 7);
    check_roundtrip(1024, 5, 8);
    check_roundtrip(2000, 3, 9);
    check_roundtrip(8192, 2, 10);
    check_roundtrip(8192, 1, 11);
}

/* A length with a prime factor above 13 (Bluestein in VkFFT): refused on
 * VkFFT 1.2, whose Bluestein real FFTs are wrong; must be right otherwise. */
H_TEST(fft, bluestein_length)
{
    fft_case t;
    tmm_status s = case_try_open(&t, 34, 3);
    if (s == TMM_OK) {
        run_roundtrip(&t, 12);
    } else {
        cr_assert_eq(s, TMM_ERR_UNSUPPORTED, "%s", tmm_last_error());
        cr_assert(strstr(tmm_last_error(), "prime factor 17"), "%s", tmm_last_error());
        cr_assert_null(t.plan);
    }
    case_close(&t);
}

/* One plan recorded into two recorders, each replayed twice with new data. */
H_TEST(fft, replay)
{
    fft_case t;
    case_open(&t, 96, 5);
    tmm_recorder *fwd, *inv;
    H_OK(tmm_recorder_create(h_dev, &fwd));
    H_OK(tmm_recorder_create(h_dev, &inv));
    H_OK(tmm_recorder_begin(fwd));
    H_OK(tmm_record_fft_r2c(fwd, t.plan, t.real_view, t.complex_view));
    H_OK(tmm_recorder_end(fwd));
    H_OK(tmm_recorder_begin(inv));
    H_OK(tmm_record_fft_c2r(inv, t.plan, t.complex_view, t.real_view));
    H_OK(tmm_recorder_end(inv));

    float *x = h_floats(t.real_floats), *got = h_floats(t.complex_floats), *ref = h_floats(t.complex_floats);
    float *back = h_floats(t.real_floats);
    for (int round = 0; round < 2; round++) {
        h_rand(x, t.real_floats, 100 + (uint64_t)round, -1.0f, 1.0f);
        H_OK(tmm_buffer_write(t.real, 0, x, t.real_floats * 4));
        H_OK(tmm_recorder_run(fwd));
        read_complex(&t, got);
        dft_rows(x, t.n, t.batch, ref);
        h_compare(round ? "replayed r2c, round 2" : "replayed r2c, round 1", got, ref, t.complex_floats,
                  spectrum_atol(t.n), 0);
        H_OK(tmm_buffer_write(t.real, 0, ref, t.real_floats * 4)); /* junk for the c2r to replace */
        H_OK(tmm_recorder_run(inv));
        read_real(&t, back);
        h_compare(round ? "replayed c2r, round 2" : "replayed c2r, round 1", back, x, t.real_floats,
                  roundtrip_atol(t.n), 0);
    }
    tmm_recorder_destroy(fwd);
    tmm_recorder_destroy(inv);
    free(x);
    free(got);
    free(ref);
    free(back);
    case_close(&t);
}

/* Plans created and destroyed repeatedly, one at a time and interleaved, so
 * glslang's process state is set up and torn down many times; then a plan
 * created after all that still works. */
H_TEST(fft, create_destroy)
{
    for (int i = 0; i < 6; i++) {
        fft_case t;
        case_open(&t, i % 2 ? 12 : 16, 2);
        case_close(&t);
    }
    fft_case a, b, c;
    case_open(&a, 16, 2);
    case_open(&b, 10, 3);
    case_close(&a);
    case_open(&c, 16, 2);
    case_close(&b);

    float x[32], back[32];
    h_rand(x, 32, 42, -1.0f, 1.0f);
    H_OK(tmm_buffer_write(c.real, 0, x, sizeof x));
    tmm_recorder *r = h_begin();
    H_OK(tmm_record_fft_r2c(r, c.plan, c.real_view, c.complex_view));
    H_OK(tmm_record_fft_c2r(r, c.plan, c.complex_view, c.real_view));
    h_run(r);
    read_real(&c, back);
    h_compare("round trip after plan churn", back, x, 32, roundtrip_atol(16), 0);
    case_close(&c);
}

H_TEST(fft, good_length)
{
    static const uint32_t cases[][2] = { { 0, 2 },      { 1, 2 },       { 2, 2 },       { 3, 4 },
                                         { 9, 10 },     { 11, 12 },     { 17, 18 },     { 22, 24 },
                                         { 1999, 2000 }, { 4097, 4116 }, { 8191, 8192 }, { 16383, 16384 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_eq(tmm_fft_good_length(cases[i][0]), cases[i][1], "good length for %u", cases[i][0]);
    cr_assert_eq(tmm_fft_good_length(UINT32_MAX), 0);
}

/* Argument checks: sizes, offsets, buffer sizes, foreign views, VkFFT refusals. */
H_TEST(fft, bad_arguments)
{
    const uint32_t n = 7, batch = 3; /* real 84 bytes, complex 96 bytes */
    const uint64_t rb = tmm_fft_real_bytes(n, batch), cb = tmm_fft_complex_bytes(n, batch);
    cr_assert_eq(rb, 84);
    cr_assert_eq(cb, 96);
    tmm_buffer *small = h_buffer(NULL, 21), *real = h_buffer(NULL, 26), *real2 = h_buffer(NULL, 24);
    tmm_buffer *cplx = h_buffer(NULL, 24);
    tmm_view rv = tmm_sub(real, 0, rb), cv = tmm_whole(cplx);
    tmm_fft_plan *p = NULL;

    cr_assert_eq(tmm_fft_plan_create(h_dev, 1, batch, rv, cv, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_fft_plan_create(h_dev, n, 0, rv, cv, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_fft_plan_create(h_dev, n, batch, tmm_whole(real), cv, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_fft_plan_create(h_dev, n, batch, rv, tmm_sub(cplx, 0, 88), &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_fft_plan_create(h_dev, n, batch, tmm_sub(real, 8, rb), cv, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "byte 0"), "%s", tmm_last_error());
    /* a real buffer that holds the view but not tmm_fft_complex_bytes */
    cr_assert_eq(tmm_fft_plan_create(h_dev, n, batch, tmm_whole(small), cv, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "at least"), "%s", tmm_last_error());
    cr_assert_eq(tmm_fft_plan_create(h_dev, n, batch, tmm_sub(cplx, 0, rb), cv, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_null(p);

    /* an odd length beyond one pass on any device: VkFFT refuses, cleanly */
    const uint32_t odd = 19683; /* 3^9 */
    tmm_buffer *big_r, *big_c;
    H_OK(tmm_buffer_create(h_dev, tmm_fft_complex_bytes(odd, 1), TMM_MEMORY_DEVICE, &big_r));
    H_OK(tmm_buffer_create(h_dev, tmm_fft_complex_bytes(odd, 1), TMM_MEMORY_DEVICE, &big_c));
    tmm_status s = tmm_fft_plan_create(h_dev, odd, 1, tmm_sub(big_r, 0, tmm_fft_real_bytes(odd, 1)),
                                       tmm_whole(big_c), &p);
    cr_assert_eq(s, TMM_ERR_FFT, "%s", tmm_last_error());
    cr_assert(strstr(tmm_last_error(), "VKFFT_ERROR_UNSUPPORTED_FFT_LENGTH_R2C"), "%s", tmm_last_error());
    cr_assert_null(p);
    tmm_buffer_destroy(big_r);
    tmm_buffer_destroy(big_c);

    H_OK(tmm_fft_plan_create(h_dev, n, batch, rv, cv, &p));
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_record_fft_r2c(r, p, tmm_sub(real2, 0, rb), cv), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "create a plan per buffer pair"), "%s", tmm_last_error());
    cr_assert_eq(tmm_record_fft_r2c(r, p, tmm_sub(real, 4, rb), cv), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_record_fft_c2r(r, p, cv, tmm_sub(real2, 0, rb)), TMM_ERR_INVALID_ARGUMENT);
    /* the argument order matters: c2r takes (complex, real) */
    cr_assert_eq(tmm_record_fft_c2r(r, p, rv, cv), TMM_ERR_INVALID_ARGUMENT);
    H_OK(tmm_record_fft_r2c(r, p, rv, cv));
    h_run(r);
    tmm_fft_plan_destroy(p);
    tmm_fft_plan_destroy(NULL);
    tmm_buffer_destroy(small);
    tmm_buffer_destroy(real);
    tmm_buffer_destroy(real2);
    tmm_buffer_destroy(cplx);
}
