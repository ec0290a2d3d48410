/* The references' double-precision buffers (they compute in double and the
 * float entry points convert at their edges): allocation, conversions. */
#ifndef TMM_REF_DOUBLE_H
#define TMM_REF_DOUBLE_H

#include <stddef.h>
#include <stdint.h>

/* Zeroed doubles; aborts when out of memory (the references are test tools:
 * small shapes only). */
double *ref_zalloc(uint64_t n);
/* A double copy of x [n] (ref_zalloc'ed). */
double *ref_to_double(const float *x, size_t n);
/* y [n] = x rounded to float. */
void ref_to_float(const double *x, float *y, size_t n);
/* free() of each of p [n]. */
void ref_free_all(double *const *p, size_t n);

#endif
