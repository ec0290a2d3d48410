/* Finite differences on the double references, shared by the tests/test_*_fd.c
 * files: a counter-based random generator, double arrays, and fd_check, which
 * compares a reference backward with central differences of a scalar loss. */
#ifndef TMM_TESTS_FD_H
#define TMM_TESTS_FD_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 1e-5
#define FD_TOL 1e-7 /* absolute, plus FD_TOL times |gradient| */

static uint64_t rng_state;  /* each test file seeds it */

static inline double urand(double lo, double hi)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * (double)(z >> 11) * 0x1.0p-53;
}

static inline double *drand_array(size_t n, double lo, double hi)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = urand(lo, hi);
    return x;
}

static inline double *dzeros(size_t n)
{
    double *x = calloc(n ? n : 1, sizeof *x);
    cr_assert_not_null(x);
    return x;
}

static inline double *dcopy(const double *x, size_t n)
{
    double *y = dzeros(n);
    memcpy(y, x, n * sizeof *x);
    return y;
}

static inline double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static inline void assert_close(const char *what, const double *a, const double *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(a[i] - b[i]) <= tol, "%s: element %zu: %.17g vs %.17g", what, i, a[i], b[i]);
}

/* A scalar loss of the problem's current inputs. */
typedef double (*loss_fn)(void *ctx);

/* Compares grad[i] with the central difference of loss over x[i], for all i;
 * returns the largest deviation. */
static inline double fd_check(const char *what, loss_fn loss, void *ctx, double *x, const double *grad, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + FD_H;
        double lp = loss(ctx);
        x[i] = keep - FD_H;
        double lm = loss(ctx);
        x[i] = keep;
        double fd = (lp - lm) / (2 * FD_H), dev = fabs(fd - grad[i]);
        if (dev > worst)
            worst = dev;
        cr_assert(dev <= FD_TOL * (1 + fabs(grad[i])), "%s: element %zu: backward %.12g, finite difference %.12g",
                  what, i, grad[i], fd);
    }
    printf("  %-40s n=%-6zu max|fd - backward| = %.3g\n", what, n, worst);
    return worst;
}

#endif
