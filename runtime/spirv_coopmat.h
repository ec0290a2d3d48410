/* The cooperative-matrix kernel for VK_KHR_cooperative_matrix, made from the
 * one glslc compiles: Debian 12's glslang knows GL_NV_cooperative_matrix but
 * not GL_KHR_cooperative_matrix, so the KHR module is the NV module with its
 * instructions rewritten (docs/gpu.md "Fast paths"). */
#ifndef TMM_RT_SPIRV_COOPMAT_H
#define TMM_RT_SPIRV_COOPMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Rewrites a module that uses SPV_NV_cooperative_matrix into one that uses
 * SPV_KHR_cooperative_matrix, in a new malloc'd buffer (*out, *out_bytes):
 *   capability CooperativeMatrixNV -> CooperativeMatrixKHR, and the extension;
 *   OpTypeCooperativeMatrixNV -> OpTypeCooperativeMatrixKHR with a Use: A or B
 *     by its place in OpCooperativeMatrixMulAddNV, the accumulator otherwise;
 *   loads and stores: the column-major bool becomes a MemoryLayout constant,
 *     placed before the stride;
 *   OpCooperativeMatrixMulAddNV and LengthNV -> their KHR opcodes.
 * With bf16, the module's 16-bit float type becomes bfloat16
 * (SPV_KHR_bfloat16: OpTypeFloat 16 BFloat16KHR, capabilities BFloat16TypeKHR
 * and BFloat16CooperativeMatrixKHR), so the matrices, the shared memory that
 * stages them and the conversions into it are bf16; which is sound only
 * where that type is converted to, stored, loaded and multiplied as
 * matrices: arithmetic on it or a 16-bit constant other than zero (whose
 * bits would change meaning) is refused.
 * Refused (TMM_ERR_INVALID_ARGUMENT, naming the module): not SPIR-V, no NV
 * cooperative matrix, one matrix type in two roles (KHR types carry their
 * use: the shader must give A, B and C distinct types), a layout that is not
 * a constant bool, or an operand whose type this rewrite cannot read. */
tmm_status tmm_spirv_coopmat_khr(const uint32_t *code, size_t bytes, const char *name, bool bf16, uint32_t **out,
                                 size_t *out_bytes);

#endif
