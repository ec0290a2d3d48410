/* FFT implementation of the causal Toeplitz op (src/ops/toeplitz_fft.h):
 *   - one op against the direct op (tmm_op_toeplitz_forward/backward, itself
 *     checked against the C reference in test_toeplitz.c): flat, heads
 *     (G = 4), kernel (K = 3) and heads with kernel, over n in {1, 2, 7, 64,
 *     100, 512, 1000, 4096} (B = 2 at 2, 64 and 512, else 1); forward and
 *     backward (du, dw, dbeta), and the skip flags; memory linear in n;
 *   - expanded (Toeplitz -> SiLU -> Toeplitz, composed as the model does,
 *     one plan serving both ops): the FFT chain and the direct chain, both
 *     against the double C reference of the chain, over the same lengths.
 *
 * Tolerance: an FFT of length N rounds each output with an error of about
 * 2^-24 * log2(N) times the 2-norm of what it combines. Every output row
 * here is a sum of correlations/convolutions of rows x_i, z_i whose result
 * is bounded elementwise by S = sum_i ||x_i||_2 ||z_i||_2 (Cauchy-Schwarz):
 *   y[b,:,c]   S = sum_a ||w[g,a]|| ||u[b,:,c-(K-1)+a]||  (+ |beta|)
 *   du[b,:,c'] S = sum_a ||w[g(c),a]|| ||gy[b,:,c]||
 *   dw[g,a]    S = sum_{b, c in g} ||gy[b,:,c]|| ||u[b,:,c-(K-1)+a]||
 *   dbeta      summed in the real domain: S = sum |gy| (direct-sum bound)
 * Batched FFTs share rounding between rows (VkFFT may transform real rows in
 * pairs; an exactly zero dw row came out at 7e-8), so each element is also
 * allowed a tenth of the largest S of its tensor, S_max:
 * We allow |fft - direct| <= eps * (S + S_max / 10), eps = 4 * 2^-24 *
 * log2(2N). A single missing term (about |w||u| ~ 0.25 here) is far above
 * this (S ~ n/3 at n = 1000: tolerance ~ 4e-3). The worst ratio seen is
 * printed.
 *
 * In the expanded chain an input's error is carried through: the second op
 * adds |T| e (the op applied to |w| and the input's error bound e), SiLU
 * multiplies an error by at most max|silu'| < 1.1, and the backward's
 * silu'(y1) moves by at most max|silu''| = 0.5 times y1's error. The w are
 * Kaiming-scaled there (std sqrt(2/n), as the model initializes them) so
 * that the chain stays O(1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "ops/nn_ops.h"
#include "ops/toeplitz.h"
#include "ops/toeplitz_fft.h"
#include "ref/ref_nn.h"
#include "ref/ref_toeplitz.h"

typedef struct shape {
    uint32_t B, n, d, G, K;
} shape;

static double worst_ratio;

/* ---- host arrays and device buffers of one case, freed together ---------- */

#define POOL_MAX 96
static void *pool[POOL_MAX];
static int pool_n;
static tmm_buffer *bpool[POOL_MAX];
static int bpool_n;

static void *pooled(void *p)
{
    cr_assert(p && pool_n < POOL_MAX, "out of host memory");
    return pool[pool_n++] = p;
}

static double *dbl(size_t n) { return pooled(calloc(n ? n : 1, sizeof(double))); }
static float *flt(size_t n) { return pooled(calloc(n ? n : 1, sizeof(float))); }

static tmm_buffer *buf(const float *data, size_t n)
{
    cr_assert(bpool_n < POOL_MAX);
    return bpool[bpool_n++] = h_buffer(data, n);
}

static void pool_free(void)
{
    while (pool_n)
        free(pool[--pool_n]);
    while (bpool_n)
        tmm_buffer_destroy(bpool[--bpool_n]);
}

static float *rand_floats(size_t n, uint64_t seed, float scale)
{
    float *x = flt(n);
    h_rand(x, n, seed, -scale, scale);
    return x;
}

static float *read_floats(const tmm_buffer *b, size_t n)
{
    float *x = flt(n);
    h_read(b, x, n);
    return x;
}

static double *to_double(const float *x, size_t n)
{
    double *y = dbl(n);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

static double *abs_of(const double *x, size_t n)
{
    double *y = dbl(n);
    for (size_t i = 0; i < n; i++)
        y[i] = fabs(x[i]);
    return y;
}

/* ---- tolerances ---------------------------------------------------------- */

static double row_norm(const double *x, uint32_t n, uint64_t stride)
{
    double s = 0;
    for (uint32_t t = 0; t < n; t++)
        s += x[t * stride] * x[t * stride];
    return sqrt(s);
}

/* The scales S (see the top) of one op with input u, parameters w, beta and
 * output gradient gy; outputs that are NULL are not computed. */
static void op_scales(shape s, const double *u, const double *w, const double *beta, const double *gy, double *sy,
                      double *sdu, double *sdw, double *sdb)
{
    const uint32_t dg = s.d / s.G;
    double *nu = dbl((size_t)s.B * s.d), *ng = dbl((size_t)s.B * s.d), *nw = dbl((size_t)s.G * s.K);
    for (uint32_t b = 0; b < s.B; b++)
        for (uint32_t c = 0; c < s.d; c++) {
            nu[b * s.d + c] = u ? row_norm(u + (size_t)b * s.n * s.d + c, s.n, s.d) : 0;
            ng[b * s.d + c] = gy ? row_norm(gy + (size_t)b * s.n * s.d + c, s.n, s.d) : 0;
        }
    for (uint32_t i = 0; i < s.G * s.K; i++)
        nw[i] = w ? row_norm(w + (size_t)i * s.n, s.n, 1) : 0;
    for (uint32_t b = 0; b < s.B; b++)
        for (uint32_t c = 0; c < s.d; c++) {
            double sy_ = 0, sdu_ = 0;
            for (uint32_t a = 0; a < s.K; a++) {
                int ch = (int)c - (int)(s.K - 1) + (int)a;
                if (ch >= 0)
                    sy_ += nw[(c / dg) * s.K + a] * nu[b * s.d + (uint32_t)ch];
                uint32_t e = c + (s.K - 1) - a;
                if (e < s.d)
                    sdu_ += nw[(e / dg) * s.K + a] * ng[b * s.d + e];
            }
            for (uint32_t t = 0; t < s.n; t++) {
                size_t i = ((size_t)b * s.n + t) * s.d + c;
                if (sy)
                    sy[i] = sy_ + fabs(beta[(c / dg) * s.n + t]);
                if (sdu)
                    sdu[i] = sdu_;
            }
        }
    for (uint32_t g = 0; g < s.G; g++) {
        for (uint32_t a = 0; a < s.K && sdw; a++) {
            double sw = 0;
            for (uint32_t b = 0; b < s.B; b++)
                for (uint32_t c = g * dg; c < (g + 1) * dg; c++) {
                    int ch = (int)c - (int)(s.K - 1) + (int)a;
                    if (ch >= 0)
                        sw += ng[b * s.d + c] * nu[b * s.d + (uint32_t)ch];
                }
            for (uint32_t t = 0; t < s.n; t++)
                sdw[((size_t)g * s.K + a) * s.n + t] = sw;
        }
        for (uint32_t t = 0; t < s.n && sdb; t++) {
            double sb = 0;
            for (uint32_t b = 0; b < s.B; b++)
                for (uint32_t c = g * dg; c < (g + 1) * dg; c++)
                    sb += fabs(gy[((size_t)b * s.n + t) * s.d + c]);
            sdb[(size_t)g * s.n + t] = sb;
        }
    }
}

/* In place: S -> eps * (S + S_max / 10). */
static void fft_tol(double *sc, size_t count, double eps)
{
    double smax = 0;
    for (size_t i = 0; i < count; i++)
        smax = sc[i] > smax ? sc[i] : smax;
    for (size_t i = 0; i < count; i++)
        sc[i] = eps * (sc[i] + 0.1 * smax) + 1e-30;
}

/* Asserts |got - ref| <= tol elementwise. */
static void check(const char *what, shape s, const float *got, const double *ref, const double *tol, size_t count)
{
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        double dev = fabs((double)got[i] - ref[i]);
        if (isnan(got[i]) || isinf(got[i]))
            dev = INFINITY;
        if (dev / tol[i] > worst) {
            worst = dev / tol[i];
            at = i;
        }
    }
    if (worst > worst_ratio)
        worst_ratio = worst;
    cr_assert(worst <= 1, "%s (B=%u n=%u d=%u G=%u K=%u): element %zu is %.9g, reference %.9g (%.3g x tolerance)",
              what, s.B, s.n, s.d, s.G, s.K, at, (double)got[at], ref[at], worst);
}

static tmm_toeplitz_desc desc_of(shape s)
{
    tmm_toeplitz_desc desc = { s.B, s.n, s.d, s.G, s.K, TMM_TOEPLITZ_DIRECT };
    return desc;
}

static double fft_eps(const tmm_toeplitz_fft *plan) { return 4 * 0x1p-24 * log2(2.0 * tmm_toeplitz_fft_length(plan)); }

/* ---- one op: FFT against direct ------------------------------------------ */

static void run_case(shape s, uint32_t flags, uint64_t seed)
{
    tmm_toeplitz_desc desc = desc_of(s);
    const size_t na = (size_t)s.B * s.n * s.d, nw = (size_t)s.G * s.K * s.n, nb = (size_t)s.G * s.n;
    float *u = rand_floats(na, seed, 1), *w = rand_floats(nw, seed + 1, 1), *beta = rand_floats(nb, seed + 2, 1);
    float *gy = rand_floats(na, seed + 3, 1);

    tmm_toeplitz_fft *plan = NULL;
    H_OK(tmm_toeplitz_fft_create(h_dev, &desc, &plan));
    tmm_buffer *bu = buf(u, na), *bw = buf(w, nw), *bb = buf(beta, nb), *bgy = buf(gy, na);
    tmm_buffer *bs = buf(NULL, tmm_op_toeplitz_backward_scratch(h_dev, &desc, 0));
    const size_t sizes[4] = { na, na, nw, nb };
    tmm_buffer *out[2][4]; /* [direct, fft][y, du, dw, dbeta] */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++)
            out[k][i] = buf(NULL, sizes[i]);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_toeplitz_forward(r, &desc, tmm_whole(bu), tmm_whole(bw), tmm_whole(bb), tmm_whole(out[0][0])));
    H_OK(tmm_op_toeplitz_backward(r, &desc, 0, tmm_whole(bu), tmm_whole(bw), tmm_whole(bgy), tmm_whole(bs),
                                  tmm_whole(out[0][1]), tmm_whole(out[0][2]), tmm_whole(out[0][3])));
    H_OK(tmm_toeplitz_fft_record_forward(r, plan, tmm_whole(bu), tmm_whole(bw), tmm_whole(bb),
                                         tmm_whole(out[1][0])));
    H_OK(tmm_toeplitz_fft_record_backward(r, plan, flags, tmm_whole(bu), tmm_whole(bw), tmm_whole(bgy),
                                          tmm_whole(out[1][1]), tmm_whole(out[1][2]), tmm_whole(out[1][3])));
    h_run(r);

    double *tol[4] = { dbl(na), dbl(na), dbl(nw), dbl(nb) };
    op_scales(s, to_double(u, na), to_double(w, nw), to_double(beta, nb), to_double(gy, na), tol[0], tol[1], tol[2],
              tol[3]);
    static const char *const names[4] = { "y", "du", "dw", "dbeta" };
    for (int i = 0; i < 4; i++) {
        if ((i == 1 && (flags & TMM_TOEPLITZ_SKIP_DU)) || (i >= 2 && (flags & TMM_TOEPLITZ_SKIP_PARAMS)))
            continue;
        fft_tol(tol[i], sizes[i], fft_eps(plan));
        check(names[i], s, read_floats(out[1][i], sizes[i]), to_double(read_floats(out[0][i], sizes[i]), sizes[i]),
              tol[i], sizes[i]);
    }
    tmm_toeplitz_fft_destroy(plan);
    pool_free();
}

static const uint32_t lengths[] = { 1, 2, 7, 64, 100, 512, 1000, 4096 };
#define N_LENGTHS (sizeof lengths / sizeof lengths[0])

/* Every length, B = 2 at every other one (plan creation, which compiles
 * VkFFT's shaders, dominates the time of these tests). */
static void sweep(void (*run)(shape, uint64_t), uint32_t d, uint32_t G, uint32_t K, uint64_t seed, const char *what)
{
    for (size_t i = 0; i < N_LENGTHS; i++) {
        shape s = { 1 + i % 2, lengths[i], d, G, K };
        run(s, seed + 10 * i);
    }
    printf("toeplitz_fft %s d=%u G=%u K=%u: worst deviation %.3g of the tolerance\n", what, d, G, K, worst_ratio);
}

static void run_op(shape s, uint64_t seed) { run_case(s, 0, seed); }

H_TEST(toeplitz_fft, flat) { sweep(run_op, 5, 1, 1, 100, "op"); }
H_TEST(toeplitz_fft, heads) { sweep(run_op, 12, 4, 1, 200, "op"); }
H_TEST(toeplitz_fft, kernel) { sweep(run_op, 6, 1, 3, 300, "op"); }
H_TEST(toeplitz_fft, heads_kernel) { sweep(run_op, 8, 4, 3, 400, "op"); }

/* ---- expanded: Toeplitz -> SiLU -> Toeplitz ------------------------------ */

typedef struct chain {
    tmm_buffer *u, *w1, *b1, *w2, *b2, *g, *zeros, *dummy, *scratch; /* inputs, SiLU's zero bias, scratch */
    tmm_buffer *y1, *q, *y2, *dy1, *du, *dw1, *db1, *dw2, *db2;      /* outputs (dy1: dq, then dy1 in place) */
} chain;

static void toeplitz_fwd(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_toeplitz_fft *plan, tmm_buffer *u,
                         tmm_buffer *w, tmm_buffer *beta, tmm_buffer *y)
{
    if (plan)
        H_OK(tmm_toeplitz_fft_record_forward(r, plan, tmm_whole(u), tmm_whole(w), tmm_whole(beta), tmm_whole(y)));
    else
        H_OK(tmm_op_toeplitz_forward(r, desc, tmm_whole(u), tmm_whole(w), tmm_whole(beta), tmm_whole(y)));
}

static void toeplitz_bwd(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_toeplitz_fft *plan, tmm_buffer *scratch,
                         tmm_buffer *u, tmm_buffer *w, tmm_buffer *gy, tmm_buffer *du, tmm_buffer *dw, tmm_buffer *db)
{
    if (plan)
        H_OK(tmm_toeplitz_fft_record_backward(r, plan, 0, tmm_whole(u), tmm_whole(w), tmm_whole(gy), tmm_whole(du),
                                              tmm_whole(dw), tmm_whole(db)));
    else
        H_OK(tmm_op_toeplitz_backward(r, desc, 0, tmm_whole(u), tmm_whole(w), tmm_whole(gy), tmm_whole(scratch),
                                      tmm_whole(du), tmm_whole(dw), tmm_whole(db)));
}

/* The model's expanded mixer forward and backward (plan NULL: direct). */
static void record_chain(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_toeplitz_fft *plan, const chain *c)
{
    const uint32_t rows = desc->batch * desc->n;
    toeplitz_fwd(r, desc, plan, c->u, c->w1, c->b1, c->y1);
    H_OK(tmm_op_bias_silu_forward(r, tmm_whole(c->y1), tmm_whole(c->zeros), rows, desc->d, tmm_whole(c->q)));
    toeplitz_fwd(r, desc, plan, c->q, c->w2, c->b2, c->y2);
    toeplitz_bwd(r, desc, plan, c->scratch, c->q, c->w2, c->g, c->dy1, c->dw2, c->db2);
    H_OK(tmm_op_bias_silu_backward(r, tmm_whole(c->y1), tmm_whole(c->zeros), tmm_whole(c->dy1), rows, desc->d, false,
                                   tmm_whole(c->scratch), tmm_whole(c->dy1), tmm_whole(c->dummy)));
    toeplitz_bwd(r, desc, plan, c->scratch, c->u, c->w1, c->dy1, c->du, c->dw1, c->db1);
}

/* out += f * |x| elementwise. */
static void add_abs(double *out, const double *x, double f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] += f * fabs(x[i]);
}

static void run_expanded(shape s, uint64_t seed)
{
    tmm_toeplitz_desc desc = desc_of(s);
    const size_t na = (size_t)s.B * s.n * s.d, nw = (size_t)s.G * s.K * s.n, nb = (size_t)s.G * s.n;
    const float ws = (float)sqrt(6.0 / s.n); /* uniform with std sqrt(2/n) */
    float *u = rand_floats(na, seed, 1), *w1 = rand_floats(nw, seed + 1, ws), *b1 = rand_floats(nb, seed + 2, 1);
    float *w2 = rand_floats(nw, seed + 3, ws), *b2 = rand_floats(nb, seed + 4, 1), *g = rand_floats(na, seed + 5, 1);

    tmm_toeplitz_fft *plan = NULL;
    H_OK(tmm_toeplitz_fft_create(h_dev, &desc, &plan));
    uint64_t ns = tmm_op_toeplitz_backward_scratch(h_dev, &desc, 0), nss = tmm_op_bias_silu_backward_scratch(s.B * s.n, s.d);
    chain in = { buf(u, na), buf(w1, nw), buf(b1, nb), buf(w2, nw), buf(b2, nb), buf(g, na), buf(flt(s.d), s.d),
                 buf(NULL, s.d), buf(NULL, ns > nss ? ns : nss), 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    chain c[2]; /* direct, fft */
    for (int k = 0; k < 2; k++) {
        c[k] = in;
        c[k].y1 = buf(NULL, na), c[k].q = buf(NULL, na), c[k].y2 = buf(NULL, na), c[k].dy1 = buf(NULL, na);
        c[k].du = buf(NULL, na), c[k].dw1 = buf(NULL, nw), c[k].db1 = buf(NULL, nb);
        c[k].dw2 = buf(NULL, nw), c[k].db2 = buf(NULL, nb);
    }
    tmm_recorder *r = h_begin();
    record_chain(r, &desc, NULL, &c[0]);
    record_chain(r, &desc, plan, &c[1]);
    h_run(r);

    /* the reference chain in double */
    double *du_ = to_double(u, na), *dw1_ = to_double(w1, nw), *db1_ = to_double(b1, nb);
    double *dw2_ = to_double(w2, nw), *db2_ = to_double(b2, nb), *dg_ = to_double(g, na), *zeros = dbl(na);
    double *y1 = dbl(na), *q = dbl(na), *y2 = dbl(na), *dq = dbl(na), *dy1 = dbl(na), *du = dbl(na), *dw1 = dbl(nw);
    double *db1 = dbl(nb), *dw2 = dbl(nw), *db2 = dbl(nb), *dummy = dbl(s.d);
    ref_toeplitz_forward_d(&desc, du_, dw1_, db1_, y1);
    ref_bias_silu_fwd_d(y1, zeros, (size_t)s.B * s.n, s.d, q);
    ref_toeplitz_forward_d(&desc, q, dw2_, db2_, y2);
    ref_toeplitz_backward_d(&desc, q, dw2_, dg_, dq, dw2, db2);
    ref_bias_silu_bwd_d(y1, zeros, dq, (size_t)s.B * s.n, s.d, false, dy1, dummy);
    ref_toeplitz_backward_d(&desc, du_, dw1_, dy1, du, dw1, db1);

    /* tolerances, carried through the chain (see the top) */
    const double eps = fft_eps(plan);
    double *t_y1 = dbl(na), *e_q = dbl(na), *t_y2 = dbl(na), *t_dq = dbl(na), *t_dw2 = dbl(nw), *t_db2 = dbl(nb);
    double *e_dy1 = dbl(na), *t_du = dbl(na), *t_dw1 = dbl(nw), *t_db1 = dbl(nb), *prop = dbl(na), *prop_w = dbl(nw);
    double *prop_b = dbl(nb), *aw1 = abs_of(dw1_, nw), *aw2 = abs_of(dw2_, nw);
    op_scales(s, du_, dw1_, db1_, NULL, t_y1, NULL, NULL, NULL);
    fft_tol(t_y1, na, eps);
    add_abs(e_q, t_y1, 1.1, na);
    add_abs(e_q, q, 0x1p-20, na);
    op_scales(s, q, dw2_, db2_, dg_, t_y2, t_dq, t_dw2, t_db2);
    fft_tol(t_y2, na, eps);
    fft_tol(t_dq, na, eps);
    fft_tol(t_dw2, nw, eps);
    fft_tol(t_db2, nb, eps);
    ref_toeplitz_forward_d(&desc, e_q, aw2, zeros, prop);
    add_abs(t_y2, prop, 1, na);
    ref_toeplitz_backward_d(&desc, e_q, aw2, abs_of(dg_, na), NULL, prop_w, NULL);
    add_abs(t_dw2, prop_w, 1, nw);
    for (size_t i = 0; i < na; i++)
        e_dy1[i] = 1.1 * t_dq[i] + 0.5 * fabs(dq[i]) * t_y1[i] + 0x1p-20 * fabs(dy1[i]);
    op_scales(s, du_, dw1_, NULL, dy1, NULL, t_du, t_dw1, t_db1);
    fft_tol(t_du, na, eps);
    fft_tol(t_dw1, nw, eps);
    fft_tol(t_db1, nb, eps);
    ref_toeplitz_backward_d(&desc, abs_of(du_, na), aw1, e_dy1, prop, prop_w, prop_b);
    add_abs(t_du, prop, 1, na);
    add_abs(t_dw1, prop_w, 1, nw);
    add_abs(t_db1, prop_b, 1, nb);

    static const char *const path[2] = { "expanded direct", "expanded fft" };
    for (int k = 0; k < 2; k++) {
        char what[64];
#define CHECK(name, count)                                                                  \
    snprintf(what, sizeof what, "%s %s", path[k], #name);                                   \
    check(what, s, read_floats(c[k].name, count), name, t_##name, count)
        CHECK(y1, na);
        CHECK(y2, na);
        CHECK(dw2, nw);
        CHECK(db2, nb);
        snprintf(what, sizeof what, "%s dy1", path[k]);
        check(what, s, read_floats(c[k].dy1, na), dy1, e_dy1, na);
        CHECK(du, na);
        CHECK(dw1, nw);
        CHECK(db1, nb);
#undef CHECK
    }
    tmm_toeplitz_fft_destroy(plan);
    pool_free();
}

H_TEST(toeplitz_fft, expanded) { sweep(run_expanded, 5, 1, 1, 800, "expanded"); }
H_TEST(toeplitz_fft, expanded_heads) { sweep(run_expanded, 8, 4, 1, 900, "expanded"); }

/* ---- flags, multi-pass, errors ------------------------------------------- */

H_TEST(toeplitz_fft, skip_flags)
{
    shape s = { 2, 100, 8, 2, 2 };
    run_case(s, TMM_TOEPLITZ_SKIP_DU, 500);
    run_case(s, TMM_TOEPLITZ_SKIP_PARAMS, 501);
}

/* N = 6000: a length VkFFT does in several passes on lavapipe (its C2R then
 * overwrites the spectrum, which the plan treats as scratch). */
H_TEST(toeplitz_fft, multi_pass_length)
{
    shape s = { 1, 3000, 4, 2, 2 };
    run_case(s, 0, 700);
}

/* dw and dbeta sums in several passes (B*dg = 2*4 terms, 3 per pass). */
H_TEST(toeplitz_fft, multi_pass)
{
    h_dev->tuning.loop_budget = 3;
    shape s = { 2, 100, 8, 2, 2 };
    run_case(s, 0, 600);
    shape flat = { 2, 7, 5, 1, 1 };
    run_case(flat, 0, 601);
    h_dev->tuning.loop_budget = 0;
}

/* Memory is at most linear in n: a plan holds 8 * M * (4hr + cr + 3GK)
 * bytes with M = N/2 + 1 and N the 7-smooth length >= 2n - 1 (M/n in
 * [1, 1.091 + 1/n]); cr = B*d channel rows per chunk (h = 0) until a
 * chunk's spectra would pass the device's binding range, fewer beyond, so
 * the bytes per position never exceed those of the unchunked layout,
 * 8 * (5Bd + 3GK) * M/n. The bench mixer shape (d 256, H 4, B 1) up to
 * n = 65536; and a plan allocates what it plans. */
H_TEST(toeplitz_fft, memory_grows_at_most_linearly_in_n)
{
    tmm_toeplitz_desc desc = { 1, 0, 256, 4, 1, TMM_TOEPLITZ_FFT };
    const double per_m = 8.0 * (5 * 256 + 3 * 4);
    static const uint32_t ns[] = { 1, 2, 7, 100, 1000, 1024, 3000, 4096, 8192, 10000, 16384, 32768, 50000, 65536 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const uint32_t n = ns[i];
        desc.n = n;
        const uint64_t bytes = tmm_toeplitz_fft_planned_bytes(h_dev, &desc);
        const double m_per_n = (double)bytes / per_m / n;
        cr_assert(bytes > 0, "n = %u: refused", n);
        cr_assert(m_per_n <= 1.091 + 1.0 / n, "n = %u: %.4f", n, m_per_n);
        cr_assert(n > 4096 || m_per_n >= 1, "n = %u: %.4f", n, m_per_n);
        if (n >= 1024 && !(n & (n - 1)))
            printf("  toeplitz_fft plan at n = %u, d 256: %.1f MiB\n", n, (double)bytes / (1 << 20));
    }
    tmm_toeplitz_desc small = { 2, 1000, 8, 2, 2, TMM_TOEPLITZ_FFT };
    tmm_memory_stats before, after;
    tmm_device_memory_stats(h_dev, &before);
    tmm_toeplitz_fft *plan = NULL;
    H_OK(tmm_toeplitz_fft_create(h_dev, &small, &plan));
    tmm_device_memory_stats(h_dev, &after);
    const uint64_t planned = tmm_toeplitz_fft_planned_bytes(h_dev, &small), used = after.used_bytes - before.used_bytes;
    cr_assert(used >= planned && used <= planned + 4 * 256, "used %llu bytes, planned %llu",
              (unsigned long long)used, (unsigned long long)planned);
    tmm_toeplitz_fft_destroy(plan);
    desc.n = 8;
    desc.d = 6; /* 4 groups do not divide 6 */
    cr_assert_eq(tmm_toeplitz_fft_planned_bytes(h_dev, &desc), 0);
}

/* Channel rows in chunks of 3 (with halos for K > 1), all variants and
 * flags. */
H_TEST(toeplitz_fft, chunks)
{
    h_dev->tuning.max_chunk_rows = 3;
    static const shape shapes[] = { { 2, 100, 5, 1, 1 }, { 2, 64, 12, 4, 1 }, { 2, 100, 6, 1, 3 },
                                    { 3, 64, 8, 4, 3 } };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        run_case(shapes[i], 0, 1000 + i);
    run_case(shapes[3], TMM_TOEPLITZ_SKIP_DU, 1010);
    run_case(shapes[3], TMM_TOEPLITZ_SKIP_PARAMS, 1011);
    run_expanded((shape){ 2, 100, 8, 4, 1 }, 1020);
    h_dev->tuning.loop_budget = 2; /* several passes per chunk */
    run_case(shapes[3], 0, 1030);
    h_dev->tuning.loop_budget = 0;
    h_dev->tuning.max_chunk_rows = 0;
    printf("toeplitz_fft chunks: worst deviation %.3g of the tolerance\n", worst_ratio);
}

/* A device with small bindings: chunks sized to them, and the activations
 * bound per chunk (5 sequences of 37 x 12 floats, 1776 bytes each; 6000-byte
 * bindings hold 3 rows of spectra per chunk and 3 sequences). */
H_TEST(toeplitz_fft, small_bindings)
{
    const uint64_t saved = h_dev->info.max_storage_buffer_range;
    h_dev->info.max_storage_buffer_range = 6000;
    shape s = { 5, 37, 12, 4, 2 };
    tmm_toeplitz_desc desc = desc_of(s);
    tmm_toeplitz_fft *plan = NULL;
    H_OK(tmm_toeplitz_fft_create(h_dev, &desc, &plan));
    cr_assert(tmm_toeplitz_fft_chunk_rows(plan) < 12, "%u rows per chunk", tmm_toeplitz_fft_chunk_rows(plan));
    tmm_toeplitz_fft_destroy(plan);
    run_case(s, 0, 1100);
    h_dev->info.max_storage_buffer_range = saved;
}

H_TEST(toeplitz_fft, errors)
{
    tmm_toeplitz_desc bad = { 1, 8, 6, 4, 1, TMM_TOEPLITZ_FFT };
    tmm_toeplitz_fft *plan = (tmm_toeplitz_fft *)1;
    cr_assert_eq(tmm_toeplitz_fft_create(h_dev, &bad, &plan), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_null(plan);
    tmm_toeplitz_desc ok = { 1, 8, 4, 1, 1, TMM_TOEPLITZ_FFT };
    H_OK(tmm_toeplitz_fft_create(h_dev, &ok, &plan));
    tmm_buffer *small = h_buffer(NULL, 8), *big = h_buffer(NULL, 64);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_toeplitz_fft_record_forward(r, plan, tmm_whole(small), tmm_whole(small), tmm_whole(small),
                                                 tmm_whole(big)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_toeplitz_fft_record_forward(r, plan, tmm_whole(big), tmm_whole(small), tmm_whole(small),
                                                 tmm_whole(big)),
                 TMM_ERR_INVALID_ARGUMENT); /* y overlaps u */
    h_run(r);
    tmm_buffer_destroy(small);
    tmm_buffer_destroy(big);
    tmm_toeplitz_fft_destroy(plan);
}
