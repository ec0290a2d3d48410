/* tmm index (src/analysis): FFT, the certified winding number, zero counts,
 * finite-section singular values, on known operators and on Kaiming-random
 * vectors against independent double / long double references (dense phase
 * unwrapping, a Schur-Cohn count, a one-sided Jacobi SVD). CPU only. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/index.h"
#include "mixer/toeplitz_mixer.h"
#include "harness.h"

#define PI 3.14159265358979323846

static const tmm_index_options opts = TMM_INDEX_OPTIONS_DEFAULT;

static tmm_symbol_report analyse(const double *w, uint32_t n)
{
    tmm_symbol_report r;
    H_OK(tmm_symbol_analyse(w, n, &opts, &r));
    return r;
}

/* w of length n with the given leading coefficients, zeros after them. */
static double *vec(uint32_t n, uint32_t count, const double *head)
{
    double *w = calloc(n, sizeof *w);
    cr_assert(w);
    memcpy(w, head, count * sizeof *w);
    return w;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Kaiming normal (fan_in n): N(0, 2/n), rounded to float like stored weights. */
static double *kaiming(uint32_t n, uint64_t seed)
{
    double *w = malloc(n * sizeof *w);
    cr_assert(w);
    for (uint32_t k = 0; k < n; k++) {
        const double u1 = ((double)(splitmix(&seed) >> 11) + 1) / 9007199254740993.0;
        const double u2 = (double)(splitmix(&seed) >> 11) / 9007199254740992.0;
        w[k] = (float)(sqrt(-2 * log(u1)) * cos(2 * PI * u2) * sqrt(2.0 / n));
    }
    return w;
}

/* ---- references ---------------------------------------------------------------- */

/* |a(e^{iθ})| summed with a cosine and a sine per term, in long double. */
static long double symbol_abs(const double *w, uint32_t n, long double theta)
{
    long double re = 0, im = 0;
    for (uint32_t k = 0; k < n; k++) {
        re += w[k] * cosl(k * theta);
        im += w[k] * sinl(k * theta);
    }
    return hypotl(re, im);
}

/* Winding number by unwrapping the phase of a on M uniform points, each value
 * summed term by term in long double (no FFT, no Horner, no certification). */
static int dense_winding(const double *w, uint32_t n, uint32_t M, double *min_abs, double *max_abs)
{
    long double total = 0, pr = 0, pi = 0;
    *min_abs = INFINITY;
    *max_abs = 0;
    for (uint32_t j = 0; j <= M; j++) {
        const long double ang = 2 * (long double)PI * (j % M) / M, zr = cosl(ang), zi = sinl(ang);
        long double re = 0, im = 0, pr_k = 1, pi_k = 0; /* Σ w_k z^k with z^k by repeated products */
        for (uint32_t k = 0; k < n; k++) {
            re += w[k] * pr_k;
            im += w[k] * pi_k;
            const long double t = pr_k * zr - pi_k * zi;
            pi_k = pr_k * zi + pi_k * zr;
            pr_k = t;
        }
        *min_abs = fmin(*min_abs, (double)hypotl(re, im));
        *max_abs = fmax(*max_abs, (double)hypotl(re, im));
        if (j > 0)
            total += atan2l(im * pr - re * pi, re * pr + im * pi);
        pr = re;
        pi = im;
    }
    return (int)lroundl(total / (2 * (long double)PI));
}

/* Zeros inside the unit disk by the Schur-Cohn recursion in long double:
 * T p = p(0)·p - a_d·p* (p* the reversed polynomial) has degree d-1 and
 * T p(0) = a_0² - a_d²; with δ_k = T^k p(0) all nonzero, the count is the
 * number of k with δ_1···δ_k < 0. Returns -1 in the singular case. */
static int schur_cohn_inside(const double *w, uint32_t n)
{
    uint32_t d = n - 1;
    while (d > 0 && w[d] == 0)
        d--;
    long double *a = malloc((d + 1) * sizeof *a), *t = malloc((d + 1) * sizeof *t);
    cr_assert(a && t);
    for (uint32_t k = 0; k <= d; k++)
        a[k] = w[k];
    int inside = 0, sign = 1;
    for (; d > 0; d--) {
        const long double delta = a[0] * a[0] - a[d] * a[d];
        if (fabsl(delta) < 1e-30L) {
            inside = -1;
            break;
        }
        sign = delta < 0 ? -sign : sign;
        inside += sign < 0;
        long double big = 0;
        for (uint32_t k = 0; k < d; k++) { /* coefficient k of T p (the z^d term cancels) */
            t[k] = a[0] * a[k] - a[d] * a[d - k];
            big = fmaxl(big, fabsl(t[k]));
        }
        for (uint32_t k = 0; k < d; k++) /* a positive scale keeps every sign */
            a[k] = t[k] / big;
    }
    free(a);
    free(t);
    return inside;
}

/* Singular values of the lower-triangular Toeplitz matrix of w by one-sided
 * Jacobi rotations (column orthogonalisation), descending. */
static void jacobi_singular_values(const double *w, uint32_t n, double *sigma)
{
    double *a = calloc((size_t)n * n, sizeof *a); /* a[col·n + row] */
    cr_assert(a);
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t t = s; t < n; t++)
            a[s * n + t] = w[t - s];
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0;
        for (uint32_t p = 0; p < n; p++)
            for (uint32_t q = p + 1; q < n; q++) {
                double alpha = 0, beta = 0, gamma = 0;
                for (uint32_t i = 0; i < n; i++) {
                    alpha += a[p * n + i] * a[p * n + i];
                    beta += a[q * n + i] * a[q * n + i];
                    gamma += a[p * n + i] * a[q * n + i];
                }
                if (gamma == 0 || fabs(gamma) <= 1e-300)
                    continue;
                off = fmax(off, fabs(gamma) / sqrt(alpha * beta));
                const double zeta = (beta - alpha) / (2 * gamma);
                const double tt = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                const double c = 1 / sqrt(1 + tt * tt), s = c * tt;
                for (uint32_t i = 0; i < n; i++) {
                    const double x = a[p * n + i], y = a[q * n + i];
                    a[p * n + i] = c * x - s * y;
                    a[q * n + i] = s * x + c * y;
                }
            }
        if (off < 1e-15)
            break;
    }
    for (uint32_t p = 0; p < n; p++) {
        double s = 0;
        for (uint32_t i = 0; i < n; i++)
            s += a[p * n + i] * a[p * n + i];
        sigma[p] = sqrt(s);
    }
    for (uint32_t i = 1; i < n; i++) /* insertion sort, descending */
        for (uint32_t j = i; j > 0 && sigma[j] > sigma[j - 1]; j--) {
            const double x = sigma[j];
            sigma[j] = sigma[j - 1];
            sigma[j - 1] = x;
        }
    free(a);
}

/* ---- building blocks ----------------------------------------------------------- */

Test(index, fft_matches_naive_dft)
{
    for (uint32_t N = 1; N <= 256; N *= 4) {
        double re[256], im[256], x[256], y[256];
        uint64_t seed = N;
        for (uint32_t j = 0; j < N; j++) {
            x[j] = re[j] = (double)(splitmix(&seed) >> 11) / 9007199254740992.0 - 0.5;
            y[j] = im[j] = (double)(splitmix(&seed) >> 11) / 9007199254740992.0 - 0.5;
        }
        for (int sign = -1; sign <= 1; sign += 2) {
            memcpy(re, x, N * sizeof *re);
            memcpy(im, y, N * sizeof *im);
            H_OK(tmm_cfft(re, im, N, sign));
            double err = 0;
            for (uint32_t j = 0; j < N; j++) {
                double sr = 0, si = 0;
                for (uint32_t k = 0; k < N; k++) {
                    const double ang = sign * 2 * PI * (double)((j * k) % N) / N;
                    sr += x[k] * cos(ang) - y[k] * sin(ang);
                    si += x[k] * sin(ang) + y[k] * cos(ang);
                }
                err = fmax(err, hypot(re[j] - sr, im[j] - si));
            }
            cr_assert_lt(err, 1e-13, "N %u sign %d: max error %g", N, sign, err);
        }
    }
    double re[3] = { 0 }, im[3] = { 0 };
    cr_assert_eq(tmm_cfft(re, im, 3, 1), TMM_ERR_INVALID_ARGUMENT);
}

Test(index, samples_match_horner)
{
    double *w = kaiming(37, 5), re[128], im[128];
    H_OK(tmm_symbol_samples(w, 37, 128, re, im));
    for (uint32_t j = 0; j < 128; j++) {
        double hr, hi;
        tmm_symbol_eval(w, 36, 2 * PI * j / 128, &hr, &hi);
        cr_assert_lt(hypot(hr - re[j], hi - im[j]), 1e-13);
    }
    cr_assert_eq(tmm_symbol_samples(w, 37, 32, re, im), TMM_ERR_INVALID_ARGUMENT);
    free(w);
}

Test(index, roots_of_known_polynomials)
{
    const double c[] = { 2, -3, 1 }; /* (z - 1)(z - 2) */
    double re[2], im[2];
    H_OK(tmm_poly_roots(c, 2, re, im));
    const double lo = fmin(re[0], re[1]), hi = fmax(re[0], re[1]);
    cr_assert(fabs(lo - 1) < 1e-12 && fabs(hi - 2) < 1e-12 && fabs(im[0]) + fabs(im[1]) < 1e-12);
    const double d[] = { 1, 0, 1 }; /* z = ±i */
    H_OK(tmm_poly_roots(d, 2, re, im));
    cr_assert(fabs(re[0]) < 1e-12 && fabs(fabs(im[0]) - 1) < 1e-12 && fabs(im[0] + im[1]) < 1e-12);
    cr_assert_eq(tmm_poly_roots(d, 0, re, im), TMM_ERR_INVALID_ARGUMENT);
}

/* ---- known operators ---------------------------------------------------------------- */

Test(index, identity)
{
    double *w = vec(16, 1, (double[]){ 1 });
    tmm_symbol_report r = analyse(w, 16);
    cr_assert(r.wind.defined && r.wind.winding == 0, "winding %d", r.wind.winding);
    cr_assert_float_eq(r.wind.min_abs, 1, 1e-14);
    cr_assert_eq(r.degree, 0);
    cr_assert_eq(r.zeros_method, TMM_ZEROS_EIGENVALUES);
    cr_assert(r.zeros_inside == 0 && r.zeros_on == 0 && r.zeros_outside == 0);
    cr_assert(r.svd && r.sigma_min_resolved);
    cr_assert_float_eq(r.sigma_min, 1, 1e-14);
    cr_assert_float_eq(r.sigma_max, 1, 1e-14);
    cr_assert_eq(r.w0_abs, 1);
    free(w);
}

Test(index, shifts)
{
    for (uint32_t s = 1; s <= 2; s++) {
        double *w = calloc(16, sizeof *w);
        w[s] = 1;
        tmm_symbol_report r = analyse(w, 16);
        cr_assert(r.wind.defined && r.wind.winding == (int)s, "e_%u: winding %d", s, r.wind.winding);
        cr_assert_float_eq(r.wind.min_abs, 1, 1e-14);
        cr_assert(r.zeros_inside == s && r.zeros_on == 0 && r.zeros_outside == 0);
        /* the finite section of a shift is nilpotent: exactly singular, w_0 = 0 */
        cr_assert(r.svd && r.sigma_min == 0 && r.sigma_min_resolved);
        cr_assert_float_eq(r.sigma_max, 1, 1e-14);
        cr_assert_eq(r.w0_abs, 0);
        free(w);
    }
}

Test(index, zero_inside_at_one_half)
{
    /* a = 1 - 2z: zero at 1/2, index -1; |a| is smallest (1) at z = 1 */
    double *w = vec(16, 2, (double[]){ 1, -2 });
    tmm_symbol_report r = analyse(w, 16);
    cr_assert(r.wind.defined && r.wind.winding == 1);
    cr_assert_float_eq(r.wind.min_abs, 1, 1e-12);
    cr_assert(fmin(r.wind.min_theta, 2 * PI - r.wind.min_theta) < 1e-6, "at %g", r.wind.min_theta);
    cr_assert(r.zeros_inside == 1 && r.zeros_on == 0 && r.zeros_outside == 0);
    /* T^-1 has entries 2^(t-s): 1/‖T^-1‖_F <= σ_min <= 1/(norm of its first column) */
    double col = 0, fro = 0;
    for (int k = 0; k < 16; k++) {
        col += pow(4, k);
        fro += (16 - k) * pow(4, k);
    }
    cr_assert(r.svd && r.sigma_min_resolved);
    cr_assert(r.sigma_min >= 1 / sqrt(fro) * (1 - 1e-9) && r.sigma_min <= 1 / sqrt(col) * (1 + 1e-9), "σ_min %g",
              r.sigma_min);
    cr_assert(r.sigma_max <= 3 && r.sigma_max > 2.9, "σ_max %g", r.sigma_max); /* ‖T_n‖ <= max|a| = 3 */
    free(w);

    /* at n = 64 the section's σ_min (about 2^-63) is below what double precision resolves */
    w = vec(64, 2, (double[]){ 1, -2 });
    r = analyse(w, 64);
    cr_assert(r.wind.defined && r.wind.winding == 1 && !r.sigma_min_resolved);
    cr_assert_float_eq(r.sigma_floor, 64 * DBL_EPSILON * r.sigma_max, 1e-20);
    free(w);
}

Test(index, zero_outside)
{
    /* a = 1 - z/2: zero at 2, index 0; T^-1 = T(1/a) has norm <= 2, so σ_min >= 1/2 */
    double *w = vec(32, 2, (double[]){ 1, -0.5 });
    tmm_symbol_report r = analyse(w, 32);
    cr_assert(r.wind.defined && r.wind.winding == 0);
    cr_assert_float_eq(r.wind.min_abs, 0.5, 1e-12);
    cr_assert(r.zeros_inside == 0 && r.zeros_on == 0 && r.zeros_outside == 1);
    cr_assert(r.svd && r.sigma_min_resolved && r.sigma_min >= 0.5 && r.sigma_min < 0.6, "σ_min %g", r.sigma_min);
    cr_assert(r.sigma_max <= 1.5, "σ_max %g", r.sigma_max);
    free(w);
}

Test(index, leading_and_trailing_zeros)
{
    /* a = z²(1 - 2z): two zeros at 0 and one at 1/2; trailing zeros lower the degree */
    double *w = vec(40, 4, (double[]){ 0, 0, 1, -2 });
    tmm_symbol_report r = analyse(w, 40);
    cr_assert(r.wind.defined && r.wind.winding == 3);
    cr_assert_eq(r.degree, 3);
    cr_assert(r.zeros_inside == 3 && r.zeros_on == 0 && r.zeros_outside == 0);
    cr_assert(r.sigma_min == 0 && r.sigma_min_resolved);
    free(w);
}

Test(index, zero_on_the_circle_is_undefined)
{
    /* zeros exactly on the circle: at z = -1, at z = 1 (a sample point), and a
     * conjugate pair at e^{±i} (between samples) times a random factor */
    double *w = vec(16, 2, (double[]){ 1, 1 });
    tmm_symbol_report r = analyse(w, 16);
    cr_assert(!r.wind.defined);
    cr_assert_lt(r.wind.min_abs, 1e-12);
    cr_assert(fabs(r.wind.min_theta - PI) < 1e-6, "at %g", r.wind.min_theta);
    cr_assert(r.zeros_inside == 0 && r.zeros_on == 1 && r.zeros_outside == 0);
    free(w);

    w = vec(16, 2, (double[]){ 1, -1 });
    r = analyse(w, 16);
    cr_assert(!r.wind.defined && r.wind.min_abs == 0 && r.zeros_on == 1);
    free(w);

    const uint32_t n = 48;
    double *q = kaiming(n - 2, 7);
    w = calloc(n, sizeof *w);
    for (uint32_t k = 0; k < n - 2; k++) { /* (1 - 2cos(1)·z + z²)·q(z) */
        w[k] += q[k];
        w[k + 1] -= 2 * cos(1.0) * q[k];
        w[k + 2] += q[k];
    }
    r = analyse(w, n);
    cr_assert(!r.wind.defined);
    cr_assert_lt(r.wind.min_abs, r.tol_abs);
    cr_assert(fabs(r.wind.min_theta - 1) < 1e-6 || fabs(r.wind.min_theta - (2 * PI - 1)) < 1e-6);
    cr_assert_geq(r.zeros_on, 2);
    cr_assert_eq(r.zeros_inside + r.zeros_on + r.zeros_outside, (uint32_t)r.degree);
    free(q);
    free(w);
}

Test(index, zero_vector)
{
    double w[8] = { 0 };
    tmm_symbol_report r = analyse(w, 8);
    cr_assert(!r.wind.defined && r.degree == -1 && r.zeros_method == TMM_ZEROS_UNDEFINED);
    cr_assert(r.svd && r.sigma_max == 0 && r.sigma_min == 0);
}

Test(index, near_the_circle_but_certified)
{
    /* a = 1 - c·z^199: 199 zeros at radius c^(-1/199), 5e-7 from the circle; the
     * curve passes 1e-4 from the origin 199 times, 50 times tol·‖w‖₁ */
    const uint32_t n = 200;
    for (int inside = 0; inside <= 1; inside++) {
        double *w = calloc(n, sizeof *w);
        w[0] = 1;
        w[n - 1] = inside ? -1.0001 : -0.9999;
        tmm_symbol_report r = analyse(w, n);
        cr_assert(r.wind.defined && r.wind.winding == (inside ? 199 : 0), "winding %d", r.wind.winding);
        cr_assert_float_eq(r.wind.min_abs, 1e-4, 1e-12);
        cr_assert(r.zeros_inside == (inside ? 199u : 0u) && r.zeros_on == 0, "inside %u on %u", r.zeros_inside,
                  r.zeros_on);
        cr_assert_gt(r.wind.direct_evals, 0); /* the FFT samples alone were not enough */
        free(w);
    }
}

Test(index, argument_principle_above_the_exact_limit)
{
    tmm_index_options o = TMM_INDEX_OPTIONS_DEFAULT;
    o.exact_max_n = 8;
    double *w = vec(16, 2, (double[]){ 1, -2 });
    tmm_symbol_report r;
    H_OK(tmm_symbol_analyse(w, 16, &o, &r));
    cr_assert_eq(r.zeros_method, TMM_ZEROS_EIGENVALUES); /* degree 1 < 8 */
    cr_assert(!r.svd);                                  /* n = 16 > 8 */
    free(w);
    w = kaiming(16, 3);
    H_OK(tmm_symbol_analyse(w, 16, &o, &r));
    cr_assert(r.wind.defined && r.zeros_method == TMM_ZEROS_ARGUMENT);
    cr_assert(r.zeros_inside == (uint32_t)r.wind.winding && r.zeros_on == 0 &&
              r.zeros_outside == (uint32_t)(r.degree - r.wind.winding));
    o.tol = 0;
    cr_assert_eq(tmm_symbol_analyse(w, 16, &o, &r), TMM_ERR_INVALID_ARGUMENT);
    free(w);
}

/* ---- random vectors against the references ------------------------------------------ */

Test(index, kaiming_random_against_references)
{
    const uint32_t sizes[] = { 8, 16, 31, 64, 128, 300, 700 }, seeds[] = { 6, 6, 6, 6, 6, 4, 2 };
    int schur_checked = 0;
    for (uint32_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (uint64_t seed = 1; seed <= seeds[si]; seed++) {
            const uint32_t n = sizes[si];
            double *w = kaiming(n, seed * 1000 + n);
            tmm_symbol_report r = analyse(w, n);
            double dense_min, dense_max;
            const uint32_t M = 64 * n;
            const int dense = dense_winding(w, n, M, &dense_min, &dense_max);
            cr_assert(r.wind.defined, "n %u seed %llu: undefined (min %g)", n, (unsigned long long)seed,
                      r.wind.min_abs);
            cr_assert_eq(r.wind.winding, dense, "n %u: winding %d, dense reference %d", n, r.wind.winding, dense);
            /* the minimum is attained at min_theta, no larger than the dense grid's, and
             * no smaller than Bernstein's inequality allows between grid points */
            const double at = (double)symbol_abs(w, n, r.wind.min_theta);
            const double slack = (n - 1) * dense_max * 1.1 * PI / M;
            cr_assert(fabs(at - r.wind.min_abs) < 1e-12, "n %u: |a(θ)| %g, min %g", n, at, r.wind.min_abs);
            cr_assert(r.wind.min_abs <= dense_min * (1 + 1e-9) && r.wind.min_abs >= dense_min - slack,
                      "n %u: min %g, dense %g", n, r.wind.min_abs, dense_min);
            cr_assert_eq(r.zeros_on, 0);
            cr_assert_eq((int)r.zeros_inside, r.wind.winding, "n %u: %u zeros inside, winding %d", n,
                         r.zeros_inside, r.wind.winding);
            cr_assert_eq(r.zeros_inside + r.zeros_outside, (uint32_t)r.degree);
            if (n <= 31) {
                const int sc = schur_cohn_inside(w, n);
                if (sc >= 0) {
                    cr_assert_eq(sc, r.wind.winding, "n %u: Schur-Cohn %d, winding %d", n, sc, r.wind.winding);
                    schur_checked++;
                }
            }
            free(w);
        }
    cr_assert_gt(schur_checked, 10);
}

Test(index, singular_values_against_jacobi)
{
    const uint32_t n = 24;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        double *w = kaiming(n, seed);
        w[0] = 1.5; /* a well-conditioned section: σ_min resolved */
        double got[24], ref[24];
        H_OK(tmm_toeplitz_singular_values(w, n, got));
        jacobi_singular_values(w, n, ref);
        double fro = 0, sum_sq = 0, log_det = 0;
        for (uint32_t i = 0; i < n; i++) {
            cr_assert(fabs(got[i] - ref[i]) <= 1e-12 * ref[0], "σ_%u: %g vs %g", i, got[i], ref[i]);
            fro += (n - i) * w[i] * w[i];
            sum_sq += got[i] * got[i];
            log_det += log(got[i]);
        }
        cr_assert(fabs(sum_sq - fro) < 1e-12 * fro);                /* Σσ² = ‖T‖_F² */
        cr_assert(fabs(log_det - n * log(fabs(w[0]))) < 1e-9 * n); /* Πσ = |det T| = |w_0|^n */
        tmm_symbol_report r = analyse(w, n);
        cr_assert(r.svd && r.sigma_min_resolved && r.sigma_min == got[n - 1] && r.sigma_max == got[0]);
        free(w);
    }
}

/* ---- a model -------------------------------------------------------------------------- */

Test(index, model_entries_and_histogram)
{
    tmm_model_config c = tmm_model_config_default();
    c.vocab = 8;
    c.d_model = 8;
    c.n_ctx = 12;
    c.n_layers = 2;
    c.heads = 2;
    c.kernel = 2;
    c.expanded = true;
    tmm_checkpoint ck = { 0 };
    H_OK(tmm_param_table_build(&c, &ck.table));
    ck.params = calloc(ck.table.arena_floats, sizeof *ck.params);
    cr_assert(ck.params);
    /* vector (layer l, w or w2 v, head g, tap a) = e_s, s = l + v + g + a: winding s */
    for (uint32_t l = 0; l < 2; l++)
        for (uint32_t v = 0; v < 2; v++) {
            const tmm_param *p = &ck.table.params[ck.table.blocks[l].mix[v ? TMM_TZ_W2 : TMM_TZ_W]];
            cr_assert(p->shape[0] == 2 && p->shape[1] == 2 && p->shape[2] == 12);
            for (uint32_t g = 0; g < 2; g++)
                for (uint32_t a = 0; a < 2; a++)
                    ck.params[p->offset + (g * 2 + a) * 12 + l + v + g + a] = 1;
        }
    tmm_index_result r, serial;
    tmm_index_options one = opts;
    one.jobs = 1;
    H_OK(tmm_index_model(&ck, &opts, &r));
    H_OK(tmm_index_model(&ck, &one, &serial));
    cr_assert(r.count == 16 && r.heads == 2 && r.taps == 2);
    for (uint32_t i = 0; i < r.count; i++) /* reports are zeroed, then filled: padding compares equal */
        cr_assert(memcmp(&r.entries[i].report, &serial.entries[i].report, sizeof r.entries[i].report) == 0,
                  "entry %u differs between 1 and several threads", i);
    tmm_index_result_free(&serial);
    for (uint32_t i = 0; i < r.count; i++) {
        const tmm_index_entry *e = &r.entries[i];
        cr_assert_eq(i, ((e->layer * 2 + e->second) * 2 + e->head) * 2 + e->tap);
        const int s = (int)(e->layer + e->second + e->head + e->tap);
        cr_assert(e->report.wind.defined && e->report.wind.winding == s, "entry %u: winding %d, want %d", i,
                  e->report.wind.winding, s);
        cr_assert_eq(tmm_index_vector(&ck, e)[s], 1.0f);
    }
    tmm_index_bin bins[16];
    uint32_t undefined;
    const uint32_t nb = tmm_index_histogram(&r, bins, &undefined);
    /* s = 0..4 over 16 vectors: 1, 4, 6, 4, 1 */
    cr_assert(nb == 5 && undefined == 0);
    const uint32_t want[5] = { 1, 4, 6, 4, 1 };
    for (uint32_t b = 0; b < 5; b++)
        cr_assert(bins[b].index == -4 + (int)b && bins[b].count == want[4 - b], "bin %u: %d x %u", b, bins[b].index,
                  bins[b].count);
    r.entries[3].report.wind.defined = false;
    tmm_index_histogram(&r, bins, &undefined);
    cr_assert_eq(undefined, 1);

    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tmm-index-%d", (int)getpid());
    H_OK(tmm_index_plot(dir, &ck, &r));
    const char *names[] = { "layer-00.svg", "layer-01.svg", "summary.svg" };
    for (int i = 0; i < 3; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "r");
        cr_assert(f, "%s missing", path);
        char buf[256] = { 0 };
        cr_assert(fread(buf, 1, sizeof buf - 1, f) > 0 && strstr(buf, "<svg"));
        fclose(f);
        remove(path);
    }
    rmdir(dir);
    tmm_index_result_free(&r);
    free(ck.params);
    tmm_param_table_free(&ck.table);
}
