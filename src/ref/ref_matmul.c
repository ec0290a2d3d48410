/* Reference of tmm_op_matmul: a plain triple loop per batch with double
 * accumulation; bias and the previous C (when accumulating) are added in
 * double too, or the gradient epilogue's factor applied, and the result is
 * rounded to float once. With a forward epilogue (SiLU, GELU) C is the
 * product alone, as the device's; its second output z = act(C + bias) is the
 * activation's reference applied to that C. */
#include "ref/ref.h"
#include "ref/ref_model_util.h"

void ref_matmul(const tmm_matmul_desc *desc, const float *a, const float *b, const float *bias, float *c)
{
    const size_t m = desc->m, n = desc->n, k = desc->k;
    const uint32_t batch = desc->batch ? desc->batch : 1;
    const size_t lda = desc->lda ? desc->lda : desc->trans_a ? m : k, ldb = desc->ldb ? desc->ldb : desc->trans_b ? k : n;
    const size_t ldc = desc->ldc ? desc->ldc : n;
    for (uint32_t bi = 0; bi < batch; bi++) {
        const float *ab = a ? a + bi * desc->stride_a : NULL;
        const float *bb = b ? b + bi * desc->stride_b : NULL;
        float *cb = c + bi * desc->stride_c;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t p = 0; p < k; p++) {
                    double x = desc->trans_a ? ab[p * lda + i] : ab[i * lda + p];
                    double y = desc->trans_b ? bb[j * ldb + p] : bb[p * ldb + j];
                    s += x * y;
                }
                if (tmm_matmul_epilogue_is_grad(desc->epilogue)) {
                    double u = (double)cb[i * ldc + j] + bias[j];
                    s *= desc->epilogue == TMM_MATMUL_EPI_SILU_GRAD ? ref_silu_grad(u) : ref_gelu_grad(u);
                } else if (bias && desc->epilogue == TMM_MATMUL_EPI_NONE) {
                    s += bias[j];
                }
                if (desc->accumulate)
                    s += cb[i * ldc + j];
                cb[i * ldc + j] = (float)s;
            }
    }
}
