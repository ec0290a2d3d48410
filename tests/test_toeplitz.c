/* Causal Toeplitz mixing (src/ops/toeplitz.h), DIRECT implementation, both
 * variants (register-blocked, suite toeplitz; shared-memory tiles,
 * toeplitz_tiled, forced with the device's tuning.kernel_variant), against its C
 * reference: flat, heads (G = 4), kernel (K = 3; K = 2 for the tiled
 * kernels, whose fully unrolled steps take seconds to compile per K on
 * lavapipe) and G = 2 with K = 2, forward and backward, over lengths and
 * widths that are not multiples of the kernels' blocks or tiles; a length
 * beyond lavapipe's 65535-iteration loop cap, and many passes on short
 * lengths (lowered loop budget); frozen layers; bit-identical reruns;
 * batches split over bindings; errors.
 *
 * Tolerance, per element: each output is a float sum of m terms (fma:
 * products exact) in some fixed order, the reference the exact sum rounded
 * once. The rounding errors of a sum add up like a random walk over its
 * partial sums, each at most S = sum of |terms| (S from the reference run
 * on |u|, |w|, |beta|, |gy|): about 2^-24 * sqrt(m) * S even when all terms
 * have one sign (with random signs about 2^-24 * S; the largest seen is
 * about 5 * 2^-24 * S). We allow 4 * 2^-24 * sqrt(m) * S: no false alarms,
 * yet a single missing term (about S/m) shows for m up to ~2*10^4, and a
 * loop cut short (thousands of terms) at n = 70000. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/toeplitz.h"
#include "ref/ref_toeplitz.h"

typedef struct shape {
    uint32_t B, n, d, G, K;
} shape;

static tmm_toeplitz_desc desc_of(shape s)
{
    tmm_toeplitz_desc d = { s.B, s.n, s.d, s.G, s.K, TMM_TOEPLITZ_AUTO };
    return d;
}

/* The largest deviation seen, in units of 2^-24 * S (for the report). */
static double worst_units;

/* Asserts |got - ref| <= 4 * 2^-24 * sqrt(m) * mag elementwise. */
static void check(const char *what, shape s, const float *got, const float *ref, const double *mag, size_t n,
                  double m)
{
    double tol_unit = 4 * 0x1p-24 * sqrt(m > 1 ? m : 1);
    double worst = 0, units = 0, excess = -1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (isnan(got[i]) != isnan(ref[i]) || isinf(got[i]))
            d = INFINITY;
        double tol = tol_unit * mag[i];
        if (d > worst)
            worst = d;
        if (mag[i] > 0 && d / (0x1p-24 * mag[i]) > units)
            units = d / (0x1p-24 * mag[i]);
        if (d - tol > excess) {
            excess = d - tol;
            at = i;
        }
    }
    if (units > worst_units)
        worst_units = units;
    cr_assert(n == 0 || excess <= 0,
              "%s (B=%u n=%u d=%u G=%u K=%u): element %zu is %.9g, reference %.9g (tolerance %.3g; max dev %.3g)",
              what, s.B, s.n, s.d, s.G, s.K, at, (double)got[at], (double)ref[at], tol_unit * mag[at], worst);
}

typedef struct problem {
    shape s;
    tmm_toeplitz_desc desc;
    size_t na, nw, nb;
    float *u, *w, *beta, *gy;
} problem;

static problem make_problem(shape s, uint64_t seed)
{
    problem p = { s, desc_of(s), (size_t)s.B * s.n * s.d, (size_t)s.G * s.K * s.n, (size_t)s.G * s.n, 0, 0, 0, 0 };
    p.u = h_floats(p.na);
    p.w = h_floats(p.nw);
    p.beta = h_floats(p.nb);
    p.gy = h_floats(p.na);
    h_rand(p.u, p.na, seed, -1, 1);
    h_rand(p.w, p.nw, seed + 1, -1, 1);
    h_rand(p.beta, p.nb, seed + 2, -1, 1);
    h_rand(p.gy, p.na, seed + 3, -1, 1);
    return p;
}

static void free_problem(problem *p)
{
    free(p->u);
    free(p->w);
    free(p->beta);
    free(p->gy);
}

typedef struct outputs {
    float *y, *du, *dw, *dbeta;
} outputs;

static outputs alloc_outputs(const problem *p)
{
    outputs o = { h_floats(p->na), h_floats(p->na), h_floats(p->nw), h_floats(p->nb) };
    return o;
}

static void free_outputs(outputs *o)
{
    free(o->y);
    free(o->du);
    free(o->dw);
    free(o->dbeta);
}

/* Forward and backward on the device, in one recording. */
static void run_device(const problem *p, uint32_t flags, outputs *o)
{
    uint64_t ns = tmm_op_toeplitz_backward_scratch(h_dev, &p->desc, flags);
    tmm_buffer *bu = h_buffer(p->u, p->na), *bw = h_buffer(p->w, p->nw), *bb = h_buffer(p->beta, p->nb);
    tmm_buffer *bgy = h_buffer(p->gy, p->na), *by = h_buffer(NULL, p->na), *bdu = h_buffer(NULL, p->na);
    tmm_buffer *bdw = h_buffer(NULL, p->nw), *bdb = h_buffer(NULL, p->nb), *bs = h_buffer(NULL, ns);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_toeplitz_forward(r, &p->desc, tmm_whole(bu), tmm_whole(bw), tmm_whole(bb), tmm_whole(by)));
    H_OK(tmm_op_toeplitz_backward(r, &p->desc, flags, tmm_whole(bu), tmm_whole(bw), tmm_whole(bgy), tmm_whole(bs),
                                  tmm_whole(bdu), tmm_whole(bdw), tmm_whole(bdb)));
    h_run(r);
    h_read(by, o->y, p->na);
    h_read(bdu, o->du, p->na);
    h_read(bdw, o->dw, p->nw);
    h_read(bdb, o->dbeta, p->nb);
    tmm_buffer *all[] = { bu, bw, bb, bgy, by, bdu, bdw, bdb, bs };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
}

static double *abs_copy(const float *x, size_t n)
{
    double *a = malloc((n ? n : 1) * sizeof *a);
    cr_assert_not_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = fabs((double)x[i]);
    return a;
}

/* Compares o with the reference over the whole problem. */
static void check_all(const problem *p, const outputs *o)
{
    shape s = p->s;
    outputs ref = alloc_outputs(p);
    ref_toeplitz_forward(&p->desc, p->u, p->w, p->beta, ref.y);
    ref_toeplitz_backward(&p->desc, p->u, p->w, p->gy, ref.du, ref.dw, ref.dbeta);
    double *au = abs_copy(p->u, p->na), *aw = abs_copy(p->w, p->nw), *ab = abs_copy(p->beta, p->nb);
    double *agy = abs_copy(p->gy, p->na);
    double *my = malloc(p->na * sizeof *my + 8), *mdu = malloc(p->na * sizeof *mdu + 8);
    double *mdw = malloc(p->nw * sizeof *mdw + 8), *mdb = malloc(p->nb * sizeof *mdb + 8);
    cr_assert(my && mdu && mdw && mdb);
    ref_toeplitz_forward_d(&p->desc, au, aw, ab, my);
    ref_toeplitz_backward_d(&p->desc, au, aw, agy, mdu, mdw, mdb);
    double dg = s.d / s.G;
    check("y", s, o->y, ref.y, my, p->na, (double)s.n * s.K + 1);
    check("du", s, o->du, ref.du, mdu, p->na, (double)s.n * s.K);
    check("dw", s, o->dw, ref.dw, mdw, p->nw, (double)s.B * dg * s.n);
    check("dbeta", s, o->dbeta, ref.dbeta, mdb, p->nb, (double)s.B * dg);
    free(au);
    free(aw);
    free(ab);
    free(agy);
    free(my);
    free(mdu);
    free(mdw);
    free(mdb);
    free_outputs(&ref);
}

static void check_shape(shape s, uint64_t seed)
{
    problem p = make_problem(s, seed);
    outputs o = alloc_outputs(&p);
    run_device(&p, 0, &o);
    check_all(&p, &o);
    free_outputs(&o);
    free_problem(&p);
}

/* flat, heads, kernel, heads with kernel over widths and lengths */
typedef struct sweep_set {
    uint32_t G, K, d[3];
} sweep_set;

static void sweep(const sweep_set *sets, size_t n_sets, const uint32_t *lengths, size_t n_lengths, uint64_t seed)
{
    static const uint32_t batches[] = { 1, 3 };
    for (size_t v = 0; v < n_sets; v++)
        for (size_t di = 0; di < 3; di++)
            for (size_t ni = 0; ni < n_lengths; ni++)
                for (size_t bi = 0; bi < 2; bi++) {
                    shape s = { batches[bi], lengths[ni], sets[v].d[di], sets[v].G, sets[v].K };
                    check_shape(s, seed += 10);
                }
}

H_TEST(toeplitz, matches_reference_small_shapes)
{
    /* widths with 1..9 channels per group (blocks of 4 channels: partial
     * blocks, and TC = 1, 2 kernels) */
    static const sweep_set sets[] = {
        { 1, 1, { 1, 5, 12 } }, { 4, 1, { 4, 12, 36 } }, { 1, 3, { 2, 5, 12 } }, { 2, 2, { 2, 6, 10 } },
    };
    static const uint32_t lengths[] = { 1, 2, 7, 64, 100 };
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_REGISTER;
    sweep(sets, 4, lengths, 5, 1000);
    printf("  toeplitz small shapes: largest deviation %.2f x 2^-24 x sum|terms|\n", worst_units);
}

/* The shared-memory variant for GPUs, run here on lavapipe (slowly: small
 * shapes). Tiles are 64 positions x 64 channels (dw: 64 lags, blocks of 16
 * channels and positions): lengths and channels per group below, at and
 * past them, several channel tiles per group, dw blocks crossing groups. */
H_TEST(toeplitz_tiled, matches_reference_small_shapes)
{
    static const sweep_set sets[] = {
        { 1, 1, { 1, 17, 70 } }, { 4, 1, { 4, 36, 264 } }, { 1, 2, { 2, 18, 66 } }, { 2, 2, { 2, 34, 132 } },
    };
    static const uint32_t lengths[] = { 1, 7, 16, 64, 65, 150 };
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_TILED;
    sweep(sets, 4, lengths, 6, 2000);
    printf("  toeplitz tiled small shapes: largest deviation %.2f x 2^-24 x sum|terms|\n", worst_units);
}

H_TEST(toeplitz, matches_reference_wider)
{
    /* the vec4 kernels with 16 positions per invocation (d a multiple of 4,
     * K = 1), several channel slabs and partial rows in dw, taps crossing
     * group boundaries */
    check_shape((shape){ 1, 1024, 256, 1, 1 }, 7);
    check_shape((shape){ 1, 520, 264, 2, 2 }, 8);
    check_shape((shape){ 3, 333, 60, 4, 3 }, 9);
    check_shape((shape){ 2, 256, 64, 4, 1 }, 10);
    printf("  toeplitz wider shapes: largest deviation %.2f x 2^-24 x sum|terms|\n", worst_units);
}

/* ---- beyond the loop cap ---------------------------------------------------- */

/* n = 70000 > 65535: every output of y and du and every dw is a sum that
 * would exceed llvmpipe's loop cap in one invocation. The reference is
 * evaluated at sampled positions (the full one is O(n^2)). */
static void long_sequence_beyond_loop_cap(void)
{
    shape s = { 1, 70000, 2, 1, 1 };
    problem p = make_problem(s, 77);
    outputs o = alloc_outputs(&p);
    run_device(&p, 0, &o);

    const uint32_t n = s.n, d = s.d;
    uint32_t at[80];
    size_t count = 0;
    static const uint32_t fixed[] = { 0, 1, 7, 8, 4095, 4096, 32767, 32768, 32769, 65534, 65535, 65536, 65537,
                                      69990, 69998, 69999 };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        at[count++] = fixed[i];
    uint64_t st = 4242;
    while (count < 80) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        at[count++] = (uint32_t)((st >> 33) % n);
    }
    float got[2], ref[2];
    double mag[2];
    for (size_t i = 0; i < count; i++) {
        uint32_t t = at[i];
        for (uint32_t c = 0; c < d; c++) {
            /* y[t, c] and du[t, c] */
            double y = p.beta[t], ym = fabs(p.beta[t]), g = 0, gm = 0;
            for (uint32_t k = 0; k <= t; k++) {
                y += (double)p.w[k] * p.u[(size_t)(t - k) * d + c];
                ym += fabs((double)p.w[k] * p.u[(size_t)(t - k) * d + c]);
            }
            for (uint32_t k = 0; t + k < n; k++) {
                g += (double)p.w[k] * p.gy[(size_t)(t + k) * d + c];
                gm += fabs((double)p.w[k] * p.gy[(size_t)(t + k) * d + c]);
            }
            got[0] = o.y[(size_t)t * d + c];
            ref[0] = (float)y;
            mag[0] = ym;
            check("y (sampled)", s, got, ref, mag, 1, n + 1.0);
            got[0] = o.du[(size_t)t * d + c];
            ref[0] = (float)g;
            mag[0] = gm;
            check("du (sampled)", s, got, ref, mag, 1, n);
        }
        /* dw[k] with k = t, dbeta[t] */
        double w = 0, wm = 0, b = 0, bm = 0;
        for (uint32_t tt = t; tt < n; tt++)
            for (uint32_t c = 0; c < d; c++) {
                double term = (double)p.gy[(size_t)tt * d + c] * p.u[(size_t)(tt - t) * d + c];
                w += term;
                wm += fabs(term);
            }
        for (uint32_t c = 0; c < d; c++) {
            b += p.gy[(size_t)t * d + c];
            bm += fabs((double)p.gy[(size_t)t * d + c]);
        }
        got[0] = o.dw[t];
        got[1] = o.dbeta[t];
        ref[0] = (float)w;
        ref[1] = (float)b;
        mag[0] = wm;
        mag[1] = bm;
        check("dw (sampled)", s, got, ref, mag, 1, (double)n * d);
        check("dbeta (sampled)", s, got + 1, ref + 1, mag + 1, 1, d);
    }
    printf("  toeplitz n = %u: largest deviation %.2f x 2^-24 x sum|terms| over %zu sampled positions\n", n,
           worst_units, count);
    free_outputs(&o);
    free_problem(&p);
}

/* (The tiled kernels share these passes; at n = 70000 they take minutes on
 * lavapipe, so many_passes_match_reference runs their passes on short
 * sequences with a lowered loop budget instead.) */
H_TEST(toeplitz, long_sequence_beyond_loop_cap)
{
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_REGISTER;
    long_sequence_beyond_loop_cap();
}

/* The same passes and partial rows as long sequences, on short ones: with a
 * loop budget of 2 iterations per invocation the forward and du run a pass
 * per 2 steps of positions and dw splits into a partial row per block of
 * positions and channel block. */
static void many_passes(const shape *shapes, size_t count)
{
    h_dev->tuning.loop_budget = 2;
    for (size_t i = 0; i < count; i++)
        check_shape(shapes[i], 301 + i);
    h_dev->tuning.loop_budget = 0;
    printf("  toeplitz many passes: largest deviation %.2f x 2^-24 x sum|terms|\n", worst_units);
}

H_TEST(toeplitz, many_passes_match_reference)
{
    static const shape shapes[] = { { 2, 100, 12, 4, 2 }, { 1, 77, 5, 1, 3 }, { 3, 64, 8, 1, 1 },
                                    { 2, 150, 40, 2, 1 } };
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_REGISTER;
    many_passes(shapes, 4);
}

/* 150 positions in steps of 16, two per pass: 5 passes over 3 t-tiles */
H_TEST(toeplitz_tiled, many_passes_match_reference)
{
    static const shape shapes[] = { { 2, 150, 12, 4, 2 }, { 1, 77, 5, 1, 2 }, { 3, 64, 8, 1, 1 },
                                    { 2, 150, 70, 2, 1 } };
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_TILED;
    many_passes(shapes, 4);
}

/* ---- frozen layers, skipped du ---------------------------------------------- */

H_TEST(toeplitz, skipped_gradients_are_left_alone)
{
    shape s = { 2, 37, 12, 4, 2 };
    problem p = make_problem(s, 31);
    outputs ref = alloc_outputs(&p);
    ref_toeplitz_backward(&p.desc, p.u, p.w, p.gy, ref.du, ref.dw, ref.dbeta);
    static const uint32_t flag_sets[] = { TMM_TOEPLITZ_SKIP_PARAMS, TMM_TOEPLITZ_SKIP_DU,
                                          TMM_TOEPLITZ_SKIP_DU | TMM_TOEPLITZ_SKIP_PARAMS };
    for (size_t f = 0; f < 3; f++) {
        uint32_t flags = flag_sets[f];
        float *sentinel = h_floats(p.na);
        for (size_t i = 0; i < p.na; i++)
            sentinel[i] = 1234.5f;
        tmm_buffer *bu = h_buffer(p.u, p.na), *bw = h_buffer(p.w, p.nw), *bgy = h_buffer(p.gy, p.na);
        tmm_buffer *bdu = h_buffer(sentinel, p.na), *bdw = h_buffer(sentinel, p.nw), *bdb = h_buffer(sentinel, p.nb);
        uint64_t ns = tmm_op_toeplitz_backward_scratch(h_dev, &p.desc, flags);
        if (flags & TMM_TOEPLITZ_SKIP_PARAMS)
            cr_assert_eq(ns, 0, "a frozen layer needs no scratch");
        tmm_buffer *bs = h_buffer(NULL, ns);
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_toeplitz_backward(r, &p.desc, flags, tmm_whole(bu), tmm_whole(bw), tmm_whole(bgy),
                                      tmm_whole(bs), tmm_whole(bdu), tmm_whole(bdw), tmm_whole(bdb)));
        if (flags == (TMM_TOEPLITZ_SKIP_DU | TMM_TOEPLITZ_SKIP_PARAMS))
            cr_assert_eq(tmm_recorder_dispatches(r), 0, "nothing to compute, nothing recorded");
        h_run(r);
        float *got = h_floats(p.na);
        h_read(bdu, got, p.na);
        if (flags & TMM_TOEPLITZ_SKIP_DU)
            cr_assert(memcmp(got, sentinel, p.na * sizeof *got) == 0, "du was written though skipped");
        else
            h_compare("du (params skipped)", got, ref.du, p.na, 1e-4, 1e-4);
        h_read(bdw, got, p.nw);
        if (flags & TMM_TOEPLITZ_SKIP_PARAMS)
            cr_assert(memcmp(got, sentinel, p.nw * sizeof *got) == 0, "dw of a frozen layer was written");
        else
            h_compare("dw (du skipped)", got, ref.dw, p.nw, 1e-3, 1e-4);
        h_read(bdb, got, p.nb);
        if (flags & TMM_TOEPLITZ_SKIP_PARAMS)
            cr_assert(memcmp(got, sentinel, p.nb * sizeof *got) == 0, "dbeta of a frozen layer was written");
        else
            h_compare("dbeta (du skipped)", got, ref.dbeta, p.nb, 1e-4, 1e-4);
        tmm_buffer *all[] = { bu, bw, bgy, bdu, bdw, bdb, bs };
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            tmm_buffer_destroy(all[i]);
        free(got);
        free(sentinel);
    }
    free_outputs(&ref);
    free_problem(&p);
}

/* ---- determinism -------------------------------------------------------------- */

/* Several batches, channel slabs and position chunks: many partial rows
 * (the second shape with a lowered loop budget: many passes too). */
static void reruns_are_bit_identical(const shape shapes[2])
{
    for (size_t k = 0; k < 2; k++) {
        h_dev->tuning.loop_budget = k ? 4 : 0;
        problem p = make_problem(shapes[k], 500 + k);
        outputs a = alloc_outputs(&p), b = alloc_outputs(&p);
        run_device(&p, 0, &a);
        run_device(&p, 0, &b);
        cr_assert(memcmp(a.y, b.y, p.na * sizeof(float)) == 0, "forward differs between runs");
        cr_assert(memcmp(a.du, b.du, p.na * sizeof(float)) == 0, "du differs between runs");
        cr_assert(memcmp(a.dw, b.dw, p.nw * sizeof(float)) == 0, "dw differs between runs");
        cr_assert(memcmp(a.dbeta, b.dbeta, p.nb * sizeof(float)) == 0, "dbeta differs between runs");
        free_outputs(&a);
        free_outputs(&b);
        free_problem(&p);
    }
}

H_TEST(toeplitz, reruns_are_bit_identical)
{
    static const shape shapes[2] = { { 3, 1024, 264, 2, 2 }, { 2, 300, 36, 4, 3 } };
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_REGISTER;
    reruns_are_bit_identical(shapes);
}

H_TEST(toeplitz_tiled, reruns_are_bit_identical)
{
    static const shape shapes[2] = { { 3, 300, 264, 2, 2 }, { 2, 300, 36, 4, 2 } };
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_TILED;
    reruns_are_bit_identical(shapes);
}

/* ---- views at odd offsets, batches split over bindings ------------------------ */

static void odd_offsets_and_split_batches(void)
{
    /* one sequence is 37 * 12 floats = 1776 bytes, not a multiple of the
     * offset alignment; a binding limit of 6000 bytes holds three of them */
    shape s = { 5, 37, 12, 4, 2 };
    problem p = make_problem(s, 61);
    const uint64_t limit = 6000;
    for (int split = 0; split < 2; split++) {
        uint64_t saved = h_dev->info.max_storage_buffer_range;
        if (split)
            h_dev->info.max_storage_buffer_range = limit;
        /* u, w, beta, gy, y, du in one buffer at float offsets 1, ... */
        size_t off_u = 1, off_w = off_u + p.na + 3, off_b = off_w + p.nw + 5, off_gy = off_b + p.nb + 7;
        size_t off_y = off_gy + p.na + 1, off_du = off_y + p.na + 2, total = off_du + p.na + 1;
        tmm_buffer *big = h_buffer(NULL, total);
        H_OK(tmm_buffer_write(big, off_u * 4, p.u, p.na * 4));
        H_OK(tmm_buffer_write(big, off_w * 4, p.w, p.nw * 4));
        H_OK(tmm_buffer_write(big, off_b * 4, p.beta, p.nb * 4));
        H_OK(tmm_buffer_write(big, off_gy * 4, p.gy, p.na * 4));
        uint64_t ns = tmm_op_toeplitz_backward_scratch(h_dev, &p.desc, 0);
        tmm_buffer *bdw = h_buffer(NULL, p.nw), *bdb = h_buffer(NULL, p.nb), *bs = h_buffer(NULL, ns);
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_toeplitz_forward(r, &p.desc, tmm_sub(big, off_u * 4, p.na * 4), tmm_sub(big, off_w * 4, p.nw * 4),
                                     tmm_sub(big, off_b * 4, p.nb * 4), tmm_sub(big, off_y * 4, p.na * 4)));
        H_OK(tmm_op_toeplitz_backward(r, &p.desc, 0, tmm_sub(big, off_u * 4, p.na * 4),
                                      tmm_sub(big, off_w * 4, p.nw * 4), tmm_sub(big, off_gy * 4, p.na * 4),
                                      tmm_whole(bs), tmm_sub(big, off_du * 4, p.na * 4), tmm_whole(bdw),
                                      tmm_whole(bdb)));
        uint32_t dispatches = tmm_recorder_dispatches(r);
        h_run(r);
        h_dev->info.max_storage_buffer_range = saved;
        outputs o = alloc_outputs(&p);
        H_OK(tmm_buffer_read(big, off_y * 4, o.y, p.na * 4));
        H_OK(tmm_buffer_read(big, off_du * 4, o.du, p.na * 4));
        h_read(bdw, o.dw, p.nw);
        h_read(bdb, o.dbeta, p.nb);
        check_all(&p, &o);
        /* forward, du and dw: one dispatch per binding of batches, plus the sums */
        if (split)
            cr_assert_eq(dispatches, 3 * 2 + 2, "5 batches, 3 per binding: %u dispatches", dispatches);
        free_outputs(&o);
        tmm_buffer_destroy(big);
        tmm_buffer_destroy(bdw);
        tmm_buffer_destroy(bdb);
        tmm_buffer_destroy(bs);
    }
    free_problem(&p);
}

H_TEST(toeplitz, odd_offsets_and_split_batches)
{
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_REGISTER;
    odd_offsets_and_split_batches();
}

H_TEST(toeplitz_tiled, odd_offsets_and_split_batches)
{
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_TILED;
    odd_offsets_and_split_batches();
}

/* ---- the variant per device --------------------------------------------------- */

static bool same_outputs(const problem *p, const outputs *a, const outputs *b)
{
    return memcmp(a->y, b->y, p->na * sizeof(float)) == 0 && memcmp(a->du, b->du, p->na * sizeof(float)) == 0 &&
           memcmp(a->dw, b->dw, p->nw * sizeof(float)) == 0 &&
           memcmp(a->dbeta, b->dbeta, p->nb * sizeof(float)) == 0;
}

/* AUTO: register blocks on CPU devices, tiles on GPUs, register blocks where
 * the tiles do not fit in shared memory (recognized by their bits: each
 * variant is deterministic, and the two sum in different orders). */
H_TEST(toeplitz_tiled, auto_picks_per_device)
{
    problem p = make_problem((shape){ 2, 100, 20, 2, 1 }, 71);
    outputs reg = alloc_outputs(&p), tiled = alloc_outputs(&p), got = alloc_outputs(&p);
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_REGISTER;
    run_device(&p, 0, &reg);
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_TILED;
    run_device(&p, 0, &tiled);
    cr_assert(!same_outputs(&p, &reg, &tiled), "the variants should round differently");
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_VARIANT_AUTO;
    const tmm_device_type type = h_dev->info.type;
    const uint32_t shared = h_dev->info.max_shared_memory;
    h_dev->info.type = TMM_DEVICE_CPU;
    run_device(&p, 0, &got);
    cr_assert(same_outputs(&p, &got, &reg), "a CPU device runs the register variant");
    h_dev->info.type = TMM_DEVICE_DISCRETE_GPU;
    run_device(&p, 0, &got);
    cr_assert(same_outputs(&p, &got, &tiled), "a GPU runs the tiled variant");
    h_dev->info.max_shared_memory = 8192;
    run_device(&p, 0, &got);
    cr_assert(same_outputs(&p, &got, &reg), "a GPU without room for the tiles runs the register variant");
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_TILED;
    tmm_recorder *r = h_begin();
    tmm_buffer *b = h_buffer(NULL, 8192);
    tmm_view v = tmm_whole(b);
    cr_assert_eq(tmm_op_toeplitz_forward(r, &p.desc, v, v, v, v), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "shared memory"), "%s", tmm_last_error());
    h_dev->info.max_shared_memory = shared;
    tmm_toeplitz_desc narrow = { 1, 8, 4, 4, 3, TMM_TOEPLITZ_DIRECT }; /* taps wider than a group: fine now */
    H_OK(tmm_toeplitz_check(r, &narrow));
    h_run(r);
    h_dev->info.type = type;
    h_dev->info.max_shared_memory = shared;
    cr_assert_str_eq(tmm_toeplitz_variant_name(TMM_TOEPLITZ_TILED), "tiled");
    tmm_buffer_destroy(b);
    free_outputs(&reg);
    free_outputs(&tiled);
    free_outputs(&got);
    free_problem(&p);
}

/* ---- kernel windows at head boundaries ------------------------------------------ */

/* With heads, a kernel-k window stays inside its head (docs/model.md): what
 * group g computes does not depend on the channels of any other group, in
 * the forward (y), in du (no gradient crosses a head boundary) and in dw.
 * Checked on the device for both variants, against a copy of the problem
 * whose other groups hold other values, and on the reference: the result
 * must be bit-identical within the group. */
static void head_confined(tmm_toeplitz_variant variant)
{
    h_dev->tuning.kernel_variant = variant;
    const shape s = { 2, 37, 12, 3, 5 }; /* 3 heads of 4 channels, 5 taps: wider than a head */
    problem p = make_problem(s, 71), q = make_problem(s, 71);
    const uint32_t dg = s.d / s.G;
    for (size_t i = 0; i < p.na; i++) /* channels outside group 1 differ */
        if ((i % s.d) / dg != 1) {
            q.u[i] = p.u[i] * -3.0f + 0.5f;
            q.gy[i] = p.gy[i] * 2.0f - 0.25f;
        }
    outputs op = alloc_outputs(&p), oq = alloc_outputs(&q), rp = alloc_outputs(&p), rq = alloc_outputs(&q);
    run_device(&p, 0, &op);
    run_device(&q, 0, &oq);
    ref_toeplitz_forward(&p.desc, p.u, p.w, p.beta, rp.y);
    ref_toeplitz_forward(&q.desc, q.u, q.w, q.beta, rq.y);
    ref_toeplitz_backward(&p.desc, p.u, p.w, p.gy, rp.du, rp.dw, rp.dbeta);
    ref_toeplitz_backward(&q.desc, q.u, q.w, q.gy, rq.du, rq.dw, rq.dbeta);
    for (size_t i = 0; i < p.na; i++)
        if ((i % s.d) / dg == 1) {
            cr_assert(op.y[i] == oq.y[i] && rp.y[i] == rq.y[i], "y of group 1 depends on another head (%zu)", i);
            cr_assert(op.du[i] == oq.du[i] && rp.du[i] == rq.du[i], "du of group 1 depends on another head (%zu)",
                      i);
        }
    for (size_t i = (size_t)s.K * s.n; i < 2 * (size_t)s.K * s.n; i++) /* dw of group 1 */
        cr_assert(op.dw[i] == oq.dw[i] && rp.dw[i] == rq.dw[i], "dw of group 1 depends on another head (%zu)", i);
    check_all(&p, &op); /* and the device agrees with the reference */
    free_outputs(&op), free_outputs(&oq), free_outputs(&rp), free_outputs(&rq);
    free_problem(&p), free_problem(&q);
    h_dev->tuning.kernel_variant = TMM_TOEPLITZ_VARIANT_AUTO;
}

H_TEST(toeplitz, kernel_window_stays_in_its_head_register) { head_confined(TMM_TOEPLITZ_REGISTER); }
H_TEST(toeplitz, kernel_window_stays_in_its_head_tiled) { head_confined(TMM_TOEPLITZ_TILED); }

/* ---- errors ------------------------------------------------------------------- */

H_TEST(toeplitz, bad_arguments_are_errors)
{
    float *ones = h_floats(4096);
    for (int i = 0; i < 4096; i++)
        ones[i] = 1.0f;
    tmm_buffer *b = h_buffer(NULL, 4096), *s = h_buffer(ones, 4096);
    free(ones);
    tmm_view v = tmm_whole(b);
    tmm_recorder *r = h_begin();
    tmm_toeplitz_desc d = { 2, 16, 12, 4, 2, TMM_TOEPLITZ_AUTO };

    d.impl = TMM_TOEPLITZ_FFT;
    cr_assert_eq(tmm_op_toeplitz_forward(r, &d, v, v, v, v), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "FFT"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_toeplitz_backward(r, &d, 0, v, v, v, v, v, v, v), TMM_ERR_UNSUPPORTED);
    d.impl = 7;
    cr_assert_eq(tmm_toeplitz_check(r, &d), TMM_ERR_INVALID_ARGUMENT);
    d.impl = TMM_TOEPLITZ_DIRECT;
    cr_assert_eq(tmm_toeplitz_check(r, &d), TMM_OK);
    cr_assert_str_eq(tmm_toeplitz_impl_name(TMM_TOEPLITZ_DIRECT), "direct");

    d.groups = 5;
    cr_assert_eq(tmm_op_toeplitz_forward(r, &d, v, v, v, v), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "5 groups do not divide d = 12"), "%s", tmm_last_error());
    d.groups = 4;
    d.taps = TMM_TOEPLITZ_MAX_TAPS + 1;
    cr_assert_eq(tmm_toeplitz_check(NULL, &d), TMM_ERR_INVALID_ARGUMENT);
    d.taps = 2;

    /* views: short, overlapping, misaligned */
    tmm_view u = tmm_sub(b, 0, 384 * 4), y = tmm_sub(b, 2048 * 4, 384 * 4), w = tmm_sub(b, 1024 * 4, 128 * 4);
    tmm_view beta = tmm_sub(b, 1536 * 4, 64 * 4);
    cr_assert_eq(tmm_op_toeplitz_forward(r, &d, u, w, beta, tmm_sub(b, 2048 * 4, 383 * 4)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "y holds 383 floats, needs 384"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_toeplitz_forward(r, &d, u, w, beta, tmm_sub(b, 100 * 4, 384 * 4)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "y overlaps u"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_toeplitz_forward(r, &d, tmm_sub(b, 2, 384 * 4), w, beta, y), TMM_ERR_INVALID_ARGUMENT);
    uint64_t ns = tmm_op_toeplitz_backward_scratch(h_dev, &d, 0);
    cr_assert(ns > 0 && ns <= 4096, "scratch %llu", (unsigned long long)ns);
    tmm_view du = tmm_sub(b, 2560 * 4, 384 * 4), dw = tmm_sub(s, 1024 * 4, 128 * 4), db = tmm_sub(s, 2048 * 4, 64 * 4);
    cr_assert_eq(tmm_op_toeplitz_backward(r, &d, 0, u, w, y, tmm_sub(s, 0, 4), du, dw, db),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "scratch holds 1 floats"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_toeplitz_backward(r, &d, 0, u, w, y, tmm_sub(s, 0, 1024 * 4), du, tmm_sub(s, 1025 * 4, 128 * 4),
                                          db),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "dw starts at byte 4100"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_toeplitz_backward(r, &d, 0, u, w, y, tmm_sub(s, 0, 1024 * 4), du, dw, tmm_sub(s, 1024 * 4, 64 * 4)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "overlaps"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_toeplitz_backward(r, &d, 4, u, w, y, v, du, dw, db), TMM_ERR_INVALID_ARGUMENT);
    /* frozen and first layer: no views needed at all */
    tmm_view none = { 0 };
    H_OK(tmm_op_toeplitz_backward(r, &d, TMM_TOEPLITZ_SKIP_DU | TMM_TOEPLITZ_SKIP_PARAMS, none, none, none, none,
                                  none, none, none));

    /* a sequence that no binding can hold: refused before any view is looked at */
    tmm_toeplitz_desc huge = { 1, 65536, 1024, 1, 1, TMM_TOEPLITZ_DIRECT };
    cr_assert_eq(tmm_op_toeplitz_forward(r, &huge, v, v, v, v), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "maxStorageBufferRange"), "%s", tmm_last_error());

    /* empty shapes: nothing to do, and zero gradients for the parameters */
    tmm_toeplitz_desc empty = { 0, 8, 4, 1, 1, TMM_TOEPLITZ_DIRECT };
    H_OK(tmm_op_toeplitz_forward(r, &empty, none, none, none, none));
    H_OK(tmm_op_toeplitz_backward(r, &empty, 0, none, none, none, none, none, tmm_sub(s, 0, 8 * 4),
                                  tmm_sub(s, 1024 * 4, 8 * 4)));
    h_run(r);
    float got[8];
    H_OK(tmm_buffer_read(s, 0, got, sizeof got));
    for (int i = 0; i < 8; i++)
        cr_assert(got[i] == 0.0f, "dw of an empty batch is 0, not %g", (double)got[i]);
    tmm_buffer_destroy(b);
    tmm_buffer_destroy(s);
}
