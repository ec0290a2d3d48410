/* Recorder: one primary command buffer, its descriptor sets and timestamp
 * queries. Accesses since the last barrier are tracked per buffer range; a
 * dispatch that conflicts with one (read-after-write, write-after-write,
 * write-after-read) gets a memory barrier first. */
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

#define MAX_REGIONS 1024
#define SETS_PER_POOL 256

typedef struct tracked {
    VkBuffer buffer;
    uint64_t offset, size;
    bool write;
} tracked;

struct tmm_recorder {
    tmm_device *device;
    VkCommandBuffer cmd;
    VkFence fence;
    bool recording, recorded, pending;

    VkDescriptorPool *pools;
    uint32_t n_pools, cur_pool, sets_in_pool;

    tracked *acc;
    uint32_t n_acc, cap_acc;
    bool after_external;

    VkQueryPool queries;
    const char *labels[MAX_REGIONS];
    tmm_region_work work[MAX_REGIONS];
    uint32_t n_regions;
    bool region_open;

    uint32_t dispatches, commands, barriers;
};

tmm_status tmm_recorder_create(tmm_device *device, tmm_recorder **out)
{
    *out = NULL;
    TMM_TRY(tmm_device_usable(device));
    tmm_recorder *r = calloc(1, sizeof *r);
    if (!r)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    r->device = device;
    *out = r;
    VkCommandBufferAllocateInfo cai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                        .commandPool = device->command_pool,
                                        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                        .commandBufferCount = 1 };
    VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    VkResult vr = vkAllocateCommandBuffers(device->device, &cai, &r->cmd);
    if (vr == VK_SUCCESS)
        vr = vkCreateFence(device->device, &fci, NULL, &r->fence);
    if (vr == VK_SUCCESS && device->info.timestamp_valid_bits) {
        VkQueryPoolCreateInfo qci = { .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                      .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                      .queryCount = 2 * MAX_REGIONS };
        vr = vkCreateQueryPool(device->device, &qci, NULL, &r->queries);
    }
    if (vr != VK_SUCCESS) {
        tmm_recorder_destroy(r);
        *out = NULL;
        return tmm_device_check(device, vr, "creating a recorder");
    }
    return TMM_OK;
}

void tmm_recorder_destroy(tmm_recorder *r)
{
    if (!r)
        return;
    VkDevice dev = r->device->device;
    if (r->pending && !r->device->lost)
        vkWaitForFences(dev, 1, &r->fence, VK_TRUE, UINT64_MAX);
    for (uint32_t i = 0; i < r->n_pools; i++)
        vkDestroyDescriptorPool(dev, r->pools[i], NULL);
    free(r->pools);
    free(r->acc);
    if (r->queries)
        vkDestroyQueryPool(dev, r->queries, NULL);
    if (r->fence)
        vkDestroyFence(dev, r->fence, NULL);
    if (r->cmd)
        vkFreeCommandBuffers(dev, r->device->command_pool, 1, &r->cmd);
    free(r);
}

tmm_device *tmm_recorder_device(const tmm_recorder *r) { return r->device; }

static void emit_barrier(tmm_recorder *r)
{
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT };
    const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(r->cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
    r->n_acc = 0;
    r->after_external = false;
    r->barriers++;
}

tmm_status tmm_recorder_wait(tmm_recorder *r)
{
    if (!r->pending)
        return TMM_OK;
    r->pending = false;
    tmm_status s = tmm_device_wait_fence(r->device, r->fence);
    vkResetFences(r->device->device, 1, &r->fence);
    return s;
}

tmm_status tmm_recorder_begin(tmm_recorder *r)
{
    TMM_TRY(tmm_device_usable(r->device));
    TMM_TRY(tmm_recorder_wait(r));
    TMM_TRY(tmm_device_check(r->device, vkResetCommandBuffer(r->cmd, 0), "vkResetCommandBuffer"));
    for (uint32_t i = 0; i < r->n_pools; i++)
        vkResetDescriptorPool(r->device->device, r->pools[i], 0);
    r->cur_pool = 0;
    r->sets_in_pool = 0;
    r->n_acc = 0;
    r->after_external = false;
    r->n_regions = 0;
    r->region_open = false;
    memset(r->work, 0, sizeof r->work);
    r->dispatches = r->commands = r->barriers = 0;
    r->recorded = false;
    VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
    TMM_TRY(tmm_device_check(r->device, vkBeginCommandBuffer(r->cmd, &bi), "vkBeginCommandBuffer"));
    r->recording = true;
    /* Order this recording after earlier submissions (uploads, other recorders). */
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT };
    vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                         NULL, 0, NULL);
    if (r->queries)
        vkCmdResetQueryPool(r->cmd, r->queries, 0, 2 * MAX_REGIONS);
    return TMM_OK;
}

static tmm_status check_recording(const tmm_recorder *r)
{
    if (!r->recording)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "record call outside tmm_recorder_begin/end");
    return TMM_OK;
}

static tmm_status check_view(const tmm_device *d, tmm_view v, bool bound, const char *what)
{
    if (!v.buffer || v.size == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: empty view", what);
    if (v.offset > v.buffer->size || v.size > v.buffer->size - v.offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: view [%llu, +%llu) overruns a buffer of %llu bytes", what,
                        (unsigned long long)v.offset, (unsigned long long)v.size,
                        (unsigned long long)v.buffer->size);
    if (bound && v.size > d->info.max_storage_buffer_range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: binding %llu bytes exceeds the device's maxStorageBufferRange "
                        "(%llu bytes); split the op", what, (unsigned long long)v.size,
                        (unsigned long long)d->info.max_storage_buffer_range);
    if (bound && v.offset % d->info.min_storage_buffer_offset_alignment)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: offset %llu is not a multiple of the device's "
                        "minStorageBufferOffsetAlignment (%llu)", what, (unsigned long long)v.offset,
                        (unsigned long long)d->info.min_storage_buffer_offset_alignment);
    return TMM_OK;
}

static bool conflicts(const tmm_recorder *r, tmm_view v, bool write)
{
    if (r->after_external)
        return true;
    for (uint32_t i = 0; i < r->n_acc; i++) {
        const tracked *t = &r->acc[i];
        if (t->buffer != v.buffer->buffer || !(t->write || write))
            continue;
        if (v.offset < t->offset + t->size && t->offset < v.offset + v.size)
            return true;
    }
    return false;
}

static tmm_status track(tmm_recorder *r, tmm_view v, bool write)
{
    if (r->n_acc == r->cap_acc) {
        uint32_t cap = r->cap_acc ? r->cap_acc * 2 : 64;
        tracked *acc = realloc(r->acc, cap * sizeof *acc);
        if (!acc)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        r->acc = acc;
        r->cap_acc = cap;
    }
    r->acc[r->n_acc++] = (tracked){ v.buffer->buffer, v.offset, v.size, write };
    return TMM_OK;
}

/* Barrier first if any access conflicts, then track them all. */
static tmm_status order_accesses(tmm_recorder *r, const tmm_arg *args, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (conflicts(r, args[i].view, args[i].access & TMM_WRITE)) {
            emit_barrier(r);
            break;
        }
    for (uint32_t i = 0; i < n; i++)
        TMM_TRY(track(r, args[i].view, args[i].access & TMM_WRITE));
    return TMM_OK;
}

static tmm_status allocate_set(tmm_recorder *r, VkDescriptorSetLayout layout, VkDescriptorSet *set)
{
    VkDevice dev = r->device->device;
    if (r->cur_pool == r->n_pools || r->sets_in_pool == SETS_PER_POOL) {
        if (r->n_pools > 0 && r->sets_in_pool == SETS_PER_POOL)
            r->cur_pool++;
        r->sets_in_pool = 0;
        if (r->cur_pool == r->n_pools) {
            VkDescriptorPool *pools = realloc(r->pools, (r->n_pools + 1) * sizeof *pools);
            if (!pools)
                return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            r->pools = pools;
            VkDescriptorPoolSize size = { VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, SETS_PER_POOL * TMM_MAX_BINDINGS };
            VkDescriptorPoolCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                              .maxSets = SETS_PER_POOL,
                                              .poolSizeCount = 1,
                                              .pPoolSizes = &size };
            TMM_TRY(tmm_device_check(r->device, vkCreateDescriptorPool(dev, &ci, NULL, &r->pools[r->n_pools]),
                                     "vkCreateDescriptorPool"));
            r->n_pools++;
        }
    }
    VkDescriptorSetAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                       .descriptorPool = r->pools[r->cur_pool],
                                       .descriptorSetCount = 1,
                                       .pSetLayouts = &layout };
    TMM_TRY(tmm_device_check(r->device, vkAllocateDescriptorSets(dev, &ai, set), "vkAllocateDescriptorSets"));
    r->sets_in_pool++;
    return TMM_OK;
}

/* The open region's work, or NULL. */
static tmm_region_work *open_work(tmm_recorder *r) { return r->region_open ? &r->work[r->n_regions] : NULL; }

static void count_args(tmm_recorder *r, const tmm_arg *args, uint32_t n_args)
{
    tmm_region_work *w = open_work(r);
    for (uint32_t i = 0; w && i < n_args; i++)
        w->bytes += args[i].view.size * (args[i].access == TMM_READ_WRITE ? 2u : 1u);
}

static void count_command(tmm_recorder *r)
{
    r->commands++;
    if (open_work(r))
        open_work(r)->commands++;
}

void tmm_record_flops(tmm_recorder *r, double flops)
{
    tmm_region_work *w = open_work(r);
    if (w)
        w->flops += flops;
}

tmm_status tmm_recorder_region_work(const tmm_recorder *r, uint32_t i, tmm_region_work *out)
{
    if (i >= r->n_regions)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "region %u of %u", i, r->n_regions);
    *out = r->work[i];
    out->label = r->labels[i];
    return TMM_OK;
}

tmm_status tmm_record_dispatch(tmm_recorder *r, tmm_pipeline *p, const tmm_arg *args, uint32_t n_args,
                               const void *push, uint32_t gx, uint32_t gy, uint32_t gz)
{
    TMM_TRY(check_recording(r));
    const char *name = p->kernel.spirv->name;
    if (n_args != p->kernel.n_buffers)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel %s takes %u buffers, got %u", name,
                        p->kernel.n_buffers, n_args);
    for (uint32_t i = 0; i < n_args; i++)
        TMM_TRY(check_view(r->device, args[i].view, true, name));
    if ((uint64_t)gx * gy * gz == 0)
        return TMM_OK;
    TMM_TRY(order_accesses(r, args, n_args));
    count_args(r, args, n_args);

    VkDescriptorSet set;
    TMM_TRY(allocate_set(r, p->set_layout, &set));
    VkDescriptorBufferInfo infos[TMM_MAX_BINDINGS];
    VkWriteDescriptorSet writes[TMM_MAX_BINDINGS];
    for (uint32_t i = 0; i < n_args; i++) {
        infos[i] = (VkDescriptorBufferInfo){ args[i].view.buffer->buffer, args[i].view.offset, args[i].view.size };
        writes[i] = (VkWriteDescriptorSet){ .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                            .dstSet = set,
                                            .dstBinding = i,
                                            .descriptorCount = 1,
                                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                            .pBufferInfo = &infos[i] };
    }
    vkUpdateDescriptorSets(r->device->device, n_args, writes, 0, NULL);
    vkCmdBindPipeline(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    vkCmdBindDescriptorSets(r->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    if (p->kernel.push_size)
        vkCmdPushConstants(r->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->kernel.push_size, push);

    /* Split along each axis at the device limit; the base keeps gl_WorkGroupID global. */
    const uint32_t *lim = r->device->dispatch_limit;
    for (uint32_t z = 0; z < gz; z += lim[2])
        for (uint32_t y = 0; y < gy; y += lim[1])
            for (uint32_t x = 0; x < gx; x += lim[0]) {
                uint32_t cx = gx - x < lim[0] ? gx - x : lim[0];
                uint32_t cy = gy - y < lim[1] ? gy - y : lim[1];
                uint32_t cz = gz - z < lim[2] ? gz - z : lim[2];
                vkCmdDispatchBase(r->cmd, x, y, z, cx, cy, cz);
                r->dispatches++;
                count_command(r);
            }
    return TMM_OK;
}

tmm_status tmm_record_copy(tmm_recorder *r, tmm_view src, tmm_view dst)
{
    TMM_TRY(check_recording(r));
    TMM_TRY(check_view(r->device, src, false, "copy source"));
    TMM_TRY(check_view(r->device, dst, false, "copy destination"));
    if (src.size != dst.size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "copy of %llu bytes into a view of %llu bytes",
                        (unsigned long long)src.size, (unsigned long long)dst.size);
    tmm_arg args[2] = { tmm_in(src), tmm_out(dst) };
    TMM_TRY(order_accesses(r, args, 2));
    count_args(r, args, 2);
    count_command(r);
    VkBufferCopy region = { src.offset, dst.offset, src.size };
    vkCmdCopyBuffer(r->cmd, src.buffer->buffer, dst.buffer->buffer, 1, &region);
    return TMM_OK;
}

tmm_status tmm_record_fill_u32(tmm_recorder *r, tmm_view dst, uint32_t value)
{
    TMM_TRY(check_recording(r));
    TMM_TRY(check_view(r->device, dst, false, "fill"));
    if (dst.offset % 4 || dst.size % 4)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "fill needs an offset and size that are multiples of 4");
    tmm_arg arg = tmm_out(dst);
    TMM_TRY(order_accesses(r, &arg, 1));
    count_args(r, &arg, 1);
    count_command(r);
    vkCmdFillBuffer(r->cmd, dst.buffer->buffer, dst.offset, dst.size, value);
    return TMM_OK;
}

tmm_status tmm_record_barrier(tmm_recorder *r)
{
    TMM_TRY(check_recording(r));
    emit_barrier(r);
    return TMM_OK;
}

tmm_status tmm_record_external(tmm_recorder *r, VkCommandBuffer *cmd)
{
    TMM_TRY(check_recording(r));
    if (r->n_acc || r->after_external)
        emit_barrier(r);
    r->after_external = true;
    if (open_work(r))
        open_work(r)->externals++;
    *cmd = r->cmd;
    return TMM_OK;
}

tmm_status tmm_record_region_begin(tmm_recorder *r, const char *label)
{
    TMM_TRY(check_recording(r));
    if (r->region_open)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "timed regions do not nest (region '%s' is open)",
                        r->labels[r->n_regions]);
    if (r->n_regions == MAX_REGIONS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "more than %d timed regions in one recording", MAX_REGIONS);
    r->labels[r->n_regions] = label;
    r->region_open = true;
    if (r->queries)
        vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->queries, 2 * r->n_regions);
    return TMM_OK;
}

tmm_status tmm_record_region_end(tmm_recorder *r)
{
    TMM_TRY(check_recording(r));
    if (!r->region_open)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_record_region_end without a region");
    if (r->queries)
        vkCmdWriteTimestamp(r->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->queries, 2 * r->n_regions + 1);
    r->region_open = false;
    r->n_regions++;
    return TMM_OK;
}

tmm_status tmm_recorder_end(tmm_recorder *r)
{
    TMM_TRY(check_recording(r));
    if (r->region_open)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "region '%s' was not ended", r->labels[r->n_regions]);
    /* Make all results visible to the host (readbacks of mapped memory). */
    VkMemoryBarrier mb = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_HOST_READ_BIT };
    vkCmdPipelineBarrier(r->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    r->recording = false;
    TMM_TRY(tmm_device_check(r->device, vkEndCommandBuffer(r->cmd), "vkEndCommandBuffer"));
    r->recorded = true;
    return TMM_OK;
}

tmm_status tmm_recorder_submit(tmm_recorder *r)
{
    TMM_TRY(tmm_device_usable(r->device));
    if (!r->recorded)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "submit before tmm_recorder_end");
    TMM_TRY(tmm_recorder_wait(r));
    VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &r->cmd };
    TMM_TRY(tmm_device_check(r->device, vkQueueSubmit(r->device->queue, 1, &si, r->fence), "vkQueueSubmit"));
    r->pending = true;
    return TMM_OK;
}

tmm_status tmm_recorder_run(tmm_recorder *r)
{
    TMM_TRY(tmm_recorder_submit(r));
    return tmm_recorder_wait(r);
}

tmm_status tmm_record_once(tmm_device *device, tmm_status (*record)(tmm_recorder *, void *), void *arg)
{
    tmm_recorder *r;
    TMM_TRY(tmm_recorder_create(device, &r));
    tmm_status s;
    if ((s = tmm_recorder_begin(r)) == TMM_OK && (s = record(r, arg)) == TMM_OK && (s = tmm_recorder_end(r)) == TMM_OK)
        s = tmm_recorder_run(r);
    tmm_recorder_destroy(r);
    return s;
}

uint32_t tmm_recorder_dispatches(const tmm_recorder *r) { return r->dispatches; }
uint32_t tmm_recorder_commands(const tmm_recorder *r) { return r->commands; }
uint32_t tmm_recorder_barriers(const tmm_recorder *r) { return r->barriers; }
uint32_t tmm_recorder_regions(const tmm_recorder *r) { return r->n_regions; }

tmm_status tmm_recorder_region_time(const tmm_recorder *r, uint32_t i, const char **label, double *ms)
{
    if (i >= r->n_regions)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "region %u of %u", i, r->n_regions);
    if (label)
        *label = r->labels[i];
    if (!r->queries)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "the device's compute queue has no timestamps");
    if (r->pending)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "region times are ready after tmm_recorder_wait");
    uint64_t t[2];
    VkResult vr = vkGetQueryPoolResults(r->device->device, r->queries, 2 * i, 2, sizeof t, t, sizeof t[0],
                                        VK_QUERY_RESULT_64_BIT);
    if (vr == VK_NOT_READY)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "region %u has not run yet", i);
    TMM_TRY(tmm_device_check(r->device, vr, "vkGetQueryPoolResults"));
    uint32_t bits = r->device->info.timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t ticks = ((t[1] & mask) - (t[0] & mask)) & mask;
    *ms = (double)ticks * (double)r->device->info.timestamp_period_ns * 1e-6;
    return TMM_OK;
}
