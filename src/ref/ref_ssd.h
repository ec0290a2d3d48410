/* C reference of the Mamba 2 SSD op (src/ops/ssd.h): the plain recurrence
 * over positions, which defines the op (the device computes the chunked
 * form), its backward by a reverse loop, the state after a prompt and the
 * decoding step. The *_d functions work in double throughout
 * (finite-difference checks); the float versions convert, compute in double
 * and round once. desc must be valid (tmm_ssd_check); chunk is ignored.
 * Shapes as in ssd.h. */
#ifndef TMM_REF_SSD_H
#define TMM_REF_SSD_H

#include <stddef.h>
#include <stdint.h>

#include "ops/ssd.h"

/* y [B*n, nh*P] from xbc [B*n, Cx], dt [B*n, nh], A_log, D [nh]. */
void ref_ssd_forward_d(const tmm_ssd_desc *desc, const double *xbc, const double *dt, const double *A_log,
                       const double *D, double *y);
/* dxbc [B*n, Cx], ddt [B*n, nh], dA_log, dD [nh] (all overwritten) from the
 * forward's inputs and dy [B*n, nh*P] (recomputes the forward). */
void ref_ssd_backward_d(const tmm_ssd_desc *desc, const double *xbc, const double *dt, const double *A_log,
                        const double *D, const double *dy, double *dxbc, double *ddt, double *dA_log, double *dD);
/* S [B, nh, P, N] (overwritten): the state after positions < min(len[b], n). */
void ref_ssd_state_d(const tmm_ssd_desc *desc, const uint32_t *len, const double *xbc, const double *dt,
                     const double *A_log, double *S);
/* One decoding step of desc->batch rows: xbc [batch, Cx], dt [batch, nh];
 * S [batch, nh, P, N] updated in place; y [batch, nh*P]. */
void ref_ssd_step_d(const tmm_ssd_desc *desc, const double *xbc, const double *dt, const double *A_log,
                    const double *D, double *S, double *y);

void ref_ssd_forward(const tmm_ssd_desc *desc, const float *xbc, const float *dt, const float *A_log,
                     const float *D, float *y);
void ref_ssd_backward(const tmm_ssd_desc *desc, const float *xbc, const float *dt, const float *A_log,
                      const float *D, const float *dy, float *dxbc, float *ddt, float *dA_log, float *dD);
void ref_ssd_state(const tmm_ssd_desc *desc, const uint32_t *len, const float *xbc, const float *dt,
                   const float *A_log, float *S);
/* The state is kept in float between steps (as the device keeps it). */
void ref_ssd_step(const tmm_ssd_desc *desc, const float *xbc, const float *dt, const float *A_log, const float *D,
                  float *S, float *y);

#endif
