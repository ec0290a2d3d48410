/* Buffers: device-local or host-visible storage buffers, sub-allocated from a
 * few large VkDeviceMemory blocks, with upload and download helpers. On
 * unified-memory devices (integrated GPUs, lavapipe) device buffers are
 * mapped and written directly; elsewhere through a staging buffer. */
#ifndef TMM_RT_BUFFER_H
#define TMM_RT_BUFFER_H

#include "device.h"

typedef enum tmm_memory_kind {
    TMM_MEMORY_DEVICE, /* fastest for kernels; mapped only on unified memory */
    TMM_MEMORY_HOST,   /* host-visible and coherent: per-step uploads and readbacks */
} tmm_memory_kind;

struct tmm_buffer {
    tmm_device *device;
    VkBuffer buffer;
    uint64_t size;
    tmm_memory_kind kind;
    void *mapped;                /* NULL unless host-visible */
    struct tmm_block *block;     /* sub-allocation: block and offset in it */
    uint64_t block_offset;
    uint64_t alloc_size;         /* bytes taken from the block (>= size) */
};

/* How a view's elements are stored: 32-bit floats, unless marked as 16-bit
 * values (two per 32-bit word, the lower index in the low half), which only
 * the ops that say so accept (tmm_op_matmul's B); offset and size stay in bytes. */
typedef enum tmm_elem { TMM_ELEM_F32 = 0, TMM_ELEM_F16, TMM_ELEM_BF16 } tmm_elem;

static inline uint64_t tmm_elem_size(tmm_elem e) { return e == TMM_ELEM_F32 ? 4 : 2; }

/* A byte range of a buffer. size 0 is not allowed where a view is bound. */
typedef struct tmm_view {
    tmm_buffer *buffer;
    uint64_t offset;
    uint64_t size;
    tmm_elem elem;
} tmm_view;

tmm_status tmm_buffer_create(tmm_device *device, uint64_t size, tmm_memory_kind kind,
                             tmm_buffer **out);
void tmm_buffer_destroy(tmm_buffer *buffer);
/* Host pointer to the contents, or NULL when the buffer is not host-visible. */
void *tmm_buffer_mapped(const tmm_buffer *buffer);
/* Copy bytes in or out; waits until done. Not to be called while a recorder
 * that writes the buffer is running. */
tmm_status tmm_buffer_write(tmm_buffer *buffer, uint64_t offset, const void *src, uint64_t size);
tmm_status tmm_buffer_read(const tmm_buffer *buffer, uint64_t offset, void *dst, uint64_t size);

static inline tmm_view tmm_whole(tmm_buffer *buffer)
{
    tmm_view v = { .buffer = buffer, .size = buffer->size };
    return v;
}

static inline tmm_view tmm_sub(tmm_buffer *buffer, uint64_t offset, uint64_t size)
{
    tmm_view v = { .buffer = buffer, .offset = offset, .size = size };
    return v;
}

/* The device's own allocations: what its buffers hold (their sizes, as
 * created), the most they held at once, and the memory blocks behind them.
 * This is "measured" memory on every device; tmm_device_memory_budget adds
 * the driver's view where the device reports one. */
typedef struct tmm_memory_stats {
    uint32_t blocks;          /* VkDeviceMemory objects held */
    uint64_t block_bytes;     /* their total size */
    uint32_t buffers;         /* live buffers */
    uint64_t used_bytes;      /* bytes of the live buffers */
    uint64_t peak_bytes;      /* the most used_bytes has been since the device was made or the peak reset */
} tmm_memory_stats;

void tmm_device_memory_stats(const tmm_device *device, tmm_memory_stats *stats);
/* Starts a new peak from what the buffers hold now. */
void tmm_device_memory_reset_peak(tmm_device *device);


/* Allocator lifetime (memory.c), used by device.c. */
tmm_status tmm_allocator_create(tmm_device *device);
void tmm_allocator_destroy(tmm_device *device);
/* Bytes of the memory blocks held in one heap. */
uint64_t tmm_allocator_heap_bytes(const tmm_device *device, uint32_t heap);

#endif
