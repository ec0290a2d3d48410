/* The Mamba 2 SSD op's C reference (src/ref/ref_ssd.c): every gradient of
 * the backward (dxs, dBt, dCt, ddt, dA_log, dD) against central finite
 * differences of L = sum(g * y), in double, on small awkward shapes (P, N
 * odd, nh 1 to 3, one position, decays from mild to strong); the decoding
 * step run over a sequence against the forward row by row, and the state
 * after len positions against the steps.
 *
 * Finite differences: step 1e-5; truncation ~1e-10 * (third derivative),
 * rounding ~1e-16 |L| / 1e-5: we allow 1e-7 absolute + 1e-6 relative. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref/ref_ssd.h"

typedef struct shape {
    uint32_t B, n, H, P, N;
} shape;

static tmm_ssd_desc desc_of(shape s)
{
    return (tmm_ssd_desc){ .batch = s.B, .n = s.n, .heads = s.H, .head_dim = s.P, .state = s.N };
}

static size_t cx_of(shape s) { return (size_t)s.H * s.P + 2 * (size_t)s.N; }

static double *alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    cr_assert_not_null(p);
    return p;
}

/* Uniform doubles in [lo, hi) from the harness's float generator. */
static double *rand_d(size_t n, uint64_t seed, float lo, float hi)
{
    float *f = h_floats(n);
    h_rand(f, n, seed, lo, hi);
    double *d = alloc_d(n);
    for (size_t i = 0; i < n; i++)
        d[i] = f[i];
    free(f);
    return d;
}

/* The inputs: 0 xbc, 1 dt, 2 A_log, 3 D, 4 g (= dL/dy). */
typedef struct inputs {
    double *x[5];
    size_t count[5];
} inputs;

static inputs make_inputs(shape s, uint64_t seed, float dt_lo, float dt_hi, float alog_lo, float alog_hi)
{
    const size_t rows = (size_t)s.B * s.n;
    inputs in = { { 0 }, { rows * cx_of(s), rows * s.H, s.H, s.H, rows * s.H * s.P } };
    in.x[0] = rand_d(in.count[0], seed, -1, 1);
    in.x[1] = rand_d(in.count[1], seed + 1, dt_lo, dt_hi);
    in.x[2] = rand_d(in.count[2], seed + 2, alog_lo, alog_hi);
    in.x[3] = rand_d(in.count[3], seed + 3, -1, 1);
    in.x[4] = rand_d(in.count[4], seed + 4, -1, 1);
    return in;
}

static void free_inputs(inputs *in)
{
    for (int i = 0; i < 5; i++)
        free(in->x[i]);
}

static double loss(const tmm_ssd_desc *desc, const inputs *in)
{
    const size_t ny = in->count[4];
    double *y = alloc_d(ny), l = 0;
    ref_ssd_forward_d(desc, in->x[0], in->x[1], in->x[2], in->x[3], y);
    for (size_t i = 0; i < ny; i++)
        l += in->x[4][i] * y[i];
    free(y);
    return l;
}

static void fd_check(shape s, uint64_t seed, float dt_lo, float dt_hi, float alog_lo, float alog_hi)
{
    tmm_ssd_desc desc = desc_of(s);
    inputs in = make_inputs(s, seed, dt_lo, dt_hi, alog_lo, alog_hi);
    double *grad[4] = { alloc_d(in.count[0]), alloc_d(in.count[1]), alloc_d(s.H), alloc_d(s.H) };
    ref_ssd_backward_d(&desc, in.x[0], in.x[1], in.x[2], in.x[3], in.x[4], grad[0], grad[1], grad[2], grad[3]);
    const double h = 1e-5;
    const size_t cx = cx_of(s), xs = (size_t)s.H * s.P;
    double worst = 0;
    for (int a = 0; a < 4; a++)
        for (size_t j = 0; j < in.count[a]; j++) {
            double keep = in.x[a][j];
            in.x[a][j] = keep + h;
            double lp = loss(&desc, &in);
            in.x[a][j] = keep - h;
            double lm = loss(&desc, &in);
            in.x[a][j] = keep;
            double fd = (lp - lm) / (2 * h), dev = fabs(fd - grad[a][j]);
            worst = fmax(worst, dev);
            const char *name = a == 1 ? "ddt" : a == 2 ? "dA_log" : a == 3 ? "dD"
                             : j % cx < xs ? "dxs" : j % cx < xs + s.N ? "dBt" : "dCt";
            cr_assert(dev <= 1e-7 + 1e-6 * fabs(fd), "%s[%zu] (B=%u n=%u nh=%u P=%u N=%u): analytic %.12g, fd %.12g",
                      name, j, s.B, s.n, s.H, s.P, s.N, grad[a][j], fd);
        }
    printf("ssd fd B=%u n=%u nh=%u P=%u N=%u dt [%g, %g) A_log [%g, %g): max |analytic - fd| %.3g\n", s.B, s.n, s.H,
           s.P, s.N, dt_lo, dt_hi, alog_lo, alog_hi, worst);
    for (int i = 0; i < 4; i++)
        free(grad[i]);
    free_inputs(&in);
}

Test(ssd_ref, backward_matches_finite_differences)
{
    fd_check((shape){ 2, 7, 2, 3, 5 }, 11, 0.05f, 1.0f, -1.0f, 1.0f);  /* P, N odd, two heads */
    fd_check((shape){ 1, 9, 3, 2, 4 }, 21, 0.01f, 0.2f, 0.0f, 2.77f); /* slow decays, A_log up to ln 16 */
    fd_check((shape){ 2, 1, 1, 1, 1 }, 31, 0.1f, 2.0f, -0.5f, 0.5f);  /* one position, P = N = 1 */
    fd_check((shape){ 1, 6, 2, 4, 3 }, 41, 0.5f, 3.0f, 1.5f, 2.77f);  /* strong decays */
}

/* The step from a zero state reproduces the forward row by row; the state
 * after len positions equals the steps' state. */
Test(ssd_ref, step_and_state_match_forward)
{
    shape s = { 2, 11, 3, 3, 5 };
    tmm_ssd_desc desc = desc_of(s), one = desc;
    one.n = 1;
    inputs in = make_inputs(s, 50, 0.05f, 1.5f, -1.0f, 2.0f);
    const size_t cx = cx_of(s), dy = (size_t)s.H * s.P, nS = (size_t)s.B * s.H * s.P * s.N;
    double *y = alloc_d(in.count[4]), *S = alloc_d(nS), *S2 = alloc_d(nS);
    double *rx = alloc_d(s.B * cx), *rd = alloc_d((size_t)s.B * s.H), *ry = alloc_d(s.B * dy);
    ref_ssd_forward_d(&desc, in.x[0], in.x[1], in.x[2], in.x[3], y);
    uint32_t len[2] = { 0, 0 };
    for (uint32_t t = 0; t < s.n; t++) {
        for (uint32_t b = 0; b < s.B; b++) {
            memcpy(rx + b * cx, in.x[0] + ((size_t)b * s.n + t) * cx, cx * sizeof *rx);
            memcpy(rd + (size_t)b * s.H, in.x[1] + ((size_t)b * s.n + t) * s.H, s.H * sizeof *rd);
        }
        ref_ssd_step_d(&one, rx, rd, in.x[2], in.x[3], S, ry);
        for (uint32_t b = 0; b < s.B; b++)
            for (size_t c = 0; c < dy; c++)
                cr_assert(fabs(ry[b * dy + c] - y[((size_t)b * s.n + t) * dy + c]) < 1e-12);
        len[0] = len[1] = t + 1;
        ref_ssd_state_d(&desc, len, in.x[0], in.x[1], in.x[2], S2);
        for (size_t i = 0; i < nS; i++)
            cr_assert(fabs(S[i] - S2[i]) < 1e-12);
    }
    len[0] = 0;
    len[1] = s.n + 7; /* above n: counts as n */
    ref_ssd_state_d(&desc, len, in.x[0], in.x[1], in.x[2], S2);
    for (size_t i = 0; i < nS / 2; i++)
        cr_assert(S2[i] == 0);
    for (size_t i = nS / 2; i < nS; i++)
        cr_assert(fabs(S[i] - S2[i]) < 1e-12);
    double *all[] = { y, S, S2, rx, rd, ry };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free_inputs(&in);
}
