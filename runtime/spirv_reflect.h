/* A small SPIR-V reader: what a compute shader's interface is, so the host
 * side of every kernel can be checked against it (pipeline creation does,
 * for each kernel, and tests/test_shaders.c for every embedded module). */
#ifndef TMM_RT_SPIRV_REFLECT_H
#define TMM_RT_SPIRV_REFLECT_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct tmm_spirv_iface {
    uint32_t push_size;    /* bytes of the push-constant block (0: none) */
    uint32_t n_buffers;    /* storage buffers in set 0: one past the highest binding */
    uint32_t binding_mask; /* bit b set when binding b is used (bindings < 32) */
} tmm_spirv_iface;

/* Reads the interface of a module; TMM_ERR_INVALID_ARGUMENT for malformed
 * SPIR-V or a push block of types this reader does not size (32-bit scalars,
 * vectors and arrays of them are sized). */
tmm_status tmm_spirv_reflect(const uint32_t *code, size_t bytes, const char *name, tmm_spirv_iface *out);

#endif
