/* Plain C references: they define what each device op means. Accumulation is
 * in double so that they serve as ground truth for float32 kernels. */
#ifndef TMM_REF_H
#define TMM_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/ops.h"

void ref_fill(float *x, size_t n, float value);
void ref_copy(const float *x, float *y, size_t n);
void ref_axpy(float a, const float *x, float *y, size_t n);
float ref_sum(const float *x, size_t n);
void ref_sum_rows(const float *x, size_t rows, size_t cols, float *out);
void ref_sum_cols(const float *x, size_t rows, size_t cols, float *out);
/* tmm_op_pack16's and tmm_op_unpack16's conversions of one value (bits). */
uint16_t ref_f32_to_16(uint32_t f, tmm_precision format);
uint32_t ref_16_to_f32(uint16_t h, tmm_precision format);
/* Same contract as tmm_op_matmul; bias may be NULL. */
void ref_matmul(const tmm_matmul_desc *desc, const float *a, const float *b, const float *bias,
                float *c);

#endif
