/* Dense linear algebra of the index analysis through LAPACKE: zeros of the
 * symbol polynomial (companion matrix eigenvalues) and singular values of
 * the finite Toeplitz section. */
#include <stdlib.h>
#include <string.h>

#define LAPACK_COMPLEX_STRUCTURE /* keep <complex.h> out: we pass no complex data */
#include <lapacke.h>

#include "analysis/index.h"
#include "status.h"

tmm_status tmm_poly_roots(const double *c, uint32_t degree, double *re, double *im)
{
    if (degree == 0 || c[degree] == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "polynomial roots need degree >= 1 and a nonzero leading term");
    const size_t d = degree;
    double *h = calloc(d * d + d, sizeof *h);
    if (!h)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for a %zu x %zu companion matrix", d, d);
    double *scale = h + d * d;
    /* column-major upper Hessenberg companion: first row -c_{d-1..0}/c_d, ones below the diagonal */
    for (size_t j = 0; j < d; j++)
        h[j * d] = -c[d - 1 - j] / c[d];
    for (size_t i = 1; i < d; i++)
        h[(i - 1) * d + i] = 1;
    lapack_int ilo, ihi;
    /* scaling only: a diagonal similarity keeps the Hessenberg form for dhseqr */
    lapack_int info = LAPACKE_dgebal(LAPACK_COL_MAJOR, 'S', (lapack_int)d, h, (lapack_int)d, &ilo, &ihi, scale);
    if (info == 0)
        info = LAPACKE_dhseqr(LAPACK_COL_MAJOR, 'E', 'N', (lapack_int)d, ilo, ihi, h, (lapack_int)d, re, im, NULL, 1);
    free(h);
    if (info != 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "LAPACK could not compute the %u zeros of the symbol (info %d)", degree,
                        (int)info);
    return TMM_OK;
}

tmm_status tmm_toeplitz_singular_values(const double *w, uint32_t n, double *sigma)
{
    const size_t m = n;
    double *a = calloc(m * m, sizeof *a);
    if (!a)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for a %zu x %zu Toeplitz section", m, m);
    for (size_t s = 0; s < m; s++) /* column-major: a[s·n + t] = T[t][s] = w[t - s] */
        memcpy(a + s * m + s, w, (m - s) * sizeof *a);
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', (lapack_int)n, (lapack_int)n, a, (lapack_int)n, sigma,
                                     NULL, 1, NULL, 1);
    free(a);
    if (info != 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "LAPACK dgesdd did not converge on the %u x %u section (info %d)", n, n,
                        (int)info);
    return TMM_OK;
}
