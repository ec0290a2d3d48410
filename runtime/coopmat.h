/* Whether a device gets the cooperative-matrix matmul (src/ops/matmul_coopmat.c,
 * shaders/matmul_coopmat.comp; docs/gpu.md "Fast paths"), from what it
 * reports, an allow-list and TMM_DISABLE_COOPMAT. */
#ifndef TMM_RT_COOPMAT_H
#define TMM_RT_COOPMAT_H

#include <vulkan/vulkan.h>

#include "tmm/tmm.h"

/* The extension the kernel is written for: Debian 12's glslang compiles
 * GL_NV_cooperative_matrix, not GL_KHR_cooperative_matrix. */
#define TMM_COOPMAT_EXTENSION "VK_NV_cooperative_matrix"

/* Fills info->coopmat_shape (0 when the path is off) and info->coopmat_note
 * (why it is off; empty when on). Defensive: the extension, then the
 * feature, then the properties (the count first, then the fill), then the
 * allow-list; a driver that reports nothing usable just turns it off. */
void tmm_coopmat_query(VkInstance instance, VkPhysicalDevice pd, tmm_device_info *info);

/* The features to enable at device creation when info->coopmat_shape[0]:
 * chained onto *next (fills the caller's structs, which must outlive
 * vkCreateDevice). */
typedef struct tmm_coopmat_features {
    VkPhysicalDeviceFeatures2 features;
    VkPhysicalDeviceShaderFloat16Int8Features f16;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat;
    VkPhysicalDeviceVulkanMemoryModelFeatures model; /* the kernel's SPIR-V uses it (glslang's NV path) */
} tmm_coopmat_features;
const void *tmm_coopmat_enable(tmm_coopmat_features *f);

#endif
