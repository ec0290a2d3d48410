#include "status.h"

#include <stdarg.h>
#include <stdio.h>

#if defined(_MSC_VER)
#define TMM_THREAD_LOCAL __declspec(thread)
#else
#define TMM_THREAD_LOCAL _Thread_local
#endif

static TMM_THREAD_LOCAL char last_error[1024];

const char *tmm_version(void) { return TMM_VERSION_STRING; }

const char *tmm_last_error(void) { return last_error; }

const char *tmm_status_name(tmm_status status)
{
    switch (status) {
    case TMM_OK: return "ok";
    case TMM_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TMM_ERR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case TMM_ERR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case TMM_ERR_NO_DEVICE: return "no device";
    case TMM_ERR_DEVICE_LOST: return "device lost";
    case TMM_ERR_UNSUPPORTED: return "unsupported";
    case TMM_ERR_VULKAN: return "Vulkan error";
    case TMM_ERR_IO: return "I/O error";
    case TMM_ERR_FFT: return "FFT error";
    }
    return "unknown status";
}

tmm_status tmm_fail(tmm_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

void tmm_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tmm: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *tmm_vk_result_name(VkResult result)
{
    switch (result) {
#define CASE(x) case x: return #x;
    CASE(VK_SUCCESS) CASE(VK_NOT_READY) CASE(VK_TIMEOUT) CASE(VK_INCOMPLETE)
    CASE(VK_ERROR_OUT_OF_HOST_MEMORY) CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CASE(VK_ERROR_INITIALIZATION_FAILED) CASE(VK_ERROR_DEVICE_LOST)
    CASE(VK_ERROR_MEMORY_MAP_FAILED) CASE(VK_ERROR_LAYER_NOT_PRESENT)
    CASE(VK_ERROR_EXTENSION_NOT_PRESENT) CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    CASE(VK_ERROR_INCOMPATIBLE_DRIVER) CASE(VK_ERROR_TOO_MANY_OBJECTS)
    CASE(VK_ERROR_FORMAT_NOT_SUPPORTED) CASE(VK_ERROR_FRAGMENTED_POOL)
    CASE(VK_ERROR_OUT_OF_POOL_MEMORY) CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    CASE(VK_ERROR_FRAGMENTATION) CASE(VK_ERROR_UNKNOWN)
#undef CASE
    default: return "VkResult(unknown)";
    }
}

tmm_status tmm_vk_fail(VkResult result, const char *what)
{
    tmm_status status;
    const char *hint = "";
    switch (result) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
        status = TMM_ERR_OUT_OF_HOST_MEMORY;
        hint = " (the host ran out of memory)";
        break;
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS:
    case VK_ERROR_FRAGMENTATION:
        status = TMM_ERR_OUT_OF_DEVICE_MEMORY;
        hint = " (the device ran out of memory: try a smaller batch or model)";
        break;
    case VK_ERROR_DEVICE_LOST:
        status = TMM_ERR_DEVICE_LOST;
        hint = " (the driver lost the device: a kernel may have hung or the GPU was reset)";
        break;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
        status = TMM_ERR_NO_DEVICE;
        hint = " (no compatible Vulkan driver: install one, e.g. mesa-vulkan-drivers)";
        break;
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_LAYER_NOT_PRESENT:
        status = TMM_ERR_UNSUPPORTED;
        break;
    default:
        status = TMM_ERR_VULKAN;
        break;
    }
    return tmm_fail(status, "%s failed with %s%s", what, tmm_vk_result_name(result), hint);
}
