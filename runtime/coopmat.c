#include "coopmat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Drivers the path is allowed on, by Vulkan driver ID: NVIDIA's own (its
 * tensor cores through VK_NV_cooperative_matrix). Others stay off until a
 * GPU run shows them right and fast: other Vulkan backends saw wrong
 * results (RADV after one Mesa change, one NVIDIA Windows driver), crashes
 * in the property query (AMD integrated, Windows), emulation on shader
 * cores (early ANV) and large slowdowns (Intel Arc) through cooperative
 * matrices (/work/shared/gpu-notes.md). */
static const VkDriverId allowed_drivers[] = { VK_DRIVER_ID_NVIDIA_PROPRIETARY };

static bool has_device_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    if (!e)
        return false;
    bool found = false;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

static bool allowed(VkPhysicalDevice pd)
{
    VkPhysicalDeviceDriverProperties driver = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES };
    VkPhysicalDeviceProperties2 p = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &driver };
    vkGetPhysicalDeviceProperties2(pd, &p);
    for (size_t i = 0; i < sizeof allowed_drivers / sizeof allowed_drivers[0]; i++)
        if (driver.driverID == allowed_drivers[i])
            return true;
    return false;
}

/* The shape to use among those reported: fp16 A and B, fp32 C and result,
 * subgroup scope, sides of 8 to 32 (the kernel's tiles); 16 x 16 x 16 first. */
static bool pick_shape(const VkCooperativeMatrixPropertiesNV *p, uint32_t n, uint32_t shape[3])
{
    bool found = false;
    for (uint32_t i = 0; i < n; i++) {
        const VkCooperativeMatrixPropertiesNV *c = &p[i];
        if (c->AType != VK_COMPONENT_TYPE_FLOAT16_NV || c->BType != VK_COMPONENT_TYPE_FLOAT16_NV ||
            c->CType != VK_COMPONENT_TYPE_FLOAT32_NV || c->DType != VK_COMPONENT_TYPE_FLOAT32_NV ||
            c->scope != VK_SCOPE_SUBGROUP_NV)
            continue;
        const uint32_t s[3] = { c->MSize, c->NSize, c->KSize };
        bool sides = true;
        for (int j = 0; j < 3; j++)
            sides = sides && s[j] >= 8 && s[j] <= 32 && s[j] % 8 == 0;
        if (!sides)
            continue;
        if (!found || (s[0] == 16 && s[1] == 16 && s[2] == 16))
            memcpy(shape, s, sizeof s);
        found = true;
    }
    return found;
}

#define NOTE(...) snprintf(info->coopmat_note, sizeof info->coopmat_note, __VA_ARGS__)

void tmm_coopmat_query(VkInstance instance, VkPhysicalDevice pd, tmm_device_info *info)
{
    memset(info->coopmat_shape, 0, sizeof info->coopmat_shape);
    const char *env = getenv("TMM_DISABLE_COOPMAT");
    if (env && *env && strcmp(env, "0") != 0) {
        NOTE("turned off by TMM_DISABLE_COOPMAT=%s", env);
        return;
    }
    if (info->api_version < VK_API_VERSION_1_2 || !info->shader_float16) {
        NOTE("the device lacks Vulkan 1.2 with shaderFloat16");
        return;
    }
    if (!info->subgroup_in_compute || info->subgroup_size < 8 || info->subgroup_size > 128 ||
        !(info->subgroup_operations & VK_SUBGROUP_FEATURE_BASIC_BIT)) {
        NOTE("the device lacks subgroups in compute");
        return;
    }
    if (!has_device_extension(pd, TMM_COOPMAT_EXTENSION)) {
        NOTE("the device lacks %s", TMM_COOPMAT_EXTENSION);
        return;
    }
    if (!allowed(pd)) { /* before the property query, which crashed some drivers */
        NOTE("the driver is not on the allow-list (runtime/coopmat.c)");
        return;
    }
    VkPhysicalDeviceVulkanMemoryModelFeatures model = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES };
    VkPhysicalDeviceCooperativeMatrixFeaturesNV feat = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, .pNext = &model };
    VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &feat };
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    VkPhysicalDeviceCooperativeMatrixPropertiesNV props = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &props };
    vkGetPhysicalDeviceProperties2(pd, &p2);
    if (!feat.cooperativeMatrix || !(props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
        NOTE("%s is listed but its feature is off in compute shaders", TMM_COOPMAT_EXTENSION);
        return;
    }
    if (!model.vulkanMemoryModel) { /* glslang emits the kernel with the Vulkan memory model */
        NOTE("the device lacks the vulkanMemoryModel feature");
        return;
    }
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!get || get(pd, &n, NULL) != VK_SUCCESS || n == 0 || n > 4096) {
        NOTE("the driver reports no cooperative-matrix shapes");
        return;
    }
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    if (!p) {
        NOTE("out of host memory");
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    VkResult r = get(pd, &n, p); /* VK_INCOMPLETE keeps the first n */
    uint32_t shape[3] = { 0 };
    const bool found = (r == VK_SUCCESS || r == VK_INCOMPLETE) && pick_shape(p, n, shape);
    free(p);
    if (!found) {
        NOTE("no fp16 x fp16 + fp32 shape at subgroup scope among the %u the driver reports", n);
        return;
    }
    memcpy(info->coopmat_shape, shape, sizeof shape);
    info->coopmat_note[0] = '\0';
}

const void *tmm_coopmat_enable(tmm_coopmat_features *f)
{
    memset(f, 0, sizeof *f);
    f->coopmat.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
    f->coopmat.cooperativeMatrix = VK_TRUE;
    f->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    f->f16.shaderFloat16 = VK_TRUE;
    f->f16.pNext = &f->coopmat;
    f->model.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    f->model.vulkanMemoryModel = VK_TRUE;
    f->coopmat.pNext = &f->model;
    f->features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f->features.pNext = &f->f16;
    return &f->features;
}
