/* FFT implementation of the causal Toeplitz op (src/ops/toeplitz_fft.h)
 * against the direct op (tmm_op_toeplitz_forward/backward, itself checked
 * against the C reference in test_toeplitz.c): flat, G = 4, K = 3, over
 * n in {1, 2, 7, 64, 100, 512, 1000} and B in {1, 2}; forward and backward
 * (du, dw, dbeta), and the skip flags.
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
 * We allow |fft - direct| <= 4 * 2^-24 * log2(2N) * (S + S_max / 10). A
 * single missing term (about |w||u| ~ 0.25 here) is far above this
 * (S ~ n/3 at n = 1000: tolerance ~ 4e-3). The worst ratio seen is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "ops/toeplitz.h"
#include "ops/toeplitz_fft.h"

typedef struct shape {
    uint32_t B, n, d, G, K;
} shape;

static double worst_ratio;

static double row_norm(const float *x, uint32_t n, uint64_t stride)
{
    double s = 0;
    for (uint32_t t = 0; t < n; t++)
        s += (double)x[t * stride] * x[t * stride];
    return sqrt(s);
}

static void check(const char *what, shape s, const float *got, const float *ref, const double *scale, size_t count,
                  double logn)
{
    double worst = 0, smax = 0;
    size_t at = 0;
    for (size_t i = 0; i < count; i++)
        smax = scale[i] > smax ? scale[i] : smax;
    for (size_t i = 0; i < count; i++) {
        double dev = fabs((double)got[i] - (double)ref[i]);
        if (isnan(got[i]) || isinf(got[i]))
            dev = INFINITY;
        double tol = 4 * 0x1p-24 * logn * (scale[i] + 0.1 * smax) + 1e-30;
        if (dev / tol > worst) {
            worst = dev / tol;
            at = i;
        }
    }
    if (worst > worst_ratio)
        worst_ratio = worst;
    cr_assert(worst <= 1, "%s (B=%u n=%u d=%u G=%u K=%u): element %zu is %.9g, direct %.9g (%.3g x tolerance)", what,
              s.B, s.n, s.d, s.G, s.K, at, (double)got[at], (double)ref[at], worst);
}

static void run_case(shape s, uint32_t flags, uint64_t seed)
{
    tmm_toeplitz_desc desc = { s.B, s.n, s.d, s.G, s.K, TMM_TOEPLITZ_DIRECT };
    const size_t na = (size_t)s.B * s.n * s.d, nw = (size_t)s.G * s.K * s.n, nb = (size_t)s.G * s.n;
    float *u = h_floats(na), *w = h_floats(nw), *beta = h_floats(nb), *gy = h_floats(na);
    h_rand(u, na, seed, -1, 1);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(beta, nb, seed + 2, -1, 1);
    h_rand(gy, na, seed + 3, -1, 1);

    tmm_toeplitz_fft *plan = NULL;
    H_OK(tmm_toeplitz_fft_create(h_dev, &desc, &plan));
    const uint32_t N = tmm_toeplitz_fft_length(plan);
    const double logn = log2(2.0 * N);

    uint64_t ns = tmm_op_toeplitz_backward_scratch(&desc, 0);
    tmm_buffer *bu = h_buffer(u, na), *bw = h_buffer(w, nw), *bb = h_buffer(beta, nb), *bgy = h_buffer(gy, na);
    tmm_buffer *bs = h_buffer(NULL, ns);
    tmm_buffer *out[2][4]; /* [direct, fft][y, du, dw, dbeta] */
    for (int k = 0; k < 2; k++) {
        out[k][0] = h_buffer(NULL, na);
        out[k][1] = h_buffer(NULL, na);
        out[k][2] = h_buffer(NULL, nw);
        out[k][3] = h_buffer(NULL, nb);
    }
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_toeplitz_forward(r, &desc, tmm_whole(bu), tmm_whole(bw), tmm_whole(bb), tmm_whole(out[0][0])));
    H_OK(tmm_op_toeplitz_backward(r, &desc, 0, tmm_whole(bu), tmm_whole(bw), tmm_whole(bgy), tmm_whole(bs),
                                  tmm_whole(out[0][1]), tmm_whole(out[0][2]), tmm_whole(out[0][3])));
    H_OK(tmm_toeplitz_fft_record_forward(r, plan, tmm_whole(bu), tmm_whole(bw), tmm_whole(bb),
                                         tmm_whole(out[1][0])));
    H_OK(tmm_toeplitz_fft_record_backward(r, plan, flags, tmm_whole(bu), tmm_whole(bw), tmm_whole(bgy),
                                          tmm_whole(out[1][1]), tmm_whole(out[1][2]), tmm_whole(out[1][3])));
    h_run(r);
    const size_t sizes[4] = { na, na, nw, nb };
    float *res[2][4];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) {
            res[k][i] = h_floats(sizes[i]);
            h_read(out[k][i], res[k][i], sizes[i]);
        }

    /* scales (see the top) */
    const uint32_t dg = s.d / s.G;
    double *nu = malloc(((size_t)s.B * s.d + 1) * sizeof *nu), *ng = malloc(((size_t)s.B * s.d + 1) * sizeof *ng);
    double *nwn = malloc((nw / (s.n ? s.n : 1) + 1) * sizeof *nwn);
    cr_assert(nu && ng && nwn);
    for (uint32_t b = 0; b < s.B; b++)
        for (uint32_t c = 0; c < s.d; c++) {
            nu[b * s.d + c] = row_norm(u + (size_t)b * s.n * s.d + c, s.n, s.d);
            ng[b * s.d + c] = row_norm(gy + (size_t)b * s.n * s.d + c, s.n, s.d);
        }
    for (uint32_t i = 0; i < s.G * s.K; i++)
        nwn[i] = row_norm(w + (size_t)i * s.n, s.n, 1);
    double *sc[4] = { malloc((na + 1) * 8), malloc((na + 1) * 8), malloc((nw + 1) * 8), malloc((nb + 1) * 8) };
    for (uint32_t b = 0; b < s.B; b++)
        for (uint32_t c = 0; c < s.d; c++) {
            double sy = 0, sdu = 0;
            for (uint32_t a = 0; a < s.K; a++) {
                int ch = (int)c - (int)(s.K - 1) + (int)a;
                if (ch >= 0)
                    sy += nwn[(c / dg) * s.K + a] * nu[b * s.d + (uint32_t)ch];
                uint32_t e = c + (s.K - 1) - a;
                if (e < s.d)
                    sdu += nwn[(e / dg) * s.K + a] * ng[b * s.d + e];
            }
            for (uint32_t t = 0; t < s.n; t++) {
                size_t i = ((size_t)b * s.n + t) * s.d + c;
                sc[0][i] = sy + fabs(beta[(c / dg) * s.n + t]);
                sc[1][i] = sdu;
            }
        }
    for (uint32_t g = 0; g < s.G; g++) {
        for (uint32_t a = 0; a < s.K; a++) {
            double sw = 0;
            for (uint32_t b = 0; b < s.B; b++)
                for (uint32_t c = g * dg; c < (g + 1) * dg; c++) {
                    int ch = (int)c - (int)(s.K - 1) + (int)a;
                    if (ch >= 0)
                        sw += ng[b * s.d + c] * nu[b * s.d + (uint32_t)ch];
                }
            for (uint32_t t = 0; t < s.n; t++)
                sc[2][((size_t)g * s.K + a) * s.n + t] = sw;
        }
        for (uint32_t t = 0; t < s.n; t++) {
            double sb = 0;
            for (uint32_t b = 0; b < s.B; b++)
                for (uint32_t c = g * dg; c < (g + 1) * dg; c++)
                    sb += fabs(gy[((size_t)b * s.n + t) * s.d + c]);
            sc[3][(size_t)g * s.n + t] = sb;
        }
    }
    check("y", s, res[1][0], res[0][0], sc[0], na, logn);
    if (!(flags & TMM_TOEPLITZ_SKIP_DU))
        check("du", s, res[1][1], res[0][1], sc[1], na, logn);
    if (!(flags & TMM_TOEPLITZ_SKIP_PARAMS)) {
        check("dw", s, res[1][2], res[0][2], sc[2], nw, logn);
        check("dbeta", s, res[1][3], res[0][3], sc[3], nb, logn);
    }

    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) {
            free(res[k][i]);
            tmm_buffer_destroy(out[k][i]);
        }
    for (int i = 0; i < 4; i++)
        free(sc[i]);
    free(nu);
    free(ng);
    free(nwn);
    tmm_buffer *all[] = { bu, bw, bb, bgy, bs };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    tmm_toeplitz_fft_destroy(plan);
    free(u);
    free(w);
    free(beta);
    free(gy);
}

static const uint32_t lengths[] = { 1, 2, 7, 64, 100, 512, 1000 };

static void sweep(uint32_t d, uint32_t G, uint32_t K, uint64_t seed)
{
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
        for (uint32_t B = 1; B <= 2; B++) {
            shape s = { B, lengths[i], d, G, K };
            run_case(s, 0, seed + 10 * i + B);
        }
    printf("toeplitz_fft d=%u G=%u K=%u: worst deviation %.3g of the tolerance\n", d, G, K, worst_ratio);
}

H_TEST(toeplitz_fft, flat) { sweep(5, 1, 1, 100); }
H_TEST(toeplitz_fft, heads) { sweep(12, 4, 1, 200); }
H_TEST(toeplitz_fft, taps) { sweep(6, 1, 3, 300); }
H_TEST(toeplitz_fft, heads_taps) { sweep(8, 4, 3, 400); }

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
    tmm_toeplitz_fft_set_loop_budget(3);
    shape s = { 2, 100, 8, 2, 2 };
    run_case(s, 0, 600);
    shape flat = { 2, 7, 5, 1, 1 };
    run_case(flat, 0, 601);
    tmm_toeplitz_fft_set_loop_budget(0);
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
