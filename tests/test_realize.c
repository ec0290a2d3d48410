/* State-space realizations of Toeplitz vectors (src/analysis/realize.c):
 * exact recovery of known low-order tails, balanced truncation's bound on
 * random and decaying vectors, the Hankel singular values against a
 * one-sided Jacobi SVD in long double, stability, the tol search, bad input.
 * CPU only. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/realize.h"
#include "harness.h"

#define PI 3.14159265358979323846

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double normal(uint64_t *seed)
{
    const double u1 = ((double)(splitmix(seed) >> 11) + 1) / 9007199254740993.0;
    const double u2 = (double)(splitmix(seed) >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(u1)) * cos(2 * PI * u2);
}

/* N(0, 2/n) (Kaiming), times decay^k, rounded to float. */
static float *random_vector(uint32_t n, double decay, uint64_t seed)
{
    float *w = h_floats(n);
    double g = 1;
    for (uint32_t k = 0; k < n; k++, g *= decay)
        w[k] = (float)(normal(&seed) * sqrt(2.0 / n) * g);
    return w;
}

static double norm2(const float *w, uint32_t n)
{
    double s = 0;
    for (uint32_t k = 0; k < n; k++)
        s += (double)w[k] * w[k];
    return sqrt(s);
}

static tmm_realization realize_order(const float *w, uint32_t n, uint32_t head, uint32_t order)
{
    const tmm_realize_options opt = {.head = head, .order = order};
    tmm_realization re;
    H_OK(tmm_realize(w, n, &opt, &re));
    return re;
}

static tmm_realization realize_tol(const float *w, uint32_t n, uint32_t head, double tol, uint32_t max_order)
{
    const tmm_realize_options opt = {.head = head, .tol = tol, .max_order = max_order};
    tmm_realization re;
    H_OK(tmm_realize(w, n, &opt, &re));
    return re;
}

/* Every pole strictly inside the unit disk, the order the modes' count, and
 * the reported errors those of tmm_realization_response. */
static void check_realization(const tmm_realization *re, const float *w, uint32_t n)
{
    uint32_t order = 0;
    for (uint32_t i = 0; i < re->modes; i++) {
        const double m = hypot(re->pole_re[i], re->pole_im[i]);
        cr_assert(m < 1, "pole %u (%g%+gi) has modulus %.9g", i, re->pole_re[i], re->pole_im[i], m);
        cr_assert(re->pole_im[i] >= 0);
        order += re->pole_im[i] != 0 ? 2 : 1;
    }
    cr_assert_eq(order, re->order);
    double *what = malloc(n * sizeof *what);
    cr_assert(what);
    tmm_realization_response(re, w, n, what);
    double max_abs = 0, err2 = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (k < re->head)
            cr_assert_eq(what[k], (double)w[k], "the head is exact");
        max_abs = fmax(max_abs, fabs(w[k] - what[k]));
        err2 += (w[k] - what[k]) * (w[k] - what[k]);
    }
    free(what);
    const double wn = norm2(w, n);
    cr_assert_eq(re->max_abs, max_abs);
    cr_assert(fabs(re->rel_l2 - (wn > 0 ? sqrt(err2) / wn : 0)) <= 1e-12);
    cr_assert(re->max_abs <= re->rel_l2 * wn * (1 + 1e-12) + 1e-300);
}

/* ---- 1. exactly low-order tails ---------------------------------------------------------- */

typedef struct mode {
    double modulus, angle; /* angle 0 or π: real */
    double res_re, res_im;
} mode;

/* The tail's moduli are kept where |pole|^L is negligible (< 1e-9): the Hankel
 * matrix is that of the finite window, whose rank is r0 only up to the
 * truncated remainder of the modes. */
static const mode modes5[] = {
    {0.7, 0, 1.0, 0}, {0.5, PI, -0.8, 0}, {0.3, 0, 0.6, 0}, {0.65, 1.1, 0.9, -0.4},
};
static const mode modes9[] = {
    {0.93, 0, 0.7, 0},      {0.6, PI, -0.5, 0},     {0.3, 0, 0.4, 0},
    {0.9, 0.4, 0.6, 0.5},   {0.75, 2.0, -0.8, 0.3}, {0.5, 2.8, 0.5, 0.5},
};

static uint32_t modes_order(const mode *m, uint32_t count)
{
    uint32_t r = 0;
    for (uint32_t i = 0; i < count; i++)
        r += sin(m[i].angle) > 1e-9 ? 2 : 1;
    return r;
}

/* h[j] = Σ Re(res_i·λ_i^j) in double. */
static void modes_tail(const mode *m, uint32_t count, uint32_t L, double *h)
{
    for (uint32_t j = 0; j < L; j++) {
        double s = 0;
        for (uint32_t i = 0; i < count; i++) {
            const double a = pow(m[i].modulus, j), th = m[i].angle * j;
            s += a * (m[i].res_re * cos(th) - m[i].res_im * sin(th));
        }
        h[j] = s;
    }
}

static float *modes_vector(const mode *m, uint32_t count, uint32_t n, uint32_t head, uint64_t seed)
{
    float *w = h_floats(n);
    double *h = malloc(n * sizeof *h);
    cr_assert(h);
    modes_tail(m, count, n - head, h);
    for (uint32_t k = 0; k < n; k++)
        w[k] = k < head ? (float)normal(&seed) : (float)h[k - head];
    free(h);
    return w;
}

/* The realization's poles are the known ones, as a set. */
static double pole_distance(const tmm_realization *re, const mode *m, uint32_t count)
{
    cr_assert_eq(re->modes, count);
    double worst = 0;
    for (uint32_t i = 0; i < count; i++) { /* each known pole has a recovered one near it */
        const double kr = m[i].modulus * cos(m[i].angle), ki = fabs(m[i].modulus * sin(m[i].angle));
        double best = INFINITY;
        for (uint32_t j = 0; j < re->modes; j++)
            best = fmin(best, hypot(re->pole_re[j] - kr, re->pole_im[j] - ki));
        worst = fmax(worst, best);
    }
    for (uint32_t j = 0; j < re->modes; j++) { /* and each recovered pole a known one */
        double best = INFINITY;
        for (uint32_t i = 0; i < count; i++)
            best = fmin(best, hypot(re->pole_re[j] - m[i].modulus * cos(m[i].angle),
                                    re->pole_im[j] - fabs(m[i].modulus * sin(m[i].angle))));
        worst = fmax(worst, best);
    }
    return worst;
}

static double max_abs_of(const float *w, uint32_t n)
{
    double m = 0;
    for (uint32_t k = 0; k < n; k++)
        m = fmax(m, fabs(w[k]));
    return m;
}

static void check_low_order(const mode *m, uint32_t count, uint32_t n, uint32_t head)
{
    const uint32_t r0 = modes_order(m, count), L = n - head;
    /* σ beyond r0 vanish (the tail in double: the float vector's rounding is not low rank) */
    double *h = malloc(L * sizeof *h), *sigma = malloc(L * sizeof *sigma);
    cr_assert(h && sigma);
    modes_tail(m, count, L, h);
    H_OK(tmm_hankel_singular_values(h, L, sigma));
    cr_assert(sigma[r0 - 1] > 1e-4 * sigma[0], "σ_%u = %g of σ1 = %g", r0, sigma[r0 - 1], sigma[0]);
    cr_assert(sigma[r0] < 1e-8 * sigma[0], "n %u: σ_%u = %g of σ1 = %g", n, r0 + 1, sigma[r0], sigma[0]);
    free(sigma);
    free(h);

    float *w = modes_vector(m, count, n, head, 7 * n + head);
    const double wmax = max_abs_of(w, n);
    tmm_realization re = realize_order(w, n, head, r0);
    check_realization(&re, w, n);
    cr_assert_eq(re.order, r0);
    cr_assert_eq(re.reflected, 0u);
    const double dist = pole_distance(&re, m, count);
    cr_assert(dist <= 1e-4, "n %u head %u: poles off by %g", n, head, dist);
    cr_assert(re.max_abs <= 1e-5 * wmax, "n %u head %u: max_abs %g of max|w| %g", n, head, re.max_abs, wmax);
    cr_log_info("order %u, n %u, head %u: poles within %.2e, max_abs %.2e (max|w| %.2f), σ_r0+1/σ1 < 1e-8", r0, n,
                head, dist, re.max_abs, wmax);
    tmm_realization_free(&re);

    re = realize_tol(w, n, head, 1e-5, 0);
    check_realization(&re, w, n);
    cr_assert_eq(re.order, r0, "tol 1e-5 chose order %u, not %u", re.order, r0);
    cr_assert(re.rel_l2 <= 1e-5);
    tmm_realization_free(&re);
    free(w);
}

Test(realize, low_order_tails_recovered)
{
    check_low_order(modes5, 4, 64, 1);
    check_low_order(modes5, 4, 64, 4);
    check_low_order(modes5, 4, 300, 1);
    check_low_order(modes9, 6, 300, 1);
    check_low_order(modes9, 6, 300, 4);
}

/* ---- 2. balanced truncation's bound ------------------------------------------------------ */

static const uint32_t orders[] = {1, 2, 3, 5, 8, 16};

static void check_bound(uint32_t n, double decay, uint64_t seed, uint32_t head, double *worst_margin)
{
    float *w = random_vector(n, decay, seed);
    const double wn = norm2(w, n);
    double prev = INFINITY;
    for (size_t t = 0; t < sizeof orders / sizeof *orders; t++) {
        tmm_realization re = realize_order(w, n, head, orders[t]);
        check_realization(&re, w, n);
        const uint32_t asked = orders[t] < n - head ? orders[t] : n - head;
        /* the order asked, or below it where that fit missed its bound (near r = L only) */
        cr_assert(re.order == asked || (re.order < asked && 2 * asked > n - head), "asked %u, got %u", asked,
                  re.order);
        cr_assert(re.bound_met && re.l2 <= re.bound + 1e-5 * wn, "n %u r %u: |w-w^| %g > bound %g", n, re.order,
                  re.l2, re.bound);
        const double err = re.rel_l2 * wn;
        if (re.reflected == 0 && 2 * re.order <= n - head) /* far from r = L (realize.h) */
            cr_assert(err <= re.bound + 1e-6 * wn, "n %u decay %g r %u: error %g > bound %g", n, decay,
                      re.order, err, re.bound);
        if (2 * re.order <= n - head)
            *worst_margin = fmax(*worst_margin, err / (re.bound + 1e-6 * wn));
        /* errors fall as the order grows (balanced truncation is not monotone: a few % slack) */
        if (decay < 1 && 2 * re.order <= n - head)
            cr_assert(re.rel_l2 <= prev * 1.05 + 1e-6, "n %u r %u: rel_l2 %g after %g", n, re.order, re.rel_l2,
                      prev);
        prev = re.rel_l2;
        tmm_realization_free(&re);
    }
    free(w);
}

Test(realize, bound_holds)
{
    const uint32_t sizes[] = {17, 100, 257};
    double worst = 0;
    for (size_t s = 0; s < 3; s++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            check_bound(sizes[s], 1.0, seed, 1, &worst);
            check_bound(sizes[s], 0.9, seed + 10, 1, &worst);
            check_bound(sizes[s], 0.97, seed + 20, 3, &worst);
        }
    cr_log_info("bound: largest error / (bound + 1e-6·||w||) %.3f", worst);
}

/* ---- 3. Hankel singular values --------------------------------------------------------- */

/* Singular values of a (n x n, row-major) by one-sided Jacobi in long double, descending. */
static void jacobi_sv(long double *a, uint32_t n, long double *sv)
{
    for (int sweep = 0; sweep < 60; sweep++) {
        long double off = 0;
        for (uint32_t p = 0; p < n; p++)
            for (uint32_t q = p + 1; q < n; q++) {
                long double al = 0, be = 0, ga = 0;
                for (uint32_t i = 0; i < n; i++) {
                    al += a[i * n + p] * a[i * n + p];
                    be += a[i * n + q] * a[i * n + q];
                    ga += a[i * n + p] * a[i * n + q];
                }
                if (ga == 0)
                    continue;
                off = fmaxl(off, fabsl(ga) / sqrtl(al * be));
                const long double zeta = (be - al) / (2 * ga);
                const long double t = (zeta >= 0 ? 1 : -1) / (fabsl(zeta) + sqrtl(1 + zeta * zeta));
                const long double c = 1 / sqrtl(1 + t * t), s = c * t;
                for (uint32_t i = 0; i < n; i++) {
                    const long double x = a[i * n + p], y = a[i * n + q];
                    a[i * n + p] = c * x - s * y;
                    a[i * n + q] = s * x + c * y;
                }
            }
        if (off < 1e-30L)
            break;
    }
    for (uint32_t j = 0; j < n; j++) {
        long double s = 0;
        for (uint32_t i = 0; i < n; i++)
            s += a[i * n + j] * a[i * n + j];
        sv[j] = sqrtl(s);
    }
    for (uint32_t i = 0; i < n; i++) /* insertion sort, descending */
        for (uint32_t j = i; j > 0 && sv[j] > sv[j - 1]; j--) {
            const long double t = sv[j];
            sv[j] = sv[j - 1];
            sv[j - 1] = t;
        }
}

Test(realize, hankel_singular_values_match_jacobi)
{
    enum { L = 20 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        uint64_t s = seed;
        double h[L], sigma[L];
        long double a[L * L], ref[L];
        for (uint32_t j = 0; j < L; j++)
            h[j] = normal(&s) * pow(0.8, seed == 3 ? j : 0);
        for (uint32_t i = 0; i < L; i++)
            for (uint32_t k = 0; k < L; k++)
                a[i * L + k] = i + k < L ? h[i + k] : 0;
        H_OK(tmm_hankel_singular_values(h, L, sigma));
        jacobi_sv(a, L, ref);
        double worst = 0;
        for (uint32_t i = 0; i < L; i++)
            worst = fmax(worst, fabs(sigma[i] - (double)ref[i]));
        cr_assert(worst <= 1e-12 * sigma[0], "seed %u: |σ - σ_jacobi| %g of σ1 %g", (unsigned)seed, worst, sigma[0]);
        for (uint32_t i = 1; i < L; i++)
            cr_assert(sigma[i] <= sigma[i - 1]);
    }
    H_OK(tmm_hankel_singular_values(NULL, 0, NULL));
}

/* ---- 4. stability -------------------------------------------------------------------- */

/* A pure delay (Hankel eigenvalues ±1, equal magnitudes split by the
 * truncation) and a constant (poles near 1): every pole stays inside. */
Test(realize, poles_inside_the_disk)
{
    uint32_t reflected = 0, checked = 0;
    for (uint32_t delay = 1; delay < 12; delay += 2) {
        const uint32_t n = 24;
        float *w = h_floats(n);
        memset(w, 0, n * sizeof *w);
        w[0] = 1;
        w[1 + delay] = 1;
        for (uint32_t r = 1; r <= delay + 2; r++) {
            tmm_realization re = realize_order(w, n, 1, r);
            check_realization(&re, w, n);
            reflected += re.reflected;
            checked++;
            tmm_realization_free(&re);
        }
        free(w);
    }
    for (uint32_t n = 10; n <= 200; n *= 2) {
        float *w = h_floats(n);
        for (uint32_t k = 0; k < n; k++)
            w[k] = 1;
        for (uint32_t r = 1; r <= 12; r++) {
            tmm_realization re = realize_order(w, n, 1, r);
            check_realization(&re, w, n);
            if (re.reflected == 0 && 2 * r <= n - 1) /* far from r = L (realize.h) */
                cr_assert(re.rel_l2 * norm2(w, n) <= re.bound + 1e-6 * norm2(w, n), "constant n %u r %u", n, r);
            reflected += re.reflected;
            checked++;
            tmm_realization_free(&re);
        }
        free(w);
    }
    cr_log_info("stability: %u realizations of delays and constants, %u poles reflected", checked, reflected);
}

/* ---- 5. the tol search ------------------------------------------------------------------- */

Test(realize, tol_picks_the_smallest_order)
{
    const double tols[] = {0.3, 0.1, 3e-2, 1e-2, 1e-3};
    for (uint64_t seed = 1; seed <= 2; seed++) {
        const uint32_t n = 100;
        float *w = random_vector(n, seed == 1 ? 0.93 : 1.0, seed);
        for (size_t t = 0; t < sizeof tols / sizeof *tols; t++) {
            tmm_realization re = realize_tol(w, n, 2, tols[t], 0);
            check_realization(&re, w, n);
            cr_assert(re.rel_l2 <= tols[t], "tol %g: order %u reaches only %g", tols[t], re.order, re.rel_l2);
            if (re.order > 0) {
                tmm_realization below = realize_order(w, n, 2, re.order - 1);
                cr_assert(below.rel_l2 > tols[t], "tol %g: order %u already reaches it", tols[t], below.order);
                tmm_realization_free(&below);
            }
            cr_log_info("tol %g (decay %s): order %u, rel_l2 %.3g, bound/||w|| %.3g", tols[t],
                        seed == 1 ? "0.93" : "none", re.order, re.rel_l2, re.bound / norm2(w, n));
            tmm_realization_free(&re);
        }
        /* a cap the tolerance needs more than: an error naming the closest fit, never a fit short of tol */
        const tmm_realize_options capped = {.head = 2, .tol = 1e-6, .max_order = 3};
        tmm_realization re;
        cr_assert_eq(tmm_realize(w, n, &capped, &re), TMM_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(tmm_last_error(), "no order up to 3 reaches"), "%s", tmm_last_error());
        cr_assert_null(re.pole_re);
        free(w);
    }
}

/* Near the full order (r -> L) the modal fit is ill-conditioned and once
 * reported a bound of 0 beside a relative error of 0.72: now every result
 * meets the bound it reports (falling back to a lower order where the fit at
 * r misses it), and a tolerance no fit reaches is an error. */
Test(realize, near_full_order_meets_its_bound)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        const uint32_t n = 32;
        float *w = random_vector(n, 1.0, seed);
        const double wn = norm2(w, n);
        const uint32_t asked[] = {25, 28, 29, 30, 31, 1000};
        for (size_t i = 0; i < sizeof asked / sizeof *asked; i++) {
            tmm_realization re = realize_order(w, n, 1, asked[i]);
            check_realization(&re, w, n);
            cr_assert(re.order <= (asked[i] < n - 1 ? asked[i] : n - 1), "order %u for %u", re.order, asked[i]);
            cr_assert(re.bound_met && re.l2 <= re.bound + 1e-5 * wn, "order %u (asked %u): |w-w^| %.3g, bound %.3g",
                      re.order, asked[i], re.l2, re.bound);
            cr_assert(fabs(re.l2 - re.rel_l2 * wn) <= 1e-12 * wn);
            cr_log_info("seed %llu, order %u asked: %u, rel L2 %.3g, |w-w^| %.3g <= bound %.3g",
                        (unsigned long long)seed, asked[i], re.order, re.rel_l2, re.l2, re.bound);
            tmm_realization_free(&re);
        }
        const tmm_realize_options tight = {.head = 1, .tol = 1e-9};
        tmm_realization re;
        const tmm_status s = tmm_realize(w, n, &tight, &re);
        if (s == TMM_OK) { /* reached: then honestly */
            cr_assert(re.rel_l2 <= 1e-9 && re.bound_met);
            tmm_realization_free(&re);
        } else {
            cr_assert_eq(s, TMM_ERR_INVALID_ARGUMENT, "%s", tmm_last_error());
            cr_assert(strstr(tmm_last_error(), "reaches the relative L2 error"), "%s", tmm_last_error());
        }
        free(w);
    }
}

Test(realize, trivial_vectors)
{
    float zero[40] = {0};
    tmm_realization re = realize_tol(zero, 40, 1, 1e-3, 0);
    cr_assert_eq(re.order, 0u);
    cr_assert_eq(re.modes, 0u);
    cr_assert_eq(re.sigma1, 0.0);
    cr_assert_eq(re.bound, 0.0);
    cr_assert_eq(re.max_abs, 0.0);
    cr_assert_eq(re.rel_l2, 0.0);
    tmm_realization_free(&re);

    /* a head and a zero tail */
    float headed[40] = {0.5f, -2.0f, 0.25f};
    re = realize_tol(headed, 40, 3, 1e-3, 0);
    cr_assert_eq(re.order, 0u);
    cr_assert_eq(re.max_abs, 0.0);
    tmm_realization_free(&re);

    const float one = 0.75f;
    re = realize_tol(&one, 1, 1, 1e-3, 0);
    cr_assert_eq(re.order, 0u);
    cr_assert_eq(re.rel_l2, 0.0);
    tmm_realization_free(&re);
    re = realize_order(&one, 1, 1, 5);
    cr_assert_eq(re.order, 0u);
    double out;
    tmm_realization_response(&re, &one, 1, &out);
    cr_assert_eq(out, 0.75);
    tmm_realization_free(&re);

    float *w = random_vector(10, 1.0, 5);
    re = realize_order(w, 10, 12, 4); /* head >= n: all of w is the head */
    check_realization(&re, w, 10);
    cr_assert_eq(re.head, 10u); /* clamped to n */
    cr_assert_eq(re.order, 0u);
    cr_assert_eq(re.max_abs, 0.0);
    tmm_realization_free(&re);
    free(w);
}

/* The response of a hand-made realization: the head copied, then
 * Σ Re(res·pole^j) against |pole|^j·(cos, sin)(j·arg pole). */
Test(realize, response_formula)
{
    float block[8] = {-0.5f, 0.6f, 0.0f, 0.3f, 2.0f, 1.0f, 0.0f, -0.5f};
    const tmm_realization re = {.head = 2, .order = 3, .modes = 2, .pole_re = block, .pole_im = block + 2,
                                .res_re = block + 4, .res_im = block + 6};
    const float w[12] = {3, -1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    double out[12];
    tmm_realization_response(&re, w, 12, out);
    cr_assert_eq(out[0], 3.0);
    cr_assert_eq(out[1], -1.0);
    const double rho = hypot(0.6f, 0.3f), theta = atan2(0.3f, 0.6f);
    for (uint32_t j = 0; j < 10; j++) {
        const double ref = 2.0 * pow(-0.5, j) + pow(rho, j) * (cos(theta * j) + 0.5 * sin(theta * j));
        cr_assert(fabs(out[2 + j] - ref) <= 1e-14, "j %u: %.17g vs %.17g", j, out[2 + j], ref);
    }
}

/* ---- 6. bad input, and a long vector's time ---------------------------------------------- */

Test(realize, bad_input)
{
    float w[8] = {1, 0.5f, 0.25f, 0.125f, 0, 0, 0, 0};
    const tmm_realize_options ok = {.head = 1, .order = 2};
    tmm_realization re;
    cr_assert_eq(tmm_realize(w, 0, &ok, &re), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(re.pole_re, NULL);
    cr_assert_eq(re.modes, 0u);
    cr_assert_eq(tmm_realize(w, 8, &(tmm_realize_options){.head = 0, .order = 2}, &re), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_realize(w, 8, &(tmm_realize_options){.head = 1}, &re), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_realize(w, 8, &(tmm_realize_options){.head = 1, .tol = -1}, &re), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_realize(w, 8, &(tmm_realize_options){.head = 1, .tol = NAN}, &re), TMM_ERR_INVALID_ARGUMENT);
    w[5] = NAN;
    cr_assert_eq(tmm_realize(w, 8, &ok, &re), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "w[5]"), "%s", tmm_last_error());
    w[5] = INFINITY;
    cr_assert_eq(tmm_realize(w, 8, &ok, &re), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(re.pole_re, NULL);
    tmm_realization zeroed = {0};
    tmm_realization_free(&zeroed);
    tmm_realization_free(NULL);
    cr_assert_eq(zeroed.pole_re, NULL);
}

Test(realize, long_vector)
{
    const uint32_t n = 1024;
    float *w = random_vector(n, 0.995, 11);
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tmm_realization re = realize_order(w, n, 1, 64);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    check_realization(&re, w, n);
    cr_assert(re.reflected > 0 || re.rel_l2 * norm2(w, n) <= re.bound + 1e-6 * norm2(w, n));
    const double order_s = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    const double rel64 = re.rel_l2;
    tmm_realization_free(&re);

    re = realize_tol(w, n, 1, 0.05, 0);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    check_realization(&re, w, n);
    cr_assert(re.rel_l2 <= 0.05);
    const double tol_s = (t2.tv_sec - t1.tv_sec) + 1e-9 * (t2.tv_nsec - t1.tv_nsec);
    cr_log_info("n 1024 (L 1023): order 64 in %.2f s (rel_l2 %.3g); tol 0.05 in %.2f s -> order %u (rel_l2 %.3g)",
                order_s, rel64, tol_s, re.order, re.rel_l2);
    tmm_realization_free(&re);
    free(w);
}
