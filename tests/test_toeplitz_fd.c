/* The backward of the Toeplitz mixing reference (src/ref/ref_toeplitz.c)
 * against central finite differences of its forward, in double, on the
 * scalar loss L = sum(r * y) with a random r (so dL/dy = r): du, dw and dbeta
 * for flat, heads (G = 4), kernel (K = 3) and heads with kernel (G = 2,
 * K = 2, where taps cross group boundaries). L is linear in each of u, w and
 * beta, so a central difference is exact up to rounding (about
 * 1e-16 * |L| / h); the tolerance allows 1e-8 relative. Needs no device. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "ref/ref_toeplitz.h"

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double *rand_doubles(size_t n, uint64_t seed)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0 * (double)(splitmix64(&seed) >> 11) * 0x1.0p-53 - 1.0;
    return x;
}

typedef struct fd_problem {
    tmm_toeplitz_desc desc;
    size_t na, nw, nb;
    double *u, *w, *beta, *r, *y;
} fd_problem;

static double loss(fd_problem *p)
{
    ref_toeplitz_forward_d(&p->desc, p->u, p->w, p->beta, p->y);
    double l = 0;
    for (size_t i = 0; i < p->na; i++)
        l += p->r[i] * p->y[i];
    return l;
}

/* Central difference of L in x[i], against the analytic gradient g[i]. */
static void check_param(fd_problem *p, const char *name, double *x, const double *g, size_t n)
{
    const double h = 1e-3;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = loss(p);
        x[i] = keep - h;
        double lm = loss(p);
        x[i] = keep;
        double fd = (lp - lm) / (2 * h);
        double dev = fabs(fd - g[i]);
        if (dev > worst)
            worst = dev;
        cr_assert(dev <= 1e-8 * (1 + fabs(g[i])), "d%s[%zu] (B=%u n=%u d=%u G=%u K=%u): analytic %.12g, finite "
                  "difference %.12g", name, i, p->desc.batch, p->desc.n, p->desc.d, p->desc.groups, p->desc.taps,
                  g[i], fd);
    }
    cr_log_info("d%s: %zu entries, max |analytic - fd| = %.3g", name, n, worst);
}

static void check_fd(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, uint64_t seed)
{
    fd_problem p = { { B, n, d, G, K, TMM_TOEPLITZ_DIRECT }, (size_t)B * n * d, (size_t)G * K * n, (size_t)G * n,
                     NULL, NULL, NULL, NULL, NULL };
    p.u = rand_doubles(p.na, seed);
    p.w = rand_doubles(p.nw, seed + 1);
    p.beta = rand_doubles(p.nb, seed + 2);
    p.r = rand_doubles(p.na, seed + 3);
    p.y = rand_doubles(p.na, 0);
    double *du = rand_doubles(p.na, 0), *dw = rand_doubles(p.nw, 0), *db = rand_doubles(p.nb, 0);
    ref_toeplitz_backward_d(&p.desc, p.u, p.w, p.r, du, dw, db);
    check_param(&p, "u", p.u, du, p.na);
    check_param(&p, "w", p.w, dw, p.nw);
    check_param(&p, "beta", p.beta, db, p.nb);
    free(p.u);
    free(p.w);
    free(p.beta);
    free(p.r);
    free(p.y);
    free(du);
    free(dw);
    free(db);
}

Test(toeplitz_fd, flat) { check_fd(2, 7, 3, 1, 1, 11); }
Test(toeplitz_fd, heads) { check_fd(2, 6, 8, 4, 1, 21); }
Test(toeplitz_fd, kernel) { check_fd(2, 6, 5, 1, 3, 31); }
Test(toeplitz_fd, heads_with_kernel) { check_fd(3, 5, 6, 2, 2, 41); }
