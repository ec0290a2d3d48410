/* The VkPipelineCache on disk: one file per device UUID and driver version,
 * so the second run skips most shader compilation. Our own header with a
 * checksum guards the driver against corrupt files: a bad file is ignored
 * with a warning and replaced at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "files.h"

/* The pipeline cache holds compiled kernels; a larger file is not ours. */
#define PIPELINE_CACHE_MAX_BYTES (1ull << 30)

#define MAGIC "TMMPCv1"

typedef struct file_header {
    char magic[8];
    uint64_t size;      /* bytes of driver data that follow */
    uint64_t checksum;  /* FNV-1a of that data */
} file_header;

tmm_status tmm_cache_dir(char *out, size_t size)
{
    const char *v;
    int n;
    if ((v = getenv("TMM_CACHE_DIR")) && *v)
        n = snprintf(out, size, "%s", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v)
        n = snprintf(out, size, "%s/tmm", v);
    else if ((v = getenv("HOME")) && *v)
        n = snprintf(out, size, "%s/.cache/tmm", v);
    else if ((v = getenv("LOCALAPPDATA")) && *v)
        n = snprintf(out, size, "%s/tmm", v);
    else
        return tmm_fail(TMM_ERR_IO, "no cache directory: set TMM_CACHE_DIR, XDG_CACHE_HOME or HOME");
    if (n < 0 || (size_t)n >= size)
        return tmm_fail(TMM_ERR_IO, "cache directory path too long");
    return TMM_OK;
}

/* Checks our header and the driver's own header (VkPipelineCacheHeaderVersionOne). */
static bool valid_cache(const tmm_device *d, const unsigned char *data, size_t size)
{
    file_header h;
    if (size < sizeof h)
        return false;
    memcpy(&h, data, sizeof h);
    if (memcmp(h.magic, MAGIC, 8) != 0 || h.size != size - sizeof h ||
        h.checksum != tmm_fnv1a64(data + sizeof h, h.size))
        return false;
    const unsigned char *p = data + sizeof h;
    uint32_t fields[4];
    if (h.size < 16 + VK_UUID_SIZE)
        return false;
    memcpy(fields, p, 16);
    return fields[0] >= 16 + VK_UUID_SIZE && fields[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           fields[2] == d->info.vendor_id && fields[3] == d->info.device_id &&
           memcmp(p + 16, d->info.pipeline_cache_uuid, VK_UUID_SIZE) == 0;
}

tmm_status tmm_pipeline_cache_open(tmm_device *d, bool disabled)
{
    VkPipelineCacheCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO };
    void *file = NULL;
    d->pipeline_cache_state = TMM_PIPELINE_CACHE_DISABLED;
    char dir[2048];
    if (!disabled && tmm_cache_dir(dir, sizeof dir) == TMM_OK) {
        size_t len = strlen(dir) + 128;
        d->pipeline_cache_path = malloc(len);
        if (!d->pipeline_cache_path)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        int n = snprintf(d->pipeline_cache_path, len, "%s/pipelines-", dir);
        for (int i = 0; i < 16; i++)
            n += snprintf(d->pipeline_cache_path + n, len - (size_t)n, "%02x", d->info.device_uuid[i]);
        snprintf(d->pipeline_cache_path + n, len - (size_t)n, "-%08x.bin", d->info.driver_version);
        d->pipeline_cache_state = TMM_PIPELINE_CACHE_EMPTY;
        size_t size = 0;
        if (tmm_read_file(d->pipeline_cache_path, "pipeline cache", PIPELINE_CACHE_MAX_BYTES, &file, &size) == TMM_OK) {
            if (valid_cache(d, file, size)) {
                ci.initialDataSize = size - sizeof(file_header);
                ci.pInitialData = (unsigned char *)file + sizeof(file_header);
                d->pipeline_cache_state = TMM_PIPELINE_CACHE_LOADED;
            } else {
                tmm_warn("ignoring corrupt pipeline cache %s (it will be rewritten)", d->pipeline_cache_path);
                d->pipeline_cache_state = TMM_PIPELINE_CACHE_IGNORED;
            }
        }
    }
    VkResult r = vkCreatePipelineCache(d->device, &ci, NULL, &d->pipeline_cache);
    if (r != VK_SUCCESS && ci.initialDataSize) {
        tmm_warn("the driver rejected pipeline cache %s; starting empty", d->pipeline_cache_path);
        d->pipeline_cache_state = TMM_PIPELINE_CACHE_IGNORED;
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(d->device, &ci, NULL, &d->pipeline_cache);
    }
    free(file);
    return tmm_device_check(d, r, "vkCreatePipelineCache");
}

static void save(tmm_device *d)
{
    size_t size = 0;
    if (vkGetPipelineCacheData(d->device, d->pipeline_cache, &size, NULL) != VK_SUCCESS || size == 0)
        return;
    unsigned char *buf = malloc(sizeof(file_header) + size);
    if (!buf)
        return;
    file_header h = { MAGIC, 0, 0 };
    if (vkGetPipelineCacheData(d->device, d->pipeline_cache, &size, buf + sizeof h) == VK_SUCCESS) {
        h.size = size;
        h.checksum = tmm_fnv1a64(buf + sizeof h, size);
        memcpy(buf, &h, sizeof h);
        char *slash = strrchr(d->pipeline_cache_path, '/');
        if (slash) {
            *slash = '\0';
            tmm_status s = tmm_make_dirs(d->pipeline_cache_path);
            *slash = '/';
            if (s != TMM_OK) {
                tmm_warn("not saving the pipeline cache: %s", tmm_last_error());
                free(buf);
                return;
            }
        }
        if (tmm_write_file_atomic(d->pipeline_cache_path, buf, sizeof h + size) != TMM_OK)
            tmm_warn("not saving the pipeline cache: %s", tmm_last_error());
    }
    free(buf);
}

void tmm_pipeline_cache_close(tmm_device *d)
{
    if (!d->pipeline_cache)
        return;
    if (d->pipeline_cache_path && !d->lost)
        save(d);
    vkDestroyPipelineCache(d->device, d->pipeline_cache, NULL);
    d->pipeline_cache = VK_NULL_HANDLE;
}

tmm_pipeline_cache_state tmm_device_pipeline_cache_state(const tmm_device *d) { return d->pipeline_cache_state; }

const char *tmm_device_pipeline_cache_path(const tmm_device *d) { return d->pipeline_cache_path; }
