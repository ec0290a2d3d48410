/* The Hyena / Mamba 2 small ops (src/ops/ssm_ops.h) against their
 * double-precision C references (src/ref/ref_ssm_ops.h) on random inputs,
 * over shapes that include 1, primes, sizes that are not multiples of any
 * workgroup or segment size, sequences shorter than the conv kernel, and
 * columns longer than llvmpipe's 65535-iteration loop cap. Also: the conv's
 * decoding step and window fill against the training forward, determinism
 * (bitwise-equal reruns), bindings split under a lowered
 * maxStorageBufferRange (bitwise equal to unsplit, row views at unaligned
 * offsets), in-place use, accumulation, optional outputs, and errors. Each
 * comparison prints its largest deviation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ssm_ops.h"
#include "ref/ref_ssm_ops.h"

/* ---- helpers ----------------------------------------------------------------- */

static double *to_d(const float *x, size_t n)
{
    double *y = calloc(n ? n : 1, sizeof *y);
    cr_assert_not_null(y);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static double *zeros_d(size_t n)
{
    double *y = calloc(n ? n : 1, sizeof *y);
    cr_assert_not_null(y);
    return y;
}

static float *readback(tmm_buffer *b, size_t n)
{
    float *x = h_floats(n);
    h_read(b, x, n);
    return x;
}

/* Compares a device buffer's first n floats with a double reference. */
static double cmp_buf(const char *what, tmm_buffer *b, const double *ref, size_t n, double atol, double rtol)
{
    float *got = readback(b, n), *rf = h_floats(n);
    for (size_t i = 0; i < n; i++)
        rf[i] = (float)ref[i];
    double w = h_compare(what, got, rf, n, atol, rtol);
    free(got), free(rf);
    return w;
}

static void assert_same_bits(const char *what, tmm_buffer *a, tmm_buffer *b, size_t n)
{
    float *x = readback(a, n), *y = readback(b, n);
    cr_assert(memcmp(x, y, n * sizeof *x) == 0, "%s: the two results differ", what);
    free(x), free(y);
}

static tmm_buffer *words_buffer(const uint32_t *data, size_t n) { return h_buffer((const float *)data, n); }
static tmm_buffer *scratch_buffer(uint64_t n) { return h_buffer(NULL, n ? n : 1); }
static uint64_t seed_of(size_t s, uint64_t k) { return 1000 * (uint64_t)s + k; }

/* Column sums of rows terms of size about 1 (float summation error). */
static double col_tol(size_t rows) { return 1e-6 * (double)(rows + 1); }

#define NONE ((tmm_view){ 0 })

/* ---- conv1d --------------------------------------------------------------------- */

static void check_conv(uint32_t B, uint32_t n, uint32_t C, uint32_t K, bool silu, uint64_t seed)
{
    const size_t rows = (size_t)B * n, N = rows * C, nw = (size_t)C * K;
    float *x = h_floats(N), *w = h_floats(nw), *bias = h_floats(C), *dy = h_floats(N);
    float *dw0 = h_floats(nw), *db0 = h_floats(C);
    h_rand(x, N, seed, -2, 2);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(bias, C, seed + 2, -1, 1);
    h_rand(dy, N, seed + 3, -1, 1);
    h_rand(dw0, nw, seed + 4, -1, 1);
    h_rand(db0, C, seed + 5, -1, 1);
    tmm_buffer *bx = h_buffer(x, N), *bw = h_buffer(w, nw), *bb = h_buffer(bias, C), *by = h_buffer(NULL, N);
    tmm_buffer *bdy = h_buffer(dy, N), *bdx = h_buffer(NULL, N);
    tmm_buffer *bdw[3] = { h_buffer(NULL, nw), h_buffer(NULL, nw), h_buffer(dw0, nw) };
    tmm_buffer *bdb[3] = { h_buffer(NULL, C), h_buffer(NULL, C), h_buffer(db0, C) };
    tmm_buffer *sc = scratch_buffer(tmm_op_conv1d_backward_scratch(B, n, C, K, silu));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_conv1d_forward(r, tmm_whole(bx), tmm_whole(bw), tmm_whole(bb), B, n, C, K, silu, tmm_whole(by)));
    for (int k = 0; k < 3; k++)
        H_OK(tmm_op_conv1d_backward(r, tmm_whole(bx), tmm_whole(bw), tmm_whole(bb), tmm_whole(bdy), B, n, C, K, silu,
                                    k == 2, tmm_whole(sc), tmm_whole(bdx), tmm_whole(bdw[k]), tmm_whole(bdb[k])));
    h_run(r);

    printf(" conv1d B=%u n=%u C=%u K=%u%s\n", B, n, C, K, silu ? " silu" : "");
    double *xd = to_d(x, N), *wd = to_d(w, nw), *bd = to_d(bias, C), *dyd = to_d(dy, N);
    double *ry = zeros_d(N), *rdx = zeros_d(N), *rdw = to_d(dw0, nw), *rdb = to_d(db0, C);
    ref_conv1d_fwd_d(xd, wd, bd, B, n, C, K, silu, ry);
    cmp_buf("conv1d y", by, ry, N, 1e-6, 1e-6);
    ref_conv1d_bwd_d(xd, wd, bd, dyd, B, n, C, K, silu, true, rdx, rdw, rdb);
    cmp_buf("conv1d dw, accumulate", bdw[2], rdw, nw, col_tol(rows), 0);
    cmp_buf("conv1d dbias, accumulate", bdb[2], rdb, C, col_tol(rows), 0);
    ref_conv1d_bwd_d(xd, wd, bd, dyd, B, n, C, K, silu, false, rdx, rdw, rdb);
    cmp_buf("conv1d dx", bdx, rdx, N, 1e-6, 1e-6);
    cmp_buf("conv1d dw", bdw[0], rdw, nw, col_tol(rows), 0);
    cmp_buf("conv1d dbias", bdb[0], rdb, C, col_tol(rows), 0);
    assert_same_bits("conv1d dw", bdw[0], bdw[1], nw);
    assert_same_bits("conv1d dbias", bdb[0], bdb[1], C);

    tmm_buffer *bufs[] = { bx, bw, bb, by, bdy, bdx, bdw[0], bdw[1], bdw[2], bdb[0], bdb[1], bdb[2], sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(w), free(bias), free(dy), free(dw0), free(db0), free(xd), free(wd), free(bd), free(dyd);
    free(ry), free(rdx), free(rdw), free(rdb);
}

H_TEST(ssm, conv1d_matches_reference)
{
    static const uint32_t shapes[][4] = {
        /* B, n, C, K */
        { 1, 1, 1, 1 },  { 1, 1, 3, 3 },    { 2, 2, 5, 4 },   { 3, 7, 13, 3 }, { 2, 17, 31, 4 },
        { 1, 5, 257, 8 }, { 4, 300, 3, 4 }, { 3, 11, 2, 1 },  { 2, 3, 7, 8 },
        /* columns of 70001 rows (547 segments), beyond the loop cap */
        { 1, 70001, 2, 3 },
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int silu = 0; silu < 2; silu++)
            if (s < 9 || silu)
                check_conv(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], silu, seed_of(s, 1 + silu));
}

/* Steps through every sequence from a garbage window against the device's
 * training forward; then fills windows from prompts of lengths 0 .. n-1 and
 * steps once at pos = len. */
static void check_conv_decode(uint32_t B, uint32_t n, uint32_t C, uint32_t K, bool silu, uint64_t seed)
{
    const size_t N = (size_t)B * n * C, nw = (size_t)C * K, nwin = (size_t)B * (K - 1) * C;
    float *x = h_floats(N), *w = h_floats(nw), *bias = h_floats(C), *win0 = h_floats(nwin + 1);
    h_rand(x, N, seed, -2, 2);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(bias, C, seed + 2, -1, 1);
    h_rand(win0, nwin + 1, seed + 3, 5, 6); /* garbage that pos 0 must ignore */
    /* the inputs of step t, [n, B, C], and the positions [n, B] */
    float *xs = h_floats(N);
    uint32_t *pos = calloc((size_t)n * B, sizeof *pos), *len = calloc(B, sizeof *len);
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t b = 0; b < B; b++) {
            pos[t * B + b] = t;
            memcpy(xs + ((size_t)t * B + b) * C, x + ((size_t)b * n + t) * C, C * sizeof *xs);
        }
    float *xl = h_floats((size_t)B * C);
    for (uint32_t b = 0; b < B; b++) {
        len[b] = (b * 5 + 3) % n;
        memcpy(xl + (size_t)b * C, x + ((size_t)b * n + len[b]) * C, C * sizeof *xl);
    }
    tmm_buffer *bx = h_buffer(x, N), *bw = h_buffer(w, nw), *bb = h_buffer(bias, C), *by = h_buffer(NULL, N);
    tmm_buffer *bxs = h_buffer(xs, N), *bys = h_buffer(NULL, N), *bpos = words_buffer(pos, (size_t)n * B);
    tmm_buffer *bwin = h_buffer(win0, nwin + 1), *bwin2 = h_buffer(win0, nwin + 1), *blen = words_buffer(len, B);
    tmm_buffer *bxl = h_buffer(xl, (size_t)B * C), *byl = h_buffer(NULL, (size_t)B * C);
    tmm_view vwin = K > 1 ? tmm_whole(bwin) : NONE, vwin2 = K > 1 ? tmm_whole(bwin2) : NONE;
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_conv1d_forward(r, tmm_whole(bx), tmm_whole(bw), tmm_whole(bb), B, n, C, K, silu, tmm_whole(by)));
    for (uint32_t t = 0; t < n; t++) {
        size_t at = (size_t)t * B * C * 4;
        H_OK(tmm_op_conv1d_step(r, tmm_sub(bxs, at, (size_t)B * C * 4), tmm_whole(bw), tmm_whole(bb),
                                tmm_sub(bpos, (size_t)t * B * 4, (size_t)B * 4), B, C, K, silu, vwin,
                                tmm_sub(bys, at, (size_t)B * C * 4)));
    }
    H_OK(tmm_op_conv1d_fill(r, tmm_whole(bx), tmm_whole(blen), B, n, C, K, vwin2));
    h_run(r);
    float *win_filled = readback(bwin2, nwin + 1);
    r = h_begin();
    H_OK(tmm_op_conv1d_step(r, tmm_whole(bxl), tmm_whole(bw), tmm_whole(bb), tmm_whole(blen), B, C, K, silu, vwin2,
                            tmm_whole(byl)));
    h_run(r);

    printf(" conv1d decoding B=%u n=%u C=%u K=%u%s\n", B, n, C, K, silu ? " silu" : "");
    float *y = readback(by, N), *ys = readback(bys, N), *yl = readback(byl, (size_t)B * C);
    float *want = h_floats(N), *wl = h_floats((size_t)B * C);
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t b = 0; b < B; b++)
            memcpy(want + ((size_t)t * B + b) * C, y + ((size_t)b * n + t) * C, C * sizeof *want);
    for (uint32_t b = 0; b < B; b++)
        memcpy(wl + (size_t)b * C, y + ((size_t)b * n + len[b]) * C, C * sizeof *wl);
    h_compare("conv1d steps vs device forward", ys, want, N, 1e-6, 1e-6);
    h_compare("conv1d fill + step vs device forward", yl, wl, (size_t)B * C, 1e-6, 1e-6);
    /* the window the fill left, exactly; the last float past it untouched */
    double *xd = to_d(x, N), *rwin = zeros_d(nwin + 1);
    ref_conv1d_fill_d(xd, len, B, n, C, K, rwin);
    rwin[nwin] = win0[nwin];
    float *rf = h_floats(nwin + 1);
    for (size_t i = 0; i <= nwin; i++)
        rf[i] = (float)rwin[i];
    h_compare("conv1d fill window", win_filled, rf, nwin + 1, 0, 0);

    tmm_buffer *bufs[] = { bx, bw, bb, by, bxs, bys, bpos, bwin, bwin2, blen, bxl, byl };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(w), free(bias), free(win0), free(xs), free(pos), free(len), free(xl), free(win_filled);
    free(y), free(ys), free(yl), free(want), free(wl), free(xd), free(rwin), free(rf);
}

H_TEST(ssm, conv1d_decoding_continues_the_forward)
{
    static const uint32_t shapes[][4] = { { 3, 9, 5, 4 }, { 2, 6, 3, 3 }, { 1, 3, 2, 8 }, { 4, 5, 7, 1 },
                                          { 2, 1, 3, 4 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_conv_decode(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], s % 2 == 0, seed_of(s, 3));
}

/* The step against its reference at mixed positions (some sequences just
 * starting, some deep in), K = 4, silu. */
H_TEST(ssm, conv1d_step_matches_reference)
{
    const uint32_t B = 6, C = 37, K = 4;
    const size_t N = (size_t)B * C, nwin = N * (K - 1);
    const uint32_t pos[6] = { 0, 1, 2, 3, 100, 0xfffffu };
    float *x = h_floats(N), *w = h_floats(C * K), *bias = h_floats(C), *win = h_floats(nwin);
    h_rand(x, N, 31, -2, 2);
    h_rand(w, C * K, 32, -1, 1);
    h_rand(bias, C, 33, -1, 1);
    h_rand(win, nwin, 34, -2, 2);
    tmm_buffer *bx = h_buffer(x, N), *bw = h_buffer(w, C * K), *bb = h_buffer(bias, C), *bwin = h_buffer(win, nwin);
    tmm_buffer *bp = words_buffer(pos, B), *by = h_buffer(NULL, N), *bx2 = h_buffer(x, N);
    tmm_buffer *bwin2 = h_buffer(win, nwin);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_conv1d_step(r, tmm_whole(bx), tmm_whole(bw), tmm_whole(bb), tmm_whole(bp), B, C, K, true,
                            tmm_whole(bwin), tmm_whole(by)));
    /* y in place over x */
    H_OK(tmm_op_conv1d_step(r, tmm_whole(bx2), tmm_whole(bw), tmm_whole(bb), tmm_whole(bp), B, C, K, true,
                            tmm_whole(bwin2), tmm_whole(bx2)));
    h_run(r);
    double *xd = to_d(x, N), *wd = to_d(w, C * K), *bd = to_d(bias, C), *wind = to_d(win, nwin), *ry = zeros_d(N);
    ref_conv1d_step_d(xd, wd, bd, pos, B, C, K, true, wind, ry);
    printf(" conv1d step at positions 0, 1, 2, 3, 100, 2^20-1\n");
    cmp_buf("conv1d step y", by, ry, N, 1e-6, 1e-6);
    cmp_buf("conv1d step window", bwin, wind, nwin, 0, 0);
    assert_same_bits("conv1d step y in place", by, bx2, N);
    assert_same_bits("conv1d step window, y in place", bwin, bwin2, nwin);
    tmm_buffer *bufs[] = { bx, bw, bb, bwin, bp, by, bx2, bwin2 };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(w), free(bias), free(win), free(xd), free(wd), free(bd), free(wind), free(ry);
}

/* ---- GELU and softplus --------------------------------------------------------- */

typedef enum act_kind { ACT_GELU, ACT_SOFTPLUS } act_kind;

#define SQRT_2PI 2.5066282746310002

static double act_grad(act_kind kind, double a)
{
    if (kind == ACT_SOFTPLUS)
        return 1.0 / (1.0 + exp(-a));
    return 0.5 * erfc(-a / sqrt(2.0)) + a * exp(-0.5 * a * a) / SQRT_2PI;
}

/* y against the reference: 1e-6 relative, plus what rounding a = x + b to
 * float may move it (|a f'(a)| 2^-24, large in GELU's left tail), plus 1e-12. */
static void cmp_act(const char *what, act_kind kind, tmm_buffer *by, const double *ref, const float *x, const float *b,
                    size_t rows, size_t C)
{
    float *got = readback(by, rows * C);
    double worst = 0, share = 0;
    for (size_t i = 0; i < rows * C; i++) {
        double a = (double)x[i] + (b ? b[i % C] : 0.0);
        double bound = 1e-12 + 1e-6 * fabs(ref[i]) + fabs(a * act_grad(kind, a)) * 0x1p-24;
        double dev = isnan(got[i]) ? INFINITY : fabs(got[i] - ref[i]);
        worst = fmax(worst, dev), share = fmax(share, dev / bound);
        cr_assert(dev <= bound, "%s: element %zu (a = %.9g) is %.9g, reference %.9g (bound %.3g)", what, i, a,
                  (double)got[i], ref[i], bound);
    }
    printf("  %-40s n=%-8zu max|dev| = %.3g (%.0f%% of the bound)\n", what, rows * C, worst, 100 * share);
    free(got);
}

static void check_act(act_kind kind, uint32_t rows, uint32_t C, bool with_b, bool in_place, uint64_t seed)
{
    const char *name = kind == ACT_GELU ? "gelu" : "softplus";
    const size_t N = (size_t)rows * C;
    float *x = h_floats(N), *b = h_floats(C), *dy = h_floats(N), *db0 = h_floats(C);
    h_rand(x, N, seed, -8, 8);
    h_rand(b, C, seed + 1, -1, 1);
    h_rand(dy, N, seed + 2, -1, 1);
    h_rand(db0, C, seed + 3, -1, 1);
    if (N > 8) { /* the tails: exp over- and underflows, erfc far out */
        static const float tails[8] = { -120, 120, -87, 30, -15, 15, -40, 1e30f };
        memcpy(x, tails, sizeof tails);
    }
    tmm_buffer *bx = h_buffer(x, N), *bb = h_buffer(b, C), *by = h_buffer(NULL, N), *bdy = h_buffer(dy, N);
    tmm_buffer *bx2 = h_buffer(x, N), *bdx = in_place ? bdy : h_buffer(NULL, N), *junk = h_buffer(NULL, N);
    tmm_buffer *bdb[3] = { h_buffer(NULL, C), h_buffer(NULL, C), h_buffer(db0, C) };
    uint64_t nsc = kind == ACT_GELU ? tmm_op_gelu_backward_scratch(rows, C) : tmm_op_softplus_backward_scratch(rows, C);
    tmm_buffer *sc = scratch_buffer(nsc);
    tmm_view vb = with_b ? tmm_whole(bb) : NONE;
    tmm_status (*fwd)(tmm_recorder *, tmm_view, tmm_view, uint32_t, uint32_t, tmm_view) =
        kind == ACT_GELU ? tmm_op_gelu_forward : tmm_op_softplus_forward;
    tmm_status (*bwd)(tmm_recorder *, tmm_view, tmm_view, tmm_view, uint32_t, uint32_t, bool, tmm_view, tmm_view,
                      tmm_view) = kind == ACT_GELU ? tmm_op_gelu_backward : tmm_op_softplus_backward;
    tmm_recorder *r = h_begin();
    H_OK(fwd(r, tmm_whole(bx), vb, rows, C, tmm_whole(by)));
    H_OK(fwd(r, tmm_whole(bx2), vb, rows, C, tmm_whole(bx2))); /* in place */
    H_OK(bwd(r, tmm_whole(bx), vb, tmm_whole(bdy), rows, C, false, tmm_whole(sc), tmm_whole(junk), tmm_whole(bdb[1])));
    H_OK(bwd(r, tmm_whole(bx), vb, tmm_whole(bdy), rows, C, true, tmm_whole(sc), tmm_whole(junk), tmm_whole(bdb[2])));
    H_OK(bwd(r, tmm_whole(bx), vb, tmm_whole(bdy), rows, C, false, tmm_whole(sc), tmm_whole(bdx), tmm_whole(bdb[0])));
    h_run(r);

    printf(" %s rows=%u C=%u%s%s\n", name, rows, C, with_b ? " with bias" : "", in_place ? " (dx in place)" : "");
    double *xd = to_d(x, N), *bd = with_b ? to_d(b, C) : NULL, *dyd = to_d(dy, N);
    double *ry = zeros_d(N), *rdx = zeros_d(N), *rdb = to_d(db0, C);
    if (kind == ACT_GELU)
        ref_gelu_fwd_d(xd, bd, rows, C, ry);
    else
        ref_softplus_fwd_d(xd, bd, rows, C, ry);
    cmp_act(kind == ACT_GELU ? "gelu y" : "softplus y", kind, by, ry, x, with_b ? b : NULL, rows, C);
    assert_same_bits("forward in place", by, bx2, N);
    if (kind == ACT_GELU)
        ref_gelu_bwd_d(xd, bd, dyd, rows, C, true, rdx, rdb);
    else
        ref_softplus_bwd_d(xd, bd, dyd, rows, C, true, rdx, rdb);
    cmp_buf("db, accumulate", bdb[2], rdb, C, col_tol(rows), 0);
    if (kind == ACT_GELU)
        ref_gelu_bwd_d(xd, bd, dyd, rows, C, false, rdx, rdb);
    else
        ref_softplus_bwd_d(xd, bd, dyd, rows, C, false, rdx, rdb);
    /* gelu' cancels near its zero (a = -0.75): an absolute term of a few ulp of its parts */
    cmp_buf("dx", bdx, rdx, N, 2e-7, 1e-6);
    cmp_buf("db", bdb[0], rdb, C, col_tol(rows), 0);
    assert_same_bits("db", bdb[0], bdb[1], C);

    tmm_buffer *bufs[] = { bx, bb, by, bdy, bx2, junk, bdb[0], bdb[1], bdb[2], sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    if (!in_place)
        tmm_buffer_destroy(bdx);
    free(x), free(b), free(dy), free(db0), free(xd), free(bd), free(dyd), free(ry), free(rdx), free(rdb);
}

static const uint32_t act_shapes[][2] = { { 1, 1 },    { 5, 7 },   { 3, 256 }, { 257, 1000 },
                                          { 1000, 3 }, { 13, 1 }, { 70001, 2 } /* beyond the loop cap */ };

H_TEST(ssm, gelu_matches_reference)
{
    for (size_t s = 0; s < sizeof act_shapes / sizeof act_shapes[0]; s++)
        check_act(ACT_GELU, act_shapes[s][0], act_shapes[s][1], s != 5, s % 2 == 1, seed_of(s, 4));
}

H_TEST(ssm, softplus_matches_reference)
{
    for (size_t s = 0; s < sizeof act_shapes / sizeof act_shapes[0]; s++)
        check_act(ACT_SOFTPLUS, act_shapes[s][0], act_shapes[s][1], s != 5, s % 2 == 0, seed_of(s, 5));
}

/* GELU and softplus over dense grids of inputs that are exact (no bias):
 * GELU on [-14, 14] (all of the erfc fit's range and the left tail down to
 * float underflow), softplus on [-87, 40]; relative accuracy of y and of
 * the derivatives. */
H_TEST(ssm, gelu_and_softplus_accuracy_over_a_grid)
{
    const uint32_t N = 28001;
    float *x = h_floats(N), *dy = h_floats(N);
    for (int kind = 0; kind < 2; kind++) {
        double lo = kind == ACT_GELU ? -14 : -87, step = kind == ACT_GELU ? 0.001 : 0.0045;
        for (uint32_t i = 0; i < N; i++)
            x[i] = (float)(lo + step * i), dy[i] = 1.0f;
        tmm_buffer *bx = h_buffer(x, N), *by = h_buffer(NULL, N), *bdy = h_buffer(dy, N), *bdx = h_buffer(NULL, N);
        tmm_recorder *r = h_begin();
        if (kind == ACT_GELU) {
            H_OK(tmm_op_gelu_forward(r, tmm_whole(bx), NONE, N, 1, tmm_whole(by)));
            H_OK(tmm_op_gelu_backward(r, tmm_whole(bx), NONE, tmm_whole(bdy), N, 1, false, NONE, tmm_whole(bdx),
                                      NONE));
        } else {
            H_OK(tmm_op_softplus_forward(r, tmm_whole(bx), NONE, N, 1, tmm_whole(by)));
            H_OK(tmm_op_softplus_backward(r, tmm_whole(bx), NONE, tmm_whole(bdy), N, 1, false, NONE, tmm_whole(bdx),
                                          NONE));
        }
        h_run(r);
        float *y = readback(by, N), *g = readback(bdx, N);
        double worst = 0, worst_at = 0, worst_g = 0, worst_g_at = 0;
        for (uint32_t i = 0; i < N; i++) {
            double a = x[i], ref, rg = act_grad(kind, a);
            ref = kind == ACT_GELU ? 0.5 * a * erfc(-a / sqrt(2.0)) : fmax(a, 0) + log1p(exp(-fabs(a)));
            if (fabs(ref) > 1e-37) { /* float normals */
                double rel = fabs(y[i] - ref) / fabs(ref);
                if (rel > worst)
                    worst = rel, worst_at = a;
            }
            /* gelu' = Phi + a phi crosses 0 near a = -0.75: relative to |Phi| + |a phi|;
             * where Phi falls below float's normal range (a < -13) it flushes */
            double scale = kind == ACT_GELU ? 0.5 * erfc(-a / sqrt(2.0)) + fabs(a) * exp(-0.5 * a * a) / SQRT_2PI : rg;
            if (scale > 1e-35) {
                double eg = fabs(g[i] - rg) / scale;
                if (eg > worst_g)
                    worst_g = eg, worst_g_at = a;
            }
        }
        printf("  %s on [%g, %g]: max relative error %.3g (at a = %.4f); derivative %.3g (at %.4f)\n",
               kind == ACT_GELU ? "gelu" : "softplus", lo, lo + step * (N - 1), worst, worst_at, worst_g, worst_g_at);
        cr_assert(worst < 1e-6, "relative error %.3g at a = %g", worst, worst_at);
        cr_assert(worst_g < 1e-6, "derivative error %.3g", worst_g);
        tmm_buffer_destroy(bx), tmm_buffer_destroy(by), tmm_buffer_destroy(bdy), tmm_buffer_destroy(bdx);
        free(y), free(g);
    }
    free(x), free(dy);
}

/* ---- sine ---------------------------------------------------------------------- */

static void check_sine(uint32_t rows, uint32_t C, bool in_place, uint64_t seed)
{
    const size_t N = (size_t)rows * C;
    float *x = h_floats(N), *om = h_floats(C), *c = h_floats(C), *dy = h_floats(N), *a0 = h_floats(C);
    h_rand(x, N, seed, -3, 3);
    h_rand(om, C, seed + 1, -2, 2);
    h_rand(c, C, seed + 2, -1, 1);
    h_rand(dy, N, seed + 3, -1, 1);
    h_rand(a0, C, seed + 4, -1, 1);
    tmm_buffer *bx = h_buffer(x, N), *bom = h_buffer(om, C), *bc = h_buffer(c, C), *by = h_buffer(NULL, N);
    tmm_buffer *bdy = h_buffer(dy, N), *bdx = in_place ? bdy : h_buffer(NULL, N), *junk = h_buffer(NULL, N);
    tmm_buffer *bx2 = h_buffer(x, N);
    tmm_buffer *bdo[3] = { h_buffer(NULL, C), h_buffer(NULL, C), h_buffer(a0, C) };
    tmm_buffer *bdc[3] = { h_buffer(NULL, C), h_buffer(NULL, C), h_buffer(a0, C) };
    tmm_buffer *sc = scratch_buffer(tmm_op_sine_backward_scratch(rows, C));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_sine_forward(r, tmm_whole(bx), tmm_whole(bom), tmm_whole(bc), rows, C, tmm_whole(by)));
    H_OK(tmm_op_sine_forward(r, tmm_whole(bx2), tmm_whole(bom), tmm_whole(bc), rows, C, tmm_whole(bx2)));
    int order[3] = { 1, 2, 0 }; /* dx (maybe over dy) last */
    for (int i = 0; i < 3; i++) {
        int k = order[i];
        H_OK(tmm_op_sine_backward(r, tmm_whole(bx), tmm_whole(bom), tmm_whole(bc), tmm_whole(bdy), rows, C, k == 2,
                                  tmm_whole(sc), k == 0 ? tmm_whole(bdx) : tmm_whole(junk), tmm_whole(bdo[k]),
                                  tmm_whole(bdc[k])));
    }
    h_run(r);

    printf(" sine rows=%u C=%u%s\n", rows, C, in_place ? " (dx in place)" : "");
    double *xd = to_d(x, N), *omd = to_d(om, C), *cd = to_d(c, C), *dyd = to_d(dy, N), *ry = zeros_d(N);
    double *rdx = zeros_d(N), *rdo = to_d(a0, C), *rdc = to_d(a0, C);
    ref_sine_fwd_d(xd, omd, cd, rows, C, ry);
    /* |omega (x + c)| <= 8: float rounding of the argument, about 1e-6 at most */
    cmp_buf("sine y", by, ry, N, 2e-6, 0);
    assert_same_bits("sine forward in place", by, bx2, N);
    ref_sine_bwd_d(xd, omd, cd, dyd, rows, C, true, rdx, rdo, rdc);
    cmp_buf("sine domega, accumulate", bdo[2], rdo, C, 4 * col_tol(rows), 0);
    cmp_buf("sine dc, accumulate", bdc[2], rdc, C, 2 * col_tol(rows), 0);
    ref_sine_bwd_d(xd, omd, cd, dyd, rows, C, false, rdx, rdo, rdc);
    cmp_buf("sine dx", bdx, rdx, N, 4e-6, 0);
    cmp_buf("sine domega", bdo[0], rdo, C, 4 * col_tol(rows), 0);
    cmp_buf("sine dc", bdc[0], rdc, C, 2 * col_tol(rows), 0);
    assert_same_bits("sine domega", bdo[0], bdo[1], C);
    assert_same_bits("sine dc", bdc[0], bdc[1], C);

    tmm_buffer *bufs[] = { bx, bom, bc, by, bdy, junk, bx2, bdo[0], bdo[1], bdo[2], bdc[0], bdc[1], bdc[2], sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    if (!in_place)
        tmm_buffer_destroy(bdx);
    free(x), free(om), free(c), free(dy), free(a0), free(xd), free(omd), free(cd), free(dyd), free(ry), free(rdx);
    free(rdo), free(rdc);
}

H_TEST(ssm, sine_matches_reference)
{
    for (size_t s = 0; s < sizeof act_shapes / sizeof act_shapes[0]; s++)
        check_sine(act_shapes[s][0], act_shapes[s][1], s % 2 == 1, seed_of(s, 6));
}

/* ---- gates ----------------------------------------------------------------------- */

static void check_gates(uint32_t rows, uint32_t C, uint64_t seed)
{
    const size_t N = (size_t)rows * C;
    float *a = h_floats(N), *v = h_floats(N), *k = h_floats(C), *dy = h_floats(N), *k0 = h_floats(C);
    h_rand(a, N, seed, -3, 3);
    h_rand(v, N, seed + 1, -8, 8);
    h_rand(k, C, seed + 2, -2, 2);
    h_rand(dy, N, seed + 3, -1, 1);
    h_rand(k0, C, seed + 4, -1, 1);
    if (N > 4) /* silu's tails */
        v[0] = -120, v[1] = 120, v[2] = -87, v[3] = 30;
    tmm_buffer *ba = h_buffer(a, N), *bv = h_buffer(v, N), *bk = h_buffer(k, C), *bdy = h_buffer(dy, N);
    tmm_buffer *y[3], *da[3], *dv[2], *dk[3];
    for (int i = 0; i < 3; i++)
        y[i] = h_buffer(NULL, N), da[i] = h_buffer(NULL, N);
    dv[0] = h_buffer(NULL, N), dv[1] = h_buffer(NULL, N);
    dk[0] = h_buffer(NULL, C), dk[1] = h_buffer(NULL, C), dk[2] = h_buffer(k0, C);
    tmm_buffer *sc = scratch_buffer(tmm_op_gate_scale_backward_scratch(rows, C));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_gate_mul_forward(r, tmm_whole(ba), tmm_whole(bv), rows, C, tmm_whole(y[0])));
    H_OK(tmm_op_gate_silu_forward(r, tmm_whole(ba), tmm_whole(bv), rows, C, tmm_whole(y[1])));
    H_OK(tmm_op_gate_scale_forward(r, tmm_whole(ba), tmm_whole(bk), rows, C, tmm_whole(y[2])));
    H_OK(tmm_op_gate_mul_backward(r, tmm_whole(ba), tmm_whole(bv), tmm_whole(bdy), rows, C, tmm_whole(da[0]),
                                  tmm_whole(dv[0])));
    H_OK(tmm_op_gate_silu_backward(r, tmm_whole(ba), tmm_whole(bv), tmm_whole(bdy), rows, C, tmm_whole(da[1]),
                                   tmm_whole(dv[1])));
    H_OK(tmm_op_gate_scale_backward(r, tmm_whole(ba), tmm_whole(bk), tmm_whole(bdy), rows, C, false, tmm_whole(sc),
                                    tmm_whole(da[2]), tmm_whole(dk[0])));
    H_OK(tmm_op_gate_scale_backward(r, tmm_whole(ba), tmm_whole(bk), tmm_whole(bdy), rows, C, false, tmm_whole(sc),
                                    NONE, tmm_whole(dk[1])));
    H_OK(tmm_op_gate_scale_backward(r, tmm_whole(ba), tmm_whole(bk), tmm_whole(bdy), rows, C, true, tmm_whole(sc),
                                    NONE, tmm_whole(dk[2])));
    h_run(r);

    printf(" gates rows=%u C=%u\n", rows, C);
    double *ad = to_d(a, N), *vd = to_d(v, N), *kd = to_d(k, C), *dyd = to_d(dy, N);
    double *ry = zeros_d(N), *rda = zeros_d(N), *rdv = zeros_d(N), *rdk = to_d(k0, C);
    ref_gate_mul_fwd_d(ad, vd, N, ry);
    cmp_buf("gate mul y", y[0], ry, N, 0, 1e-7);
    ref_gate_mul_bwd_d(ad, vd, dyd, N, rda, rdv);
    cmp_buf("gate mul da", da[0], rda, N, 0, 1e-7);
    cmp_buf("gate mul db", dv[0], rdv, N, 0, 1e-7);
    ref_gate_silu_fwd_d(ad, vd, N, ry);
    cmp_buf("gate silu y", y[1], ry, N, 1e-6, 1e-6);
    ref_gate_silu_bwd_d(ad, vd, dyd, N, rda, rdv);
    cmp_buf("gate silu da", da[1], rda, N, 1e-6, 1e-6);
    cmp_buf("gate silu dz", dv[1], rdv, N, 1e-6, 1e-6);
    ref_gate_scale_fwd_d(ad, kd, rows, C, ry);
    cmp_buf("gate scale y", y[2], ry, N, 0, 1e-7);
    ref_gate_scale_bwd_d(ad, kd, dyd, rows, C, true, rda, rdk);
    cmp_buf("gate scale dk, accumulate", dk[2], rdk, C, 3 * col_tol(rows), 0);
    ref_gate_scale_bwd_d(ad, kd, dyd, rows, C, false, rda, rdk);
    cmp_buf("gate scale da", da[2], rda, N, 0, 1e-7);
    cmp_buf("gate scale dk", dk[0], rdk, C, 3 * col_tol(rows), 0);
    assert_same_bits("gate scale dk", dk[0], dk[1], C);

    tmm_buffer *bufs[] = { ba, bv, bk, bdy, y[0], y[1], y[2], da[0], da[1], da[2], dv[0], dv[1], dk[0], dk[1], dk[2],
                           sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(a), free(v), free(k), free(dy), free(k0), free(ad), free(vd), free(kd), free(dyd), free(ry), free(rda);
    free(rdv), free(rdk);
}

H_TEST(ssm, gates_match_reference)
{
    for (size_t s = 0; s < sizeof act_shapes / sizeof act_shapes[0]; s++)
        check_gates(act_shapes[s][0], act_shapes[s][1], seed_of(s, 7));
}

/* Outputs over inputs (each documented alias) equal the out-of-place results
 * bit for bit; an absent output leaves the other one unchanged. */
H_TEST(ssm, gates_in_place_and_optional_outputs)
{
    const uint32_t rows = 37, C = 29;
    const size_t N = (size_t)rows * C;
    float *a = h_floats(N), *v = h_floats(N), *dy = h_floats(N);
    h_rand(a, N, 41, -3, 3);
    h_rand(v, N, 42, -4, 4);
    h_rand(dy, N, 43, -1, 1);
    for (int kind = 0; kind < 2; kind++) {
        tmm_status (*fwd)(tmm_recorder *, tmm_view, tmm_view, uint32_t, uint32_t, tmm_view) =
            kind ? tmm_op_gate_silu_forward : tmm_op_gate_mul_forward;
        tmm_status (*bwd)(tmm_recorder *, tmm_view, tmm_view, tmm_view, uint32_t, uint32_t, tmm_view, tmm_view) =
            kind ? tmm_op_gate_silu_backward : tmm_op_gate_mul_backward;
        tmm_buffer *ba = h_buffer(a, N), *bv = h_buffer(v, N), *bdy = h_buffer(dy, N), *y = h_buffer(NULL, N);
        tmm_buffer *da = h_buffer(NULL, N), *dv = h_buffer(NULL, N), *da1 = h_buffer(NULL, N);
        tmm_buffer *dv1 = h_buffer(NULL, N);
        /* in place: y over a; da over dy and dv over a (a second copy); swapped: da over v, dv over dy */
        tmm_buffer *ya = h_buffer(a, N), *a2 = h_buffer(a, N), *dy2 = h_buffer(dy, N), *v3 = h_buffer(v, N);
        tmm_buffer *dy3 = h_buffer(dy, N), *a3 = h_buffer(a, N);
        tmm_recorder *r = h_begin();
        H_OK(fwd(r, tmm_whole(ba), tmm_whole(bv), rows, C, tmm_whole(y)));
        H_OK(fwd(r, tmm_whole(ya), tmm_whole(bv), rows, C, tmm_whole(ya)));
        H_OK(bwd(r, tmm_whole(ba), tmm_whole(bv), tmm_whole(bdy), rows, C, tmm_whole(da), tmm_whole(dv)));
        H_OK(bwd(r, tmm_whole(ba), tmm_whole(bv), tmm_whole(bdy), rows, C, tmm_whole(da1), NONE));
        H_OK(bwd(r, tmm_whole(ba), tmm_whole(bv), tmm_whole(bdy), rows, C, NONE, tmm_whole(dv1)));
        H_OK(bwd(r, tmm_whole(a2), tmm_whole(bv), tmm_whole(dy2), rows, C, tmm_whole(dy2), tmm_whole(a2)));
        H_OK(bwd(r, tmm_whole(a3), tmm_whole(v3), tmm_whole(dy3), rows, C, tmm_whole(v3), tmm_whole(dy3)));
        h_run(r);
        assert_same_bits("y over a", y, ya, N);
        assert_same_bits("da alone", da, da1, N);
        assert_same_bits("db alone", dv, dv1, N);
        assert_same_bits("da over dy", da, dy2, N);
        assert_same_bits("db over a", dv, a2, N);
        assert_same_bits("da over b", da, v3, N);
        assert_same_bits("db over dy", dv, dy3, N);
        printf("  %-40s n=%-8zu identical bits\n", kind ? "gate silu in place, optional outputs" :
                                                          "gate mul in place, optional outputs", N);
        tmm_buffer *bufs[] = { ba, bv, bdy, y, da, dv, da1, dv1, ya, a2, dy2, v3, dy3, a3 };
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            tmm_buffer_destroy(bufs[i]);
    }
    /* scale: y over a, da over dy */
    float *k = h_floats(C);
    h_rand(k, C, 44, -2, 2);
    tmm_buffer *ba = h_buffer(a, N), *bk = h_buffer(k, C), *bdy = h_buffer(dy, N), *y = h_buffer(NULL, N);
    tmm_buffer *da = h_buffer(NULL, N), *ya = h_buffer(a, N), *dy2 = h_buffer(dy, N), *dk = h_buffer(NULL, C);
    tmm_buffer *dk2 = h_buffer(NULL, C);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_gate_scale_forward(r, tmm_whole(ba), tmm_whole(bk), rows, C, tmm_whole(y)));
    H_OK(tmm_op_gate_scale_forward(r, tmm_whole(ya), tmm_whole(bk), rows, C, tmm_whole(ya)));
    H_OK(tmm_op_gate_scale_backward(r, tmm_whole(ba), tmm_whole(bk), tmm_whole(bdy), rows, C, false, NONE,
                                    tmm_whole(da), tmm_whole(dk)));
    H_OK(tmm_op_gate_scale_backward(r, tmm_whole(ba), tmm_whole(bk), tmm_whole(dy2), rows, C, false, NONE,
                                    tmm_whole(dy2), tmm_whole(dk2)));
    h_run(r);
    assert_same_bits("scale y over a", y, ya, N);
    assert_same_bits("scale da over dy", da, dy2, N);
    assert_same_bits("scale dk with da over dy", dk, dk2, C);
    printf("  %-40s n=%-8zu identical bits\n", "gate scale in place", N);
    tmm_buffer *bufs[] = { ba, bk, bdy, y, da, ya, dy2, dk, dk2 };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(a), free(v), free(dy), free(k);
}

/* ---- bindings split under a lowered maxStorageBufferRange ----------------------- */

/* Every op on fixed inputs whose row views start 3 floats into their
 * buffers; returns all outputs concatenated. Run with the device's limits
 * and with a 16 KiB range (several chunks per tensor, sequences straddling
 * chunk boundaries), the outputs must have identical bits. */
static float *run_all_ops(size_t *n_out)
{
    enum { B = 80, NS = 37, C = 3, K = 4, ROWS = B * NS, N = ROWS * C, OFF = 3, NB = 2000 };
    const size_t nwin = (size_t)B * (K - 1) * C, nsw = (size_t)NB * (K - 1) * C;
    size_t cap = 16 * (size_t)N + nwin + nsw + (size_t)NB * C + 64 * OFF;
    float *out = h_floats(cap), *o = out, *zero = h_floats(nsw + OFF);
    tmm_buffer *keep[64];
    int nk = 0;
#define B_(data, n) (keep[nk++] = h_buffer((data), (n)))
#define ROW(buf) tmm_sub((buf), OFF * 4, (uint64_t)N * 4)
    float *x = h_floats(N + OFF), *dy = h_floats(N + OFF), *p = h_floats(128), *win = h_floats(nsw);
    h_rand(x, N + OFF, 1, -3, 3);
    h_rand(dy, N + OFF, 2, -1, 1);
    h_rand(p, 128, 3, 0.5f, 1.5f);
    h_rand(win, nsw, 4, -1, 1);
    tmm_buffer *bx = B_(x, N + OFF), *bdy = B_(dy, N + OFF), *bp = B_(p, 128);
    tmm_view w = tmm_sub(bp, 0, C * K * 4), bias = tmm_sub(bp, 256, C * 4), om = tmm_sub(bp, 0, C * 4);
    tmm_buffer *outs[24];
    size_t sizes[24];
    int no = 0;
#define OUT(n) (sizes[no] = (n) + OFF, outs[no++] = B_(zero, (n) + OFF))
    tmm_recorder *r = h_begin();
    /* conv1d forward and backward, with SiLU */
    tmm_buffer *cy = OUT(N), *cdx = OUT(N), *cdw = OUT(C * K), *cdb = OUT(C);
    tmm_buffer *csc = B_(NULL, tmm_op_conv1d_backward_scratch(B, NS, C, K, true));
    H_OK(tmm_op_conv1d_forward(r, ROW(bx), w, bias, B, NS, C, K, true, ROW(cy)));
    H_OK(tmm_op_conv1d_backward(r, ROW(bx), w, bias, ROW(bdy), B, NS, C, K, true, false, tmm_whole(csc), ROW(cdx),
                                tmm_whole(cdw), tmm_whole(cdb)));
    /* conv1d fill (len = 7 b mod NS) and a step of NB sequences at positions 0..4 */
    uint32_t len[B], *pos = calloc(NB, sizeof *pos);
    for (uint32_t b = 0; b < B; b++)
        len[b] = (b * 7) % NS;
    for (uint32_t b = 0; b < NB; b++)
        pos[b] = b % 5;
    tmm_buffer *blen = B_((const float *)len, B), *bpos = B_((const float *)pos, NB);
    tmm_buffer *cwin = OUT(nwin), *sy = OUT((size_t)NB * C);
    tmm_buffer *swin = B_(win, nsw);
    sizes[no] = nsw, outs[no++] = swin;
    H_OK(tmm_op_conv1d_fill(r, ROW(bx), tmm_whole(blen), B, NS, C, K, tmm_sub(cwin, OFF * 4, nwin * 4)));
    H_OK(tmm_op_conv1d_step(r, tmm_sub(bx, OFF * 4, (size_t)NB * C * 4), w, bias, tmm_whole(bpos), NB, C, K, true,
                            tmm_whole(swin), tmm_sub(sy, OFF * 4, (size_t)NB * C * 4)));
    /* GELU, softplus, sine */
    tmm_buffer *gy = OUT(N), *gdx = OUT(N), *gdb = OUT(C), *sp = OUT(N), *spdx = OUT(N), *spdb = OUT(C);
    tmm_buffer *ny = OUT(N), *ndx = OUT(N), *ndo = OUT(C), *ndc = OUT(C);
    tmm_buffer *asc = B_(NULL, tmm_op_sine_backward_scratch(ROWS, C));
    H_OK(tmm_op_gelu_forward(r, ROW(bx), bias, ROWS, C, ROW(gy)));
    H_OK(tmm_op_gelu_backward(r, ROW(bx), bias, ROW(bdy), ROWS, C, false, tmm_whole(asc), ROW(gdx), tmm_whole(gdb)));
    H_OK(tmm_op_softplus_forward(r, ROW(bx), bias, ROWS, C, ROW(sp)));
    H_OK(tmm_op_softplus_backward(r, ROW(bx), bias, ROW(bdy), ROWS, C, false, tmm_whole(asc), ROW(spdx),
                                  tmm_whole(spdb)));
    H_OK(tmm_op_sine_forward(r, ROW(bx), om, bias, ROWS, C, ROW(ny)));
    H_OK(tmm_op_sine_backward(r, ROW(bx), om, bias, ROW(bdy), ROWS, C, false, tmm_whole(asc), ROW(ndx),
                              tmm_whole(ndo), tmm_whole(ndc)));
    /* gates */
    tmm_buffer *my = OUT(N), *mda = OUT(N), *mdb = OUT(N), *zy = OUT(N), *zda = OUT(N), *kdk = OUT(C);
    H_OK(tmm_op_gate_mul_forward(r, ROW(bx), ROW(bdy), ROWS, C, ROW(my)));
    H_OK(tmm_op_gate_mul_backward(r, ROW(bx), ROW(bdy), ROW(bx), ROWS, C, ROW(mda), ROW(mdb)));
    H_OK(tmm_op_gate_silu_forward(r, ROW(bdy), ROW(bx), ROWS, C, ROW(zy)));
    H_OK(tmm_op_gate_silu_backward(r, ROW(bdy), ROW(bx), ROW(bdy), ROWS, C, NONE, ROW(zda)));
    H_OK(tmm_op_gate_scale_backward(r, ROW(bx), om, ROW(bdy), ROWS, C, false, tmm_whole(asc), NONE, tmm_whole(kdk)));
    h_run(r);
#undef B_
#undef ROW
#undef OUT
    cr_assert(no <= 24 && nk <= 64);
    for (int i = 0; i < no; i++) {
        cr_assert((size_t)(o - out) + sizes[i] <= cap);
        h_read(outs[i], o, sizes[i]);
        o += sizes[i];
    }
    *n_out = (size_t)(o - out);
    for (int i = 0; i < nk; i++)
        tmm_buffer_destroy(keep[i]);
    free(x), free(dy), free(p), free(pos), free(win), free(zero);
    return out;
}

H_TEST(ssm, bindings_split_to_fit_a_small_range_give_the_same_bits)
{
    size_t n1, n2;
    float *whole = run_all_ops(&n1);
    tmm_device_info saved = h_dev->info;
    h_dev->info.max_storage_buffer_range = 16384;
    h_dev->info.min_storage_buffer_offset_alignment = 256;
    float *split = run_all_ops(&n2);
    h_dev->info = saved;
    cr_assert_eq(n1, n2);
    size_t first = n1;
    for (size_t i = 0; i < n1 && first == n1; i++)
        if (memcmp(&whole[i], &split[i], sizeof *whole))
            first = i;
    cr_assert(first == n1, "outputs differ when bindings are split (first at float %zu: %.9g vs %.9g)", first,
              (double)whole[first < n1 ? first : 0], (double)split[first < n1 ? first : 0]);
    printf("  %-40s n=%-8zu identical bits\n", "all ops, split vs whole bindings", n1);
    free(whole), free(split);
}

/* ---- errors ------------------------------------------------------------------ */

static void expect(tmm_status got, tmm_status want, const char *message)
{
    cr_assert_eq(got, want, "status %s, expected %s (%s)", tmm_status_name(got), tmm_status_name(want),
                 tmm_last_error());
    cr_assert(strstr(tmm_last_error(), message), "message \"%s\" lacks \"%s\"", tmm_last_error(), message);
}

H_TEST(ssm, bad_arguments_are_clear_errors)
{
    tmm_buffer *a = h_buffer(NULL, 256), *b = h_buffer(NULL, 256), *c = h_buffer(NULL, 256);
    tmm_view va = tmm_whole(a), vb = tmm_whole(b), vc = tmm_whole(c);
    tmm_recorder *r = h_begin();
    expect(tmm_op_conv1d_forward(r, va, vb, vb, 2, 4, 4, 0, false, vc), TMM_ERR_INVALID_ARGUMENT,
           "conv1d_forward: kernel size K = 0 is outside 1..8");
    expect(tmm_op_conv1d_step(r, va, vb, vb, vb, 2, 4, 9, false, vc, va), TMM_ERR_INVALID_ARGUMENT,
           "conv1d_step: kernel size K = 9 is outside 1..8");
    expect(tmm_op_conv1d_forward(r, va, vb, vb, 2, 4, 4, 3, false, tmm_sub(a, 16, 128)), TMM_ERR_INVALID_ARGUMENT,
           "conv1d_forward: y overlaps x");
    expect(tmm_op_conv1d_forward(r, va, tmm_sub(b, 4, 48), vb, 2, 4, 4, 3, false, vc), TMM_ERR_INVALID_ARGUMENT,
           "w starts at byte offset 4, not a multiple of the device's minStorageBufferOffsetAlignment");
    expect(tmm_op_conv1d_backward(r, va, vb, vb, va, 1, 200, 1, 3, false, false, tmm_sub(c, 0, 4), vc, vb, vb),
           TMM_ERR_INVALID_ARGUMENT, "conv1d_backward: scratch holds 1 floats");
    expect(tmm_op_conv1d_step(r, va, vb, vb, vc, 2, 4, 3, false, tmm_sub(c, 0, 64), vc), TMM_ERR_INVALID_ARGUMENT,
           "conv1d_step: window overlaps pos");
    expect(tmm_op_gelu_forward(r, va, vb, 8, 8, tmm_sub(a, 4, 256)), TMM_ERR_INVALID_ARGUMENT,
           "gelu_forward: y overlaps x without being the same view");
    expect(tmm_op_gelu_backward(r, va, NONE, vb, 8, 8, false, NONE, tmm_sub(b, 4, 256), NONE),
           TMM_ERR_INVALID_ARGUMENT, "gelu_backward: dx overlaps dy without being the same view");
    expect(tmm_op_softplus_forward(r, va, vb, 8, 8, tmm_sub(c, 0, 100)), TMM_ERR_INVALID_ARGUMENT,
           "softplus_forward: y holds 25 floats, needs 64");
    expect(tmm_op_gate_mul_backward(r, va, vb, va, 8, 8, tmm_sub(c, 0, 256), tmm_sub(c, 128, 256)),
           TMM_ERR_INVALID_ARGUMENT, "gate_mul_backward: db overlaps da; outputs must not alias each other");
    expect(tmm_op_gate_scale_backward(r, va, vb, va, 8, 8, false, NONE, NONE, tmm_sub(a, 0, 32)),
           TMM_ERR_INVALID_ARGUMENT, "gate_scale_backward: dk overlaps a");
    expect(tmm_op_sine_backward(r, va, vb, vb, va, 8, 8, false, NONE, vc, tmm_sub(b, 0, 32), tmm_sub(c, 512, 32)),
           TMM_ERR_INVALID_ARGUMENT, "sine_backward: domega overlaps omega");
    const uint64_t range = h_dev->info.max_storage_buffer_range;
    h_dev->info.max_storage_buffer_range = 256;
    expect(tmm_op_conv1d_forward(r, va, vb, vb, 1, 8, 8, 8, false, vc), TMM_ERR_UNSUPPORTED,
           "not more than the 7 neighbouring rows the taps read");
    h_dev->info.max_storage_buffer_range = range;
    h_run(r);
    tmm_buffer_destroy(a), tmm_buffer_destroy(b), tmm_buffer_destroy(c);
}

/* No rows: the parameter gradients are zeroed (or left alone when
 * accumulating); nothing else is touched. */
H_TEST(ssm, zero_rows_zero_the_parameter_gradients)
{
    const uint32_t C = 5, K = 3;
    float ones[16];
    for (int i = 0; i < 16; i++)
        ones[i] = 1.0f;
    tmm_buffer *in = h_buffer(ones, 16), *g[8];
    for (int i = 0; i < 8; i++)
        g[i] = h_buffer(ones, 16);
    tmm_view v = tmm_whole(in);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_conv1d_backward(r, v, v, v, v, 0, 7, C, K, true, false, NONE, v, tmm_whole(g[0]), tmm_whole(g[1])));
    H_OK(tmm_op_conv1d_backward(r, v, v, v, v, 3, 0, C, K, false, true, NONE, v, tmm_whole(g[2]), tmm_whole(g[3])));
    H_OK(tmm_op_gelu_backward(r, v, v, v, 0, C, false, NONE, v, tmm_whole(g[4])));
    H_OK(tmm_op_softplus_backward(r, v, NONE, v, 0, C, true, NONE, v, tmm_whole(g[5])));
    H_OK(tmm_op_sine_backward(r, v, v, v, v, 0, C, false, NONE, v, tmm_whole(g[6]), tmm_whole(g[7])));
    H_OK(tmm_op_conv1d_forward(r, v, v, v, 0, 4, C, K, false, v));
    H_OK(tmm_op_gate_mul_forward(r, v, v, 0, C, v));
    h_run(r);
    const size_t want_zero[8] = { C * K, C, 0, 0, C, 0, C, C };
    for (int i = 0; i < 8; i++) {
        float *x = readback(g[i], 16);
        for (size_t j = 0; j < 16; j++)
            cr_assert(x[j] == (j < want_zero[i] ? 0.0f : 1.0f), "gradient %d, float %zu: %g", i, j, (double)x[j]);
        free(x);
        tmm_buffer_destroy(g[i]);
    }
    float *x = readback(in, 16);
    for (size_t j = 0; j < 16; j++)
        cr_assert(x[j] == 1.0f);
    free(x);
    tmm_buffer_destroy(in);
    printf("  %-40s parameter gradients zeroed, nothing else written\n", "rows = 0");
}
