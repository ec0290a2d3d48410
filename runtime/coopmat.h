/* Whether a device gets the cooperative-matrix matmul (src/ops/matmul_coopmat.c,
 * shaders/matmul_coopmat.comp; docs/gpu.md "Fast paths"), through which
 * extension, from what it reports, an allow-list, TMM_DISABLE_COOPMAT and
 * TMM_COOPMAT_EXTENSION; and the kernel's module for that extension. */
#ifndef TMM_RT_COOPMAT_H
#define TMM_RT_COOPMAT_H

#include <vulkan/vulkan.h>

#include "pipeline.h"
#include "tmm/tmm.h"

/* Fills info->coopmat_shape (0 when the path is off), info->coopmat_extension
 * (VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix, tried in that
 * order, or only the one TMM_COOPMAT_EXTENSION=NV|KHR names) and
 * info->coopmat_note (why it is off; empty when on). Defensive: the
 * extension, the allow-list, the feature, then the properties (the count
 * first, then the fill); a driver that reports nothing usable just turns it
 * off. */
void tmm_coopmat_query(VkInstance instance, VkPhysicalDevice pd, tmm_device_info *info);

/* The module to run for a kernel written with GL_NV_cooperative_matrix (nv,
 * embedded): nv itself on a device that uses the NV extension, else its KHR
 * rewrite (runtime/spirv_coopmat.h), made at the first call and kept by the
 * device until it is destroyed. bf16: the KHR rewrite with bf16 matrices,
 * where info.coopmat_bf16_shape says the device has them. */
tmm_status tmm_coopmat_module(tmm_device *d, const tmm_spirv *nv, bool bf16, const tmm_spirv **out);
/* The device extension bf16 matrices need besides the KHR one. */
const char *tmm_coopmat_bf16_extension(void);
void tmm_coopmat_modules_free(tmm_device *d);

/* The features to enable at device creation when info->coopmat_shape[0]:
 * chained onto *next (fills the caller's structs, which must outlive
 * vkCreateDevice). */
/* VkPhysicalDeviceShaderBfloat16FeaturesKHR (VK_KHR_shader_bfloat16), which
 * Debian 12's Vulkan headers (1.3.239) predate: the registry's layout. */
typedef struct tmm_vk_bf16_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 type, dot, coopmat; /* shaderBFloat16Type, ...DotProduct, ...CooperativeMatrix */
} tmm_vk_bf16_features;

typedef struct tmm_coopmat_features {
    VkPhysicalDeviceFeatures2 features;
    VkPhysicalDeviceShaderFloat16Int8Features f16;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat; /* the KHR struct has the same members */
    VkPhysicalDeviceVulkanMemoryModelFeatures model;     /* the kernel's SPIR-V uses it */
    VkPhysicalDeviceSubgroupSizeControlFeatures size;    /* when info->subgroup_size_control */
    tmm_vk_bf16_features bf16;                           /* when info->coopmat_bf16_shape[0] */
} tmm_coopmat_features;
const void *tmm_coopmat_enable(const tmm_device_info *info, tmm_coopmat_features *f);

#endif
