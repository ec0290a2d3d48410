/* Causal linear attention (src/ops/linear_attention.h): the C reference's
 * backward against finite differences; the chunked device forward (y and the
 * saved denominators) and backward (dq, dk, dv) against the reference (the
 * plain recurrence) for B in {1, 3}, n in {1, 5, 64, 100, 200} (one chunk,
 * less than a chunk, exactly a chunk, several, not a multiple), D = d/H in
 * {1, 3, 7} with the default chunk (64) and chunks of 1 and 7; D = 37, 64
 * and 128 (the largest supported); the multi-pass paths (loop budget lowered
 * to 1 and 5 positions per pass); a length (66000) beyond lavapipe's loop cap;
 * decoding step by step against the forward row by row, from an empty state
 * and after prefills of different lengths per sequence; bit-identical reruns
 * (training ops, and a prefill followed by steps); errors.
 *
 * Tolerance (device vs reference), per element: |got - ref| <= atol + RTOL |ref|
 * with atol = TOL * (the largest |ref| of the array) + FLOOR, TOL = 2e-5,
 * FLOOR = 1e-6, RTOL = 1e-4. Inputs are uniform in [-1, 1): f(x) is in
 * [e^-1, 2), the denominators are sums of positive terms (O(n D)), y_t is a
 * convex combination of the v_s (|y| < 1) and the gradients are O(1e-2)
 * (they shrink as 1/den). Each value is a float sum of at most n + 2 D terms
 * (rounding ~ sqrt(n) 2^-24 relative to the terms, ~1e-6 for n = 200)
 * through exp (3 + 2|x| ulp) and divisions (2.5 ulp): the errors seen are
 * at most 1/10 of atol, which stays far below a missing term (a position's
 * weight is >= e^-2 / (2 n) ~ 3e-4 of a row). FLOOR covers entries that are
 * rounding noise: for n = 1 or D = 1, dq is a difference of O(1) terms that
 * cancel (dfq = fk (v - y)·dy / den with y ~ v). For n = 66000, TOL = 1e-4.
 * The largest deviations, and the largest as a fraction of atol, are printed.
 *
 * Finite differences (reference, double): central differences with step
 * 1e-5 of L = sum(g * y); truncation ~1e-10, rounding ~1e-11: we allow
 * 1e-7 absolute + 1e-6 relative. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/linear_attention.h"
#include "ref/ref_linear_attention.h"

#define TOL 2e-5    /* of the largest |reference| of each array */
#define FLOOR 1e-6  /* absolute */
#define RTOL 1e-4

typedef struct shape {
    uint32_t B, n, d, H, C; /* C = 0: the default chunk */
} shape;

static tmm_linear_attention_desc desc_of(shape s)
{
    return (tmm_linear_attention_desc){ .batch = s.B, .n = s.n, .d = s.d, .heads = s.H, .chunk = s.C };
}

static size_t act_of(shape s) { return (size_t)s.B * s.n * s.d; }
static size_t rows_of(shape s) { return (size_t)s.B * s.H * s.n; }

/* Where den starts in saved (the layout documented in linear_attention.h). */
static size_t den_offset(shape s)
{
    size_t C = s.C ? s.C : TMM_LINATTN_CHUNK, NC = (s.n + C - 1) / C, D = s.d / s.H, A = TMM_LINATTN_ALIGN;
    size_t ns = (size_t)s.B * s.H * NC * D * D, nz = (size_t)s.B * s.H * NC * D;
    return (ns + A - 1) / A * A + (nz + A - 1) / A * A;
}

static void destroy_all(tmm_buffer **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tmm_buffer_destroy(b[i]);
}

/* ---- reference: finite differences ------------------------------------ */

static double loss(const tmm_linear_attention_desc *desc, double *const x[4], size_t na)
{
    double *y = malloc(na * sizeof *y);
    cr_assert_not_null(y);
    ref_linear_attention_forward_d(desc, x[0], x[1], x[2], y, NULL);
    double l = 0;
    for (size_t i = 0; i < na; i++)
        l += x[3][i] * y[i];
    free(y);
    return l;
}

static void fd_check(shape s, uint64_t seed)
{
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s);
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
    ref_linear_attention_backward_d(&desc, x[0], x[1], x[2], x[3], grad[0], grad[1], grad[2]);
    const double h = 1e-5;
    static const char *names[3] = { "dq", "dk", "dv" };
    double worst = 0;
    for (int a = 0; a < 3; a++)
        for (size_t j = 0; j < na; j++) {
            double keep = x[a][j];
            x[a][j] = keep + h;
            double lp = loss(&desc, x, na);
            x[a][j] = keep - h;
            double lm = loss(&desc, x, na);
            x[a][j] = keep;
            double fd = (lp - lm) / (2 * h), dev = fabs(fd - grad[a][j]);
            if (dev > worst)
                worst = dev;
            cr_assert(dev <= 1e-7 + 1e-6 * fabs(fd), "%s[%zu] (B=%u n=%u d=%u H=%u): analytic %.12g, fd %.12g",
                      names[a], j, s.B, s.n, s.d, s.H, grad[a][j], fd);
        }
    printf("linear attention fd B=%u n=%u d=%u H=%u: max |analytic - fd| %.3g\n", s.B, s.n, s.d, s.H, worst);
    for (int i = 0; i < 4; i++)
        free(x[i]);
    for (int i = 0; i < 3; i++)
        free(grad[i]);
    free(f);
}

Test(linear_attention_ref, backward_matches_finite_differences)
{
    fd_check((shape){ 2, 7, 6, 2, 0 }, 11);  /* D = 3 */
    fd_check((shape){ 1, 5, 5, 1, 0 }, 21);  /* D = 5 */
    fd_check((shape){ 2, 1, 4, 4, 0 }, 31);  /* D = 1, one position */
    fd_check((shape){ 1, 9, 1, 1, 0 }, 41);  /* d = 1 */
}

/* One position: y = v fq·fk / (fq·fk + eps) ~ v. */
Test(linear_attention_ref, one_position_returns_v)
{
    shape s = { 2, 1, 6, 2, 0 };
    tmm_linear_attention_desc desc = desc_of(s);
    float q[12], k[12], v[12], y[12];
    h_rand(q, 12, 1, -1, 1);
    h_rand(k, 12, 2, -1, 1);
    h_rand(v, 12, 3, -1, 1);
    ref_linear_attention_forward(&desc, q, k, v, y, NULL);
    for (int i = 0; i < 12; i++)
        cr_assert_float_eq(y[i], v[i], 1e-5);
}

/* The step and the state (double) reproduce the forward row by row. */
Test(linear_attention_ref, step_matches_forward)
{
    shape s = { 2, 9, 6, 2, 0 };
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s), D = 3, nS = 2 * 2 * D * D, nz = 2 * 2 * D;
    double *x[3], *y = calloc(na, sizeof *y), S[36] = { 0 }, z[12] = { 0 }, S2[36], z2[12];
    float *f = h_floats(na);
    for (int i = 0; i < 3; i++) {
        x[i] = calloc(na, sizeof(double));
        cr_assert_not_null(x[i]);
        h_rand(f, na, 50 + (uint64_t)i, -1, 1);
        for (size_t j = 0; j < na; j++)
            x[i][j] = f[j];
    }
    cr_assert_not_null(y);
    ref_linear_attention_forward_d(&desc, x[0], x[1], x[2], y, NULL);
    double rq[12], rk[12], rv[12], ry[12];
    for (uint32_t t = 0; t < s.n; t++) {
        for (uint32_t b = 0; b < s.B; b++)
            for (uint32_t c = 0; c < s.d; c++) {
                size_t at = ((size_t)b * s.n + t) * s.d + c;
                rq[b * s.d + c] = x[0][at];
                rk[b * s.d + c] = x[1][at];
                rv[b * s.d + c] = x[2][at];
            }
        ref_linear_attention_step_d(&desc, rq, rk, rv, S, z, ry);
        for (uint32_t b = 0; b < s.B; b++)
            for (uint32_t c = 0; c < s.d; c++)
                cr_assert(fabs(ry[b * s.d + c] - y[((size_t)b * s.n + t) * s.d + c]) < 1e-12);
    }
    uint32_t len[2] = { s.n, s.n + 5 };
    ref_linear_attention_state_d(&desc, len, x[1], x[2], S2, z2);
    for (size_t i = 0; i < nS; i++)
        cr_assert(fabs(S[i] - S2[i]) < 1e-12);
    for (size_t i = 0; i < nz; i++)
        cr_assert(fabs(z[i] - z2[i]) < 1e-12);
    for (int i = 0; i < 3; i++)
        free(x[i]);
    free(y);
    free(f);
}

/* ---- device against reference ----------------------------------------- */

typedef struct result {
    float *y, *den, *dq, *dk, *dv, *saved;
    size_t nsaved;
} result;

static void free_result(result *r)
{
    free(r->y);
    free(r->den);
    free(r->dq);
    free(r->dk);
    free(r->dv);
    free(r->saved);
}

typedef struct inputs {
    float *q, *k, *v, *g;
} inputs;

static inputs make_inputs(size_t na, uint64_t seed)
{
    inputs in = { h_floats(na), h_floats(na), h_floats(na), h_floats(na) };
    h_rand(in.q, na, seed, -1, 1);
    h_rand(in.k, na, seed + 1, -1, 1);
    h_rand(in.v, na, seed + 2, -1, 1);
    h_rand(in.g, na, seed + 3, -1, 1);
    return in;
}

static void free_inputs(inputs *in)
{
    free(in->q);
    free(in->k);
    free(in->v);
    free(in->g);
}

/* Forward and backward on the device, in one recording. */
static result run_device(shape s, const inputs *in)
{
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s), nr = rows_of(s);
    uint64_t ns = tmm_op_linear_attention_saved(&desc), nx = tmm_op_linear_attention_backward_scratch(&desc);
    cr_assert(ns >= den_offset(s) + nr && nx >= ns);
    tmm_buffer *bq = h_buffer(in->q, na), *bk = h_buffer(in->k, na), *bv = h_buffer(in->v, na);
    tmm_buffer *bg = h_buffer(in->g, na), *by = h_buffer(NULL, na), *bs = h_buffer(NULL, ns);
    tmm_buffer *bx = h_buffer(NULL, nx), *bdq = h_buffer(NULL, na), *bdk = h_buffer(NULL, na);
    tmm_buffer *bdv = h_buffer(NULL, na);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_attention_forward(r, &desc, tmm_whole(bq), tmm_whole(bk), tmm_whole(bv), tmm_whole(by),
                                         tmm_whole(bs)));
    H_OK(tmm_op_linear_attention_backward(r, &desc, tmm_whole(bq), tmm_whole(bk), tmm_whole(bv), tmm_whole(bs),
                                          tmm_whole(bg), tmm_whole(bx), tmm_whole(bdq), tmm_whole(bdk),
                                          tmm_whole(bdv)));
    h_run(r);
    result out = { h_floats(na), h_floats(nr), h_floats(na), h_floats(na), h_floats(na), h_floats(ns), ns };
    h_read(by, out.y, na);
    h_read(bs, out.saved, ns);
    memcpy(out.den, out.saved + den_offset(s), nr * sizeof(float));
    h_read(bdq, out.dq, na);
    h_read(bdk, out.dk, na);
    h_read(bdv, out.dv, na);
    tmm_buffer *all[] = { bq, bk, bv, bg, by, bs, bx, bdq, bdk, bdv };
    destroy_all(all, sizeof all / sizeof all[0]);
    return out;
}

static double worst_seen;

/* h_compare with atol = tol * the largest |ref| of the array + FLOOR:
 * gradients are O(1e-2) where y is O(1), and den O(n D); FLOOR covers the
 * entries that are rounding noise, differences of O(1) terms that cancel
 * (dq for n = 1 or D = 1, where dfq = fk (v - y)·dy / den and y ~ v). */
static void compare(const char *what, shape s, const float *got, const float *ref, size_t n, double tol)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs((double)ref[i]));
    char name[128];
    snprintf(name, sizeof name, "%s B=%u n=%u d=%u H=%u C=%u (max %.2g)", what, s.B, s.n, s.d, s.H, s.C, scale);
    double w = h_compare(name, got, ref, n, tol * scale + FLOOR, RTOL) / (tol * scale + FLOOR);
    if (w > worst_seen)
        worst_seen = w;
}

/* Runs one shape on the device and compares with the reference. */
static void check_shape(shape s, uint64_t seed, double atol)
{
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s), nr = rows_of(s);
    inputs in = make_inputs(na, seed);
    result dev = run_device(s, &in);
    float *y = h_floats(na), *den = h_floats(nr), *dq = h_floats(na), *dk = h_floats(na), *dv = h_floats(na);
    ref_linear_attention_forward(&desc, in.q, in.k, in.v, y, den);
    ref_linear_attention_backward(&desc, in.q, in.k, in.v, in.g, dq, dk, dv);
    compare("y", s, dev.y, y, na, atol);
    compare("den", s, dev.den, den, nr, atol);
    compare("dq", s, dev.dq, dq, na, atol);
    compare("dk", s, dev.dk, dk, na, atol);
    compare("dv", s, dev.dv, dv, na, atol);
    free_result(&dev);
    free_inputs(&in);
    free(y);
    free(den);
    free(dq);
    free(dk);
    free(dv);
}

H_TEST(linear_attention, matches_reference)
{
    static const uint32_t ns[] = { 1, 5, 64, 100, 200 };
    static const uint32_t dh[][2] = { { 1, 1 }, { 6, 2 }, { 35, 5 } }; /* (d, H): D = 1, 3, 7 */
    worst_seen = 0;
    uint64_t seed = 100;
    for (uint32_t B = 1; B <= 3; B += 2)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < 3; j++)
                check_shape((shape){ B, ns[i], dh[j][0], dh[j][1], 0 }, seed += 10, TOL);
    printf("linear attention: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Chunks of 1 and 7 positions: many chunks on short sequences. */
H_TEST(linear_attention, small_chunks)
{
    static const uint32_t ns[] = { 1, 7, 13, 100 };
    worst_seen = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        check_shape((shape){ 2, ns[i], 6, 2, 7 }, 300 + i, TOL);
        check_shape((shape){ 1, ns[i], 35, 5, 1 }, 400 + i, TOL);
    }
    printf("linear attention, small chunks: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Wide heads: D = 37 (three blocks of 16 channels, the last partial), 64 and
 * the largest supported, 128. */
H_TEST(linear_attention, wide_heads)
{
    worst_seen = 0;
    check_shape((shape){ 3, 67, 74, 2, 0 }, 490, TOL);
    check_shape((shape){ 2, 100, 128, 2, 0 }, 500, TOL);
    check_shape((shape){ 1, 37, 128, 2, 16 }, 510, TOL);
    check_shape((shape){ 1, 70, TMM_LINATTN_MAX_HEAD_DIM, 1, 0 }, 520, TOL);
    printf("linear attention, wide heads: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Many passes over the positions (the state sums) on short sequences. */
H_TEST(linear_attention, multi_pass)
{
    static const uint32_t budgets[] = { 1, 5 };
    worst_seen = 0;
    for (size_t i = 0; i < 2; i++) {
        h_dev->tuning.loop_budget = budgets[i];
        check_shape((shape){ 2, 100, 6, 2, 7 }, 600 + i, TOL);
        check_shape((shape){ 1, 130, 35, 5, 0 }, 610 + i, TOL);
        check_shape((shape){ 3, 5, 1, 1, 3 }, 620 + i, TOL);
    }
    h_dev->tuning.loop_budget = 0;
    printf("linear attention, multi-pass: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* A length beyond lavapipe's 65535-iteration loop cap with the default
 * budget: forward, backward and the prefill state. Loops cut short would drop
 * thousands of positions from the last rows' states. Sums of up to 66000
 * terms: ATOL 1e-4 (rounding ~ sqrt(n) 2^-24 relative ~ 2e-5). */
H_TEST(linear_attention, beyond_loop_cap)
{
    shape s = { 1, 66000, 2, 1, 0 };
    worst_seen = 0;
    check_shape(s, 700, 1e-4);
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s);
    inputs in = make_inputs(na, 710);
    float len_f;
    uint32_t len = s.n;
    memcpy(&len_f, &len, sizeof len);
    float S[4], z[2], rS[4], rz[2];
    tmm_buffer *bl = h_buffer(&len_f, 1), *bk = h_buffer(in.k, na), *bv = h_buffer(in.v, na);
    tmm_buffer *bS = h_buffer(NULL, 4), *bz = h_buffer(NULL, 2);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_attention_state(r, &desc, tmm_whole(bl), tmm_whole(bk), tmm_whole(bv), tmm_whole(bS),
                                       tmm_whole(bz)));
    h_run(r);
    h_read(bS, S, 4);
    h_read(bz, z, 2);
    ref_linear_attention_state(&desc, &len, in.k, in.v, rS, rz);
    /* sums of 66000 terms of size <= 2: float rounding ~ sqrt(n) 2^-24 |sum| */
    h_compare("state S, n = 66000", S, rS, 4, 1e-3, 1e-4);
    h_compare("state z, n = 66000", z, rz, 2, 1e-3, 1e-4);
    tmm_buffer *all[] = { bl, bk, bv, bS, bz };
    destroy_all(all, 5);
    free_inputs(&in);
}

/* ---- decoding --------------------------------------------------------- */

/* Row-stride of the per-step row buffers: rows of consecutive steps start at
 * aligned offsets. */
static size_t step_stride(shape s) { return ((size_t)s.B * s.d + 63) / 64 * 64; }

/* Steps `steps` positions on the device; step i of sequence b takes position
 * start[b] + i of q, k, v [B, n, d]; the state starts from the prefill of
 * the positions s < start[b] (tmm_op_linear_attention_state) and each step's
 * y is compared with the reference forward's row start[b] + i. The state
 * after the last step is compared with the reference state of
 * start[b] + steps positions. Returns the device's outputs and final state
 * (y rows, then S, then z; caller frees). */
static float *check_decode(shape s, const uint32_t *start, uint32_t steps, uint64_t seed)
{
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s), D = s.d / s.H, nS = (size_t)s.B * s.H * D * D, nz = (size_t)s.B * s.H * D;
    size_t st = step_stride(s);
    inputs in = make_inputs(na, seed);
    float *rq = h_floats(st * steps), *rk = h_floats(st * steps), *rv = h_floats(st * steps);
    float *yref = h_floats(na), *ydev = h_floats(st * steps), *yr = h_floats((size_t)s.B * s.d * steps);
    float *ye = h_floats((size_t)s.B * s.d * steps);
    for (uint32_t i = 0; i < steps; i++)
        for (uint32_t b = 0; b < s.B; b++) {
            cr_assert(start[b] + i < s.n);
            size_t from = ((size_t)b * s.n + start[b] + i) * s.d, to = i * st + (size_t)b * s.d;
            memcpy(rq + to, in.q + from, s.d * sizeof(float));
            memcpy(rk + to, in.k + from, s.d * sizeof(float));
            memcpy(rv + to, in.v + from, s.d * sizeof(float));
        }
    ref_linear_attention_forward(&desc, in.q, in.k, in.v, yref, NULL);
    float *lenf = h_floats(s.B);
    memcpy(lenf, start, s.B * sizeof(uint32_t));
    tmm_buffer *bq = h_buffer(in.q, na), *bk = h_buffer(in.k, na), *bv = h_buffer(in.v, na);
    tmm_buffer *bl = h_buffer(lenf, s.B), *bS = h_buffer(NULL, nS), *bz = h_buffer(NULL, nz);
    tmm_buffer *brq = h_buffer(rq, st * steps), *brk = h_buffer(rk, st * steps), *brv = h_buffer(rv, st * steps);
    tmm_buffer *by = h_buffer(NULL, st * steps);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_attention_state(r, &desc, tmm_whole(bl), tmm_whole(bk), tmm_whole(bv), tmm_whole(bS),
                                       tmm_whole(bz)));
    uint64_t row = (uint64_t)s.B * s.d * sizeof(float);
    for (uint32_t i = 0; i < steps; i++) {
        uint64_t at = i * st * sizeof(float);
        H_OK(tmm_op_linear_attention_step(r, &desc, tmm_sub(brq, at, row), tmm_sub(brk, at, row),
                                          tmm_sub(brv, at, row), tmm_whole(bS), tmm_whole(bz), tmm_sub(by, at, row)));
    }
    h_run(r);
    h_read(by, ydev, st * steps);
    for (uint32_t i = 0; i < steps; i++)
        for (uint32_t b = 0; b < s.B; b++) {
            memcpy(yr + ((size_t)i * s.B + b) * s.d, ydev + i * st + (size_t)b * s.d, s.d * sizeof(float));
            memcpy(ye + ((size_t)i * s.B + b) * s.d, yref + ((size_t)b * s.n + start[b] + i) * s.d,
                   s.d * sizeof(float));
        }
    char name[128];
    snprintf(name, sizeof name, "step y B=%u n=%u d=%u H=%u, %u steps", s.B, s.n, s.d, s.H, steps);
    h_compare(name, yr, ye, (size_t)s.B * s.d * steps, TOL, RTOL);
    /* the state after the steps */
    float *S = h_floats(nS), *z = h_floats(nz), *rS = h_floats(nS), *rz = h_floats(nz);
    uint32_t *end = calloc(s.B, sizeof *end);
    cr_assert_not_null(end);
    for (uint32_t b = 0; b < s.B; b++)
        end[b] = start[b] + steps;
    h_read(bS, S, nS);
    h_read(bz, z, nz);
    ref_linear_attention_state(&desc, end, in.k, in.v, rS, rz);
    h_compare("state S after the steps", S, rS, nS, TOL, RTOL);
    h_compare("state z after the steps", z, rz, nz, TOL, RTOL);
    tmm_buffer *all[] = { bq, bk, bv, bl, bS, bz, brq, brk, brv, by };
    destroy_all(all, sizeof all / sizeof all[0]);
    free_inputs(&in);
    size_t ny = (size_t)s.B * s.d * steps;
    float *out = h_floats(ny + nS + nz);
    memcpy(out, yr, ny * sizeof(float));
    memcpy(out + ny, S, nS * sizeof(float));
    memcpy(out + ny + nS, z, nz * sizeof(float));
    float *fl[] = { rq, rk, rv, yref, ydev, yr, ye, lenf, S, z, rS, rz };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        free(fl[i]);
    free(end);
    return out;
}

/* From an empty state (a prefill of no positions), every row of the forward. */
H_TEST(linear_attention, steps_match_forward)
{
    uint32_t zero[2] = { 0, 0 };
    free(check_decode((shape){ 2, 20, 6, 2, 0 }, zero, 20, 800));
    free(check_decode((shape){ 1, 9, 128, 2, 0 }, zero, 9, 810));
    free(check_decode((shape){ 1, 3, 1, 1, 0 }, zero, 3, 820));
}

/* Prefills of different lengths per sequence (0, < and > a pass), then steps;
 * the prefill in one pass and in many (loop budget 4). */
H_TEST(linear_attention, prefill_then_steps)
{
    uint32_t start[3] = { 0, 7, 19 };
    free(check_decode((shape){ 3, 30, 35, 5, 0 }, start, 11, 900));
    h_dev->tuning.loop_budget = 4;
    free(check_decode((shape){ 3, 30, 35, 5, 0 }, start, 11, 910));
    free(check_decode((shape){ 3, 30, 6, 2, 0 }, start, 11, 920));
    h_dev->tuning.loop_budget = 0;
}

/* A prefill length above n counts as n. */
H_TEST(linear_attention, prefill_length_above_n)
{
    shape s = { 2, 9, 6, 2, 0 };
    tmm_linear_attention_desc desc = desc_of(s);
    size_t na = act_of(s);
    inputs in = make_inputs(na, 950);
    uint32_t len[2] = { 1000, 4 };
    float lenf[2], S[36], z[12], rS[36], rz[12];
    memcpy(lenf, len, sizeof len);
    tmm_buffer *bl = h_buffer(lenf, 2), *bk = h_buffer(in.k, na), *bv = h_buffer(in.v, na);
    tmm_buffer *bS = h_buffer(NULL, 36), *bz = h_buffer(NULL, 12);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_attention_state(r, &desc, tmm_whole(bl), tmm_whole(bk), tmm_whole(bv), tmm_whole(bS),
                                       tmm_whole(bz)));
    h_run(r);
    h_read(bS, S, 36);
    h_read(bz, z, 12);
    ref_linear_attention_state(&desc, len, in.k, in.v, rS, rz);
    h_compare("state S, len above n", S, rS, 36, TOL, RTOL);
    h_compare("state z, len above n", z, rz, 12, TOL, RTOL);
    tmm_buffer *all[] = { bl, bk, bv, bS, bz };
    destroy_all(all, 5);
    free_inputs(&in);
}

/* ---- determinism and errors ------------------------------------------- */

H_TEST(linear_attention, reruns_are_bit_identical)
{
    static const shape shapes[] = { { 2, 100, 6, 2, 7 }, { 3, 200, 35, 5, 0 } };
    for (size_t i = 0; i < 2; i++) {
        shape s = shapes[i];
        size_t na = act_of(s);
        inputs in = make_inputs(na, 1000 + i);
        result a = run_device(s, &in), b = run_device(s, &in);
        cr_assert(memcmp(a.y, b.y, na * sizeof(float)) == 0);
        cr_assert(memcmp(a.saved, b.saved, a.nsaved * sizeof(float)) == 0);
        cr_assert(memcmp(a.dq, b.dq, na * sizeof(float)) == 0);
        cr_assert(memcmp(a.dk, b.dk, na * sizeof(float)) == 0);
        cr_assert(memcmp(a.dv, b.dv, na * sizeof(float)) == 0);
        free_result(&a);
        free_result(&b);
        free_inputs(&in);
    }
    /* prefill and steps: y rows and the final state */
    shape s = { 3, 30, 35, 5, 0 };
    uint32_t start[3] = { 0, 7, 19 };
    size_t n = (size_t)s.B * s.d * 11 + (size_t)s.B * s.H * 7 * 7 + (size_t)s.B * s.H * 7;
    float *a = check_decode(s, start, 11, 1100), *b = check_decode(s, start, 11, 1100);
    cr_assert(memcmp(a, b, n * sizeof(float)) == 0);
    free(a);
    free(b);
}

H_TEST(linear_attention, errors)
{
    tmm_linear_attention_desc bad_heads = { .batch = 1, .n = 8, .d = 10, .heads = 4 };
    cr_assert_eq(tmm_linear_attention_check(NULL, &bad_heads), TMM_ERR_INVALID_ARGUMENT);
    tmm_linear_attention_desc wide = { .batch = 1, .n = 8, .d = 2 * TMM_LINATTN_MAX_HEAD_DIM, .heads = 1 };
    cr_assert_eq(tmm_linear_attention_check(NULL, &wide), TMM_ERR_UNSUPPORTED);
    tmm_linear_attention_desc big_chunk = { .batch = 1, .n = 8, .d = 4, .heads = 1,
                                            .chunk = TMM_LINATTN_MAX_CHUNK + 1 };
    cr_assert_eq(tmm_linear_attention_check(NULL, &big_chunk), TMM_ERR_UNSUPPORTED);
    tmm_linear_attention_desc empty = { .batch = 1, .n = 0, .d = 4, .heads = 1 };
    cr_assert_eq(tmm_linear_attention_check(NULL, &empty), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_linear_attention_saved(&empty), 0);
    cr_assert_eq(tmm_linear_attention_check(NULL, NULL), TMM_ERR_INVALID_ARGUMENT);

    tmm_linear_attention_desc ok = { .batch = 1, .n = 8, .d = 4, .heads = 2 };
    uint64_t ns = tmm_op_linear_attention_saved(&ok);
    size_t na = 32;
    cr_assert(ns > 0 && ns <= 4096);
    tmm_buffer *b = h_buffer(NULL, 16384);
    tmm_view x = tmm_sub(b, 0, na * 4), small = tmm_sub(b, 0, na * 4 - 4), y = tmm_sub(b, 1024, na * 4);
    tmm_view saved = tmm_sub(b, 4096, ns * 4), S = tmm_sub(b, 32768, 8 * 4), z = tmm_sub(b, 36864, 4 * 4);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_linear_attention_forward(r, &ok, small, x, x, y, saved), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "q holds"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_linear_attention_forward(r, &ok, x, x, x, tmm_sub(b, 1024 + 4, na * 4), saved),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "minStorageBufferOffsetAlignment"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_linear_attention_forward(r, &ok, x, x, x, x, saved), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "overlaps"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_linear_attention_forward(r, &ok, x, x, x, y, tmm_sub(b, 4096, ns * 4 - 4)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_linear_attention_forward(r, &bad_heads, x, x, x, y, saved), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_linear_attention_backward(r, &ok, x, x, x, saved, x, saved, y, tmm_sub(b, 2048, na * 4),
                                                  tmm_sub(b, 3072, na * 4)),
                 TMM_ERR_INVALID_ARGUMENT); /* scratch overlaps saved */
    cr_assert_eq(tmm_op_linear_attention_step(r, &ok, x, x, x, S, tmm_sub(b, 36864, 4), y),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "z holds"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_linear_attention_step(r, &ok, x, x, x, S, S, y), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_linear_attention_state(r, &ok, x, x, x, S, z), TMM_OK); /* len may be any uint32 */
    cr_assert_eq(tmm_op_linear_attention_state(r, &ok, x, x, x, x, z), TMM_ERR_INVALID_ARGUMENT);
    tmm_linear_attention_desc any_chunk = ok; /* the step and the state ignore the chunk */
    any_chunk.chunk = TMM_LINATTN_MAX_CHUNK + 1;
    cr_assert_eq(tmm_op_linear_attention_step(r, &any_chunk, x, x, x, S, z, y), TMM_OK);
    cr_assert_eq(tmm_op_linear_attention_state(r, &any_chunk, x, x, x, S, z), TMM_OK);
    h_run(r);
    tmm_buffer_destroy(b);
}

