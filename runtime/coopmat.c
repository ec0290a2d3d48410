#include "coopmat.h"

#include "device.h"
#include "spirv_coopmat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Drivers each extension is allowed on, by Vulkan driver ID. Others stay off
 * until a GPU run shows them right and fast: other Vulkan backends saw wrong
 * results (RADV after one Mesa change, one NVIDIA Windows driver), crashes
 * in the property query (AMD integrated, Windows), emulation on shader
 * cores (early ANV) and large slowdowns (Intel Arc) through cooperative
 * matrices (/work/shared/gpu-notes.md). NVIDIA's tensor cores take either
 * extension; AMD's matrix cores (RDNA 3 and later) take KHR, where the
 * self-check at first use guards against a wrong driver and a subgroup size
 * the kernel can require (info->subgroup_size_control) keeps its workgroup
 * what the host planned. */
static const VkDriverId nv_drivers[] = { VK_DRIVER_ID_NVIDIA_PROPRIETARY };
static const VkDriverId khr_drivers[] = { VK_DRIVER_ID_NVIDIA_PROPRIETARY, VK_DRIVER_ID_AMD_PROPRIETARY,
                                          VK_DRIVER_ID_AMD_OPEN_SOURCE, VK_DRIVER_ID_MESA_RADV };

/* VK_KHR_cooperative_matrix's structures and entry point, which Debian 12's
 * Vulkan headers (1.3.239) predate: the layouts of the Vulkan registry. The
 * feature and stage-properties structures have the NV ones' members. */
enum {
    STYPE_KHR_FEATURES = 1000506000, STYPE_KHR_SHAPE = 1000506001, STYPE_KHR_PROPERTIES = 1000506002,
    STYPE_BF16_FEATURES = 1000141000, COMPONENT_BF16 = 1000141000, /* VK_KHR_shader_bfloat16 */
};
static const char bf16_extension[] = "VK_KHR_shader_bfloat16";
typedef struct coopmat_shape_khr {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    VkComponentTypeNV AType, BType, CType, ResultType; /* VkComponentTypeKHR: the same values */
    VkBool32 saturatingAccumulation;
    VkScopeNV scope;
} coopmat_shape_khr;
typedef VkResult(VKAPI_PTR *get_shapes_khr)(VkPhysicalDevice, uint32_t *, coopmat_shape_khr *);

/* One of the two extensions: what to ask the driver for. */
typedef struct coopmat_ext {
    const char *name, *shapes_fn;
    VkStructureType features, properties;
    const VkDriverId *drivers;
    size_t n_drivers;
    bool needs_size_control; /* off NVIDIA's fixed subgroups of 32 */
} coopmat_ext;

static const coopmat_ext extensions[] = {
    { "VK_NV_cooperative_matrix", "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV",
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV, nv_drivers,
      sizeof nv_drivers / sizeof nv_drivers[0], false },
    { "VK_KHR_cooperative_matrix", "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR",
      (VkStructureType)STYPE_KHR_FEATURES, (VkStructureType)STYPE_KHR_PROPERTIES, khr_drivers,
      sizeof khr_drivers / sizeof khr_drivers[0], true },
};
#define KHR_INDEX 1

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

static VkDriverId driver_id(VkPhysicalDevice pd)
{
    VkPhysicalDeviceDriverProperties driver = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES };
    VkPhysicalDeviceProperties2 p = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &driver };
    vkGetPhysicalDeviceProperties2(pd, &p);
    return driver.driverID;
}

static bool allowed(const coopmat_ext *e, VkDriverId id)
{
    for (size_t i = 0; i < e->n_drivers; i++)
        if (id == e->drivers[i])
            return true;
    return false;
}

/* The shape to use among those reported (in the KHR layout; NV's are
 * converted): A and B of type ab (fp16, or bf16), fp32 C and result, no
 * saturation, subgroup scope, sides of 8 to 32 (the kernel's tiles);
 * 16 x 16 x 16 first. */
static bool pick_shape(const coopmat_shape_khr *p, uint32_t n, VkComponentTypeNV ab, uint32_t shape[3])
{
    bool found = false;
    for (uint32_t i = 0; i < n; i++) {
        const coopmat_shape_khr *c = &p[i];
        if (c->AType != ab || c->BType != ab ||
            c->CType != VK_COMPONENT_TYPE_FLOAT32_NV || c->ResultType != VK_COMPONENT_TYPE_FLOAT32_NV ||
            c->saturatingAccumulation || c->scope != VK_SCOPE_SUBGROUP_NV)
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

/* The shapes the driver reports through extension e, counted first, then
 * filled (VK_INCOMPLETE keeps the first n); NULL with *n 0 when none. */
static coopmat_shape_khr *shapes(VkInstance instance, VkPhysicalDevice pd, size_t e, uint32_t *n)
{
    PFN_vkVoidFunction fn = vkGetInstanceProcAddr(instance, extensions[e].shapes_fn);
    *n = 0;
    if (!fn)
        return NULL;
    uint32_t count = 0;
    VkResult r = e == KHR_INDEX ? ((get_shapes_khr)fn)(pd, &count, NULL)
                                : ((PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)fn)(pd, &count, NULL);
    if (r != VK_SUCCESS || count == 0 || count > 4096)
        return NULL;
    coopmat_shape_khr *out = calloc(count, sizeof *out);
    if (!out)
        return NULL;
    if (e == KHR_INDEX) {
        for (uint32_t i = 0; i < count; i++)
            out[i].sType = (VkStructureType)STYPE_KHR_SHAPE;
        r = ((get_shapes_khr)fn)(pd, &count, out);
    } else {
        VkCooperativeMatrixPropertiesNV *nv = calloc(count, sizeof *nv);
        r = VK_ERROR_OUT_OF_HOST_MEMORY;
        if (nv) {
            for (uint32_t i = 0; i < count; i++)
                nv[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
            r = ((PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)fn)(pd, &count, nv);
            for (uint32_t i = 0; i < count; i++)
                out[i] = (coopmat_shape_khr){ .MSize = nv[i].MSize, .NSize = nv[i].NSize, .KSize = nv[i].KSize,
                                              .AType = nv[i].AType, .BType = nv[i].BType, .CType = nv[i].CType,
                                              .ResultType = nv[i].DType, .scope = nv[i].scope };
            free(nv);
        }
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        free(out);
        return NULL;
    }
    *n = count;
    return out;
}

/* The bf16 shape through KHR: VK_KHR_shader_bfloat16 with its type and
 * cooperative-matrix features, and a bf16 x bf16 + fp32 shape among those
 * reported (p, n). */
static bool probe_bf16(VkPhysicalDevice pd, const coopmat_shape_khr *p, uint32_t n, uint32_t shape[3])
{
    if (!has_device_extension(pd, bf16_extension))
        return false;
    tmm_vk_bf16_features bf16 = { .sType = (VkStructureType)STYPE_BF16_FEATURES };
    VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &bf16 };
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    return bf16.type && bf16.coopmat && pick_shape(p, n, (VkComponentTypeNV)COMPONENT_BF16, shape);
}

/* Whether extension e serves the kernel on pd: true with the fp16 shape
 * (and for KHR the bf16 one, or zeros), else false with the reason in why. */
static bool probe(VkInstance instance, VkPhysicalDevice pd, const tmm_device_info *info, size_t e,
                  uint32_t shape[3], uint32_t bf16_shape[3], char *why, size_t why_size)
{
    const coopmat_ext *x = &extensions[e];
    if (!has_device_extension(pd, x->name)) {
        snprintf(why, why_size, "the device lacks %s", x->name);
        return false;
    }
    const VkDriverId driver = driver_id(pd);
    if (!allowed(x, driver)) { /* before the property query, which crashed some drivers */
        snprintf(why, why_size, "%s: the driver is not on its allow-list (runtime/coopmat.c)", x->name);
        return false;
    }
    if (x->needs_size_control && driver != VK_DRIVER_ID_NVIDIA_PROPRIETARY && !info->subgroup_size_control) {
        snprintf(why, why_size, "%s: the device cannot require a compute subgroup size", x->name);
        return false;
    }
    VkPhysicalDeviceVulkanMemoryModelFeatures model = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES };
    VkPhysicalDeviceCooperativeMatrixFeaturesNV feat = { .sType = x->features, .pNext = &model };
    VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &feat };
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    VkPhysicalDeviceCooperativeMatrixPropertiesNV props = { .sType = x->properties };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &props };
    vkGetPhysicalDeviceProperties2(pd, &p2);
    if (!feat.cooperativeMatrix || !(props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
        snprintf(why, why_size, "%s is listed but its feature is off in compute shaders", x->name);
        return false;
    }
    if (!model.vulkanMemoryModel) { /* glslang emits the kernel with the Vulkan memory model */
        snprintf(why, why_size, "the device lacks the vulkanMemoryModel feature");
        return false;
    }
    uint32_t n = 0;
    coopmat_shape_khr *p = shapes(instance, pd, e, &n);
    const bool found = p && pick_shape(p, n, VK_COMPONENT_TYPE_FLOAT16_NV, shape);
    if (found && e == KHR_INDEX && !probe_bf16(pd, p, n, bf16_shape))
        memset(bf16_shape, 0, 3 * sizeof bf16_shape[0]);
    free(p);
    if (!found) {
        snprintf(why, why_size, "%s: no fp16 x fp16 + fp32 shape at subgroup scope among the %u the driver reports",
                 x->name, n);
        return false;
    }
    return true;
}

/* Whether the device takes the path through VK_KHR_cooperative_matrix. */
static bool uses_khr(const tmm_device_info *info)
{
    return strcmp(info->coopmat_extension, extensions[KHR_INDEX].name) == 0;
}

#define NOTE(...) snprintf(info->coopmat_note, sizeof info->coopmat_note, __VA_ARGS__)

void tmm_coopmat_query(VkInstance instance, VkPhysicalDevice pd, tmm_device_info *info)
{
    memset(info->coopmat_shape, 0, sizeof info->coopmat_shape);
    memset(info->coopmat_bf16_shape, 0, sizeof info->coopmat_bf16_shape);
    info->coopmat_extension[0] = '\0';
    const char *env = getenv("TMM_DISABLE_COOPMAT");
    if (env && *env && strcmp(env, "0") != 0) {
        NOTE("turned off by TMM_DISABLE_COOPMAT=%s", env);
        return;
    }
    const char *only = getenv("TMM_COOPMAT_EXTENSION");
    if (only && *only && strcmp(only, "NV") != 0 && strcmp(only, "KHR") != 0) {
        NOTE("TMM_COOPMAT_EXTENSION=%s names no extension: NV or KHR", only);
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
    char why[2][94] = { "", "" }; /* both fit the note with "; " between */
    for (size_t e = 0; e < 2; e++) {
        if (only && *only && strcmp(only, e == KHR_INDEX ? "KHR" : "NV") != 0) {
            snprintf(why[e], sizeof why[e], "%s: not the one TMM_COOPMAT_EXTENSION names", extensions[e].name);
            continue;
        }
        uint32_t shape[3], bf16[3] = { 0 };
        if (probe(instance, pd, info, e, shape, bf16, why[e], sizeof why[e])) {
            memcpy(info->coopmat_shape, shape, sizeof shape);
            memcpy(info->coopmat_bf16_shape, bf16, sizeof bf16);
            snprintf(info->coopmat_extension, sizeof info->coopmat_extension, "%s", extensions[e].name);
            info->coopmat_note[0] = '\0';
            return;
        }
    }
    if (strncmp(why[0], "the device lacks VK_", 20) == 0 && strncmp(why[1], "the device lacks VK_", 20) == 0)
        NOTE("the device lacks %s and %s", extensions[0].name, extensions[KHR_INDEX].name);
    else
        NOTE("%s; %s", why[0], why[1]);
}

const void *tmm_coopmat_enable(const tmm_device_info *info, tmm_coopmat_features *f)
{
    memset(f, 0, sizeof *f);
    f->coopmat.sType = extensions[uses_khr(info) ? KHR_INDEX : 0].features;
    f->coopmat.cooperativeMatrix = VK_TRUE;
    f->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
    f->f16.shaderFloat16 = VK_TRUE;
    f->f16.pNext = &f->coopmat;
    f->model.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    f->model.vulkanMemoryModel = VK_TRUE;
    f->coopmat.pNext = &f->model;
    void **tail = &f->model.pNext;
    if (info->subgroup_size_control) {
        f->size.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES;
        f->size.subgroupSizeControl = VK_TRUE;
        *tail = &f->size;
        tail = &f->size.pNext;
    }
    if (info->coopmat_bf16_shape[0]) {
        f->bf16.sType = (VkStructureType)STYPE_BF16_FEATURES;
        f->bf16.type = f->bf16.coopmat = VK_TRUE;
        *tail = &f->bf16;
    }
    f->features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f->features.pNext = &f->f16;
    return &f->features;
}

const char *tmm_coopmat_bf16_extension(void)
{
    return bf16_extension;
}

tmm_status tmm_coopmat_module(tmm_device *d, const tmm_spirv *nv, bool bf16, const tmm_spirv **out)
{
    *out = nv;
    if (bf16 && !d->info.coopmat_bf16_shape[0])
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the device has no bf16 cooperative matrices", nv->name);
    if (!bf16 && !uses_khr(&d->info))
        return TMM_OK;
    for (uint32_t i = 0; i < d->n_coopmat_modules; i++)
        if (d->coopmat_modules[i].nv == nv && d->coopmat_modules[i].bf16 == bf16) {
            *out = d->coopmat_modules[i].khr;
            return TMM_OK;
        }
    const uint32_t cap = sizeof d->coopmat_modules / sizeof d->coopmat_modules[0];
    if (d->n_coopmat_modules == cap)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: more than %u cooperative-matrix modules on one device", nv->name,
                        cap);
    tmm_spirv *khr = calloc(1, sizeof *khr);
    if (!khr)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t *code = NULL;
    tmm_status s = tmm_spirv_coopmat_khr(nv->code, nv->size, nv->name, bf16, &code, &khr->size);
    if (s != TMM_OK) {
        free(khr);
        return s;
    }
    khr->name = nv->name;
    khr->code = code;
    d->coopmat_modules[d->n_coopmat_modules++] = (struct tmm_coopmat_module){ .nv = nv, .bf16 = bf16, .khr = khr };
    *out = khr;
    return TMM_OK;
}

void tmm_coopmat_modules_free(tmm_device *d)
{
    for (uint32_t i = 0; i < d->n_coopmat_modules; i++) {
        free((void *)d->coopmat_modules[i].khr->code);
        free(d->coopmat_modules[i].khr);
    }
    d->n_coopmat_modules = 0;
}
