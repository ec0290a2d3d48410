/* The nn ops (src/ops/nn_ops.h) against their double-precision C references
 * (src/ref/ref_nn.h) on random inputs, over shapes that include 1, primes,
 * sizes that are not multiples of any workgroup, chunk or segment size, and
 * lengths beyond llvmpipe's 65535-iteration loop cap along every axis that
 * a kernel loops over. Also: determinism (bitwise-equal reruns), bindings
 * split under a lowered maxStorageBufferRange (bitwise equal to unsplit),
 * in-place use, accumulation, and errors. Each comparison prints its
 * largest deviation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/nn_ops.h"
#include "ref/ref_nn.h"

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

/* Compares device floats with a double reference. */
static double cmp_d(const char *what, const float *got, const double *ref, size_t n, double atol, double rtol)
{
    float *rf = to_f(ref, n);
    double w = h_compare(what, got, rf, n, atol, rtol);
    free(rf);
    return w;
}

/* For LayerNorm: x - mean cancels in rows whose spread is small against
 * their magnitude, so float errors grow with the row's condition number
 * kappa_r = rstd_r * max_c |x[r, c]| (about 2 for spread-out rows, up to
 * |x| / sqrt(eps) for nearly constant ones). Asserts |got - ref| <=
 * 1e-6 + k * kappa_r^p * 2^-24 * (1 + sqrt(d)) * scale[r] and prints the
 * largest deviation and the largest share of the bound used. */
static double cmp_rows(const char *what, const float *got, const double *ref, const float *x, const double *rstd,
                       const double *scale, size_t rows, size_t d, double k, int p)
{
    double worst = 0, share = 0;
    for (size_t r = 0; r < rows; r++) {
        double xmax = 0;
        for (size_t c = 0; c < d; c++)
            xmax = fmax(xmax, fabs(x[r * d + c]));
        double kappa = fmax(1.0, rstd[r] * xmax);
        double bound = 1e-6 + k * pow(kappa, p) * 0x1p-24 * (1 + sqrt((double)d)) * scale[r];
        for (size_t c = 0; c < d; c++) {
            size_t i = r * d + c;
            double dev = fabs((double)got[i] - ref[i]);
            if (isnan(got[i]))
                dev = INFINITY;
            worst = fmax(worst, dev);
            share = fmax(share, dev / bound);
            cr_assert(dev <= bound, "%s: element %zu (row %zu, kappa %.3g) is %.9g, reference %.9g (bound %.3g)",
                      what, i, r, kappa, (double)got[i], ref[i], bound);
        }
    }
    printf("  %-40s n=%-8zu max|dev| = %.3g (%.0f%% of the bound)\n", what, rows * d, worst, 100 * share);
    return worst;
}

static float *readback(tmm_buffer *b, size_t n)
{
    float *x = h_floats(n);
    h_read(b, x, n);
    return x;
}

/* A buffer of n 32-bit words (uint32 or int32 data). */
static tmm_buffer *words_buffer(const void *data, size_t n) { return h_buffer((const float *)data, n); }

static void assert_same_bits(const char *what, tmm_buffer *a, tmm_buffer *b, size_t n)
{
    float *x = readback(a, n), *y = readback(b, n);
    cr_assert(memcmp(x, y, n * sizeof *x) == 0, "%s: two runs on the same data differ", what);
    free(x);
    free(y);
}

static tmm_buffer *scratch_buffer(uint64_t n) { return h_buffer(NULL, n ? n : 1); }

static uint64_t seed_of(size_t s, uint64_t k) { return 1000 * (uint64_t)s + k; }

/* ---- embedding ---------------------------------------------------------------- */

/* Runs forward and backward (both accumulate modes, backward twice for
 * determinism) and compares with the reference. hot: a token that takes
 * hot_per_20 of every 20 positions (long segments). */
static void check_embedding(uint32_t rows, uint32_t vocab, uint32_t d, uint32_t hot_per_20, uint64_t seed)
{
    uint32_t *tok = calloc(rows, sizeof *tok);
    float *u = h_floats(rows);
    h_rand(u, rows, seed, 0, 1);
    uint32_t hot = vocab / 3;
    for (uint32_t i = 0; i < rows; i++)
        tok[i] = i % 20 < hot_per_20 ? hot : (uint32_t)(u[i] * vocab) % vocab;
    size_t ne = (size_t)vocab * d, nh = (size_t)rows * d;
    float *E = h_floats(ne), *dh = h_floats(nh), *dE0 = h_floats(ne);
    h_rand(E, ne, seed + 1, -1, 1);
    h_rand(dh, nh, seed + 2, -1, 1);
    h_rand(dE0, ne, seed + 3, -1, 1);
    uint64_t words = tmm_nn_embedding_index_words(rows);
    uint32_t *index = calloc(words, sizeof *index);
    H_OK(tmm_nn_embedding_index(tok, rows, vocab, index));

    tmm_buffer *btok = words_buffer(tok, rows), *bidx = words_buffer(index, words);
    tmm_buffer *bE = h_buffer(E, ne), *bh = h_buffer(NULL, nh), *bdh = h_buffer(dh, nh);
    tmm_buffer *bdE[3] = { h_buffer(dE0, ne), h_buffer(dE0, ne), h_buffer(dE0, ne) };
    tmm_buffer *sc = scratch_buffer(tmm_op_embedding_backward_scratch(rows, d));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_embedding_forward(r, tmm_whole(btok), tmm_whole(bE), rows, vocab, d, tmm_whole(bh)));
    H_OK(tmm_op_embedding_backward(r, tmm_whole(bidx), tmm_whole(bdh), rows, vocab, d, false, tmm_whole(sc),
                                   tmm_whole(bdE[0])));
    H_OK(tmm_op_embedding_backward(r, tmm_whole(bidx), tmm_whole(bdh), rows, vocab, d, false, tmm_whole(sc),
                                   tmm_whole(bdE[1])));
    H_OK(tmm_op_embedding_backward(r, tmm_whole(bidx), tmm_whole(bdh), rows, vocab, d, true, tmm_whole(sc),
                                   tmm_whole(bdE[2])));
    h_run(r);

    printf(" embedding rows=%u vocab=%u d=%u (segment length %u, %u long segments)\n", rows, vocab, d, index[2],
           index[1]);
    double *Ed = to_d(E, ne), *dhd = to_d(dh, nh), *ref_h = calloc(nh, sizeof(double));
    double *ref_dE = to_d(dE0, ne);
    ref_embedding_fwd_d(tok, rows, Ed, vocab, d, ref_h);
    float *got = readback(bh, nh);
    cmp_d("embedding forward", got, ref_h, nh, 0, 0);
    free(got);
    /* A float sum of c terms in [-1, 1]: error well below c sqrt(c) 2^-24. */
    uint32_t max_count = 0, *count = calloc(vocab, sizeof *count);
    for (uint32_t i = 0; i < rows; i++)
        if (++count[tok[i]] > max_count)
            max_count = count[tok[i]];
    double tol = max_count * sqrt(max_count) * 0x1p-24 + 1e-6;
    ref_embedding_bwd_d(tok, rows, dhd, vocab, d, true, ref_dE);
    got = readback(bdE[2], ne);
    cmp_d("embedding backward, accumulate", got, ref_dE, ne, tol, 1e-6);
    free(got);
    ref_embedding_bwd_d(tok, rows, dhd, vocab, d, false, ref_dE);
    got = readback(bdE[0], ne);
    cmp_d("embedding backward", got, ref_dE, ne, tol, 0);
    free(got);
    assert_same_bits("embedding backward", bdE[0], bdE[1], ne);

    for (int i = 0; i < 3; i++)
        tmm_buffer_destroy(bdE[i]);
    tmm_buffer_destroy(btok), tmm_buffer_destroy(bidx), tmm_buffer_destroy(bE), tmm_buffer_destroy(bh);
    tmm_buffer_destroy(bdh), tmm_buffer_destroy(sc);
    free(tok), free(u), free(E), free(dh), free(dE0), free(index), free(Ed), free(dhd), free(ref_h), free(ref_dE);
    free(count);
}

H_TEST(nn, embedding_matches_reference)
{
    static const uint32_t shapes[][4] = {
        /* rows, vocab, d, hot positions per 20 */
        { 1, 1, 1, 0 },     { 2, 3, 1, 0 },     { 7, 5, 3, 0 },    { 257, 13, 31, 0 },
        { 1000, 257, 65, 0 }, { 1000, 8000, 17, 14 }, { 4099, 50, 7, 10 },
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_embedding(shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], seed_of(s, 1));
}

H_TEST(nn, embedding_long_token_runs)
{
    /* a token at 19 of 20 positions: 66501 occurrences, beyond the loop cap */
    check_embedding(70001, 50, 3, 19, 77);
    /* 1.14 million occurrences: segments longer than 256 (4096 at most per token) */
    check_embedding(1200000, 3, 2, 19, 78);
}

H_TEST(nn, embedding_out_of_range_tokens)
{
    const uint32_t rows = 5, vocab = 4, d = 3;
    uint32_t tok[5] = { 3, 4, 0, 0xffffffffu, 2 };
    float E[12];
    h_rand(E, 12, 5, -1, 1);
    tmm_buffer *btok = words_buffer(tok, rows), *bE = h_buffer(E, 12), *bh = h_buffer(NULL, 15);
    H_OK(tmm_buffer_write(bh, 0, (float[15]){ 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9 }, 60));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_embedding_forward(r, tmm_whole(btok), tmm_whole(bE), rows, vocab, d, tmm_whole(bh)));
    h_run(r);
    double Ed[12], ref[15];
    for (int i = 0; i < 12; i++)
        Ed[i] = E[i];
    ref_embedding_fwd_d(tok, rows, Ed, vocab, d, ref);
    float got[15];
    h_read(bh, got, 15);
    cmp_d("embedding forward, tokens >= vocab give zero rows", got, ref, 15, 0, 0);
    uint32_t index[64];
    cr_assert_eq(tmm_nn_embedding_index(tok, rows, vocab, index), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "token 4 at position 1 is outside the vocabulary of 4"), "%s",
              tmm_last_error());
    tmm_buffer_destroy(btok), tmm_buffer_destroy(bE), tmm_buffer_destroy(bh);
}

/* ---- LayerNorm ---------------------------------------------------------------- */

static void check_layernorm(uint32_t rows, uint32_t d, bool in_place, uint64_t seed)
{
    size_t n = (size_t)rows * d;
    float *x = h_floats(n), *g = h_floats(d), *b = h_floats(d), *dy = h_floats(n), *dg0 = h_floats(d),
          *db0 = h_floats(d);
    h_rand(x, n, seed, -2, 3);
    h_rand(g, d, seed + 1, 0.5f, 1.5f);
    h_rand(b, d, seed + 2, -1, 1);
    h_rand(dy, n, seed + 3, -1, 1);
    h_rand(dg0, d, seed + 4, -1, 1);
    h_rand(db0, d, seed + 5, -1, 1);
    tmm_buffer *bx = h_buffer(x, n), *bg = h_buffer(g, d), *bb = h_buffer(b, d), *by = h_buffer(NULL, n);
    tmm_buffer *bm = h_buffer(NULL, rows), *brs = h_buffer(NULL, rows), *bdy = h_buffer(dy, n);
    tmm_buffer *bdx = in_place ? bdy : h_buffer(NULL, n);
    tmm_buffer *bdg[2] = { h_buffer(NULL, d), h_buffer(dg0, d) }, *bdb[2] = { h_buffer(NULL, d), h_buffer(db0, d) };
    tmm_buffer *bdg2 = h_buffer(NULL, d), *bdb2 = h_buffer(NULL, d);
    uint64_t nsf = tmm_op_layernorm_forward_scratch(rows, d), nsb = tmm_op_layernorm_backward_scratch(rows, d);
    tmm_buffer *sc = scratch_buffer(nsf > nsb ? nsf : nsb);
    tmm_buffer *junk = h_buffer(NULL, n);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bb), rows, d, TMM_NN_LAYERNORM_EPS,
                                  tmm_whole(sc), tmm_whole(by), tmm_whole(bm), tmm_whole(brs)));
    /* the parameter gradients twice (determinism), with and without accumulate; dx last (it may overwrite dy) */
    H_OK(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs), tmm_whole(bdy),
                                   rows, d, true, tmm_whole(sc), tmm_whole(junk), tmm_whole(bdg[1]),
                                   tmm_whole(bdb[1])));
    H_OK(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs), tmm_whole(bdy),
                                   rows, d, false, tmm_whole(sc), tmm_whole(junk), tmm_whole(bdg2), tmm_whole(bdb2)));
    H_OK(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs), tmm_whole(bdy),
                                   rows, d, false, tmm_whole(sc), tmm_whole(bdx), tmm_whole(bdg[0]),
                                   tmm_whole(bdb[0])));
    h_run(r);

    printf(" layernorm rows=%u d=%u%s\n", rows, d, in_place ? " (dx in place over dy)" : "");
    double *xd = to_d(x, n), *gd = to_d(g, d), *bd = to_d(b, d), *dyd = to_d(dy, n);
    double *ry = calloc(n, sizeof *ry), *rm = calloc(rows, sizeof *rm), *rr = calloc(rows, sizeof *rr);
    double *rdx = calloc(n, sizeof *rdx), *rdg = to_d(dg0, d), *rdb = to_d(db0, d);
    ref_layernorm_fwd_d(xd, gd, bd, rows, d, TMM_NN_LAYERNORM_EPS, ry, rm, rr);
    /* Float sums of d terms, in chunks of 2048: relative errors of order 1e-7 * sqrt(d)
     * in mean and variance, magnified by |xhat| <= sqrt(d) in y. */
    double tol = 2e-6 * (1 + sqrt(d));
    float *got = readback(by, n);
    /* y's scale: the largest output of the row; dx's: rstd * max |dy * gamma| */
    double *sy = calloc(rows, sizeof *sy), *sdx = calloc(rows, sizeof *sdx);
    for (size_t i = 0; i < n; i++) {
        sy[i / d] = fmax(sy[i / d], fabs(ry[i]));
        sdx[i / d] = fmax(sdx[i / d], rr[i / d] * fabs((double)dy[i] * g[i % d]));
    }
    cmp_rows("layernorm y", got, ry, x, rr, sy, rows, d, 8, 1);
    free(got);
    got = readback(bm, rows);
    cmp_d("layernorm mean", got, rm, rows, tol, 0);
    free(got);
    got = readback(brs, rows);
    cmp_d("layernorm rstd", got, rr, rows, 0, tol);
    free(got);

    ref_layernorm_bwd_d(xd, gd, dyd, rows, d, TMM_NN_LAYERNORM_EPS, true, rdx, rdg, rdb);
    /* dgamma, dbeta: float sums over rows in segments of 256 */
    double ctol = 1e-6 * rows + 1e-5;
    got = readback(bdg[1], d);
    cmp_d("layernorm dgamma, accumulate", got, rdg, d, ctol, 0);
    free(got);
    got = readback(bdb[1], d);
    cmp_d("layernorm dbeta, accumulate", got, rdb, d, ctol, 0);
    free(got);
    ref_layernorm_bwd_d(xd, gd, dyd, rows, d, TMM_NN_LAYERNORM_EPS, false, rdx, rdg, rdb);
    got = readback(bdx, n);
    cmp_rows("layernorm dx", got, rdx, x, rr, sdx, rows, d, 8, 2);
    free(got);
    got = readback(bdg[0], d);
    cmp_d("layernorm dgamma", got, rdg, d, ctol, 0);
    free(got);
    got = readback(bdb[0], d);
    cmp_d("layernorm dbeta", got, rdb, d, ctol, 0);
    free(got);
    assert_same_bits("layernorm dgamma", bdg[0], bdg2, d);
    assert_same_bits("layernorm dbeta", bdb[0], bdb2, d);

    tmm_buffer *bufs[] = { bx, bg, bb, by, bm, brs, bdy, bdg[0], bdg[1], bdb[0], bdb[1], bdg2, bdb2, sc, junk };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    if (!in_place)
        tmm_buffer_destroy(bdx);
    free(x), free(g), free(b), free(dy), free(dg0), free(db0), free(xd), free(gd), free(bd), free(dyd);
    free(ry), free(rm), free(rr), free(rdx), free(rdg), free(rdb), free(sy), free(sdx);
}

H_TEST(nn, layernorm_matches_reference)
{
    static const uint32_t shapes[][2] = { { 1, 1 },   { 2, 1 },    { 1, 7 },    { 3, 256 },   { 257, 255 },
                                          { 513, 1000 }, { 5, 2049 }, { 3, 5000 }, { 1100, 3 },
                                          /* rows beyond the loop cap (column sums), d beyond it (row sums) */
                                          { 70001, 2 }, { 2, 70001 },
                                          /* one dispatch (layernorm_row) up to 64 rows of 3 d <= TMM_MAX_LOOP */
                                          { 64, 1365 }, { 64, 1366 }, { 65, 17 }, { 63, 1365 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_layernorm(shapes[s][0], shapes[s][1], s % 3 == 1, seed_of(s, 2));
}

/* The GPUs' statistics (norm_stats_sg: a workgroup per row, subgroup sums),
 * forced on this device: rows past one dispatch's 65535, rows longer than a
 * workgroup, several loops per invocation. */
H_TEST(nn, layernorm_subgroups_match_reference)
{
    if (!tmm_op_row_subgroups_for(tmm_device_get_info(h_dev), 2))
        cr_skip_test("skipped: the device lacks subgroup arithmetic in compute");
    static const uint32_t shapes[][2] = { { 1, 1 }, { 3, 7 }, { 2, 255 }, { 5, 1000 }, { 70, 4099 },
                                          { 64, 1 }, { 1, 70001 }, { 65537, 3 } };
    h_dev->tuning.reduce_variant = 2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_layernorm(shapes[s][0], shapes[s][1], s % 3 == 1, seed_of(s, 7));
    h_dev->tuning.reduce_variant = 0;
}

/* The fused backward (one kernel, d <= TMM_NN_NORM_FUSED_MAX_D) against the
 * three phases on the same data: the same sums in the same order, so the
 * same bits; in place and not, one segment of rows and several,
 * accumulating into the parameter gradients. */
static void check_layernorm_fused(uint32_t rows, uint32_t d, bool in_place, bool accumulate, uint64_t seed)
{
    size_t n = (size_t)rows * d;
    float *x = h_floats(n), *g = h_floats(d), *b = h_floats(d), *dy = h_floats(n), *p0 = h_floats(d);
    h_rand(x, n, seed, -2, 3);
    h_rand(g, d, seed + 1, 0.5f, 1.5f);
    h_rand(b, d, seed + 2, -1, 1);
    h_rand(dy, n, seed + 3, -1, 1);
    h_rand(p0, d, seed + 4, -1, 1);
    tmm_buffer *bx = h_buffer(x, n), *bg = h_buffer(g, d), *bb = h_buffer(b, d), *by = h_buffer(NULL, n);
    tmm_buffer *bm = h_buffer(NULL, rows), *brs = h_buffer(NULL, rows);
    uint64_t nsf = tmm_op_layernorm_forward_scratch(rows, d), nsb = tmm_op_layernorm_backward_scratch(rows, d);
    tmm_buffer *sc = scratch_buffer(nsf > nsb ? nsf : nsb);
    tmm_buffer *bdy[2], *bdx[2], *bdg[2], *bdb[2];
    for (int k = 0; k < 2; k++) {
        bdy[k] = h_buffer(dy, n);
        bdx[k] = in_place ? bdy[k] : h_buffer(NULL, n);
        bdg[k] = h_buffer(p0, d);
        bdb[k] = h_buffer(p0, d);
    }
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bb), rows, d, TMM_NN_LAYERNORM_EPS,
                                  tmm_whole(sc), tmm_whole(by), tmm_whole(bm), tmm_whole(brs)));
    H_OK(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs), tmm_whole(bdy[0]),
                                   rows, d, accumulate, tmm_whole(sc), tmm_whole(bdx[0]), tmm_whole(bdg[0]),
                                   tmm_whole(bdb[0])));
    H_OK(tmm_op_layernorm_backward_unfused(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs),
                                           tmm_whole(bdy[1]), rows, d, accumulate, tmm_whole(sc), tmm_whole(bdx[1]),
                                           tmm_whole(bdg[1]), tmm_whole(bdb[1])));
    h_run(r);
    printf(" layernorm backward fused vs unfused rows=%u d=%u%s%s\n", rows, d, in_place ? ", in place" : "",
           accumulate ? ", accumulate" : "");
    float *got[2] = { readback(bdx[0], n), readback(bdx[1], n) };
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&got[0][i], &got[1][i], sizeof(float)) == 0, "dx[%zu]: fused %.9g, unfused %.9g", i,
                  (double)got[0][i], (double)got[1][i]);
    free(got[0]), free(got[1]);
    assert_same_bits("layernorm dgamma, fused and unfused", bdg[0], bdg[1], d);
    assert_same_bits("layernorm dbeta, fused and unfused", bdb[0], bdb[1], d);

    for (int k = 0; k < 2; k++) {
        tmm_buffer_destroy(bdy[k]), tmm_buffer_destroy(bdg[k]), tmm_buffer_destroy(bdb[k]);
        if (!in_place)
            tmm_buffer_destroy(bdx[k]);
    }
    tmm_buffer *bufs[] = { bx, bg, bb, by, bm, brs, sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(g), free(b), free(dy), free(p0);
}

H_TEST(nn, layernorm_backward_fused_matches_unfused)
{
    /* d up to the fused limit (1024), rows in one segment of 256 and several,
     * with a partial last segment */
    static const uint32_t shapes[][2] = { { 1, 1 }, { 3, 7 }, { 256, 128 }, { 257, 255 }, { 700, 37 }, { 300, 1024 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_layernorm_fused(shapes[s][0], shapes[s][1], s % 2 == 1, s % 3 == 2, seed_of(s, 11));
}

/* The residual's form (dh += dx in the same pass) against the unfused
 * backward followed by axpy, bit for bit; above the fused limit too. */
static void check_layernorm_residual(uint32_t rows, uint32_t d, uint64_t seed)
{
    size_t n = (size_t)rows * d;
    float *x = h_floats(n), *g = h_floats(d), *dy = h_floats(n), *h0 = h_floats(n);
    h_rand(x, n, seed, -2, 3);
    h_rand(g, d, seed + 1, 0.5f, 1.5f);
    h_rand(dy, n, seed + 2, -1, 1);
    h_rand(h0, n, seed + 3, -1, 1);
    tmm_buffer *bx = h_buffer(x, n), *bg = h_buffer(g, d), *bb = h_buffer(g, d), *by = h_buffer(NULL, n);
    tmm_buffer *bm = h_buffer(NULL, rows), *brs = h_buffer(NULL, rows);
    uint64_t nsf = tmm_op_layernorm_forward_scratch(rows, d), nsb = tmm_op_layernorm_backward_scratch(rows, d);
    tmm_buffer *sc = scratch_buffer(nsf > nsb ? nsf : nsb);
    tmm_buffer *bdy[2] = { h_buffer(dy, n), h_buffer(dy, n) }, *bdh[2] = { h_buffer(h0, n), h_buffer(h0, n) };
    tmm_buffer *bdg[2] = { h_buffer(NULL, d), h_buffer(NULL, d) }, *bdb[2] = { h_buffer(NULL, d), h_buffer(NULL, d) };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bb), rows, d, TMM_NN_LAYERNORM_EPS,
                                  tmm_whole(sc), tmm_whole(by), tmm_whole(bm), tmm_whole(brs)));
    H_OK(tmm_op_layernorm_backward_residual(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs),
                                            tmm_whole(bdy[0]), rows, d, false, tmm_whole(sc), tmm_whole(bdh[0]),
                                            tmm_whole(bdg[0]), tmm_whole(bdb[0])));
    H_OK(tmm_op_layernorm_backward_unfused(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs),
                                           tmm_whole(bdy[1]), rows, d, false, tmm_whole(sc), tmm_whole(bdy[1]),
                                           tmm_whole(bdg[1]), tmm_whole(bdb[1])));
    H_OK(tmm_op_axpy(r, 1.0f, tmm_whole(bdy[1]), tmm_whole(bdh[1]), (uint32_t)n));
    cr_assert_eq(tmm_op_layernorm_backward_residual(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs),
                                                    tmm_whole(bdy[0]), rows, d, false, tmm_whole(sc),
                                                    tmm_whole(bdy[0]), tmm_whole(bdg[0]), tmm_whole(bdb[0])),
                 TMM_ERR_INVALID_ARGUMENT, "dh over dy");
    h_run(r);
    printf(" layernorm backward with the residual rows=%u d=%u\n", rows, d);
    assert_same_bits("layernorm dh += dx, fused and unfused", bdh[0], bdh[1], n);
    assert_same_bits("layernorm dgamma with the residual", bdg[0], bdg[1], d);
    assert_same_bits("layernorm dbeta with the residual", bdb[0], bdb[1], d);
    tmm_buffer *bufs[] = { bx,     bg,     bb,     by,     bm,     brs,    sc,    bdy[0],
                           bdy[1], bdh[0], bdh[1], bdg[0], bdg[1], bdb[0], bdb[1] };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(g), free(dy), free(h0);
}

H_TEST(nn, layernorm_backward_residual_matches_unfused)
{
    check_layernorm_residual(3, 7, 41);
    check_layernorm_residual(600, 128, 42);
    check_layernorm_residual(5, 1100, 43); /* above the fused limit: dx over dy, then added */
}

/* ---- bias + SiLU -------------------------------------------------------------- */

static void check_silu(uint32_t rows, uint32_t d, bool in_place, uint64_t seed)
{
    size_t n = (size_t)rows * d;
    float *x = h_floats(n), *b = h_floats(d), *dy = h_floats(n), *db0 = h_floats(d);
    h_rand(x, n, seed, -8, 8);
    h_rand(b, d, seed + 1, -1, 1);
    h_rand(dy, n, seed + 2, -1, 1);
    h_rand(db0, d, seed + 3, -1, 1);
    if (n > 4) { /* the tails, where exp over- or underflows */
        x[0] = -120, x[1] = 120, x[2] = -87, x[3] = 30;
    }
    tmm_buffer *bx = h_buffer(x, n), *bb = h_buffer(b, d), *by = h_buffer(NULL, n), *bdy = h_buffer(dy, n);
    tmm_buffer *bda = in_place ? bdy : h_buffer(NULL, n);
    tmm_buffer *bdb[3] = { h_buffer(NULL, d), h_buffer(NULL, d), h_buffer(db0, d) };
    tmm_buffer *sc = scratch_buffer(tmm_op_bias_silu_backward_scratch(rows, d));
    tmm_buffer *junk = h_buffer(NULL, n);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_bias_silu_forward(r, tmm_whole(bx), tmm_whole(bb), rows, d, tmm_whole(by)));
    H_OK(tmm_op_bias_silu_backward(r, tmm_whole(bx), tmm_whole(bb), tmm_whole(bdy), rows, d, false, tmm_whole(sc),
                                   tmm_whole(junk), tmm_whole(bdb[1])));
    H_OK(tmm_op_bias_silu_backward(r, tmm_whole(bx), tmm_whole(bb), tmm_whole(bdy), rows, d, true, tmm_whole(sc),
                                   tmm_whole(junk), tmm_whole(bdb[2])));
    H_OK(tmm_op_bias_silu_backward(r, tmm_whole(bx), tmm_whole(bb), tmm_whole(bdy), rows, d, false, tmm_whole(sc),
                                   tmm_whole(bda), tmm_whole(bdb[0])));
    h_run(r);

    printf(" bias_silu rows=%u d=%u%s\n", rows, d, in_place ? " (da in place over dy)" : "");
    double *xd = to_d(x, n), *bd = to_d(b, d), *dyd = to_d(dy, n);
    double *ry = calloc(n, sizeof *ry), *rda = calloc(n, sizeof *rda), *rdb = to_d(db0, d);
    ref_bias_silu_fwd_d(xd, bd, rows, d, ry);
    float *got = readback(by, n);
    cmp_d("bias_silu y", got, ry, n, 1e-6, 1e-6);
    free(got);
    ref_bias_silu_bwd_d(xd, bd, dyd, rows, d, true, rda, rdb);
    double ctol = 1e-6 * rows + 1e-6;
    got = readback(bdb[2], d);
    cmp_d("bias_silu db, accumulate", got, rdb, d, ctol, 0);
    free(got);
    ref_bias_silu_bwd_d(xd, bd, dyd, rows, d, false, rda, rdb);
    got = readback(bda, n);
    cmp_d("bias_silu da", got, rda, n, 1e-6, 1e-6);
    free(got);
    got = readback(bdb[0], d);
    cmp_d("bias_silu db", got, rdb, d, ctol, 0);
    free(got);
    assert_same_bits("bias_silu db", bdb[0], bdb[1], d);

    tmm_buffer *bufs[] = { bx, bb, by, bdy, bdb[0], bdb[1], bdb[2], sc, junk };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    if (!in_place)
        tmm_buffer_destroy(bda);
    free(x), free(b), free(dy), free(db0), free(xd), free(bd), free(dyd), free(ry), free(rda), free(rdb);
}

H_TEST(nn, bias_silu_matches_reference)
{
    static const uint32_t shapes[][2] = { { 1, 1 },    { 5, 7 },   { 3, 256 }, { 257, 1000 },
                                          { 1000, 3 }, { 70001, 2 } /* rows beyond the loop cap */ };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_silu(shapes[s][0], shapes[s][1], s % 2 == 1, seed_of(s, 3));
}

/* ---- softmax cross-entropy ------------------------------------------------------ */

static void check_xent(uint32_t rows, uint32_t vocab, uint64_t seed)
{
    size_t n = (size_t)rows * vocab;
    float *x = h_floats(n), *u = h_floats(rows);
    h_rand(x, n, seed, -6, 6);
    h_rand(u, rows, seed + 1, 0, 1);
    int32_t *t = calloc(rows, sizeof *t);
    for (uint32_t i = 0; i < rows; i++) {
        t[i] = (int32_t)((uint32_t)(u[i] * 5 * vocab) % vocab);
        if (i % 5 == 3)
            t[i] = -100;
        if (i % 17 == 1) /* a confident row, far from 0: max-subtraction matters */
            for (uint32_t j = 0; j < vocab; j++)
                x[(size_t)i * vocab + j] += 80;
    }
    if (rows > 2)
        t[rows - 1] = (int32_t)vocab; /* out of range: the kernels ignore it (the host counter rejects it) */
    uint32_t n_scored = (uint32_t)ref_count_scored(t, rows, vocab);

    tmm_buffer *bx = h_buffer(x, n), *bt = words_buffer(t, rows), *bl = h_buffer(NULL, rows);
    tmm_buffer *ba = h_buffer(NULL, rows), *ba2 = h_buffer(NULL, rows), *bmean = h_buffer(NULL, 1);
    tmm_buffer *sc = scratch_buffer(tmm_op_xent_scratch(rows, vocab));
    tmm_buffer *msc = scratch_buffer(tmm_op_xent_mean_scratch(rows));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_argmax(r, tmm_whole(bx), rows, vocab, tmm_whole(sc), tmm_whole(ba2)));
    H_OK(tmm_op_xent(r, tmm_whole(bx), tmm_whole(bt), rows, vocab, n_scored, true, (tmm_view){ 0 }, tmm_whole(sc),
                     tmm_whole(bl), tmm_whole(ba)));
    H_OK(tmm_op_xent_mean(r, tmm_whole(bl), rows, n_scored, tmm_whole(msc), tmm_whole(bmean)));
    h_run(r);

    printf(" xent rows=%u vocab=%u scored=%u\n", rows, vocab, n_scored);
    double *xd = to_d(x, n), *rl = calloc(rows, sizeof *rl), *rg = calloc(n, sizeof *rg);
    uint32_t *ram = calloc(rows, sizeof *ram), *am = calloc(rows, sizeof *am);
    double mean = ref_xent_fwd_d(xd, t, rows, vocab, rl, ram);
    ref_xent_bwd_d(xd, t, rows, vocab, n_scored, 1.0, rg);
    /* lse from float sums of exp in chunks of 2048 (terms <= 1): relative error
     * in the sum of order 1e-7 * sqrt(vocab), absolute in its log; the loss
     * also carries the rounding of lse near |logit| (up to ~90). */
    double tol = 1e-5 + 2e-7 * sqrt(vocab);
    float *got = readback(bl, rows);
    cmp_d("xent loss", got, rl, rows, tol, 0);
    free(got);
    for (int k = 0; k < 2; k++) {
        h_read(k ? ba2 : ba, (float *)am, rows);
        for (uint32_t i = 0; i < rows; i++)
            cr_assert_eq(am[i], ram[i], "argmax of row %u: %u, reference %u", i, am[i], ram[i]);
    }
    printf("  %-40s n=%-8u all equal\n", "xent argmax (fused and alone)", rows);
    got = readback(bx, n);
    /* softmax to 1e-5 relative (exp of a difference of floats near 90), scaled by 1/n_scored */
    cmp_d("xent dlogits (in place)", got, rg, n, n_scored ? tol / n_scored : 0, 1e-5);
    free(got);
    float gm;
    h_read(bmean, &gm, 1);
    cmp_d("xent mean loss", &gm, &mean, 1, tol, 1e-6);

    tmm_buffer *bufs[] = { bx, bt, bl, ba, ba2, bmean, sc, msc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(u), free(t), free(xd), free(rl), free(rg), free(ram), free(am);
}

H_TEST(nn, xent_matches_reference)
{
    static const uint32_t shapes[][2] = { { 1, 1 },     { 1, 2 },    { 7, 2048 }, { 5, 2049 },
                                          { 37, 1000 }, { 4099, 17 },
                                          { 3, 70000 } /* vocab beyond the loop cap */ };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_xent(shapes[s][0], shapes[s][1], seed_of(s, 4));
}

/* The GPUs' kernel (xent_row_sg: a workgroup per row, subgroup max, argmax
 * and sum), forced on this device; and ties go to the first index. */
H_TEST(nn, xent_subgroups_match_reference)
{
    if (!tmm_op_row_subgroups_for(tmm_device_get_info(h_dev), 2))
        cr_skip_test("skipped: the device lacks subgroup arithmetic in compute");
    static const uint32_t shapes[][2] = { { 1, 1 }, { 1, 2 }, { 7, 2048 }, { 37, 1000 }, { 65537, 3 }, { 3, 70000 } };
    h_dev->tuning.reduce_variant = 2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        check_xent(shapes[s][0], shapes[s][1], seed_of(s, 9));
    const uint32_t rows = 3, vocab = 300;
    float x[3 * 300];
    for (uint32_t i = 0; i < rows * vocab; i++)
        x[i] = (float)(i % 7) * 0.25f;
    x[1 * vocab + 200] = x[1 * vocab + 250] = 9.0f; /* row 1: two maxima */
    x[2 * vocab + 299] = 9.0f;                      /* row 2: the last */
    tmm_buffer *bx = h_buffer(x, rows * vocab), *ba = h_buffer(NULL, rows);
    tmm_buffer *sc = scratch_buffer(tmm_op_argmax_scratch(rows, vocab));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_argmax(r, tmm_whole(bx), rows, vocab, tmm_whole(sc), tmm_whole(ba)));
    h_run(r);
    float words[3];
    uint32_t am[3];
    h_read(ba, words, 3);
    memcpy(am, words, sizeof am);
    cr_assert_eq(am[0], 6, "row 0's first maximum is at 6, got %u", am[0]);
    cr_assert_eq(am[1], 200, "row 1: the first of two maxima, got %u", am[1]);
    cr_assert_eq(am[2], 299, "row 2: the last logit, got %u", am[2]);
    h_dev->tuning.reduce_variant = 0;
    tmm_buffer_destroy(bx), tmm_buffer_destroy(ba), tmm_buffer_destroy(sc);
}

H_TEST(nn, xent_nothing_scored)
{
    const uint32_t rows = 3, vocab = 5;
    int32_t t[3] = { -100, -1, -100 };
    uint32_t n_scored = 99;
    H_OK(tmm_nn_count_scored(t, rows, vocab, &n_scored));
    cr_assert_eq(n_scored, 0);
    float x[15];
    h_rand(x, 15, 9, -1, 1);
    tmm_buffer *bx = h_buffer(x, 15), *bt = words_buffer(t, rows), *bl = h_buffer(NULL, rows);
    tmm_buffer *sc = scratch_buffer(tmm_op_xent_scratch(rows, vocab)), *bmean = h_buffer(NULL, 1);
    tmm_buffer *msc = scratch_buffer(tmm_op_xent_mean_scratch(rows));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_xent(r, tmm_whole(bx), tmm_whole(bt), rows, vocab, 0, true, (tmm_view){ 0 }, tmm_whole(sc),
                     tmm_whole(bl), (tmm_view){ 0 }));
    H_OK(tmm_op_xent_mean(r, tmm_whole(bl), rows, 0, tmm_whole(msc), tmm_whole(bmean)));
    h_run(r);
    float got[15], m;
    h_read(bx, got, 15);
    h_read(bmean, &m, 1);
    for (int i = 0; i < 15; i++)
        cr_assert_eq(got[i], 0.0f);
    cr_assert_eq(m, 0.0f);
    int32_t bad[3] = { 1, -100, 5 };
    cr_assert_eq(tmm_nn_count_scored(bad, rows, vocab, &n_scored), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "target 5 at position 2 is outside the vocabulary of 5"), "%s",
              tmm_last_error());
    tmm_buffer_destroy(bx), tmm_buffer_destroy(bt), tmm_buffer_destroy(bl), tmm_buffer_destroy(sc);
    tmm_buffer_destroy(bmean), tmm_buffer_destroy(msc);
}

H_TEST(nn, xent_ties_take_the_first_index)
{
    /* row 0: all equal; row 1: the maximum at 5 and again at 2050 (another chunk) and 4000 */
    const uint32_t rows = 2, vocab = 4100;
    float *x = h_floats((size_t)rows * vocab);
    h_rand(x + vocab, vocab, 3, -1, 1);
    x[vocab + 5] = x[vocab + 2050] = x[vocab + 4000] = 2;
    tmm_buffer *bx = h_buffer(x, (size_t)rows * vocab), *ba = h_buffer(NULL, rows);
    tmm_buffer *sc = scratch_buffer(tmm_op_argmax_scratch(rows, vocab));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_argmax(r, tmm_whole(bx), rows, vocab, tmm_whole(sc), tmm_whole(ba)));
    h_run(r);
    uint32_t am[2];
    h_read(ba, (float *)am, rows);
    cr_assert_eq(am[0], 0);
    cr_assert_eq(am[1], 5);
    tmm_buffer_destroy(bx), tmm_buffer_destroy(ba), tmm_buffer_destroy(sc);
    free(x);
}

/* Dynamic loss scaling: with a loss scale S (a power of two) read from the
 * device, dlogits are exactly S times the unscaled ones and the loss is
 * unchanged; a replay reads the new S. Also against the reference. */
H_TEST(nn, xent_loss_scale)
{
    const uint32_t rows = 37, vocab = 2049;
    const size_t n = (size_t)rows * vocab;
    float *x = h_floats(n);
    h_rand(x, n, 21, -6, 6);
    int32_t t[37];
    for (uint32_t i = 0; i < rows; i++)
        t[i] = i % 5 == 3 ? -100 : (int32_t)((i * 977) % vocab);
    const uint32_t n_scored = (uint32_t)ref_count_scored(t, rows, vocab);
    /* S at float 7 of its buffer: bound from an aligned offset with a base */
    float holder[16] = { 0 };
    holder[7] = 0x1p16f;
    tmm_buffer *b1 = h_buffer(x, n), *bs = h_buffer(x, n), *bt = words_buffer(t, rows), *bscale = h_buffer(holder, 16);
    tmm_buffer *l1 = h_buffer(NULL, rows), *ls = h_buffer(NULL, rows);
    tmm_buffer *sc = scratch_buffer(tmm_op_xent_scratch(rows, vocab));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_xent(r, tmm_whole(b1), tmm_whole(bt), rows, vocab, n_scored, true, (tmm_view){ 0 }, tmm_whole(sc),
                     tmm_whole(l1), (tmm_view){ 0 }));
    h_run(r);
    r = h_begin();
    H_OK(tmm_op_xent(r, tmm_whole(bs), tmm_whole(bt), rows, vocab, n_scored, true, tmm_sub(bscale, 28, 4),
                     tmm_whole(sc), tmm_whole(ls), (tmm_view){ 0 }));
    H_OK(tmm_recorder_end(r));
    float *g1 = readback(b1, n), *loss1 = readback(l1, rows);
    static const float scales[] = { 0x1p16f, 0x1p-3f, 0x1p24f };
    for (int k = 0; k < 3; k++) {
        holder[7] = scales[k];
        H_OK(tmm_buffer_write(bscale, 0, holder, sizeof holder));
        H_OK(tmm_buffer_write(bs, 0, x, n * 4));
        H_OK(tmm_recorder_run(r));
        float *gs = readback(bs, n), *losss = readback(ls, rows);
        for (size_t i = 0; i < n; i++)
            cr_assert(gs[i] == g1[i] * scales[k], "S = %g: dlogits[%zu] = %a, unscaled %a", (double)scales[k], i,
                      (double)gs[i], (double)g1[i]);
        cr_assert(memcmp(losss, loss1, rows * 4) == 0, "the loss changed with the loss scale");
        double *xd = to_d(x, n), *rg = calloc(n, sizeof *rg);
        ref_xent_bwd_d(xd, t, rows, vocab, n_scored, scales[k], rg);
        cmp_d("xent dlogits, loss-scaled", gs, rg, n, 1e-5 * scales[k] / n_scored, 1e-5);
        free(gs), free(losss), free(xd), free(rg);
    }
    printf("  %-40s all exact multiples of the unscaled run\n", "xent dlogits x S (2^16, 2^-3, 2^24)");
    tmm_recorder_destroy(r);
    tmm_buffer *bufs[] = { b1, bs, bt, bscale, l1, ls, sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(g1), free(loss1);
}

H_TEST(nn, embedding_backward_replays_with_a_new_index)
{
    const uint32_t rows = 1500, vocab = 40, d = 5;
    uint32_t tok[2][1500];
    float *dh[2] = { h_floats((size_t)rows * d), h_floats((size_t)rows * d) };
    for (uint32_t i = 0; i < rows; i++) {
        tok[0][i] = i % 4 ? 7 : (i * 13) % vocab; /* token 7 is long: several segments */
        tok[1][i] = (i * 31 + 3) % vocab;         /* no long tokens */
    }
    h_rand(dh[0], (size_t)rows * d, 1, -1, 1);
    h_rand(dh[1], (size_t)rows * d, 2, -1, 1);
    uint64_t words = tmm_nn_embedding_index_words(rows);
    uint32_t *index = calloc(words, sizeof *index);
    H_OK(tmm_nn_embedding_index(tok[0], rows, vocab, index));
    tmm_buffer *bidx = words_buffer(index, words), *bdh = h_buffer(dh[0], (size_t)rows * d);
    tmm_buffer *bdE = h_buffer(NULL, (size_t)vocab * d), *sc = scratch_buffer(tmm_op_embedding_backward_scratch(rows, d));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_embedding_backward(r, tmm_whole(bidx), tmm_whole(bdh), rows, vocab, d, false, tmm_whole(sc),
                                   tmm_whole(bdE)));
    H_OK(tmm_recorder_end(r));
    double *ref = calloc((size_t)vocab * d, sizeof *ref);
    float *got = h_floats((size_t)vocab * d);
    for (int b = 0; b < 2; b++) {
        if (b) {
            H_OK(tmm_nn_embedding_index(tok[1], rows, vocab, index));
            H_OK(tmm_buffer_write(bidx, 0, index, words * 4));
            H_OK(tmm_buffer_write(bdh, 0, dh[1], (size_t)rows * d * 4));
        }
        H_OK(tmm_recorder_run(r));
        double *dhd = to_d(dh[b], (size_t)rows * d);
        ref_embedding_bwd_d(tok[b], rows, dhd, vocab, d, false, ref);
        h_read(bdE, got, (size_t)vocab * d);
        cmp_d(b ? "embedding backward, replayed" : "embedding backward, first run", got, ref, (size_t)vocab * d,
              1e-4, 0);
        free(dhd);
    }
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(bidx), tmm_buffer_destroy(bdh), tmm_buffer_destroy(bdE), tmm_buffer_destroy(sc);
    free(dh[0]), free(dh[1]), free(index), free(ref), free(got);
}

/* ---- bindings split under a lowered maxStorageBufferRange --------------------- */

/* Every op on fixed inputs; returns all outputs concatenated (floats). Run
 * with the device's limits and with a lowered range (more, smaller chunks,
 * 256-byte offset alignment), the outputs must have identical bits. */
static float *run_all_ops(size_t *n_out)
{
    enum { E_ROWS = 200, E_VOCAB = 500, E_D = 20, L_ROWS = 3000, L_D = 3, X_ROWS = 300, X_V = 100 };
    size_t cap = E_ROWS * E_D + E_VOCAB * E_D + 4 * L_ROWS * L_D + 2 * L_ROWS + 4 * L_D + 2 * X_ROWS + X_ROWS * X_V;
    float *out = h_floats(cap), *o = out;
    tmm_recorder *r = h_begin();
    tmm_buffer *keep[64];
    int nk = 0;
#define B(data, n) (keep[nk++] = h_buffer((data), (n)))
    /* embedding */
    uint32_t tok[E_ROWS];
    for (uint32_t i = 0; i < E_ROWS; i++)
        tok[i] = i % 3 ? 321 : (i * 97) % E_VOCAB;
    float *E = h_floats(E_VOCAB * E_D), *dh = h_floats(E_ROWS * E_D);
    h_rand(E, E_VOCAB * E_D, 1, -1, 1);
    h_rand(dh, E_ROWS * E_D, 2, -1, 1);
    uint32_t *index = calloc(tmm_nn_embedding_index_words(E_ROWS), 4);
    H_OK(tmm_nn_embedding_index(tok, E_ROWS, E_VOCAB, index));
    tmm_buffer *btok = B((const float *)tok, E_ROWS), *bE = B(E, E_VOCAB * E_D), *bh = B(NULL, E_ROWS * E_D);
    tmm_buffer *bidx = B((const float *)index, tmm_nn_embedding_index_words(E_ROWS)), *bdh = B(dh, E_ROWS * E_D);
    tmm_buffer *bdE = B(NULL, E_VOCAB * E_D), *esc = B(NULL, tmm_op_embedding_backward_scratch(E_ROWS, E_D));
    H_OK(tmm_op_embedding_forward(r, tmm_whole(btok), tmm_whole(bE), E_ROWS, E_VOCAB, E_D, tmm_whole(bh)));
    H_OK(tmm_op_embedding_backward(r, tmm_whole(bidx), tmm_whole(bdh), E_ROWS, E_VOCAB, E_D, false, tmm_whole(esc),
                                   tmm_whole(bdE)));
    /* LayerNorm and bias + SiLU */
    float *x = h_floats(L_ROWS * L_D), *dy = h_floats(L_ROWS * L_D), *g = h_floats(L_D), *b = h_floats(L_D);
    h_rand(x, L_ROWS * L_D, 3, -2, 2);
    h_rand(dy, L_ROWS * L_D, 4, -1, 1);
    h_rand(g, L_D, 5, 0.5f, 1.5f);
    h_rand(b, L_D, 6, -1, 1);
    tmm_buffer *bx = B(x, L_ROWS * L_D), *bdy = B(dy, L_ROWS * L_D), *bg = B(g, L_D), *bb = B(b, L_D);
    tmm_buffer *by = B(NULL, L_ROWS * L_D), *bm = B(NULL, L_ROWS), *brs = B(NULL, L_ROWS);
    tmm_buffer *bdx = B(NULL, L_ROWS * L_D), *bdg = B(NULL, L_D), *bdb = B(NULL, L_D);
    tmm_buffer *lsc = B(NULL, tmm_op_layernorm_backward_scratch(L_ROWS, L_D));
    tmm_buffer *bsy = B(NULL, L_ROWS * L_D), *bda = B(NULL, L_ROWS * L_D), *bsdb = B(NULL, L_D);
    tmm_buffer *ssc = B(NULL, tmm_op_bias_silu_backward_scratch(L_ROWS, L_D));
    H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bb), L_ROWS, L_D, TMM_NN_LAYERNORM_EPS,
                                  (tmm_view){ 0 }, tmm_whole(by), tmm_whole(bm), tmm_whole(brs)));
    H_OK(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs), tmm_whole(bdy),
                                   L_ROWS, L_D, false, tmm_whole(lsc), tmm_whole(bdx), tmm_whole(bdg),
                                   tmm_whole(bdb)));
    H_OK(tmm_op_bias_silu_forward(r, tmm_whole(bx), tmm_whole(bb), L_ROWS, L_D, tmm_whole(bsy)));
    H_OK(tmm_op_bias_silu_backward(r, tmm_whole(bx), tmm_whole(bb), tmm_whole(bdy), L_ROWS, L_D, false,
                                   tmm_whole(ssc), tmm_whole(bda), tmm_whole(bsdb)));
    /* cross-entropy */
    float *lg = h_floats(X_ROWS * X_V);
    h_rand(lg, X_ROWS * X_V, 7, -3, 3);
    int32_t t[X_ROWS];
    for (int i = 0; i < X_ROWS; i++)
        t[i] = i % 7 == 2 ? -100 : (i * 37) % X_V;
    tmm_buffer *blg = B(lg, X_ROWS * X_V), *bt = B((const float *)t, X_ROWS), *bl = B(NULL, X_ROWS);
    tmm_buffer *ba = B(NULL, X_ROWS), *xsc = B(NULL, tmm_op_xent_scratch(X_ROWS, X_V));
    H_OK(tmm_op_xent(r, tmm_whole(blg), tmm_whole(bt), X_ROWS, X_V, (uint32_t)ref_count_scored(t, X_ROWS, X_V), true,
                     (tmm_view){ 0 }, tmm_whole(xsc), tmm_whole(bl), tmm_whole(ba)));
    h_run(r);
#undef B
    const struct { tmm_buffer *b; size_t n; } outs[] = {
        { bh, E_ROWS * E_D }, { bdE, E_VOCAB * E_D }, { by, L_ROWS * L_D }, { bm, L_ROWS },
        { brs, L_ROWS },     { bdx, L_ROWS * L_D },  { bdg, L_D },          { bdb, L_D },
        { bsy, L_ROWS * L_D }, { bda, L_ROWS * L_D }, { bsdb, L_D },        { bl, X_ROWS },
        { ba, X_ROWS },      { blg, X_ROWS * X_V } };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        h_read(outs[i].b, o, outs[i].n);
        o += outs[i].n;
    }
    cr_assert((size_t)(o - out) <= cap);
    *n_out = (size_t)(o - out);
    for (int i = 0; i < nk; i++)
        tmm_buffer_destroy(keep[i]);
    free(E), free(dh), free(index), free(x), free(dy), free(g), free(b), free(lg);
    return out;
}

H_TEST(nn, bindings_split_to_fit_a_small_range_give_the_same_bits)
{
    size_t n1, n2;
    float *whole = run_all_ops(&n1);
    tmm_device_info saved = h_dev->info;
    printf("  device: maxStorageBufferRange %llu, minStorageBufferOffsetAlignment %llu\n",
           (unsigned long long)saved.max_storage_buffer_range,
           (unsigned long long)saved.min_storage_buffer_offset_alignment);
    h_dev->info.max_storage_buffer_range = 16384;
    h_dev->info.min_storage_buffer_offset_alignment = 256;
    float *split = run_all_ops(&n2);

    /* LayerNorm forward with rows of several chunks, three rows per binding */
    const uint32_t rows = 7, d = 5000;
    float *x = h_floats((size_t)rows * d), *g = h_floats(d), *b = h_floats(d);
    h_rand(x, (size_t)rows * d, 8, -2, 2);
    h_rand(g, d, 9, 0.5f, 1.5f);
    h_rand(b, d, 10, -1, 1);
    tmm_buffer *bx = h_buffer(x, (size_t)rows * d), *bg = h_buffer(g, d), *bb = h_buffer(b, d);
    tmm_buffer *by[2] = { h_buffer(NULL, (size_t)rows * d), h_buffer(NULL, (size_t)rows * d) };
    tmm_buffer *bm = h_buffer(NULL, rows), *brs = h_buffer(NULL, rows);
    tmm_buffer *sc = scratch_buffer(tmm_op_layernorm_forward_scratch(rows, d));
    for (int k = 0; k < 2; k++) {
        h_dev->info.max_storage_buffer_range = k ? 65536 : saved.max_storage_buffer_range;
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bb), rows, d, TMM_NN_LAYERNORM_EPS,
                                      tmm_whole(sc), tmm_whole(by[k]), tmm_whole(bm), tmm_whole(brs)));
        h_run(r);
    }
    /* The backward's column sums need 256 rows per binding: a clear refusal. */
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs),
                                           tmm_whole(bx), rows, d, false, tmm_whole(sc), tmm_whole(bx),
                                           tmm_whole(bg), tmm_whole(bb)),
                 TMM_ERR_INVALID_ARGUMENT); /* scratch too small is found first */
    tmm_buffer *bsc = scratch_buffer(tmm_op_layernorm_backward_scratch(rows, d));
    cr_assert_eq(tmm_op_layernorm_backward(r, tmm_whole(bx), tmm_whole(bg), tmm_whole(bm), tmm_whole(brs),
                                           tmm_whole(bx), rows, d, false, tmm_whole(bsc), tmm_whole(bx),
                                           tmm_whole(bg), tmm_whole(bb)),
                 TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "fewer than the 256 that the column sums need"), "%s", tmm_last_error());
    printf("  refused as expected: %s\n", tmm_last_error());
    h_run(r);
    h_dev->info = saved;
    assert_same_bits("layernorm forward, rows of 3 chunks, 3 rows per binding", by[0], by[1], (size_t)rows * d);

    cr_assert_eq(n1, n2);
    cr_assert(memcmp(whole, split, n1 * sizeof *whole) == 0, "outputs differ when bindings are split");
    printf("  %-40s n=%-8zu identical bits\n", "all ops, split vs whole bindings", n1);
    tmm_buffer_destroy(bx), tmm_buffer_destroy(bg), tmm_buffer_destroy(bb), tmm_buffer_destroy(by[0]);
    tmm_buffer_destroy(by[1]), tmm_buffer_destroy(bm), tmm_buffer_destroy(brs), tmm_buffer_destroy(sc);
    tmm_buffer_destroy(bsc);
    free(whole), free(split), free(x), free(g), free(b);
}

/* ---- errors ------------------------------------------------------------------ */

static void expect(tmm_status got, tmm_status want, const char *message)
{
    cr_assert_eq(got, want, "status %s, expected %s (%s)", tmm_status_name(got), tmm_status_name(want),
                 tmm_last_error());
    cr_assert(strstr(tmm_last_error(), message), "message \"%s\" lacks \"%s\"", tmm_last_error(), message);
}

H_TEST(nn, bad_arguments_are_clear_errors)
{
    tmm_buffer *a = h_buffer(NULL, 64), *b = h_buffer(NULL, 64);
    tmm_view va = tmm_whole(a), vb = tmm_whole(b), none = { 0 };
    const uint64_t range = h_dev->info.max_storage_buffer_range;
    tmm_recorder *r = h_begin();
    expect(tmm_op_layernorm_forward(r, va, va, va, 8, 8, 1e-5f, none, tmm_sub(b, 0, 20), va, va),
           TMM_ERR_INVALID_ARGUMENT, "layernorm_forward: y holds 5 floats, needs 64");
    expect(tmm_op_layernorm_forward(r, va, va, va, 1, 9000000, 1e-5f, none, vb, va, va), TMM_ERR_UNSUPPORTED,
           "d = 9000000 is above the supported 8388608");
    expect(tmm_op_bias_silu_forward(r, tmm_sub(a, 2, 40), vb, 2, 4, vb), TMM_ERR_INVALID_ARGUMENT,
           "x starts at byte offset 2, not a multiple of 4");
    expect(tmm_op_bias_silu_forward(r, va, tmm_sub(b, 4, 16), 2, 4, vb), TMM_ERR_INVALID_ARGUMENT,
           "b starts at byte offset 4, not a multiple of the device's minStorageBufferOffsetAlignment");
    expect(tmm_op_xent(r, va, vb, 1, 5000000, 1, true, none, vb, vb, none), TMM_ERR_UNSUPPORTED,
           "vocab 5000000 is above the supported 4194304");
    expect(tmm_op_xent(r, va, vb, 8, 8, 8, true, none, tmm_sub(b, 0, 16), vb, none), TMM_ERR_INVALID_ARGUMENT,
           "xent: scratch holds 4 floats, needs");
    expect(tmm_op_xent(r, va, vb, 2, 3, 2, true, tmm_sub(b, 2, 4), vb, vb, none), TMM_ERR_INVALID_ARGUMENT,
           "loss scale starts at byte offset 2");
    expect(tmm_op_argmax(r, va, 2, 3, vb, none), TMM_ERR_INVALID_ARGUMENT, "argmax: empty output view");
    expect(tmm_op_embedding_forward(r, va, vb, 2, 0, 3, va), TMM_ERR_INVALID_ARGUMENT, "vocabulary is empty");
    expect(tmm_op_embedding_backward(r, va, vb, 8, 4, 4, false, vb, tmm_sub(b, 0, 32)), TMM_ERR_INVALID_ARGUMENT,
           "embedding_backward: dE holds 8 floats, needs 16");
    h_dev->info.max_storage_buffer_range = 64;
    expect(tmm_op_embedding_backward(r, va, vb, 8, 2, 4, false, vb, va), TMM_ERR_UNSUPPORTED,
           "are bound whole and must each fit maxStorageBufferRange (64 bytes)");
    expect(tmm_op_bias_silu_forward(r, va, vb, 2, 32, va), TMM_ERR_UNSUPPORTED,
           "one row of x is 128 bytes, more than one binding can hold");
    h_dev->info.max_storage_buffer_range = range;
    h_run(r);
    tmm_buffer_destroy(a), tmm_buffer_destroy(b);
}

H_TEST(nn, forwards_in_place_match_out_of_place)
{
    const uint32_t rows = 300, d = 2100; /* rows of two LayerNorm chunks */
    const size_t n = (size_t)rows * d;
    float *x = h_floats(n), *g = h_floats(d), *b = h_floats(d);
    h_rand(x, n, 11, -2, 2);
    h_rand(g, d, 12, 0.5f, 1.5f);
    h_rand(b, d, 13, -1, 1);
    tmm_buffer *bx[2] = { h_buffer(x, n), h_buffer(x, n) }, *by = h_buffer(NULL, n);
    tmm_buffer *sx[2] = { h_buffer(x, n), h_buffer(x, n) }, *sy = h_buffer(NULL, n);
    tmm_buffer *bg = h_buffer(g, d), *bb = h_buffer(b, d), *bm = h_buffer(NULL, rows), *brs = h_buffer(NULL, rows);
    tmm_buffer *sc = scratch_buffer(tmm_op_layernorm_forward_scratch(rows, d));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx[0]), tmm_whole(bg), tmm_whole(bb), rows, d, TMM_NN_LAYERNORM_EPS,
                                  tmm_whole(sc), tmm_whole(by), tmm_whole(bm), tmm_whole(brs)));
    H_OK(tmm_op_layernorm_forward(r, tmm_whole(bx[1]), tmm_whole(bg), tmm_whole(bb), rows, d, TMM_NN_LAYERNORM_EPS,
                                  tmm_whole(sc), tmm_whole(bx[1]), tmm_whole(bm), tmm_whole(brs)));
    H_OK(tmm_op_bias_silu_forward(r, tmm_whole(sx[0]), tmm_whole(bb), rows, d, tmm_whole(sy)));
    H_OK(tmm_op_bias_silu_forward(r, tmm_whole(sx[1]), tmm_whole(bb), rows, d, tmm_whole(sx[1])));
    h_run(r);
    assert_same_bits("layernorm forward in place", by, bx[1], n);
    assert_same_bits("bias_silu forward in place", sy, sx[1], n);
    printf("  %-40s n=%-8zu identical bits\n", "layernorm and bias_silu in place", n);
    tmm_buffer *bufs[] = { bx[0], bx[1], by, sx[0], sx[1], sy, bg, bb, bm, brs, sc };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        tmm_buffer_destroy(bufs[i]);
    free(x), free(g), free(b);
}

H_TEST(nn, row_views_at_unaligned_offsets)
{
    /* x, y, mean, rstd, logits, targets, loss and argmax 12 bytes into their buffers */
    const uint32_t rows = 37, d = 129, vocab = 3000;
    const size_t n = (size_t)rows * d, nl = (size_t)rows * vocab;
    float *x = h_floats(n + 3), *g = h_floats(d), *b = h_floats(d), *lg = h_floats(nl + 3);
    h_rand(x, n + 3, 21, -2, 2);
    h_rand(g, d, 22, 0.5f, 1.5f);
    h_rand(b, d, 23, -1, 1);
    h_rand(lg, nl + 3, 24, -4, 4);
    int32_t *t = calloc(rows + 3, sizeof *t);
    for (uint32_t i = 0; i < rows + 3; i++)
        t[i] = (int32_t)((i * 211) % vocab);
    tmm_buffer *bg = h_buffer(g, d), *bb = h_buffer(b, d), *bt = words_buffer(t, rows + 3);
    tmm_buffer *sc = scratch_buffer(tmm_op_xent_scratch(rows, vocab));
    tmm_buffer *bx[2], *by[2], *bm[2], *brs[2], *blg[2], *bl[2], *ba[2];
    for (int k = 0; k < 2; k++) {
        uint64_t o = k ? 12 : 0; /* k = 1: views at byte 12; k = 0: the same data at byte 0 */
        bx[k] = h_buffer(k ? x : NULL, n + 3), by[k] = h_buffer(NULL, n + 3);
        bm[k] = h_buffer(NULL, rows + 3), brs[k] = h_buffer(NULL, rows + 3);
        blg[k] = h_buffer(k ? lg : NULL, nl + 3), bl[k] = h_buffer(NULL, rows + 3), ba[k] = h_buffer(NULL, rows + 3);
        if (!k) {
            H_OK(tmm_buffer_write(bx[k], 0, x + 3, n * 4));
            H_OK(tmm_buffer_write(blg[k], 0, lg + 3, nl * 4));
        }
        tmm_buffer *tb = k ? bt : words_buffer(t + 3, rows);
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_layernorm_forward(r, tmm_sub(bx[k], o, n * 4), tmm_whole(bg), tmm_whole(bb), rows, d,
                                      TMM_NN_LAYERNORM_EPS, (tmm_view){ 0 }, tmm_sub(by[k], o, n * 4),
                                      tmm_sub(bm[k], o, rows * 4), tmm_sub(brs[k], o, rows * 4)));
        H_OK(tmm_op_xent(r, tmm_sub(blg[k], o, nl * 4), tmm_sub(tb, o, rows * 4), rows, vocab, rows, true,
                         (tmm_view){ 0 }, tmm_whole(sc), tmm_sub(bl[k], o, rows * 4), tmm_sub(ba[k], o, rows * 4)));
        h_run(r);
        if (!k)
            tmm_buffer_destroy(tb);
    }
    const struct { tmm_buffer **b; size_t n; const char *what; } outs[] = {
        { by, n, "layernorm y" }, { bm, rows, "layernorm mean" }, { brs, rows, "layernorm rstd" },
        { blg, nl, "xent dlogits" }, { bl, rows, "xent loss" }, { ba, rows, "xent argmax" } };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        float *u = readback(outs[i].b[0], outs[i].n + 3), *v = readback(outs[i].b[1], outs[i].n + 3);
        cr_assert(memcmp(u, v + 3, outs[i].n * 4) == 0, "%s differs at a 12-byte offset", outs[i].what);
        free(u), free(v);
    }
    printf("  %-40s identical bits at byte offsets 0 and 12\n", "layernorm and xent");
    for (int k = 0; k < 2; k++) {
        tmm_buffer_destroy(bx[k]), tmm_buffer_destroy(by[k]), tmm_buffer_destroy(bm[k]);
        tmm_buffer_destroy(brs[k]), tmm_buffer_destroy(blg[k]), tmm_buffer_destroy(bl[k]), tmm_buffer_destroy(ba[k]);
    }
    tmm_buffer_destroy(bg), tmm_buffer_destroy(bb), tmm_buffer_destroy(bt), tmm_buffer_destroy(sc);
    free(x), free(g), free(b), free(lg), free(t);
}
