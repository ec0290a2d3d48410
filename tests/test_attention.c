/* Causal softmax attention (src/ops/attention.h): the C reference's backward
 * against finite differences (full and windowed), and both device
 * implementations (NAIVE, MEMORY_EFFICIENT) against the reference, forward
 * (o, lse) and backward (dq, dk, dv), for n in {1, 2, 7, 64, 100}, H in
 * {1, 4} (d = 5 with H = 1, d = 12 with H = 4: 3 channels per head), B in
 * {1, 2}; the multi-pass path of MEMORY_EFFICIENT (loop budget lowered to 1
 * and 7 positions per pass); bit-identical reruns; a length (66000) beyond
 * lavapipe's loop cap; errors.
 *
 * Sliding window W: windows 1, 2, 5 and 13 (primes), n - 1, n and n + 3 on
 * n in {1, 7, 37, 100}, B in {1, 3}, both implementations; W >= n gives the
 * bits of W = 0; many passes over the window (budget 1, 3, 7) and a window
 * past one pass of the default budget (W = 4500); and out-of-window rows of
 * q, k, v and dout poisoned with NaN leave the rows whose windows avoid them
 * finite and equal to the reference of the clean inputs. NAIVE's softmax by
 * subgroups (the GPUs' kernel) forced on, both sweeps.
 *
 * Tolerance (device vs reference), per element: |got - ref| <= ATOL + RTOL |ref|
 * with ATOL = 2e-5, RTOL = 1e-4. Inputs are uniform in [-1, 1), so scores are
 * at most dh * scale = sqrt(dh) <= sqrt(5) in size and o, lse and the
 * gradients are O(1) to O(10). Each value is a float sum of at most n = 100
 * terms (rounding about sqrt(n) * 2^-24 relative to the terms' magnitude,
 * ~1e-6) through exp/log, which Vulkan allows 3 + 2|x| ulp (exp) and 2^-21
 * absolute (log near 1): the errors expected are ~1e-6, the tolerance 10-20x
 * above that and far below a wrong or missing term (P >= e^-4.5 / n ~ 1e-4).
 * The largest deviations seen are printed.
 *
 * Finite differences (reference, double): central differences with step
 * 1e-5 of L = sum(dout * o); truncation ~1e-10, rounding ~1e-11: we allow
 * 1e-7 absolute + 1e-6 relative. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/attention.h"
#include "ops/nn_ops.h"
#include "ref/ref_attention.h"

#define ATOL 2e-5
#define RTOL 1e-4

typedef struct shape {
    uint32_t B, n, d, H;
    uint32_t W; /* window; 0: full */
} shape;

static tmm_attention_desc desc_of(shape s, tmm_attention_impl impl)
{
    tmm_attention_desc d = { s.B, s.n, s.d, s.H, impl, s.W };
    return d;
}

/* ---- reference: finite differences ------------------------------------ */

static double loss(const tmm_attention_desc *desc, const double *q, const double *k, const double *v,
                   const double *g, size_t na)
{
    double *o = malloc(na * sizeof *o);
    cr_assert_not_null(o);
    ref_attention_forward_d(desc, q, k, v, o, NULL);
    double l = 0;
    for (size_t i = 0; i < na; i++)
        l += g[i] * o[i];
    free(o);
    return l;
}

static void fd_check(shape s, uint64_t seed)
{
    tmm_attention_desc desc = desc_of(s, TMM_ATTENTION_NAIVE);
    size_t na = (size_t)s.B * s.n * s.d;
    double *x[4], *grad[3];
    float *f = h_floats(na);
    for (int i = 0; i < 4; i++) {
        x[i] = malloc(na * sizeof(double));
        cr_assert_not_null(x[i]);
        h_rand(f, na, seed + (uint64_t)i, -1.5f, 1.5f);
        for (size_t j = 0; j < na; j++)
            x[i][j] = f[j];
    }
    for (int i = 0; i < 3; i++) {
        grad[i] = malloc(na * sizeof(double));
        cr_assert_not_null(grad[i]);
    }
    ref_attention_backward_d(&desc, x[0], x[1], x[2], x[3], grad[0], grad[1], grad[2]);
    const double h = 1e-5;
    static const char *names[3] = { "dq", "dk", "dv" };
    double worst = 0;
    for (int a = 0; a < 3; a++)
        for (size_t j = 0; j < na; j++) {
            double keep = x[a][j];
            x[a][j] = keep + h;
            double lp = loss(&desc, x[0], x[1], x[2], x[3], na);
            x[a][j] = keep - h;
            double lm = loss(&desc, x[0], x[1], x[2], x[3], na);
            x[a][j] = keep;
            double fd = (lp - lm) / (2 * h), dev = fabs(fd - grad[a][j]);
            if (dev > worst)
                worst = dev;
            cr_assert(dev <= 1e-7 + 1e-6 * fabs(fd),
                      "%s[%zu] (B=%u n=%u d=%u H=%u W=%u): analytic %.12g, fd %.12g", names[a], j, s.B, s.n, s.d,
                      s.H, s.W, grad[a][j], fd);
        }
    printf("attention fd B=%u n=%u d=%u H=%u W=%u: max |analytic - fd| %.3g\n", s.B, s.n, s.d, s.H, s.W, worst);
    for (int i = 0; i < 4; i++)
        free(x[i]);
    for (int i = 0; i < 3; i++)
        free(grad[i]);
    free(f);
}

Test(attention_ref, backward_matches_finite_differences)
{
    fd_check((shape){ 2, 7, 12, 4, 0 }, 11);
    fd_check((shape){ 1, 6, 5, 1, 0 }, 21);
    fd_check((shape){ 2, 1, 4, 2, 0 }, 31);
}

Test(attention_ref, windowed_backward_matches_finite_differences)
{
    fd_check((shape){ 2, 9, 12, 4, 3 }, 41);
    fd_check((shape){ 1, 8, 5, 1, 1 }, 51);
    fd_check((shape){ 1, 7, 4, 2, 6 }, 61); /* W = n - 1 */
    fd_check((shape){ 1, 6, 6, 3, 2 }, 71);
}

/* W = 1: each query sees only its own key, so o = v; W >= n is full attention. */
Test(attention_ref, window_limits)
{
    enum { na = 2 * 9 * 6 };
    shape s = { 2, 9, 6, 2, 1 };
    float q[na], k[na], v[na], o[na], full[na], other[na];
    h_rand(q, na, 1, -1, 1);
    h_rand(k, na, 2, -1, 1);
    h_rand(v, na, 3, -1, 1);
    tmm_attention_desc desc = desc_of(s, TMM_ATTENTION_NAIVE);
    ref_attention_forward(&desc, q, k, v, o, NULL);
    for (size_t i = 0; i < na; i++)
        cr_assert_float_eq(o[i], v[i], 1e-7);
    desc.window = 0;
    ref_attention_forward(&desc, q, k, v, full, NULL);
    for (uint32_t W = 9; W <= 10; W++) {
        desc.window = W;
        ref_attention_forward(&desc, q, k, v, other, NULL);
        cr_assert(memcmp(full, other, sizeof full) == 0, "W = %u differs from full attention", W);
    }
}

Test(attention_ref, one_position_returns_v)
{
    shape s = { 2, 1, 6, 2, 0 };
    tmm_attention_desc desc = desc_of(s, TMM_ATTENTION_NAIVE);
    float q[12], k[12], v[12], o[12], lse[4];
    h_rand(q, 12, 1, -1, 1);
    h_rand(k, 12, 2, -1, 1);
    h_rand(v, 12, 3, -1, 1);
    ref_attention_forward(&desc, q, k, v, o, lse);
    for (int i = 0; i < 12; i++)
        cr_assert_float_eq(o[i], v[i], 1e-7);
}

/* ---- device against reference ----------------------------------------- */

typedef struct result {
    float *o, *lse, *dq, *dk, *dv;
} result;

static result alloc_result(size_t na, size_t nl)
{
    result r = { h_floats(na), h_floats(nl), h_floats(na), h_floats(na), h_floats(na) };
    return r;
}

static void free_result(result *r)
{
    free(r->o);
    free(r->lse);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

/* Forward and backward on the device, in one recording. */
static void run_device(const tmm_attention_desc *desc, const float *q, const float *k, const float *v,
                       const float *g, result *out)
{
    size_t na = (size_t)desc->batch * desc->n * desc->d, nl = (size_t)desc->batch * desc->heads * desc->n;
    uint64_t ns = tmm_op_attention_saved(desc), nx = tmm_op_attention_backward_scratch(desc);
    cr_assert(ns >= nl && nx > 0);
    tmm_buffer *bq = h_buffer(q, na), *bk = h_buffer(k, na), *bv = h_buffer(v, na), *bg = h_buffer(g, na);
    tmm_buffer *bo = h_buffer(NULL, na), *bs = h_buffer(NULL, ns), *bx = h_buffer(NULL, nx);
    tmm_buffer *bdq = h_buffer(NULL, na), *bdk = h_buffer(NULL, na), *bdv = h_buffer(NULL, na);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_attention_forward(r, desc, tmm_whole(bq), tmm_whole(bk), tmm_whole(bv), tmm_whole(bo),
                                  tmm_whole(bs)));
    H_OK(tmm_op_attention_backward(r, desc, tmm_whole(bq), tmm_whole(bk), tmm_whole(bv), tmm_whole(bo),
                                   tmm_whole(bs), tmm_whole(bg), tmm_whole(bx), tmm_whole(bdq), tmm_whole(bdk),
                                   tmm_whole(bdv)));
    h_run(r);
    h_read(bo, out->o, na);
    h_read(bs, out->lse, nl); /* lse comes first in saved, for both implementations */
    h_read(bdq, out->dq, na);
    h_read(bdk, out->dk, na);
    h_read(bdv, out->dv, na);
    tmm_buffer *all[] = { bq, bk, bv, bg, bo, bs, bx, bdq, bdk, bdv };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
}

static double worst_seen;

static void compare(const char *what, shape s, tmm_attention_impl impl, const float *got, const float *ref, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (!isfinite(got[i]))
            d = INFINITY;
        double excess = d - (ATOL + RTOL * fabs((double)ref[i]));
        if (d > worst)
            worst = d;
        cr_assert(excess <= 0, "%s %s (B=%u n=%u d=%u H=%u W=%u): element %zu is %.9g, reference %.9g",
                  tmm_attention_impl_name(impl), what, s.B, s.n, s.d, s.H, s.W, i, (double)got[i], (double)ref[i]);
    }
    if (worst > worst_seen)
        worst_seen = worst;
}

/* Runs one shape on the device and compares with the reference; returns the
 * device result (caller frees) for reruns. */
static result check_shape(shape s, tmm_attention_impl impl, uint64_t seed)
{
    tmm_attention_desc desc = desc_of(s, impl);
    size_t na = (size_t)s.B * s.n * s.d, nl = (size_t)s.B * s.H * s.n;
    float *q = h_floats(na), *k = h_floats(na), *v = h_floats(na), *g = h_floats(na);
    h_rand(q, na, seed, -1, 1);
    h_rand(k, na, seed + 1, -1, 1);
    h_rand(v, na, seed + 2, -1, 1);
    h_rand(g, na, seed + 3, -1, 1);
    result dev = alloc_result(na, nl), ref = alloc_result(na, nl);
    run_device(&desc, q, k, v, g, &dev);
    ref_attention_forward(&desc, q, k, v, ref.o, ref.lse);
    ref_attention_backward(&desc, q, k, v, g, ref.dq, ref.dk, ref.dv);
    compare("o", s, impl, dev.o, ref.o, na);
    compare("lse", s, impl, dev.lse, ref.lse, nl);
    compare("dq", s, impl, dev.dq, ref.dq, na);
    compare("dk", s, impl, dev.dk, ref.dk, na);
    compare("dv", s, impl, dev.dv, ref.dv, na);
    free_result(&ref);
    free(q);
    free(k);
    free(v);
    free(g);
    return dev;
}

static void sweep(tmm_attention_impl impl)
{
    static const uint32_t ns[] = { 1, 2, 7, 64, 100 };
    worst_seen = 0;
    uint64_t seed = 100;
    for (uint32_t B = 1; B <= 2; B++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (uint32_t H = 1; H <= 4; H += 3) {
                shape s = { B, ns[i], H == 1 ? 5u : 12u, H, 0 };
                result r = check_shape(s, impl, seed += 10);
                free_result(&r);
            }
    printf("attention %s: largest |device - reference| %.3g\n", tmm_attention_impl_name(impl), worst_seen);
}

H_TEST(attention, naive_matches_reference) { sweep(TMM_ATTENTION_NAIVE); }

H_TEST(attention, memory_efficient_matches_reference) { sweep(TMM_ATTENTION_MEMORY_EFFICIENT); }

/* Many passes over the keys (and queries) on short sequences. */
H_TEST(attention, memory_efficient_multi_pass)
{
    static const uint32_t budgets[] = { 1, 7 };
    worst_seen = 0;
    for (size_t i = 0; i < 2; i++) {
        h_dev->tuning.loop_budget = budgets[i];
        result a = check_shape((shape){ 2, 100, 12, 4, 0 }, TMM_ATTENTION_MEMORY_EFFICIENT, 500);
        free_result(&a);
        result b = check_shape((shape){ 1, 64, 5, 1, 0 }, TMM_ATTENTION_MEMORY_EFFICIENT, 600);
        free_result(&b);
        result c = check_shape((shape){ 1, 7, 12, 4, 0 }, TMM_ATTENTION_MEMORY_EFFICIENT, 700);
        free_result(&c);
    }
    h_dev->tuning.loop_budget = 0;
    printf("attention multi-pass: largest |device - reference| %.3g\n", worst_seen);
}

H_TEST(attention, reruns_are_bit_identical)
{
    shape s = { 2, 64, 12, 4, 0 };
    size_t na = (size_t)s.B * s.n * s.d, nl = (size_t)s.B * s.H * s.n;
    for (int impl = TMM_ATTENTION_NAIVE; impl <= TMM_ATTENTION_MEMORY_EFFICIENT; impl++) {
        result a = check_shape(s, (tmm_attention_impl)impl, 900);
        result b = check_shape(s, (tmm_attention_impl)impl, 900);
        cr_assert(memcmp(a.o, b.o, na * sizeof(float)) == 0);
        cr_assert(memcmp(a.lse, b.lse, nl * sizeof(float)) == 0);
        cr_assert(memcmp(a.dq, b.dq, na * sizeof(float)) == 0);
        cr_assert(memcmp(a.dk, b.dk, na * sizeof(float)) == 0);
        cr_assert(memcmp(a.dv, b.dv, na * sizeof(float)) == 0);
        free_result(&a);
        free_result(&b);
    }
}

/* ---- sliding window ----------------------------------------------------- */

static void window_sweep(tmm_attention_impl impl)
{
    static const uint32_t ns[] = { 1, 7, 37, 100 };
    worst_seen = 0;
    uint64_t seed = 2000;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const uint32_t n = ns[i], Ws[] = { 1, 2, 5, 13, n - 1, n, n + 3 };
        for (size_t j = 0; j < sizeof Ws / sizeof Ws[0]; j++)
            for (uint32_t B = 1; B <= 3; B += 2) {
                if (Ws[j] == 0 || (Ws[j] >= n && j < 4))
                    continue; /* W = 0 and repeats of W >= n are the full sweep's */
                shape sh = { B, n, B == 1 ? 5u : 12u, B == 1 ? 1u : 4u, Ws[j] };
                result r = check_shape(sh, impl, seed += 10);
                free_result(&r);
            }
    }
    printf("attention %s windows: largest |device - reference| %.3g\n", tmm_attention_impl_name(impl), worst_seen);
}

H_TEST(attention, naive_window_matches_reference) { window_sweep(TMM_ATTENTION_NAIVE); }

/* The GPUs' softmax (attention_naive_softmax_sg: a workgroup per row,
 * subgroup max and sum), forced on, full and windowed. */
H_TEST(attention, naive_subgroups_match_reference)
{
    if (!tmm_op_row_subgroups_for(tmm_device_get_info(h_dev), 2))
        cr_skip_test("skipped: the device lacks subgroup arithmetic in compute");
    h_dev->tuning.reduce_variant = 2;
    sweep(TMM_ATTENTION_NAIVE);
    window_sweep(TMM_ATTENTION_NAIVE);
    h_dev->tuning.reduce_variant = 0;
}

H_TEST(attention, memory_efficient_window_matches_reference) { window_sweep(TMM_ATTENTION_MEMORY_EFFICIENT); }

/* W >= n runs as full attention: the same bits as W = 0. */
H_TEST(attention, window_at_least_n_is_full)
{
    shape s = { 2, 37, 12, 4, 0 };
    size_t na = (size_t)s.B * s.n * s.d, nl = (size_t)s.B * s.H * s.n;
    for (int impl = TMM_ATTENTION_NAIVE; impl <= TMM_ATTENTION_MEMORY_EFFICIENT; impl++) {
        s.W = 0;
        result a = check_shape(s, (tmm_attention_impl)impl, 950);
        for (uint32_t W = s.n; W <= s.n + 3; W += 3) {
            s.W = W;
            result b = check_shape(s, (tmm_attention_impl)impl, 950);
            cr_assert(memcmp(a.o, b.o, na * sizeof(float)) == 0);
            cr_assert(memcmp(a.lse, b.lse, nl * sizeof(float)) == 0);
            cr_assert(memcmp(a.dq, b.dq, na * sizeof(float)) == 0);
            cr_assert(memcmp(a.dk, b.dk, na * sizeof(float)) == 0);
            cr_assert(memcmp(a.dv, b.dv, na * sizeof(float)) == 0);
            free_result(&b);
        }
        free_result(&a);
    }
}

/* Many passes over the window's offsets on short sequences. */
H_TEST(attention, memory_efficient_window_multi_pass)
{
    static const uint32_t budgets[] = { 1, 3, 7 };
    static const shape shapes[] = { { 2, 100, 12, 4, 13 }, { 1, 64, 5, 1, 63 }, { 3, 37, 12, 4, 5 },
                                    { 1, 100, 5, 1, 1 } };
    worst_seen = 0;
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        h_dev->tuning.loop_budget = budgets[i];
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            result r = check_shape(shapes[j], TMM_ATTENTION_MEMORY_EFFICIENT, 3000 + 10 * j);
            free_result(&r);
        }
    }
    h_dev->tuning.loop_budget = 0;
    printf("attention window multi-pass: largest |device - reference| %.3g\n", worst_seen);
}

/* Rows of q, k, v and dout before P0 and from P1 on hold NaN. The rows whose
 * windows lie in [P0, P1) must come out finite and equal to the reference on
 * the clean inputs: o, lse and dq of queries t in [P0 + W - 1, P1) (their keys
 * are t-W+1 .. t); dk and dv of keys s in [P0 + W - 1, P1 - W + 1) (their
 * queries s .. s+W-1 have clean windows, lse and Delta). Any read of a
 * poisoned row, even one weighted by zero, makes NaN. */
static void poison_check(shape s, uint32_t P0, uint32_t P1, uint64_t seed)
{
    tmm_attention_desc desc = desc_of(s, TMM_ATTENTION_MEMORY_EFFICIENT);
    const size_t na = (size_t)s.B * s.n * s.d, nl = (size_t)s.B * s.H * s.n;
    float *x[4], *px[4];
    for (int i = 0; i < 4; i++) {
        x[i] = h_floats(na);
        px[i] = h_floats(na);
        h_rand(x[i], na, seed + (uint64_t)i, -1, 1);
        memcpy(px[i], x[i], na * sizeof(float));
        for (size_t b = 0; b < s.B; b++)
            for (size_t t = 0; t < s.n; t++)
                if (t < P0 || t >= P1)
                    for (size_t c = 0; c < s.d; c++)
                        px[i][(b * s.n + t) * s.d + c] = NAN;
    }
    result dev = alloc_result(na, nl), ref = alloc_result(na, nl);
    run_device(&desc, px[0], px[1], px[2], px[3], &dev);
    ref_attention_forward(&desc, x[0], x[1], x[2], ref.o, ref.lse);
    ref_attention_backward(&desc, x[0], x[1], x[2], x[3], ref.dq, ref.dk, ref.dv);
    const uint32_t q0 = P0 + s.W - 1, k1 = P1 - s.W + 1;
    cr_assert(q0 < P1 && q0 < k1, "the test needs clean rows");
    for (size_t b = 0; b < s.B; b++) {
        size_t qa = (b * s.n + q0) * s.d, qn = (size_t)(P1 - q0) * s.d;
        size_t ka = (b * s.n + q0) * s.d, kn = (size_t)(k1 - q0) * s.d;
        compare("o (poisoned)", s, desc.impl, dev.o + qa, ref.o + qa, qn);
        compare("dq (poisoned)", s, desc.impl, dev.dq + qa, ref.dq + qa, qn);
        compare("dk (poisoned)", s, desc.impl, dev.dk + ka, ref.dk + ka, kn);
        compare("dv (poisoned)", s, desc.impl, dev.dv + ka, ref.dv + ka, kn);
        for (size_t h = 0; h < s.H; h++) {
            size_t la = (b * s.H + h) * s.n + q0;
            compare("lse (poisoned)", s, desc.impl, dev.lse + la, ref.lse + la, P1 - q0);
        }
    }
    free_result(&dev);
    free_result(&ref);
    for (int i = 0; i < 4; i++) {
        free(x[i]);
        free(px[i]);
    }
}

H_TEST(attention, window_never_reads_outside)
{
    static const uint32_t budgets[] = { 0, 3 };
    worst_seen = 0;
    for (size_t i = 0; i < 2; i++) {
        h_dev->tuning.loop_budget = budgets[i];
        poison_check((shape){ 2, 60, 12, 4, 7 }, 10, 50, 4000);
        poison_check((shape){ 1, 41, 5, 1, 1 }, 3, 38, 4100);
        poison_check((shape){ 3, 53, 12, 4, 13 }, 11, 52, 4200);
    }
    h_dev->tuning.loop_budget = 0;
    printf("attention window, poisoned rows outside: largest |device - reference| %.3g\n", worst_seen);
}

/* A window longer than one pass of the default budget (TMM_MAX_LOOP = 4096
 * offsets): two passes. Forward rows checked against a direct double sum. */
H_TEST(attention, memory_efficient_window_beyond_one_pass)
{
    shape s = { 1, 9000, 2, 1, 4500 };
    tmm_attention_desc desc = desc_of(s, TMM_ATTENTION_MEMORY_EFFICIENT);
    const size_t na = (size_t)s.n * s.d;
    float *q = h_floats(na), *k = h_floats(na), *v = h_floats(na), *o = h_floats(na), *lse = h_floats(s.n);
    h_rand(q, na, 5, -1, 1);
    h_rand(k, na, 6, -1, 1);
    h_rand(v, na, 7, -1, 1);
    tmm_buffer *bq = h_buffer(q, na), *bk = h_buffer(k, na), *bv = h_buffer(v, na), *bo = h_buffer(NULL, na);
    tmm_buffer *bs = h_buffer(NULL, tmm_op_attention_saved(&desc));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_attention_forward(r, &desc, tmm_whole(bq), tmm_whole(bk), tmm_whole(bv), tmm_whole(bo),
                                  tmm_whole(bs)));
    h_run(r);
    h_read(bo, o, na);
    h_read(bs, lse, s.n);
    const double scale = 1 / sqrt(2.0);
    static const uint32_t rows[] = { 0, 403, 404, 405, 4095, 4096, 4499, 4500, 4501, 8999 };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const uint32_t t = rows[i], j0 = t + 1 > s.W ? t + 1 - s.W : 0;
        double m = -INFINITY, l = 0, acc[2] = { 0, 0 };
        for (uint32_t j = j0; j <= t; j++)
            m = fmax(m, scale * ((double)q[2 * t] * k[2 * j] + (double)q[2 * t + 1] * k[2 * j + 1]));
        for (uint32_t j = j0; j <= t; j++) {
            double e = exp(scale * ((double)q[2 * t] * k[2 * j] + (double)q[2 * t + 1] * k[2 * j + 1]) - m);
            l += e;
            acc[0] += e * v[2 * j];
            acc[1] += e * v[2 * j + 1];
        }
        /* sums of up to 4500 terms: allow 2e-5 */
        for (int c = 0; c < 2; c++)
            cr_assert(fabs(o[2 * t + c] - acc[c] / l) <= 2e-5, "o[%u, %d] = %.9g, reference %.9g", t, c,
                      (double)o[2 * t + c], acc[c] / l);
        cr_assert(fabs(lse[t] - (m + log(l))) <= 2e-5 * (1 + fabs(m + log(l))), "lse[%u] = %.9g, reference %.9g",
                  t, (double)lse[t], m + log(l));
    }
    tmm_buffer *all[] = { bq, bk, bv, bo, bs };
    for (size_t i = 0; i < 5; i++)
        tmm_buffer_destroy(all[i]);
    free(q);
    free(k);
    free(v);
    free(o);
    free(lse);
}

H_TEST(attention, errors)
{
    tmm_attention_desc bad_heads = { 1, 8, 10, 4, TMM_ATTENTION_MEMORY_EFFICIENT, 0 };
    cr_assert_eq(tmm_attention_check(NULL, &bad_heads), TMM_ERR_INVALID_ARGUMENT);
    tmm_attention_desc long_naive = { 1, TMM_ATTENTION_NAIVE_MAX_N + 1, 4, 1, TMM_ATTENTION_NAIVE, 0 };
    cr_assert_eq(tmm_attention_check(NULL, &long_naive), TMM_ERR_UNSUPPORTED);
    tmm_attention_desc wide = { 1, 8, 2 * TMM_ATTENTION_MAX_HEAD_DIM, 1, TMM_ATTENTION_MEMORY_EFFICIENT, 0 };
    cr_assert_eq(tmm_attention_check(NULL, &wide), TMM_ERR_UNSUPPORTED);
    tmm_attention_desc unknown = { 1, 8, 4, 1, (tmm_attention_impl)42, 0 };
    cr_assert_eq(tmm_attention_check(NULL, &unknown), TMM_ERR_INVALID_ARGUMENT);
    tmm_attention_desc empty = { 1, 0, 4, 1, TMM_ATTENTION_AUTO, 0 };
    cr_assert_eq(tmm_attention_check(NULL, &empty), TMM_ERR_INVALID_ARGUMENT);

    tmm_attention_desc ok = { 1, 8, 4, 2, TMM_ATTENTION_AUTO, 0 };
    size_t na = 32;
    tmm_buffer *b = h_buffer(NULL, 4096);
    tmm_view x = tmm_sub(b, 0, na * 4), small = tmm_sub(b, 0, na * 4 - 4), saved = tmm_sub(b, 1024, 64 * 4);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_attention_forward(r, &ok, small, x, x, tmm_sub(b, 2048, na * 4), saved),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "q holds"), "%s", tmm_last_error());
    uint64_t align = h_dev->info.min_storage_buffer_offset_alignment;
    if (align > 4) {
        cr_assert_eq(tmm_op_attention_forward(r, &ok, x, x, x, tmm_sub(b, 2048 + 4, na * 4), saved),
                     TMM_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(tmm_last_error(), "minStorageBufferOffsetAlignment"), "%s", tmm_last_error());
    }
    cr_assert_eq(tmm_op_attention_forward(r, &bad_heads, x, x, x, x, saved), TMM_ERR_INVALID_ARGUMENT);
    h_run(r);
    tmm_buffer_destroy(b);
}

/* A length beyond lavapipe's 65535-iteration loop cap, default budget:
 * forward (MEMORY_EFFICIENT) rows checked against a direct double sum. Loops
 * cut short would drop thousands of keys from the last rows. */
H_TEST(attention, memory_efficient_beyond_loop_cap)
{
    shape s = { 1, 66000, 1, 1, 0 };
    tmm_attention_desc desc = desc_of(s, TMM_ATTENTION_MEMORY_EFFICIENT);
    size_t na = s.n;
    float *q = h_floats(na), *k = h_floats(na), *v = h_floats(na), *o = h_floats(na), *lse = h_floats(na);
    h_rand(q, na, 1, -1, 1);
    h_rand(k, na, 2, -1, 1);
    h_rand(v, na, 3, -1, 1);
    tmm_buffer *bq = h_buffer(q, na), *bk = h_buffer(k, na), *bv = h_buffer(v, na), *bo = h_buffer(NULL, na);
    tmm_buffer *bs = h_buffer(NULL, tmm_op_attention_saved(&desc));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_attention_forward(r, &desc, tmm_whole(bq), tmm_whole(bk), tmm_whole(bv), tmm_whole(bo),
                                  tmm_whole(bs)));
    h_run(r);
    h_read(bo, o, na);
    h_read(bs, lse, na);
    static const uint32_t rows[] = { 0, 4095, 4096, 65534, 65535, 65536, 65999 };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint32_t t = rows[i];
        double m = -INFINITY, l = 0, acc = 0;
        for (uint32_t j = 0; j <= t; j++)
            m = fmax(m, (double)q[t] * k[j]);
        for (uint32_t j = 0; j <= t; j++) {
            double e = exp((double)q[t] * k[j] - m);
            l += e;
            acc += e * v[j];
        }
        /* sums of up to 66000 terms: allow 1e-4 (the float sum's rounding ~1e-5) */
        cr_assert(fabs(o[t] - acc / l) <= 1e-4, "o[%u] = %.9g, reference %.9g", t, (double)o[t], acc / l);
        cr_assert(fabs(lse[t] - (m + log(l))) <= 1e-4 * (1 + fabs(m + log(l))), "lse[%u] = %.9g, reference %.9g",
                  t, (double)lse[t], m + log(l));
    }
    tmm_buffer *all[] = { bq, bk, bv, bo, bs };
    for (size_t i = 0; i < 5; i++)
        tmm_buffer_destroy(all[i]);
    free(q);
    free(k);
    free(v);
    free(o);
    free(lse);
}
