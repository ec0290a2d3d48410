/* The Llama ops (src/ops/llama_ops.h: RMSNorm, SwiGLU, RoPE) against their
 * double-precision C references (src/ref/ref_llama.h) on random inputs, over
 * shapes that include 1, primes and sizes that are not multiples of any
 * workgroup, chunk or segment size, and lengths beyond llvmpipe's
 * 65535-iteration loop cap along every axis a kernel loops over (RMSNorm's
 * rows and columns). Also: determinism, bindings split under a lowered
 * maxStorageBufferRange at unaligned offsets (bitwise equal to unsplit),
 * in-place use, accumulation, RoPE's decoding mode against its training
 * mode, RoPE's inverse and relative-position properties, and errors. Each
 * comparison prints its largest deviation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ref/ref_llama.h"

/* ---- helpers ---------------------------------------------------------------- */

static double *to_d(const float *x, size_t n)
{
    double *y = calloc(n ? n : 1, sizeof *y);
    cr_assert_not_null(y);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static float *to_f(const double *x, size_t n)
{
    float *y = h_floats(n);
    for (size_t i = 0; i < n; i++)
        y[i] = (float)x[i];
    return y;
}

static double *dzeros(size_t n)
{
    double *y = calloc(n ? n : 1, sizeof *y);
    cr_assert_not_null(y);
    return y;
}

/* Compares device floats with a double reference. */
static double cmp_d(const char *what, const float *got, const double *ref, size_t n, double atol, double rtol)
{
    float *rf = to_f(ref, n);
    double w = h_compare(what, got, rf, n, atol, rtol);
    free(rf);
    return w;
}

/* Asserts |got - ref| <= atol + k * 2^-24 * (1 + sqrt(d)) * scale[r] for
 * every element of row r; prints the largest deviation and the largest share
 * of the bound used. */
static void cmp_rows(const char *what, const float *got, const double *ref, const double *scale, size_t rows,
                     size_t d, double atol, double k)
{
    double worst = 0, share = 0;
    for (size_t r = 0; r < rows; r++) {
        double bound = atol + k * 0x1p-24 * (1 + sqrt((double)d)) * scale[r];
        for (size_t c = 0; c < d; c++) {
            size_t i = r * d + c;
            double dev = isnan(got[i]) ? INFINITY : fabs((double)got[i] - ref[i]);
            worst = fmax(worst, dev);
            share = fmax(share, dev / bound);
            cr_assert(dev <= bound, "%s: element %zu (row %zu) is %.9g, reference %.9g (bound %.3g)", what, i, r,
                      (double)got[i], ref[i], bound);
        }
    }
    printf("  %-40s n=%-8zu max|dev| = %.3g (%.0f%% of the bound)\n", what, rows * d, worst, 100 * share);
}

static float *readback(tmm_buffer *b, size_t n)
{
    float *x = h_floats(n);
    h_read(b, x, n);
    return x;
}

static void assert_same_bits(const char *what, tmm_buffer *a, tmm_buffer *b, size_t n)
{
    float *x = readback(a, n), *y = readback(b, n);
    cr_assert(memcmp(x, y, n * sizeof *x) == 0, "%s: results differ", what);
    free(x);
    free(y);
}

static tmm_buffer *scratch_buffer(uint64_t n) { return h_buffer(NULL, n ? n : 1); }

static uint64_t seed_of(size_t s, uint64_t k) { return 1000 * (uint64_t)s + k; }

static void destroy_all(tmm_buffer **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tmm_buffer_destroy(b[i]);
}

/* ---- RMSNorm ------------------------------------------------------------------- */

static void check_rmsnorm(uint32_t rows, uint32_t d, bool in_place, uint64_t seed)
{
    const size_t n = (size_t)rows * d;
    const float eps = 1e-6f;
    float *x = h_floats(n), *g = h_floats(d), *dy = h_floats(n), *dg0 = h_floats(d);
    h_rand(x, n, seed, -2, 3);
    h_rand(g, d, seed + 1, 0.5f, 1.5f);
    h_rand(dy, n, seed + 2, -1, 1);
    h_rand(dg0, d, seed + 3, -1, 1);
    if (rows >= 3) /* a zero row: rstd = 1 / sqrt(eps) */
        memset(x + (size_t)(rows - 1) * d, 0, d * sizeof *x);
    tmm_buffer *bx = h_buffer(x, n), *bg = h_buffer(g, d), *by = in_place ? NULL : h_buffer(NULL, n);
    tmm_buffer *brs = h_buffer(NULL, rows), *bdy = h_buffer(dy, n), *bdx = in_place ? bdy : h_buffer(NULL, n);
    tmm_buffer *bdg[3] = { h_buffer(NULL, d), h_buffer(NULL, d), h_buffer(dg0, d) };
    tmm_buffer *bx2 = in_place ? h_buffer(x, n) : NULL; /* x for the backward when y overwrote it */
    uint64_t nsf = tmm_op_rmsnorm_forward_scratch(rows, d), nsb = tmm_op_rmsnorm_backward_scratch(rows, d);
    tmm_buffer *sc = scratch_buffer(nsf > nsb ? nsf : nsb), *junk = h_buffer(NULL, n);
    tmm_view vx = tmm_whole(bx), vy = in_place ? vx : tmm_whole(by), vxb = in_place ? tmm_whole(bx2) : vx;
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rmsnorm_forward(r, vx, tmm_whole(bg), rows, d, eps, tmm_whole(sc), vy, tmm_whole(brs)));
    /* dg twice (determinism), and accumulated; dx last (it may overwrite dy) */
    H_OK(tmm_op_rmsnorm_backward(r, vxb, tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy), rows, d, false,
                                 tmm_whole(sc), tmm_whole(junk), tmm_whole(bdg[1])));
    H_OK(tmm_op_rmsnorm_backward(r, vxb, tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy), rows, d, true,
                                 tmm_whole(sc), tmm_whole(junk), tmm_whole(bdg[2])));
    H_OK(tmm_op_rmsnorm_backward(r, vxb, tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy), rows, d, false,
                                 tmm_whole(sc), tmm_whole(bdx), tmm_whole(bdg[0])));
    h_run(r);

    printf(" rmsnorm rows=%u d=%u%s\n", rows, d, in_place ? " (y over x, dx over dy)" : "");
    double *xd = to_d(x, n), *gd = to_d(g, d), *dyd = to_d(dy, n);
    double *ry = dzeros(n), *rr = dzeros(rows), *rdx = dzeros(n), *rdg = to_d(dg0, d);
    ref_rmsnorm_fwd_d(xd, gd, rows, d, eps, ry, rr);
    /* Float sums of d squares in chunks of 2048: relative error of order
     * 2^-24 sqrt(d) in rstd, carried into every y of the row. */
    double *sy = dzeros(rows), *sdx = dzeros(rows);
    for (size_t i = 0; i < n; i++)
        sy[i / d] = fmax(sy[i / d], fabs(ry[i]));
    for (size_t rw = 0; rw < rows; rw++) { /* dx's scale: rstd * max |dy g| + |xhat * the row term| */
        double s = 0, rs = rr[rw];
        for (size_t c = 0; c < d; c++)
            s += dyd[rw * d + c] * gd[c] * xd[rw * d + c] * rs;
        for (size_t c = 0; c < d; c++)
            sdx[rw] = fmax(sdx[rw], rs * (fabs(dyd[rw * d + c] * gd[c]) + fabs(xd[rw * d + c] * rs * s) / d));
    }
    float *got = readback(in_place ? bx : by, n);
    cmp_rows("rmsnorm y", got, ry, sy, rows, d, 1e-6, 4);
    free(got);
    got = readback(brs, rows);
    cmp_d("rmsnorm rstd", got, rr, rows, 0, 4 * 0x1p-24 * (1 + sqrt(d)));
    free(got);

    ref_rmsnorm_bwd_d(xd, gd, dyd, rows, d, eps, true, rdx, rdg);
    double ctol = 1e-6 * rows + 1e-5; /* dg: float sums over rows in segments of 256 */
    got = readback(bdg[2], d);
    cmp_d("rmsnorm dg, accumulate", got, rdg, d, ctol, 0);
    free(got);
    ref_rmsnorm_bwd_d(xd, gd, dyd, rows, d, eps, false, rdx, rdg);
    got = readback(bdx, n);
    cmp_rows("rmsnorm dx", got, rdx, sdx, rows, d, 1e-6, 8);
    free(got);
    got = readback(bdg[0], d);
    cmp_d("rmsnorm dg", got, rdg, d, ctol, 0);
    free(got);
    assert_same_bits("rmsnorm dg, two runs", bdg[0], bdg[1], d);

    tmm_buffer *bufs[] = { bx, bg, brs, bdy, bdg[0], bdg[1], bdg[2], sc, junk };
    destroy_all(bufs, sizeof bufs / sizeof bufs[0]);
    if (in_place)
        tmm_buffer_destroy(bx2);
    else
        tmm_buffer_destroy(by), tmm_buffer_destroy(bdx);
    free(x), free(g), free(dy), free(dg0), free(xd), free(gd), free(dyd), free(ry), free(rr), free(rdx), free(rdg);
    free(sy), free(sdx);
}

H_TEST(llama, rmsnorm_matches_reference)
{
    static const uint32_t shapes[][2] = { { 1, 1 },    { 2, 1 },    { 1, 7 },     { 3, 256 },  { 257, 255 },
                                          { 513, 1000 }, { 5, 2049 }, { 3, 5000 }, { 1100, 3 },
                                          /* rows beyond the loop cap (column sums), d beyond it (row sums) */
                                          { 70001, 2 }, { 2, 70001 },
                                          /* one dispatch (rmsnorm_row) up to 64 rows of 2 d <= TMM_MAX_LOOP */
                                          { 64, 2048 }, { 64, 2049 }, { 65, 17 }, { 63, 2048 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_rmsnorm(shapes[s][0], shapes[s][1], s % 3 == 1, seed_of(s, 1));
}

/* The GPUs' statistics (norm_stats_sg), forced on this device. */
H_TEST(llama, rmsnorm_subgroups_match_reference)
{
    if (!tmm_op_row_subgroups_for(tmm_device_get_info(h_dev), 2))
        cr_skip_test("skipped: the device lacks subgroup arithmetic in compute");
    static const uint32_t shapes[][2] = { { 1, 1 }, { 3, 7 }, { 2, 255 }, { 5, 1000 }, { 70, 4099 },
                                          { 1, 70001 }, { 65537, 3 } };
    h_dev->tuning.reduce_variant = 2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_rmsnorm(shapes[s][0], shapes[s][1], s % 3 == 1, seed_of(s, 5));
    h_dev->tuning.reduce_variant = 0;
}

/* The fused backward (one kernel, d <= TMM_NN_NORM_FUSED_MAX_D) against the
 * three phases on the same data: the same sums in the same order, so the
 * same bits; in place and not, one segment of rows and several,
 * accumulating into dg. */
static void check_rmsnorm_fused(uint32_t rows, uint32_t d, bool in_place, bool accumulate, uint64_t seed)
{
    const size_t n = (size_t)rows * d;
    float *x = h_floats(n), *g = h_floats(d), *dy = h_floats(n), *dg0 = h_floats(d);
    h_rand(x, n, seed, -2, 3);
    h_rand(g, d, seed + 1, 0.5f, 1.5f);
    h_rand(dy, n, seed + 2, -1, 1);
    h_rand(dg0, d, seed + 3, -1, 1);
    tmm_buffer *bx = h_buffer(x, n), *bg = h_buffer(g, d), *by = h_buffer(NULL, n), *brs = h_buffer(NULL, rows);
    uint64_t nsf = tmm_op_rmsnorm_forward_scratch(rows, d), nsb = tmm_op_rmsnorm_backward_scratch(rows, d);
    tmm_buffer *sc = scratch_buffer(nsf > nsb ? nsf : nsb);
    tmm_buffer *bdy[2], *bdx[2], *bdg[2];
    for (int k = 0; k < 2; k++) {
        bdy[k] = h_buffer(dy, n);
        bdx[k] = in_place ? bdy[k] : h_buffer(NULL, n);
        bdg[k] = h_buffer(dg0, d);
    }
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rmsnorm_forward(r, tmm_whole(bx), tmm_whole(bg), rows, d, 1e-6f, tmm_whole(sc), tmm_whole(by),
                                tmm_whole(brs)));
    H_OK(tmm_op_rmsnorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy[0]), rows, d,
                                 accumulate, tmm_whole(sc), tmm_whole(bdx[0]), tmm_whole(bdg[0])));
    H_OK(tmm_op_rmsnorm_backward_unfused(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy[1]), rows, d,
                                         accumulate, tmm_whole(sc), tmm_whole(bdx[1]), tmm_whole(bdg[1])));
    h_run(r);
    printf(" rmsnorm backward fused vs unfused rows=%u d=%u%s%s\n", rows, d, in_place ? ", in place" : "",
           accumulate ? ", accumulate" : "");
    assert_same_bits("rmsnorm dx, fused and unfused", bdx[0], bdx[1], n);
    assert_same_bits("rmsnorm dg, fused and unfused", bdg[0], bdg[1], d);
    for (int k = 0; k < 2; k++) {
        tmm_buffer_destroy(bdy[k]), tmm_buffer_destroy(bdg[k]);
        if (!in_place)
            tmm_buffer_destroy(bdx[k]);
    }
    tmm_buffer *bufs[] = { bx, bg, by, brs, sc };
    destroy_all(bufs, sizeof bufs / sizeof bufs[0]);
    free(x), free(g), free(dy), free(dg0);
}

H_TEST(llama, rmsnorm_backward_fused_matches_unfused)
{
    /* d up to the fused limit (1024), rows in one segment of 256 and several,
     * with a partial last segment */
    static const uint32_t shapes[][2] = { { 1, 1 }, { 3, 7 }, { 256, 128 }, { 257, 255 }, { 700, 37 }, { 300, 1024 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_rmsnorm_fused(shapes[s][0], shapes[s][1], s % 2 == 1, s % 3 == 2, seed_of(s, 13));
}

/* The residual's form (dh += dx in the same pass) against the unfused
 * backward followed by axpy, bit for bit; above the fused limit too. */
static void check_rmsnorm_residual(uint32_t rows, uint32_t d, uint64_t seed)
{
    const size_t n = (size_t)rows * d;
    float *x = h_floats(n), *g = h_floats(d), *dy = h_floats(n), *h0 = h_floats(n);
    h_rand(x, n, seed, -2, 3);
    h_rand(g, d, seed + 1, 0.5f, 1.5f);
    h_rand(dy, n, seed + 2, -1, 1);
    h_rand(h0, n, seed + 3, -1, 1);
    tmm_buffer *bx = h_buffer(x, n), *bg = h_buffer(g, d), *by = h_buffer(NULL, n), *brs = h_buffer(NULL, rows);
    uint64_t nsf = tmm_op_rmsnorm_forward_scratch(rows, d), nsb = tmm_op_rmsnorm_backward_scratch(rows, d);
    tmm_buffer *sc = scratch_buffer(nsf > nsb ? nsf : nsb);
    tmm_buffer *bdy[2] = { h_buffer(dy, n), h_buffer(dy, n) }, *bdh[2] = { h_buffer(h0, n), h_buffer(h0, n) };
    tmm_buffer *bdg[2] = { h_buffer(NULL, d), h_buffer(NULL, d) };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rmsnorm_forward(r, tmm_whole(bx), tmm_whole(bg), rows, d, 1e-6f, tmm_whole(sc), tmm_whole(by),
                                tmm_whole(brs)));
    H_OK(tmm_op_rmsnorm_backward_residual(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy[0]), rows, d,
                                          false, tmm_whole(sc), tmm_whole(bdh[0]), tmm_whole(bdg[0])));
    H_OK(tmm_op_rmsnorm_backward_unfused(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(brs), tmm_whole(bdy[1]), rows, d,
                                         false, tmm_whole(sc), tmm_whole(bdy[1]), tmm_whole(bdg[1])));
    H_OK(tmm_op_axpy(r, 1.0f, tmm_whole(bdy[1]), tmm_whole(bdh[1]), (uint32_t)n));
    h_run(r);
    printf(" rmsnorm backward with the residual rows=%u d=%u\n", rows, d);
    assert_same_bits("rmsnorm dh += dx, fused and unfused", bdh[0], bdh[1], n);
    assert_same_bits("rmsnorm dg with the residual", bdg[0], bdg[1], d);
    tmm_buffer *bufs[] = { bx, bg, by, brs, sc, bdy[0], bdy[1], bdh[0], bdh[1], bdg[0], bdg[1] };
    destroy_all(bufs, sizeof bufs / sizeof bufs[0]);
    free(x), free(g), free(dy), free(h0);
}

H_TEST(llama, rmsnorm_backward_residual_matches_unfused)
{
    check_rmsnorm_residual(3, 7, 51);
    check_rmsnorm_residual(600, 128, 52);
    check_rmsnorm_residual(5, 1100, 53); /* above the fused limit: dx over dy, then added */
}

H_TEST(llama, rmsnorm_backward_of_no_rows)
{
    float g[3] = { 1, 2, 3 }, dg0[3] = { 4, 5, 6 };
    tmm_buffer *bg = h_buffer(g, 3), *bdg[2] = { h_buffer(dg0, 3), h_buffer(dg0, 3) };
    tmm_view none = { 0 };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rmsnorm_backward(r, none, tmm_whole(bg), none, none, 0, 3, false, none, none, tmm_whole(bdg[0])));
    H_OK(tmm_op_rmsnorm_backward(r, none, tmm_whole(bg), none, none, 0, 3, true, none, none, tmm_whole(bdg[1])));
    H_OK(tmm_op_rmsnorm_forward(r, none, tmm_whole(bg), 0, 3, 1e-6f, none, none, none));
    h_run(r);
    float got[3];
    h_read(bdg[0], got, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(got[i], 0.0f);
    h_read(bdg[1], got, 3);
    cr_assert(memcmp(got, dg0, sizeof got) == 0);
    tmm_buffer_destroy(bg), tmm_buffer_destroy(bdg[0]), tmm_buffer_destroy(bdg[1]);
}

/* ---- SwiGLU ---------------------------------------------------------------------- */

static void check_swiglu(uint32_t rows, uint32_t f, bool in_place, uint64_t seed)
{
    const size_t n = (size_t)rows * f;
    float *gu = h_floats(2 * n), *dy = h_floats(n);
    h_rand(gu, 2 * n, seed, -8, 8);
    h_rand(dy, n, seed + 1, -1, 1);
    if (f > 4) { /* the gate's tails, where exp over- or underflows */
        gu[0] = -120, gu[1] = 120, gu[2] = -87, gu[3] = 30;
    }
    tmm_buffer *bgu = h_buffer(gu, 2 * n), *by = h_buffer(NULL, n), *bdy = h_buffer(dy, n);
    tmm_buffer *bdgu = in_place ? bgu : h_buffer(NULL, 2 * n), *bdgu2 = h_buffer(NULL, 2 * n);
    tmm_buffer *bgu2 = in_place ? h_buffer(gu, 2 * n) : bgu; /* the second, out-of-place backward's input */
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_swiglu_forward(r, tmm_whole(bgu), rows, f, tmm_whole(by)));
    H_OK(tmm_op_swiglu_backward(r, tmm_whole(bgu2), tmm_whole(bdy), rows, f, tmm_whole(bdgu2)));
    H_OK(tmm_op_swiglu_backward(r, tmm_whole(bgu), tmm_whole(bdy), rows, f, tmm_whole(bdgu)));
    h_run(r);

    printf(" swiglu rows=%u f=%u%s\n", rows, f, in_place ? " (dgu over gu)" : "");
    double *gud = to_d(gu, 2 * n), *dyd = to_d(dy, n), *ry = dzeros(n), *rdgu = dzeros(2 * n);
    ref_swiglu_fwd_d(gud, rows, f, ry);
    ref_swiglu_bwd_d(gud, dyd, rows, f, rdgu);
    float *got = readback(by, n);
    cmp_d("swiglu y", got, ry, n, 1e-6, 1e-5);
    free(got);
    got = readback(bdgu, 2 * n);
    cmp_d("swiglu dgu", got, rdgu, 2 * n, 1e-6, 1e-5);
    free(got);
    assert_same_bits("swiglu dgu, in place and not", bdgu, bdgu2, 2 * n);

    tmm_buffer *bufs[] = { bgu, by, bdy, bdgu2 };
    destroy_all(bufs, 4);
    if (in_place)
        tmm_buffer_destroy(bgu2);
    else
        tmm_buffer_destroy(bdgu);
    free(gu), free(dy), free(gud), free(dyd), free(ry), free(rdgu);
}

H_TEST(llama, swiglu_matches_reference)
{
    static const uint32_t shapes[][2] = { { 1, 1 },    { 5, 7 },   { 2, 1 },    { 3, 256 },
                                          { 257, 1000 }, { 1000, 3 }, { 70001, 1 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_swiglu(shapes[s][0], shapes[s][1], s % 2 == 1, seed_of(s, 2));
}

/* ---- RoPE --------------------------------------------------------------------------- */

static tmm_buffer *rope_table_buffer(uint32_t n, uint32_t dh)
{
    size_t nt = tmm_rope_table_floats(n, dh);
    float *t = h_floats(nt);
    H_OK(tmm_rope_table(n, dh, TMM_ROPE_BASE, t));
    tmm_buffer *b = h_buffer(t, nt);
    free(t);
    return b;
}

static tmm_buffer *words_buffer(const uint32_t *w, size_t n) { return h_buffer((const float *)w, n); }

/* rows [B, n, d] forward and backward against the reference; then B rows at
 * random positions in decoding mode: against the reference and bitwise
 * against the matching rows of the training-mode result. */
static void check_rope(uint32_t B, uint32_t n, uint32_t H, uint32_t dh, bool in_place, uint64_t seed)
{
    const uint32_t d = H * dh, rows = B * n;
    const size_t nx = (size_t)rows * d;
    float *x = h_floats(nx), *dy = h_floats(nx), *u = h_floats(B);
    h_rand(x, nx, seed, -2, 2);
    h_rand(dy, nx, seed + 1, -1, 1);
    h_rand(u, B, seed + 2, 0, 1);
    uint32_t *pos = calloc(B, sizeof *pos);
    float *xq = h_floats((size_t)B * d);
    for (uint32_t b = 0; b < B; b++) {
        pos[b] = b == B - 1 ? n - 1 : (uint32_t)(u[b] * n) % n;
        memcpy(xq + (size_t)b * d, x + ((size_t)b * n + pos[b]) * d, d * sizeof *x);
    }
    tmm_buffer *bt = rope_table_buffer(n, dh), *bx = h_buffer(x, nx), *bdy = h_buffer(dy, nx);
    tmm_buffer *by = in_place ? bx : h_buffer(NULL, nx), *bdx = in_place ? bdy : h_buffer(NULL, nx);
    tmm_buffer *bq = h_buffer(xq, (size_t)B * d), *bqy = h_buffer(NULL, (size_t)B * d), *bpos = words_buffer(pos, B);
    tmm_view none = { 0 };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rope(r, TMM_ROPE_SEQUENCE, tmm_whole(bx), tmm_whole(bt), none, rows, d, H, n, false, tmm_whole(by)));
    H_OK(tmm_op_rope(r, TMM_ROPE_SEQUENCE, tmm_whole(bdy), tmm_whole(bt), none, rows, d, H, n, true,
                     tmm_whole(bdx)));
    H_OK(tmm_op_rope(r, TMM_ROPE_POSITIONS, tmm_whole(bq), tmm_whole(bt), tmm_whole(bpos), B, d, H, n, false,
                     tmm_whole(bqy)));
    h_run(r);

    printf(" rope B=%u n=%u H=%u dh=%u%s\n", B, n, H, dh, in_place ? " (in place)" : "");
    double *xd = to_d(x, nx), *dyd = to_d(dy, nx), *ry = dzeros(nx), *rdx = dzeros(nx);
    double *xqd = to_d(xq, (size_t)B * d), *rq = dzeros((size_t)B * d);
    ref_rope_d(xd, rows, d, H, n, NULL, TMM_ROPE_BASE, false, ry);
    ref_rope_d(dyd, rows, d, H, n, NULL, TMM_ROPE_BASE, true, rdx);
    ref_rope_d(xqd, B, d, H, n, pos, TMM_ROPE_BASE, false, rq);
    /* two products of table entries rounded to float (2^-24 relative) and a sum */
    float *y = readback(by, nx), *got = readback(bdx, nx), *q = readback(bqy, (size_t)B * d);
    cmp_d("rope y (training positions)", y, ry, nx, 1e-6, 0);
    cmp_d("rope dx (inverse)", got, rdx, nx, 1e-6, 0);
    cmp_d("rope y (decoding positions)", q, rq, (size_t)B * d, 1e-6, 0);
    for (uint32_t b = 0; b < B; b++)
        cr_assert(memcmp(q + (size_t)b * d, y + ((size_t)b * n + pos[b]) * d, d * sizeof *q) == 0,
                  "decoding row %u at position %u differs from row %u of the training result", b, pos[b], pos[b]);
    printf("  %-40s rows=%-5u identical bits\n", "rope decoding vs training rows", B);

    tmm_buffer *bufs[] = { bt, bx, bdy, bq, bqy, bpos };
    destroy_all(bufs, 6);
    if (!in_place)
        tmm_buffer_destroy(by), tmm_buffer_destroy(bdx);
    free(x), free(dy), free(u), free(pos), free(xq), free(xd), free(dyd), free(ry), free(rdx), free(xqd), free(rq);
    free(y), free(got), free(q);
}

H_TEST(llama, rope_matches_reference)
{
    static const uint32_t shapes[][4] = {
        /* B, n, H, dh */
        { 1, 1, 1, 2 }, { 2, 7, 1, 2 }, { 3, 5, 3, 6 }, { 1, 13, 3, 10 }, { 2, 100, 2, 18 },
        { 5, 257, 3, 2 }, { 2, 31, 1, 128 }, { 1, 5003, 1, 4 } /* large angles */,
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_rope(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], s % 2 == 1, seed_of(s, 3));
}

/* inverse(rope(x)) = x; and <rope(q, t), rope(k, s)> depends on t - s only. */
H_TEST(llama, rope_properties)
{
    const uint32_t H = 3, dh = 10, d = H * dh, n = 4096, rows = 2 * 7;
    /* (t, s) pairs with t - s = 3 (rows 0..3) and t - s = -40 (rows 4..6) */
    static const uint32_t ts[7][2] = { { 3, 0 }, { 10, 7 }, { 1000, 997 }, { 4095, 4092 },
                                       { 0, 40 }, { 77, 117 }, { 4000, 4040 } };
    uint32_t pos[2 * 7];
    float *qk = h_floats((size_t)rows * d), *x = h_floats((size_t)rows * d);
    float q[30], k[30];
    h_rand(q, d, 1, -1, 1);
    h_rand(k, d, 2, -1, 1);
    for (uint32_t i = 0; i < 7; i++) {
        memcpy(qk + (size_t)i * d, q, sizeof q);
        memcpy(qk + (size_t)(7 + i) * d, k, sizeof k);
        pos[i] = ts[i][0];
        pos[7 + i] = ts[i][1] % n;
    }
    h_rand(x, (size_t)rows * d, 3, -2, 2);
    tmm_buffer *bt = rope_table_buffer(n, dh), *bqk = h_buffer(qk, (size_t)rows * d), *bp = words_buffer(pos, rows);
    tmm_buffer *bx = h_buffer(x, (size_t)rows * d), *bxi = h_buffer(NULL, (size_t)rows * d);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rope(r, TMM_ROPE_POSITIONS, tmm_whole(bqk), tmm_whole(bt), tmm_whole(bp), rows, d, H, n, false,
                     tmm_whole(bqk)));
    H_OK(tmm_op_rope(r, TMM_ROPE_SEQUENCE, tmm_whole(bx), tmm_whole(bt), (tmm_view){ 0 }, rows, d, H, 5, false,
                     tmm_whole(bxi)));
    H_OK(tmm_op_rope(r, TMM_ROPE_SEQUENCE, tmm_whole(bxi), tmm_whole(bt), (tmm_view){ 0 }, rows, d, H, 5, true,
                     tmm_whole(bxi)));
    h_run(r);
    float *got = readback(bxi, (size_t)rows * d), *rot = readback(bqk, (size_t)rows * d);
    h_compare("rope inverse of rope", got, x, (size_t)rows * d, 1e-6, 0);
    /* per head: the dot product of the rotated q and k */
    double dots[7][3], worst = 0;
    for (uint32_t i = 0; i < 7; i++)
        for (uint32_t h = 0; h < H; h++) {
            double s = 0;
            for (uint32_t c = 0; c < dh; c++)
                s += (double)rot[(size_t)i * d + h * dh + c] * rot[(size_t)(7 + i) * d + h * dh + c];
            dots[i][h] = s;
        }
    for (uint32_t i = 1; i < 7; i++)
        for (uint32_t h = 0; h < H; h++) {
            uint32_t first = i < 4 ? 0 : 4;
            if (i == first)
                continue;
            double dev = fabs(dots[i][h] - dots[first][h]);
            worst = fmax(worst, dev);
            cr_assert(dev < 2e-6, "head %u: the dot at (t, s) = (%u, %u) is %.9g, at (%u, %u) %.9g", h, ts[i][0],
                      ts[i][1], dots[i][h], ts[first][0], ts[first][1], dots[first][h]);
        }
    cr_assert(fabs(dots[0][0] - dots[4][0]) > 1e-3, "different offsets should give different dots");
    printf("  %-40s max|dev| = %.3g\n", "rope q.k depends on t - s only", worst);
    tmm_buffer *bufs[] = { bt, bqk, bp, bx, bxi };
    destroy_all(bufs, 5);
    free(qk), free(x), free(got), free(rot);
}

H_TEST(llama, rope_position_outside_the_table_gives_a_zero_row)
{
    const uint32_t d = 4, n = 3;
    uint32_t pos[3] = { 2, 3, 0xffffffffu };
    float x[12];
    h_rand(x, 12, 4, -1, 1);
    tmm_buffer *bt = rope_table_buffer(n, d), *bx = h_buffer(x, 12), *bp = words_buffer(pos, 3);
    tmm_buffer *by = h_buffer(x, 12);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rope(r, TMM_ROPE_POSITIONS, tmm_whole(bx), tmm_whole(bt), tmm_whole(bp), 3, d, 1, n, false,
                     tmm_whole(by)));
    h_run(r);
    float got[12];
    h_read(by, got, 12);
    double xd[4], ref[4];
    for (int i = 0; i < 4; i++)
        xd[i] = x[i];
    ref_rope_d(xd, 1, d, 1, n, pos, TMM_ROPE_BASE, false, ref);
    cmp_d("rope row at position 2", got, ref, 4, 1e-6, 0);
    for (int i = 4; i < 12; i++)
        cr_assert_eq(got[i], 0.0f, "element %d of a row beyond the table is %g", i, (double)got[i]);
    tmm_buffer_destroy(bt), tmm_buffer_destroy(bx), tmm_buffer_destroy(bp), tmm_buffer_destroy(by);
}

/* ---- bindings split under a lowered maxStorageBufferRange ------------------------ */

/* A buffer of off + n floats holding data (when not NULL) from float off on. */
static tmm_buffer *row_buffer(const float *data, size_t n, size_t off)
{
    tmm_buffer *b = h_buffer(NULL, off + n);
    if (data)
        H_OK(tmm_buffer_write(b, off * 4, data, n * 4));
    return b;
}

/* Every op forward and backward on fixed inputs placed `off` floats into
 * their buffers; returns all outputs concatenated and the number of
 * dispatches. Run with the device's limits at offset 0 and with a lowered
 * range (several bindings per tensor) at offset 3 (12 bytes), the outputs
 * must have identical bits. wide_range (0: unchanged) is the range for the
 * RMSNorm of rows of 5000 floats. */
static float *run_all_ops(size_t off, uint64_t wide_range, size_t *n_out, uint32_t *dispatches)
{
    enum { R_ROWS = 3000, R_D = 3, W_ROWS = 7, W_D = 5000, S_ROWS = 3000, S_F = 5, P_B = 3, P_N = 1000, P_H = 3,
           P_DH = 4, P_D = P_H * P_DH, P_ROWS = P_B * P_N };
    size_t cap = 3 * R_ROWS * R_D + R_ROWS + R_D + W_ROWS * W_D + W_ROWS + S_ROWS * S_F * 3 + 3 * P_ROWS * P_D;
    float *out = h_floats(cap), *o = out;
    tmm_buffer *keep[64];
    int nk = 0;
    tmm_recorder *r = h_begin();
    /* a row-indexed buffer holding data (or nothing) from float `off` on, and its view */
#define ROWS_BUF(data, n) (keep[nk++] = row_buffer((data), (n), off))
#define V(b, n) tmm_sub((b), off * 4, (uint64_t)(n) * 4)
#define B(data, n) (keep[nk++] = h_buffer((data), (n)))
    /* RMSNorm: many rows of d = 3 (forward and backward), and rows of 3 chunks (forward) */
    float *x = h_floats(R_ROWS * R_D), *dy = h_floats(R_ROWS * R_D), *g = h_floats(W_D);
    float *xw = h_floats(W_ROWS * W_D);
    h_rand(x, R_ROWS * R_D, 1, -2, 2);
    h_rand(dy, R_ROWS * R_D, 2, -1, 1);
    h_rand(g, W_D, 3, 0.5f, 1.5f);
    h_rand(xw, W_ROWS * W_D, 4, -2, 2);
    tmm_buffer *bx = ROWS_BUF(x, R_ROWS * R_D), *bdy = ROWS_BUF(dy, R_ROWS * R_D), *bg = B(g, W_D);
    tmm_buffer *by = ROWS_BUF(NULL, R_ROWS * R_D), *brs = ROWS_BUF(NULL, R_ROWS), *bdx = ROWS_BUF(NULL, R_ROWS * R_D);
    tmm_buffer *bdg = B(NULL, R_D), *rsc = B(NULL, tmm_op_rmsnorm_backward_scratch(R_ROWS, R_D));
    tmm_buffer *bxw = ROWS_BUF(xw, W_ROWS * W_D), *byw = ROWS_BUF(NULL, W_ROWS * W_D), *brw = ROWS_BUF(NULL, W_ROWS);
    tmm_buffer *wsc = B(NULL, tmm_op_rmsnorm_forward_scratch(W_ROWS, W_D));
    H_OK(tmm_op_rmsnorm_forward(r, V(bx, R_ROWS * R_D), tmm_whole(bg), R_ROWS, R_D, 1e-6f, (tmm_view){ 0 },
                                V(by, R_ROWS * R_D), V(brs, R_ROWS)));
    H_OK(tmm_op_rmsnorm_backward(r, V(bx, R_ROWS * R_D), tmm_whole(bg), V(brs, R_ROWS), V(bdy, R_ROWS * R_D), R_ROWS,
                                 R_D, false, tmm_whole(rsc), V(bdx, R_ROWS * R_D), tmm_whole(bdg)));
    const uint64_t range = h_dev->info.max_storage_buffer_range;
    if (wide_range)
        h_dev->info.max_storage_buffer_range = wide_range;
    H_OK(tmm_op_rmsnorm_forward(r, V(bxw, W_ROWS * W_D), tmm_whole(bg), W_ROWS, W_D, 1e-6f, tmm_whole(wsc),
                                V(byw, W_ROWS * W_D), V(brw, W_ROWS)));
    h_dev->info.max_storage_buffer_range = range;
    /* SwiGLU */
    float *gu = h_floats(2 * S_ROWS * S_F), *sdy = h_floats(S_ROWS * S_F);
    h_rand(gu, 2 * S_ROWS * S_F, 5, -4, 4);
    h_rand(sdy, S_ROWS * S_F, 6, -1, 1);
    tmm_buffer *bgu = ROWS_BUF(gu, 2 * S_ROWS * S_F), *bsdy = ROWS_BUF(sdy, S_ROWS * S_F);
    tmm_buffer *bsy = ROWS_BUF(NULL, S_ROWS * S_F), *bdgu = ROWS_BUF(NULL, 2 * S_ROWS * S_F);
    H_OK(tmm_op_swiglu_forward(r, V(bgu, 2 * S_ROWS * S_F), S_ROWS, S_F, V(bsy, S_ROWS * S_F)));
    H_OK(tmm_op_swiglu_backward(r, V(bgu, 2 * S_ROWS * S_F), V(bsdy, S_ROWS * S_F), S_ROWS, S_F,
                                V(bdgu, 2 * S_ROWS * S_F)));
    /* RoPE: training positions, inverse in place, decoding positions */
    float *px = h_floats(P_ROWS * P_D);
    h_rand(px, P_ROWS * P_D, 7, -2, 2);
    uint32_t *pos = calloc(P_ROWS, sizeof *pos);
    for (uint32_t i = 0; i < P_ROWS; i++)
        pos[i] = (i * 7919u) % P_N;
    float *tab = h_floats(tmm_rope_table_floats(P_N, P_DH));
    H_OK(tmm_rope_table(P_N, P_DH, TMM_ROPE_BASE, tab));
    tmm_buffer *bpx = ROWS_BUF(px, P_ROWS * P_D), *bpy = ROWS_BUF(NULL, P_ROWS * P_D);
    tmm_buffer *bpq = ROWS_BUF(NULL, P_ROWS * P_D), *bpos = ROWS_BUF((const float *)pos, P_ROWS);
    tmm_buffer *btab = B(tab, tmm_rope_table_floats(P_N, P_DH));
    H_OK(tmm_op_rope(r, TMM_ROPE_SEQUENCE, V(bpx, P_ROWS * P_D), tmm_whole(btab), (tmm_view){ 0 }, P_ROWS, P_D, P_H,
                     P_N, false, V(bpy, P_ROWS * P_D)));
    H_OK(tmm_op_rope(r, TMM_ROPE_POSITIONS, V(bpx, P_ROWS * P_D), tmm_whole(btab), V(bpos, P_ROWS), P_ROWS, P_D, P_H,
                     P_N, false, V(bpq, P_ROWS * P_D)));
    H_OK(tmm_op_rope(r, TMM_ROPE_SEQUENCE, V(bpx, P_ROWS * P_D), tmm_whole(btab), (tmm_view){ 0 }, P_ROWS, P_D, P_H,
                     P_N, true, V(bpx, P_ROWS * P_D)));
    *dispatches = tmm_recorder_dispatches(r);
    h_run(r);
#undef ROWS_BUF
#undef V
#undef B
    const struct { tmm_buffer *b; size_t n, off; } outs[] = {
        { by, R_ROWS * R_D, off },  { brs, R_ROWS, off }, { bdx, R_ROWS * R_D, off }, { bdg, R_D, 0 },
        { byw, W_ROWS * W_D, off }, { brw, W_ROWS, off }, { bsy, S_ROWS * S_F, off }, { bdgu, 2 * S_ROWS * S_F, off },
        { bpy, P_ROWS * P_D, off }, { bpq, P_ROWS * P_D, off }, { bpx, P_ROWS * P_D, off } };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        float *all = readback(outs[i].b, outs[i].off + outs[i].n);
        memcpy(o, all + outs[i].off, outs[i].n * sizeof *o);
        o += outs[i].n;
        free(all);
    }
    cr_assert((size_t)(o - out) <= cap);
    *n_out = (size_t)(o - out);
    destroy_all(keep, (size_t)nk);
    free(x), free(dy), free(g), free(xw), free(gu), free(sdy), free(px), free(pos), free(tab);
    return out;
}

H_TEST(llama, bindings_split_to_fit_a_small_range_give_the_same_bits)
{
    size_t n1, n2;
    uint32_t k1, k2;
    float *whole = run_all_ops(0, 0, &n1, &k1);
    tmm_device_info saved = h_dev->info;
    printf("  device: maxStorageBufferRange %llu, minStorageBufferOffsetAlignment %llu\n",
           (unsigned long long)saved.max_storage_buffer_range,
           (unsigned long long)saved.min_storage_buffer_offset_alignment);
    /* 4096 floats per binding: RMSNorm's 3000 rows of 3 in 3 bindings, SwiGLU's gu in 8, RoPE's x in 9; rows
     * of 5000 floats three to a binding of 16384 */
    h_dev->info.max_storage_buffer_range = 16384;
    h_dev->info.min_storage_buffer_offset_alignment = 256;
    float *split = run_all_ops(3, 65536, &n2, &k2);
    h_dev->info = saved;
    printf("  %u dispatches with whole bindings, %u split\n", k1, k2);
    cr_assert(k2 > k1 + 20, "the lowered range should split bindings into more dispatches");
    cr_assert_eq(n1, n2);
    cr_assert(memcmp(whole, split, n1 * sizeof *whole) == 0, "outputs differ when bindings are split");
    printf("  %-40s n=%-8zu identical bits\n", "all ops, split at byte 12 vs whole", n1);
    free(whole), free(split);
}

/* ---- errors ------------------------------------------------------------------ */

static void expect(tmm_status got, tmm_status want, const char *message)
{
    cr_assert_eq(got, want, "status %s, expected %s (%s)", tmm_status_name(got), tmm_status_name(want),
                 tmm_last_error());
    cr_assert(strstr(tmm_last_error(), message), "message \"%s\" lacks \"%s\"", tmm_last_error(), message);
}

H_TEST(llama, bad_arguments_are_clear_errors)
{
    tmm_buffer *a = h_buffer(NULL, 256), *b = h_buffer(NULL, 256);
    tmm_view va = tmm_whole(a), vb = tmm_whole(b), none = { 0 };
    float t[8];
    tmm_recorder *r = h_begin();
    /* RMSNorm */
    expect(tmm_op_rmsnorm_forward(r, va, vb, 4, 0, 1e-6f, none, va, vb), TMM_ERR_INVALID_ARGUMENT,
           "rmsnorm_forward: d is 0");
    expect(tmm_op_rmsnorm_forward(r, va, vb, 4, 8, 0.0f, none, va, vb), TMM_ERR_INVALID_ARGUMENT,
           "eps must be positive");
    expect(tmm_op_rmsnorm_forward(r, va, vb, 1, 9000000, 1e-6f, none, va, vb), TMM_ERR_UNSUPPORTED,
           "d = 9000000 is above the supported 8388608");
    expect(tmm_op_rmsnorm_forward(r, va, vb, 8, 8, 1e-6f, none, tmm_sub(a, 0, 20), vb), TMM_ERR_INVALID_ARGUMENT,
           "rmsnorm_forward: y holds 5 floats, needs 64");
    expect(tmm_op_rmsnorm_forward(r, tmm_sub(a, 0, 256), vb, 8, 8, 1e-6f, none, tmm_sub(a, 4, 256), tmm_sub(b, 512, 32)),
           TMM_ERR_INVALID_ARGUMENT, "rmsnorm_forward: y overlaps x");
    expect(tmm_op_rmsnorm_forward(r, va, tmm_sub(b, 4, 64), 8, 8, 1e-6f, none, va, vb), TMM_ERR_INVALID_ARGUMENT,
           "g starts at byte offset 4, not a multiple of the device's minStorageBufferOffsetAlignment");
    tmm_view bsc = tmm_sub(b, 256, 256); /* the backward's scratch (64 floats) */
    expect(tmm_op_rmsnorm_backward(r, va, vb, vb, va, 8, 8, false, tmm_sub(b, 256, 128), va, tmm_sub(b, 768, 32)),
           TMM_ERR_INVALID_ARGUMENT, "rmsnorm_backward: scratch holds 32 floats, needs 64");
    expect(tmm_op_rmsnorm_backward(r, va, vb, vb, va, 8, 8, false, bsc, va, tmm_sub(b, 768, 32)),
           TMM_ERR_INVALID_ARGUMENT, "rmsnorm_backward: dx overlaps x");
    expect(tmm_op_rmsnorm_backward(r, tmm_sub(a, 0, 256), tmm_sub(b, 0, 32), tmm_sub(b, 0, 32), tmm_sub(a, 256, 256),
                                   8, 8, false, bsc, tmm_sub(a, 512, 256), tmm_sub(b, 0, 32)),
           TMM_ERR_INVALID_ARGUMENT, "rmsnorm_backward: dg overlaps g");
    /* SwiGLU */
    expect(tmm_op_swiglu_forward(r, tmm_sub(a, 0, 64), 4, 4, vb), TMM_ERR_INVALID_ARGUMENT,
           "swiglu_forward: gu holds 16 floats, needs 32");
    expect(tmm_op_swiglu_forward(r, tmm_sub(a, 0, 128), 4, 4, tmm_sub(a, 64, 64)), TMM_ERR_INVALID_ARGUMENT,
           "swiglu_forward: y overlaps gu");
    expect(tmm_op_swiglu_backward(r, tmm_sub(a, 0, 128), tmm_sub(a, 128, 64), 4, 4, tmm_sub(a, 4, 128)),
           TMM_ERR_INVALID_ARGUMENT, "swiglu_backward: dgu overlaps gu");
    /* RoPE */
    expect(tmm_rope_table(4, 3, 10000, t), TMM_ERR_INVALID_ARGUMENT, "head width 3 is not a positive even number");
    expect(tmm_rope_table(4, 2, 0, t), TMM_ERR_INVALID_ARGUMENT, "base 0 is not finite and positive");
    expect(tmm_op_rope(r, TMM_ROPE_SEQUENCE, va, vb, none, 2, 12, 5, 2, false, va), TMM_ERR_INVALID_ARGUMENT,
           "5 heads do not divide d = 12 channels");
    expect(tmm_op_rope(r, TMM_ROPE_SEQUENCE, va, vb, none, 2, 12, 4, 2, false, va), TMM_ERR_INVALID_ARGUMENT,
           "the head width d / heads = 3 is odd");
    expect(tmm_op_rope(r, TMM_ROPE_SEQUENCE, va, vb, none, 2, 12, 2, 0, false, va), TMM_ERR_INVALID_ARGUMENT,
           "no positions");
    expect(tmm_op_rope(r, TMM_ROPE_SEQUENCE, va, tmm_sub(b, 0, 64), none, 2, 12, 2, 4, false, va),
           TMM_ERR_INVALID_ARGUMENT, "rope: table holds 16 floats, needs 24");
    expect(tmm_op_rope(r, TMM_ROPE_POSITIONS, va, vb, none, 2, 12, 2, 4, false, va), TMM_ERR_INVALID_ARGUMENT,
           "rope: pos holds 0 floats, needs 2");
    expect(tmm_op_rope(r, TMM_ROPE_SEQUENCE, tmm_sub(a, 0, 96), vb, none, 2, 12, 2, 4, false, tmm_sub(a, 8, 96)),
           TMM_ERR_INVALID_ARGUMENT, "rope: y overlaps x");
    expect(tmm_op_rope(r, (tmm_rope_mode)7, va, vb, none, 2, 12, 2, 4, false, va), TMM_ERR_INVALID_ARGUMENT,
           "unknown position mode 7");
    const uint64_t range = h_dev->info.max_storage_buffer_range;
    h_dev->info.max_storage_buffer_range = 64;
    expect(tmm_op_rope(r, TMM_ROPE_SEQUENCE, va, vb, none, 2, 12, 2, 4, false, va), TMM_ERR_UNSUPPORTED,
           "does not fit the device's maxStorageBufferRange");
    expect(tmm_op_swiglu_forward(r, va, 2, 16, vb), TMM_ERR_UNSUPPORTED,
           "one row of gu is 128 bytes, more than one binding can hold");
    h_dev->info.max_storage_buffer_range = range;
    h_run(r);
    tmm_buffer_destroy(a), tmm_buffer_destroy(b);
}
