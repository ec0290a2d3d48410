/* The references' double-precision buffers (ref_double.h). */
#include "ref/ref_double.h"

#include <stdlib.h>

double *ref_zalloc(uint64_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        abort(); /* the references are test tools: small shapes only */
    return p;
}

double *ref_to_double(const float *x, size_t n)
{
    double *y = ref_zalloc(n);
    for (size_t i = 0; i < n; i++)
        y[i] = x[i];
    return y;
}

void ref_to_float(const double *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)x[i];
}

void ref_free_all(double *const *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i]);
}
