/* C reference of the causal Toeplitz mixing op (src/ops/toeplitz.h): the
 * definition of its forward and backward. The *_d functions work in double
 * throughout (finite-difference checks); the float versions convert, compute
 * in double and round once. desc must be valid (tmm_toeplitz_check); impl is
 * ignored. */
#ifndef TMM_REF_TOEPLITZ_H
#define TMM_REF_TOEPLITZ_H

#include <stddef.h>
#include <stdint.h>

#include "ops/toeplitz.h"

/* y[B, n, d] from u[B, n, d], w[G, K, n], beta[G, n]. */
void ref_toeplitz_forward_d(const tmm_toeplitz_desc *desc, const double *u, const double *w, const double *beta,
                            double *y);
/* du[B, n, d], dw[G, K, n], dbeta[G, n] from u, w, gy; any output may be NULL
 * (not computed). u may be NULL when dw is. */
void ref_toeplitz_backward_d(const tmm_toeplitz_desc *desc, const double *u, const double *w, const double *gy,
                             double *du, double *dw, double *dbeta);

void ref_toeplitz_forward(const tmm_toeplitz_desc *desc, const float *u, const float *w, const float *beta,
                          float *y);
void ref_toeplitz_backward(const tmm_toeplitz_desc *desc, const float *u, const float *w, const float *gy,
                           float *du, float *dw, float *dbeta);

#endif
