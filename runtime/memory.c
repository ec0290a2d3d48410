/* Sub-allocator and buffers. Each VkBuffer is bound at an offset inside a
 * large VkDeviceMemory block, so a model's hundreds of tensors take a handful
 * of allocations (maxMemoryAllocationCount can be as low as 4096). Blocks
 * keep a sorted free list with first fit and coalescing; an empty block is
 * released at once. */
#include <stdlib.h>
#include <string.h>

#include "buffer.h"

#define DEFAULT_BLOCK_SIZE (64ull << 20)
#define STAGING_SIZE (16ull << 20)

typedef struct tmm_range {
    uint64_t offset, size;
} tmm_range;

typedef struct tmm_block {
    VkDeviceMemory memory;
    uint64_t size;
    uint32_t type;
    uint8_t *mapped;
    tmm_range *free;      /* sorted by offset, never adjacent */
    uint32_t n_free, cap_free;
    uint32_t live;        /* buffers in this block */
    struct tmm_block *next;
} tmm_block;

struct tmm_allocator {
    tmm_block *blocks;
    uint32_t n_blocks;
    uint64_t block_bytes;
    uint32_t buffers;
    uint64_t used, peak;
};

tmm_status tmm_allocator_create(tmm_device *device)
{
    device->allocator = calloc(1, sizeof *device->allocator);
    if (!device->allocator)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    return TMM_OK;
}

static void block_free(tmm_device *device, tmm_block *b)
{
    if (b->mapped)
        vkUnmapMemory(device->device, b->memory);
    vkFreeMemory(device->device, b->memory, NULL);
    free(b->free);
    free(b);
}

void tmm_allocator_destroy(tmm_device *device)
{
    struct tmm_allocator *a = device->allocator;
    if (!a)
        return;
    for (tmm_block *b = a->blocks, *next; b; b = next) {
        next = b->next;
        block_free(device, b);
    }
    free(a);
    device->allocator = NULL;
}

void tmm_device_memory_stats(const tmm_device *device, tmm_memory_stats *stats)
{
    const struct tmm_allocator *a = device->allocator;
    stats->blocks = a->n_blocks;
    stats->block_bytes = a->block_bytes;
    stats->buffers = a->buffers;
    stats->used_bytes = a->used;
    stats->peak_bytes = a->peak;
}

void tmm_device_memory_reset_peak(tmm_device *device) { device->allocator->peak = device->allocator->used; }

uint64_t tmm_allocator_heap_bytes(const tmm_device *device, uint32_t heap)
{
    uint64_t bytes = 0;
    for (const tmm_block *b = device->allocator->blocks; b; b = b->next)
        if (device->memory_properties.memoryTypes[b->type].heapIndex == heap)
            bytes += b->size;
    return bytes;
}

/* Device buffers are mapped for the host (no staging copies) on unified memory. */
static bool direct_mapping(const tmm_device *device)
{
    return device->info.unified_memory && !device->tuning.force_staging;
}

static int choose_type(const tmm_device *device, uint32_t allowed, tmm_memory_kind kind)
{
    const VkPhysicalDeviceMemoryProperties *mp = &device->memory_properties;
    const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    VkMemoryPropertyFlags prefs[3];
    int n = 0;
    if (kind == TMM_MEMORY_HOST) {
        prefs[n++] = host | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
        prefs[n++] = host;
    } else {
        if (direct_mapping(device))
            prefs[n++] = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | host;
        prefs[n++] = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
        prefs[n++] = 0;
    }
    for (int p = 0; p < n; p++)
        for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
            if ((allowed & (1u << i)) && (mp->memoryTypes[i].propertyFlags & prefs[p]) == prefs[p])
                return (int)i;
    return -1;
}

/* Room for one more free range. */
static bool reserve_range(tmm_block *b)
{
    if (b->n_free < b->cap_free)
        return true;
    uint32_t cap = b->cap_free * 2;
    tmm_range *nf = realloc(b->free, cap * sizeof *nf);
    if (!nf)
        return false;
    b->free = nf;
    b->cap_free = cap;
    return true;
}

static bool block_take(tmm_block *b, uint64_t size, uint64_t align, uint64_t *offset)
{
    for (uint32_t i = 0; i < b->n_free; i++) {
        tmm_range *r = &b->free[i];
        uint64_t start = (r->offset + align - 1) / align * align;
        if (start + size > r->offset + r->size)
            continue;
        uint64_t end = start + size, r_end = r->offset + r->size;
        /* Split the free range into [r.offset, start) and [end, r_end). */
        if (start > r->offset && end < r_end) {
            if (!reserve_range(b))
                return false;
            r = &b->free[i];
            memmove(&b->free[i + 2], &b->free[i + 1], (b->n_free - i - 1) * sizeof *r);
            b->free[i].size = start - r->offset;
            b->free[i + 1].offset = end;
            b->free[i + 1].size = r_end - end;
            b->n_free++;
        } else if (start > r->offset) {
            r->size = start - r->offset;
        } else if (end < r_end) {
            r->offset = end;
            r->size = r_end - end;
        } else {
            memmove(&b->free[i], &b->free[i + 1], (b->n_free - i - 1) * sizeof *r);
            b->n_free--;
        }
        *offset = start;
        return true;
    }
    return false;
}

static bool block_give(tmm_block *b, uint64_t offset, uint64_t size)
{
    uint32_t i = 0;
    while (i < b->n_free && b->free[i].offset < offset)
        i++;
    bool merge_prev = i > 0 && b->free[i - 1].offset + b->free[i - 1].size == offset;
    bool merge_next = i < b->n_free && offset + size == b->free[i].offset;
    if (merge_prev && merge_next) {
        b->free[i - 1].size += size + b->free[i].size;
        memmove(&b->free[i], &b->free[i + 1], (b->n_free - i - 1) * sizeof *b->free);
        b->n_free--;
    } else if (merge_prev) {
        b->free[i - 1].size += size;
    } else if (merge_next) {
        b->free[i].offset = offset;
        b->free[i].size += size;
    } else {
        if (!reserve_range(b))
            return false;
        memmove(&b->free[i + 1], &b->free[i], (b->n_free - i) * sizeof *b->free);
        b->free[i].offset = offset;
        b->free[i].size = size;
        b->n_free++;
    }
    return true;
}

static tmm_status block_new(tmm_device *device, uint32_t type, uint64_t size, tmm_block **out)
{
    struct tmm_allocator *a = device->allocator;
    if (a->n_blocks >= device->info.max_memory_allocation_count)
        return tmm_fail(TMM_ERR_OUT_OF_DEVICE_MEMORY, "the device allows only %u memory allocations",
                        device->info.max_memory_allocation_count);
    tmm_block *b = calloc(1, sizeof *b);
    if (!b || !(b->free = malloc(8 * sizeof *b->free))) {
        free(b);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    b->cap_free = 8;
    VkMemoryAllocateInfo mai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                 .allocationSize = size,
                                 .memoryTypeIndex = type };
    VkResult r = vkAllocateMemory(device->device, &mai, NULL, &b->memory);
    if (r != VK_SUCCESS) {
        free(b->free);
        free(b);
        return tmm_device_check(device, r, "vkAllocateMemory");
    }
    if (device->memory_properties.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
        void *p;
        r = vkMapMemory(device->device, b->memory, 0, VK_WHOLE_SIZE, 0, &p);
        if (r != VK_SUCCESS) {
            vkFreeMemory(device->device, b->memory, NULL);
            free(b->free);
            free(b);
            return tmm_device_check(device, r, "vkMapMemory");
        }
        b->mapped = p;
    }
    b->size = size;
    b->type = type;
    b->free[0] = (tmm_range){ 0, size };
    b->n_free = 1;
    b->next = a->blocks;
    a->blocks = b;
    a->n_blocks++;
    a->block_bytes += size;
    *out = b;
    return TMM_OK;
}

static void block_release_if_empty(tmm_device *device, tmm_block *b)
{
    if (b->live)
        return;
    struct tmm_allocator *a = device->allocator;
    for (tmm_block **p = &a->blocks; *p; p = &(*p)->next)
        if (*p == b) {
            *p = b->next;
            break;
        }
    a->n_blocks--;
    a->block_bytes -= b->size;
    block_free(device, b);
}

static tmm_status allocate(tmm_device *device, const VkMemoryRequirements *req, tmm_memory_kind kind,
                           tmm_block **block, uint64_t *offset)
{
    int type = choose_type(device, req->memoryTypeBits, kind);
    if (type < 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "no memory type suits a %s buffer",
                        kind == TMM_MEMORY_HOST ? "host-visible" : "device");
    if (req->size > device->info.max_memory_allocation_size)
        return tmm_fail(TMM_ERR_OUT_OF_DEVICE_MEMORY, "a buffer of %llu bytes exceeds the device's largest "
                        "allocation (%llu bytes)", (unsigned long long)req->size,
                        (unsigned long long)device->info.max_memory_allocation_size);
    for (tmm_block *b = device->allocator->blocks; b; b = b->next)
        if (b->type == (uint32_t)type && block_take(b, req->size, req->alignment, offset)) {
            *block = b;
            return TMM_OK;
        }
    uint64_t size = DEFAULT_BLOCK_SIZE;
    if (size > device->info.max_memory_allocation_size)
        size = device->info.max_memory_allocation_size;
    if (req->size > size)
        size = req->size;
    tmm_block *b;
    if (block_new(device, (uint32_t)type, size, &b) != TMM_OK) {
        /* A full-size block may not fit where the request alone does. */
        if (size == req->size)
            return TMM_ERR_OUT_OF_DEVICE_MEMORY;
        TMM_TRY(block_new(device, (uint32_t)type, req->size, &b));
    }
    if (!block_take(b, req->size, req->alignment, offset)) {
        block_release_if_empty(device, b);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    *block = b;
    return TMM_OK;
}

tmm_status tmm_buffer_create(tmm_device *device, uint64_t size, tmm_memory_kind kind, tmm_buffer **out)
{
    *out = NULL;
    TMM_TRY(tmm_device_usable(device));
    if (size == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a buffer needs a size above 0 bytes");
    tmm_buffer *buf = calloc(1, sizeof *buf);
    if (!buf)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    buf->device = device;
    buf->size = size;
    buf->kind = kind;
    VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = size,
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               .sharingMode = VK_SHARING_MODE_EXCLUSIVE };
    VkResult r = vkCreateBuffer(device->device, &bci, NULL, &buf->buffer);
    if (r != VK_SUCCESS) {
        free(buf);
        return tmm_device_check(device, r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device->device, buf->buffer, &req);
    tmm_status s = allocate(device, &req, kind, &buf->block, &buf->block_offset);
    if (s == TMM_OK) {
        r = vkBindBufferMemory(device->device, buf->buffer, buf->block->memory, buf->block_offset);
        if (r != VK_SUCCESS) {
            block_give(buf->block, buf->block_offset, req.size);
            block_release_if_empty(device, buf->block);
            s = tmm_device_check(device, r, "vkBindBufferMemory");
        }
    }
    if (s != TMM_OK) {
        vkDestroyBuffer(device->device, buf->buffer, NULL);
        free(buf);
        return s;
    }
    buf->block->live++;
    buf->alloc_size = req.size;
    if (buf->block->mapped && (kind == TMM_MEMORY_HOST || direct_mapping(device)))
        buf->mapped = buf->block->mapped + buf->block_offset;
    struct tmm_allocator *a = device->allocator;
    a->buffers++;
    a->used += size;
    if (a->used > a->peak)
        a->peak = a->used;
    *out = buf;
    return TMM_OK;
}

void tmm_buffer_destroy(tmm_buffer *buf)
{
    if (!buf)
        return;
    tmm_device *device = buf->device;
    vkDestroyBuffer(device->device, buf->buffer, NULL);
    buf->block->live--;
    block_give(buf->block, buf->block_offset, buf->alloc_size);
    block_release_if_empty(device, buf->block);
    device->allocator->buffers--;
    device->allocator->used -= buf->size;
    free(buf);
}



void *tmm_buffer_mapped(const tmm_buffer *buffer) { return buffer->mapped; }

static tmm_status check_range(const tmm_buffer *buf, uint64_t offset, uint64_t size, const char *what)
{
    if (offset > buf->size || size > buf->size - offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s of %llu bytes at offset %llu overruns a buffer of %llu bytes",
                        what, (unsigned long long)size, (unsigned long long)offset,
                        (unsigned long long)buf->size);
    return TMM_OK;
}

/* One copy between a buffer and the staging buffer, submitted and waited. */
static tmm_status staged_copy(tmm_device *device, VkBuffer src, uint64_t src_off, VkBuffer dst,
                              uint64_t dst_off, uint64_t size)
{
    VkCommandBuffer cmd = device->transfer_cmd;
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
    TMM_VK_TRY(vkBeginCommandBuffer(cmd, &bi));
    /* Order after earlier submissions' writes; make ours visible to the host
     * and to later submissions. */
    VkMemoryBarrier before = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                               .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                               .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before,
                         0, NULL, 0, NULL);
    VkBufferCopy region = { src_off, dst_off, size };
    vkCmdCopyBuffer(cmd, src, dst, 1, &region);
    VkMemoryBarrier after = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_MEMORY_READ_BIT |
                                               VK_ACCESS_MEMORY_WRITE_BIT };
    vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &after, 0, NULL,
                         0, NULL);
    TMM_VK_TRY(vkEndCommandBuffer(cmd));
    VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd };
    TMM_TRY(tmm_device_check(device, vkQueueSubmit(device->queue, 1, &si, device->transfer_fence),
                             "vkQueueSubmit"));
    tmm_status s = tmm_device_wait_fence(device, device->transfer_fence);
    vkResetFences(device->device, 1, &device->transfer_fence);
    return s;
}

static tmm_status ensure_staging(tmm_device *device)
{
    if (!device->staging)
        TMM_TRY(tmm_buffer_create(device, STAGING_SIZE, TMM_MEMORY_HOST, &device->staging));
    return TMM_OK;
}

tmm_status tmm_buffer_write(tmm_buffer *buf, uint64_t offset, const void *src, uint64_t size)
{
    tmm_device *device = buf->device;
    TMM_TRY(tmm_device_usable(device));
    TMM_TRY(check_range(buf, offset, size, "a write"));
    if (buf->mapped) {
        memcpy((uint8_t *)buf->mapped + offset, src, size);
        return TMM_OK;
    }
    TMM_TRY(ensure_staging(device));
    for (uint64_t done = 0; done < size; done += STAGING_SIZE) {
        uint64_t n = size - done < STAGING_SIZE ? size - done : STAGING_SIZE;
        memcpy(device->staging->mapped, (const uint8_t *)src + done, n);
        TMM_TRY(staged_copy(device, device->staging->buffer, 0, buf->buffer, offset + done, n));
    }
    return TMM_OK;
}

tmm_status tmm_buffer_read(const tmm_buffer *buf, uint64_t offset, void *dst, uint64_t size)
{
    tmm_device *device = buf->device;
    TMM_TRY(tmm_device_usable(device));
    TMM_TRY(check_range(buf, offset, size, "a read"));
    if (buf->mapped) {
        memcpy(dst, (const uint8_t *)buf->mapped + offset, size);
        return TMM_OK;
    }
    TMM_TRY(ensure_staging(device));
    for (uint64_t done = 0; done < size; done += STAGING_SIZE) {
        uint64_t n = size - done < STAGING_SIZE ? size - done : STAGING_SIZE;
        TMM_TRY(staged_copy(device, buf->buffer, offset + done, device->staging->buffer, 0, n));
        memcpy((uint8_t *)dst + done, device->staging->mapped, n);
    }
    return TMM_OK;
}
