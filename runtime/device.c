/* Instance, device selection, limits and features, validation messenger. */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "coopmat.h"
#include "pipeline.h"

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

static uint32_t validation_total;

uint32_t tmm_validation_messages_total(void) { return validation_total; }

const char *tmm_device_type_name(tmm_device_type type)
{
    switch (type) {
    case TMM_DEVICE_INTEGRATED_GPU: return "integrated GPU";
    case TMM_DEVICE_DISCRETE_GPU: return "discrete GPU";
    case TMM_DEVICE_VIRTUAL_GPU: return "virtual GPU";
    case TMM_DEVICE_CPU: return "CPU";
    default: return "other";
    }
}

static bool has_instance_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(exts[i].extensionName, name) == 0)
            return true;
    return false;
}

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0)
        return false;
    VkLayerProperties *layers = calloc(n, sizeof *layers);
    if (!layers)
        return false;
    bool found = false;
    if (vkEnumerateInstanceLayerProperties(&n, layers) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++)
            found = strcmp(layers[i].layerName, name) == 0;
    free(layers);
    return found;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    tmm_device *device = user;
    device->validation_messages++;
    validation_total++;
    const char *level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
    fprintf(stderr, "tmm: validation %s: %s\n", level, data && data->pMessage ? data->pMessage : "");
    return VK_FALSE;
}

/* An environment variable holding a whole number in [0, max] (the same
 * rule as the matching flag); unset or empty: fallback. Anything else is an
 * error, never silently ignored. */
static tmm_status env_uint(const char *name, int max, int fallback, int *out)
{
    const char *v = getenv(name);
    *out = fallback;
    if (!v || !*v)
        return TMM_OK;
    long x = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || (x = x * 10 + (*p - '0')) > max)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s is '%.32s': expected a whole number from 0 to %d", name, v,
                            max);
    }
    *out = (int)x;
    return TMM_OK;
}

tmm_status tmm_env_device_index(int *index) { return env_uint("TMM_DEVICE", TMM_MAX_DEVICE_INDEX, -1, index); }

/* Instance with optional validation; portability enumeration where offered
 * (MoltenVK). device may be NULL (listing only: no messenger). */
static tmm_status create_instance(bool validate, tmm_device *device, VkInstance *out,
                                  VkDebugUtilsMessengerEXT *messenger)
{
    uint32_t api = VK_API_VERSION_1_0;
    PFN_vkEnumerateInstanceVersion enum_version =
        (PFN_vkEnumerateInstanceVersion)vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (!enum_version || enum_version(&api) != VK_SUCCESS || api < VK_API_VERSION_1_1)
        return tmm_fail(TMM_ERR_NO_DEVICE, "the Vulkan loader is older than 1.1; tmm needs Vulkan 1.1 "
                                           "(update libvulkan1 and the GPU driver)");

    uint32_t n_ext = 0;
    VkResult r = vkEnumerateInstanceExtensionProperties(NULL, &n_ext, NULL);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER || r == VK_ERROR_INITIALIZATION_FAILED)
        return tmm_fail(TMM_ERR_NO_DEVICE, "no Vulkan driver found: install one (Debian: apt install "
                                           "mesa-vulkan-drivers for a CPU device, or your GPU's driver)");
    VkExtensionProperties *exts = calloc(n_ext ? n_ext : 1, sizeof *exts);
    if (!exts)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory listing Vulkan extensions");
    vkEnumerateInstanceExtensionProperties(NULL, &n_ext, exts);

    const char *enabled[4];
    uint32_t n_enabled = 0;
    VkInstanceCreateFlags flags = 0;
    if (has_instance_extension(exts, n_ext, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        enabled[n_enabled++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    free(exts);

    const char *layers[1] = { VALIDATION_LAYER };
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT features = { .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                         .enabledValidationFeatureCount = 1,
                                         .pEnabledValidationFeatures = &sync };
    const void *next = NULL;
    if (validate) {
        if (!has_layer(VALIDATION_LAYER))
            return tmm_fail(TMM_ERR_UNSUPPORTED, "validation was requested (TMM_VALIDATE) but %s is not "
                            "installed (Debian: apt install vulkan-validationlayers)", VALIDATION_LAYER);
        uint32_t n_layer_ext = 0;
        vkEnumerateInstanceExtensionProperties(VALIDATION_LAYER, &n_layer_ext, NULL);
        VkExtensionProperties *lexts = calloc(n_layer_ext ? n_layer_ext : 1, sizeof *lexts);
        if (!lexts)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        vkEnumerateInstanceExtensionProperties(VALIDATION_LAYER, &n_layer_ext, lexts);
        if (has_instance_extension(lexts, n_layer_ext, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME)) {
            enabled[n_enabled++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
            next = &features;
        }
        free(lexts);
        enabled[n_enabled++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    }

    VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                              .pApplicationName = "tmm",
                              .applicationVersion = VK_MAKE_API_VERSION(0, 0, 1, 0),
                              .pEngineName = "tmm",
                              .apiVersion = api >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : api };
    VkInstanceCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                .pNext = next,
                                .flags = flags,
                                .pApplicationInfo = &app,
                                .enabledLayerCount = validate ? 1u : 0u,
                                .ppEnabledLayerNames = layers,
                                .enabledExtensionCount = n_enabled,
                                .ppEnabledExtensionNames = enabled };
    r = vkCreateInstance(&ci, NULL, out);
    if (r != VK_SUCCESS)
        return tmm_vk_fail(r, "vkCreateInstance");

    *messenger = VK_NULL_HANDLE;
    if (validate && device) {
        PFN_vkCreateDebugUtilsMessengerEXT create = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(*out, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mci = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_validation_message,
            .pUserData = device };
        r = create ? create(*out, &mci, NULL, messenger) : VK_ERROR_EXTENSION_NOT_PRESENT;
        if (r != VK_SUCCESS) {
            vkDestroyInstance(*out, NULL);
            return tmm_vk_fail(r, "vkCreateDebugUtilsMessengerEXT");
        }
    }
    return TMM_OK;
}

static bool find_compute_queue(VkPhysicalDevice pd, uint32_t *family, uint32_t *ts_bits)
{
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q)
        return false;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
    /* Prefer a compute queue without graphics (async compute), else any. */
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
            continue;
        if (best < 0 || ((q[best].queueFlags & VK_QUEUE_GRAPHICS_BIT) && !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            best = (int)i;
    }
    if (best >= 0) {
        *family = (uint32_t)best;
        *ts_bits = q[best].timestampValidBits;
    }
    free(q);
    return best >= 0;
}

static void copy_str(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src);
}

static bool device_has_extension(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
    VkExtensionProperties *e = calloc(n ? n : 1, sizeof *e);
    if (!e)
        return false;
    vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e);
    bool found = has_instance_extension(e, n, name);
    free(e);
    return found;
}

/* Each heap's budget and usage (VK_EXT_memory_budget), read now. */
static void read_budget(VkPhysicalDevice pd, uint64_t budget[VK_MAX_MEMORY_HEAPS], uint64_t usage[VK_MAX_MEMORY_HEAPS])
{
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT };
    VkPhysicalDeviceMemoryProperties2 p = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                            .pNext = &b };
    vkGetPhysicalDeviceMemoryProperties2(pd, &p);
    memcpy(budget, b.heapBudget, sizeof b.heapBudget);
    memcpy(usage, b.heapUsage, sizeof b.heapUsage);
}

static void query_info(VkPhysicalDevice pd, uint32_t index, tmm_device_info *info)
{
    memset(info, 0, sizeof *info);
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);

    VkPhysicalDeviceSubgroupProperties subgroup = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
    VkPhysicalDeviceDriverProperties driver = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES };
    VkPhysicalDeviceProperties2 props = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &subgroup };
    bool v12 = base.apiVersion >= VK_API_VERSION_1_2;
    if (v12)
        subgroup.pNext = &driver;
    if (base.apiVersion >= VK_API_VERSION_1_1)
        vkGetPhysicalDeviceProperties2(pd, &props);

    VkPhysicalDevice16BitStorageFeatures storage16 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES };
    VkPhysicalDeviceShaderFloat16Int8Features f16 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES };
    VkPhysicalDeviceFeatures2 feats = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &storage16 };
    if (v12)
        storage16.pNext = &f16;
    if (base.apiVersion >= VK_API_VERSION_1_1)
        vkGetPhysicalDeviceFeatures2(pd, &feats);

    const VkPhysicalDeviceLimits *l = &base.limits;
    info->index = index;
    copy_str(info->name, sizeof info->name, base.deviceName);
    info->type = (tmm_device_type)base.deviceType;
    info->vendor_id = base.vendorID;
    info->device_id = base.deviceID;
    info->api_version = base.apiVersion;
    info->driver_version = base.driverVersion;
    if (v12) {
        copy_str(info->driver_name, sizeof info->driver_name, driver.driverName);
        copy_str(info->driver_info, sizeof info->driver_info, driver.driverInfo);
    }
    memcpy(info->pipeline_cache_uuid, base.pipelineCacheUUID, 16);
    if (base.apiVersion >= VK_API_VERSION_1_1) {
        VkPhysicalDeviceIDProperties id = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES };
        VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id };
        vkGetPhysicalDeviceProperties2(pd, &p2);
        memcpy(info->device_uuid, id.deviceUUID, 16);
    }
    uint32_t family = 0;
    info->has_compute_queue = find_compute_queue(pd, &family, &info->timestamp_valid_bits);

    info->max_storage_buffer_range = l->maxStorageBufferRange;
    info->min_storage_buffer_offset_alignment = l->minStorageBufferOffsetAlignment;
    for (int i = 0; i < 3; i++) {
        info->max_workgroup_count[i] = l->maxComputeWorkGroupCount[i];
        info->max_workgroup_size[i] = l->maxComputeWorkGroupSize[i];
    }
    info->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
    info->max_shared_memory = l->maxComputeSharedMemorySize;
    info->max_push_constants = l->maxPushConstantsSize;
    info->max_memory_allocation_count = l->maxMemoryAllocationCount;
    info->max_memory_allocation_size = 1ull << 30; /* Vulkan 1.1 guarantees at least 1 GiB */
    if (base.apiVersion >= VK_API_VERSION_1_1) {
        VkPhysicalDeviceMaintenance3Properties m3 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES };
        VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3 };
        vkGetPhysicalDeviceProperties2(pd, &p2);
        if (m3.maxMemoryAllocationSize)
            info->max_memory_allocation_size = m3.maxMemoryAllocationSize;
    }
    info->subgroup_size = info->subgroup_size_min = info->subgroup_size_max = subgroup.subgroupSize;
    if (base.apiVersion >= VK_API_VERSION_1_3 || device_has_extension(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
        VkPhysicalDeviceSubgroupSizeControlProperties sc = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES };
        VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sc };
        vkGetPhysicalDeviceProperties2(pd, &p2);
        if (sc.minSubgroupSize && sc.minSubgroupSize <= sc.maxSubgroupSize) {
            info->subgroup_size_min = sc.minSubgroupSize;
            info->subgroup_size_max = sc.maxSubgroupSize;
        }
        if (base.apiVersion >= VK_API_VERSION_1_3) { /* core there: no extension to enable */
            VkPhysicalDeviceSubgroupSizeControlFeatures scf = {
                .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES };
            VkPhysicalDeviceFeatures2 f2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &scf };
            vkGetPhysicalDeviceFeatures2(pd, &f2);
            info->subgroup_size_control = scf.subgroupSizeControl &&
                                          (sc.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                          info->subgroup_size >= info->subgroup_size_min &&
                                          info->subgroup_size <= info->subgroup_size_max;
        }
    }
    info->subgroup_operations = subgroup.supportedOperations;
    info->subgroup_in_compute = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    info->shader_float16 = v12 && f16.shaderFloat16;
    info->storage_buffer_16bit = storage16.storageBuffer16BitAccess;
    info->timestamp_period_ns = l->timestampPeriod;

    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    info->heap_count = mem.memoryHeapCount < TMM_MAX_HEAPS ? mem.memoryHeapCount : TMM_MAX_HEAPS;
    uint64_t budget[VK_MAX_MEMORY_HEAPS] = { 0 }, usage[VK_MAX_MEMORY_HEAPS] = { 0 };
    info->memory_budget = base.apiVersion >= VK_API_VERSION_1_1 &&
                          device_has_extension(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (info->memory_budget)
        read_budget(pd, budget, usage);
    for (uint32_t i = 0; i < info->heap_count; i++) {
        info->heaps[i].size = mem.memoryHeaps[i].size;
        info->heaps[i].device_local = (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
        info->heaps[i].budget = budget[i];
        info->heaps[i].usage = usage[i];
    }
    info->memory_type_count = mem.memoryTypeCount < TMM_MAX_MEMORY_TYPES ? mem.memoryTypeCount : TMM_MAX_MEMORY_TYPES;
    bool direct = false;
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    for (uint32_t i = 0; i < info->memory_type_count; i++) {
        info->memory_types[i].heap = mem.memoryTypes[i].heapIndex;
        info->memory_types[i].flags = mem.memoryTypes[i].propertyFlags;
        if ((mem.memoryTypes[i].propertyFlags & want) == want)
            direct = true;
    }
    /* A discrete GPU with resizable BAR also has such a type, but reads from it
     * cross the bus: only integrated and CPU devices count as unified. */
    info->unified_memory = direct && (info->type == TMM_DEVICE_INTEGRATED_GPU || info->type == TMM_DEVICE_CPU);
}

static int type_rank(tmm_device_type t)
{
    switch (t) {
    case TMM_DEVICE_DISCRETE_GPU: return 4;
    case TMM_DEVICE_INTEGRATED_GPU: return 3;
    case TMM_DEVICE_VIRTUAL_GPU: return 2;
    case TMM_DEVICE_CPU: return 1;
    default: return 0;
    }
}

static tmm_status enumerate(VkInstance instance, VkPhysicalDevice **pds, tmm_device_info **infos,
                            uint32_t *count, uint32_t *preferred)
{
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance, &n, NULL);
    if (r != VK_SUCCESS)
        return tmm_vk_fail(r, "vkEnumeratePhysicalDevices");
    if (n == 0)
        return tmm_fail(TMM_ERR_NO_DEVICE, "Vulkan reports no devices: install a driver (Debian: apt install "
                                           "mesa-vulkan-drivers for a CPU device, or your GPU's driver)");
    *pds = calloc(n, sizeof **pds);
    *infos = calloc(n, sizeof **infos);
    if (!*pds || !*infos) {
        free(*pds);
        free(*infos);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory listing devices");
    }
    vkEnumeratePhysicalDevices(instance, &n, *pds);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        query_info((*pds)[i], i, &(*infos)[i]);
        tmm_coopmat_query(instance, (*pds)[i], &(*infos)[i]);
        tmm_device_info *d = &(*infos)[i];
        if (!d->has_compute_queue || d->api_version < VK_API_VERSION_1_1)
            continue;
        if (best < 0 || type_rank(d->type) > type_rank((*infos)[best].type))
            best = (int)i;
    }
    *count = n;
    *preferred = best < 0 ? 0 : (uint32_t)best;
    return TMM_OK;
}

tmm_status tmm_device_list(tmm_device_info **infos, uint32_t *count, uint32_t *preferred)
{
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    TMM_TRY(create_instance(false, NULL, &instance, &messenger));
    VkPhysicalDevice *pds = NULL;
    tmm_status s = enumerate(instance, &pds, infos, count, preferred);
    free(pds);
    vkDestroyInstance(instance, NULL);
    return s;
}

static tmm_status open_device(tmm_device *d, const tmm_device_options *opt)
{
    int validate = opt->validate;
    if (validate < 0)
        TMM_TRY(env_uint("TMM_VALIDATE", 1, 0, &validate));
    d->validate = validate != 0;
    TMM_TRY(create_instance(d->validate, d, &d->instance, &d->messenger));

    VkPhysicalDevice *pds = NULL;
    tmm_device_info *infos = NULL;
    uint32_t count = 0, preferred = 0;
    TMM_TRY(enumerate(d->instance, &pds, &infos, &count, &preferred));
    int index = opt->index;
    tmm_status s = index >= 0 ? TMM_OK : tmm_env_device_index(&index);
    if (s != TMM_OK) {
        free(pds);
        free(infos);
        return s;
    }
    if (index >= (int)count) {
        free(pds);
        free(infos);
        return tmm_fail(TMM_ERR_NO_DEVICE, "device %d does not exist: there %s %u Vulkan device%s (0..%u); "
                        "see 'tmm devices'", index, count == 1 ? "is" : "are", count, count == 1 ? "" : "s",
                        count - 1);
    }
    uint32_t chosen = index >= 0 ? (uint32_t)index : preferred;
    d->physical = pds[chosen];
    d->info = infos[chosen];
    free(pds);
    free(infos);
    if (!d->info.has_compute_queue || d->info.api_version < VK_API_VERSION_1_1)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "device %u (%s) lacks Vulkan 1.1 compute, which tmm needs",
                        chosen, d->info.name);
    uint32_t ts_bits = 0;
    find_compute_queue(d->physical, &d->queue_family, &ts_bits);
    vkGetPhysicalDeviceMemoryProperties(d->physical, &d->memory_properties);

    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = { .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                    .queueFamilyIndex = d->queue_family,
                                    .queueCount = 1,
                                    .pQueuePriorities = &priority };
    const char *exts[4];
    uint32_t n_ext = 0;
    /* MoltenVK and other portability drivers require enabling this. */
    if (device_has_extension(d->physical, "VK_KHR_portability_subset"))
        exts[n_ext++] = "VK_KHR_portability_subset";
    if (d->info.memory_budget)
        exts[n_ext++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    tmm_coopmat_features coopmat;
    VkPhysicalDeviceSubgroupSizeControlFeatures size = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, .subgroupSizeControl = VK_TRUE };
    VkPhysicalDeviceFeatures2 size_only = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &size };
    const void *features = d->info.subgroup_size_control ? &size_only : NULL; /* tmm_kernel.subgroup_size */
    if (d->info.coopmat_shape[0]) {
        exts[n_ext++] = d->info.coopmat_extension;
        if (d->info.coopmat_bf16_shape[0])
            exts[n_ext++] = tmm_coopmat_bf16_extension();
        features = tmm_coopmat_enable(&d->info, &coopmat);
    }
    VkDeviceCreateInfo dci = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                               .pNext = features,
                               .queueCreateInfoCount = 1,
                               .pQueueCreateInfos = &qci,
                               .enabledExtensionCount = n_ext,
                               .ppEnabledExtensionNames = exts };
    TMM_VK_TRY(vkCreateDevice(d->physical, &dci, NULL, &d->device));
    vkGetDeviceQueue(d->device, d->queue_family, 0, &d->queue);

    VkCommandPoolCreateInfo pci = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                    .queueFamilyIndex = d->queue_family };
    TMM_VK_TRY(vkCreateCommandPool(d->device, &pci, NULL, &d->command_pool));
    VkCommandBufferAllocateInfo cai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = d->command_pool,
                                        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1 };
    TMM_VK_TRY(vkAllocateCommandBuffers(d->device, &cai, &d->transfer_cmd));
    VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    TMM_VK_TRY(vkCreateFence(d->device, &fci, NULL, &d->transfer_fence));

    for (int i = 0; i < 3; i++)
        d->dispatch_limit[i] = d->info.max_workgroup_count[i];
    TMM_TRY(tmm_allocator_create(d));
    return tmm_pipeline_cache_open(d, opt->no_pipeline_cache);
}

tmm_status tmm_device_create(const tmm_device_options *options, tmm_device **out)
{
    static const tmm_device_options defaults = TMM_DEVICE_OPTIONS_DEFAULT;
    *out = NULL;
    tmm_device *d = calloc(1, sizeof *d);
    if (!d)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory creating a device");
    tmm_status s = open_device(d, options ? options : &defaults);
    if (s != TMM_OK) {
        char saved[1024];
        snprintf(saved, sizeof saved, "%s", tmm_last_error());
        tmm_device_destroy(d);
        return tmm_fail(s, "%s", saved);
    }
    *out = d;
    return TMM_OK;
}

void tmm_device_destroy(tmm_device *d)
{
    if (!d)
        return;
    if (d->device) {
        vkDeviceWaitIdle(d->device);
        tmm_buffer_destroy(d->staging);
        tmm_pipelines_destroy(d);
        tmm_pipeline_cache_close(d);
        tmm_allocator_destroy(d);
        if (d->transfer_fence)
            vkDestroyFence(d->device, d->transfer_fence, NULL);
        if (d->command_pool)
            vkDestroyCommandPool(d->device, d->command_pool, NULL);
        vkDestroyDevice(d->device, NULL);
    }
    free(d->pipeline_cache_path);
    tmm_coopmat_modules_free(d);
    if (d->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(d->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy)
            destroy(d->instance, d->messenger, NULL);
    }
    if (d->instance)
        vkDestroyInstance(d->instance, NULL);
    free(d);
}

const tmm_device_info *tmm_device_get_info(const tmm_device *device) { return &device->info; }

/* The heap tmm's device buffers come from: the largest device-local one. */
static uint32_t main_heap(const tmm_device_info *info)
{
    uint32_t best = 0;
    for (uint32_t i = 0; i < info->heap_count; i++)
        if (info->heaps[i].device_local &&
            (!info->heaps[best].device_local || info->heaps[i].size > info->heaps[best].size))
            best = i;
    return best;
}

void tmm_device_memory_budget(const tmm_device *device, tmm_memory_budget *out)
{
    const uint32_t heap = main_heap(&device->info);
    *out = (tmm_memory_budget){ .heap = heap, .reported = device->info.memory_budget };
    if (out->reported) {
        uint64_t budget[VK_MAX_MEMORY_HEAPS], usage[VK_MAX_MEMORY_HEAPS];
        read_budget(device->physical, budget, usage);
        out->budget = budget[heap];
        out->usage = usage[heap];
    } else {
        out->budget = device->info.heaps[heap].size;
        out->usage = tmm_allocator_heap_bytes(device, heap);
    }
}

uint32_t tmm_device_validation_messages(const tmm_device *device) { return device->validation_messages; }

tmm_status tmm_device_usable(const tmm_device *device)
{
    if (device->lost)
        return tmm_fail(TMM_ERR_DEVICE_LOST, "the device was lost earlier; create a new one");
    return TMM_OK;
}

tmm_status tmm_device_check(tmm_device *device, VkResult result, const char *what)
{
    if (result == VK_SUCCESS)
        return TMM_OK;
    if (result == VK_ERROR_DEVICE_LOST)
        device->lost = true;
    return tmm_vk_fail(result, what);
}

tmm_status tmm_device_wait_fence(tmm_device *device, VkFence fence)
{
    /* Long enough for any sane step on a slow CPU device. */
    const uint64_t timeout_ns = 30ull * 60 * 1000 * 1000 * 1000;
    VkResult r = vkWaitForFences(device->device, 1, &fence, VK_TRUE, timeout_ns);
    if (r == VK_TIMEOUT)
        return tmm_fail(TMM_ERR_DEVICE_LOST, "the device did not finish its work within 30 minutes");
    return tmm_device_check(device, r, "vkWaitForFences");
}

void tmm_device_set_dispatch_limit(tmm_device *d, uint32_t x, uint32_t y, uint32_t z)
{
    uint32_t v[3] = { x, y, z };
    for (int i = 0; i < 3; i++)
        d->dispatch_limit[i] = (v[i] && v[i] < d->info.max_workgroup_count[i]) ? v[i] : d->info.max_workgroup_count[i];
}
