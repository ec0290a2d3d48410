/* The device: instance, physical and logical device, one compute queue, and
 * the per-device state that buffers, pipelines and recorders share.
 * A device is used from one thread at a time. */
#ifndef TMM_RT_DEVICE_H
#define TMM_RT_DEVICE_H

#include <vulkan/vulkan.h>

#include "status.h"

struct tmm_spirv;

struct tmm_allocator;
struct tmm_pipeline_set;
typedef struct tmm_buffer tmm_buffer;

typedef enum tmm_pipeline_cache_state {
    TMM_PIPELINE_CACHE_DISABLED,
    TMM_PIPELINE_CACHE_EMPTY,    /* no usable file yet: starts empty */
    TMM_PIPELINE_CACHE_LOADED,   /* read from disk */
    TMM_PIPELINE_CACHE_IGNORED,  /* a file was there but corrupt or for another device */
} tmm_pipeline_cache_state;

/* Settings that let tests reach, on small shapes, the code paths that real
 * shapes reach only at large sizes. Per device (never process-wide); zero is
 * the default of every field, and production code never sets them. */
typedef struct tmm_device_tuning {
    uint32_t loop_budget;     /* loop iterations per invocation the Toeplitz, FFT and attention kernels plan
                                 for (0: their TMM_MAX_LOOP defaults; lower: many passes on short inputs) */
    uint32_t kernel_variant;  /* Toeplitz direct kernels: 0 per device type, else a tmm_toeplitz_variant */
    uint32_t ssd_block;       /* SSD chunk products: outputs per invocation BK x BK (0: 16 on CPU devices,
                                 8 on GPUs; at most 16) */
    uint32_t max_chunk_rows;  /* FFT path: channel rows per chunk (0: as many as a binding holds) */
    uint32_t reduce_variant;  /* reductions (LayerNorm and RMSNorm statistics, cross-entropy, the naive
                                 attention's softmax, the optimizer's gradient norm): 0 per device (subgroup
                                 arithmetic on GPUs that have it in compute), 1 the plain kernels, 2
                                 subgroups wherever the device has them */
    uint32_t matmul_tile[3];  /* tiled matmul: invocations per axis, outputs per invocation per axis, k per
                                 step (0, or a shape the device cannot run: from its limits) */
    bool no_coopmat;          /* AUTO matmuls keep the fp32 kernels where the cooperative-matrix one would
                                 apply (the bit-for-bit claims of docs/model.md are theirs) */
    bool no_fused_act;        /* the training forward's MLP keeps its SiLU or GELU as a pass of its own after
                                 the matmul instead of the matmul's epilogue (tests compare the two) */
    bool force_staging;       /* device buffers use staged copies even on unified memory: the discrete-GPU
                                 path (set before creating buffers) */
} tmm_device_tuning;

struct tmm_device {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice physical;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    tmm_device_info info;
    VkPhysicalDeviceMemoryProperties memory_properties;

    /* one-shot submissions (buffer uploads and downloads) */
    VkCommandPool command_pool;
    VkCommandBuffer transfer_cmd;
    VkFence transfer_fence;
    tmm_buffer *staging;

    struct tmm_allocator *allocator;
    struct tmm_pipeline_set *pipelines;
    VkPipelineCache pipeline_cache;
    tmm_pipeline_cache_state pipeline_cache_state;
    char *pipeline_cache_path;

    uint32_t dispatch_limit[3];  /* workgroups per dispatch before splitting */
    tmm_device_tuning tuning;
    int coopmat_check[2]; /* the cooperative-matrix matmul's self-check (src/ops/matmul_coopmat.c), fp16 [0]
                           and bf16 [1]: 0 not run yet, 1 passed, -1 failed (that path is off on this device),
                           2 running */
    struct tmm_coopmat_module {           /* KHR rewrites of NV modules (runtime/coopmat.h) */
        const struct tmm_spirv *nv;       /* the embedded module it was made from */
        bool bf16;                        /* its 16-bit matrices made bf16 */
        struct tmm_spirv *khr;            /* malloc'ed, with its code */
    } coopmat_modules[4];
    uint32_t n_coopmat_modules;
    /* the benches' roofline ceilings (src/bench/bench_peaks.c): measured at
       their first use on this device (seconds) and kept */
    bool peaks_measured;
    double peak_copy_gbs, peak_matmul_gflops;
    bool validate;
    bool lost;
    uint32_t validation_messages;
};

/* The largest device index --device and TMM_DEVICE accept. */
#define TMM_MAX_DEVICE_INDEX 1000
/* $TMM_DEVICE as a device index (-1 when unset), checked like --device. */
tmm_status tmm_env_device_index(int *index);

/* Maps a VkResult from the device's queue; marks the device lost when it is. */
tmm_status tmm_device_check(tmm_device *device, VkResult result, const char *what);
/* Fails early with TMM_ERR_DEVICE_LOST once the device has been lost. */
tmm_status tmm_device_usable(const tmm_device *device);
/* Waits for a fence with a generous timeout, reporting a hang as an error. */
tmm_status tmm_device_wait_fence(tmm_device *device, VkFence fence);

/* Pipeline cache on disk (pipeline_cache.c). */
tmm_status tmm_pipeline_cache_open(tmm_device *device, bool disabled);
void tmm_pipeline_cache_close(tmm_device *device);
/* Directory for caches: $TMM_CACHE_DIR, $XDG_CACHE_HOME/tmm or ~/.cache/tmm. */
tmm_status tmm_cache_dir(char *out, size_t size);
tmm_pipeline_cache_state tmm_device_pipeline_cache_state(const tmm_device *device);
const char *tmm_device_pipeline_cache_path(const tmm_device *device);

/* The memory of the heap tmm's device buffers come from (the largest
 * device-local one), as the driver sees it now. */
typedef struct tmm_memory_budget {
    uint32_t heap;      /* its index */
    uint64_t budget;    /* bytes this process may allocate from it */
    uint64_t usage;     /* bytes this process has allocated from it */
    bool reported;      /* by VK_EXT_memory_budget; otherwise budget is the heap's size and usage
                           this device's own memory blocks in it */
} tmm_memory_budget;
void tmm_device_memory_budget(const tmm_device *device, tmm_memory_budget *out);

/* Lower the per-dispatch workgroup limits (tests use this to exercise the
 * splitting of large dispatches); values above the device limits are clamped. */
void tmm_device_set_dispatch_limit(tmm_device *device, uint32_t x, uint32_t y, uint32_t z);

#endif
