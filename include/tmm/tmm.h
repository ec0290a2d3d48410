/* tmm: a vendor-neutral Vulkan runtime for Toeplitz MLP Mixer language models.
 *
 * Public API. Every function that can fail returns a tmm_status; on failure
 * tmm_last_error() holds a one-line message that says what went wrong. */
#ifndef TMM_TMM_H
#define TMM_TMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API: the only symbols libtmm.so exports (the library is
 * compiled with hidden visibility). */
#if defined(TMM_BUILDING_LIBRARY) && (defined(__GNUC__) || defined(__clang__))
#define TMM_API __attribute__((visibility("default")))
#else
#define TMM_API
#endif

typedef enum tmm_status {
    TMM_OK = 0,
    TMM_ERR_INVALID_ARGUMENT,   /* a caller passed something that cannot work */
    TMM_ERR_OUT_OF_HOST_MEMORY,
    TMM_ERR_OUT_OF_DEVICE_MEMORY,
    TMM_ERR_NO_DEVICE,          /* no Vulkan device, or the asked-for index does not exist */
    TMM_ERR_DEVICE_LOST,        /* the driver lost the device; it cannot be used any more */
    TMM_ERR_UNSUPPORTED,        /* the device lacks a feature or limit the request needs */
    TMM_ERR_VULKAN,             /* any other Vulkan failure */
    TMM_ERR_IO,                 /* reading or writing a file failed */
    TMM_ERR_FFT,                /* VkFFT refused a plan or a launch */
} tmm_status;

/* Short stable name of a status, e.g. "out of device memory". */
TMM_API const char *tmm_status_name(tmm_status status);
/* Message of the last failure on this thread ("" when none). */
TMM_API const char *tmm_last_error(void);
/* Library version, "MAJOR.MINOR.PATCH". */
TMM_API const char *tmm_version(void);

/* Values equal VkPhysicalDeviceType. */
typedef enum tmm_device_type {
    TMM_DEVICE_OTHER = 0,
    TMM_DEVICE_INTEGRATED_GPU = 1,
    TMM_DEVICE_DISCRETE_GPU = 2,
    TMM_DEVICE_VIRTUAL_GPU = 3,
    TMM_DEVICE_CPU = 4,
} tmm_device_type;

TMM_API const char *tmm_device_type_name(tmm_device_type type);

#define TMM_MAX_HEAPS 16
#define TMM_MAX_MEMORY_TYPES 32

typedef struct tmm_memory_heap {
    uint64_t size;
    bool device_local;
    /* VK_EXT_memory_budget, read when the device was listed or opened (0
     * without it): what this process may allocate from the heap, and uses. */
    uint64_t budget, usage;
} tmm_memory_heap;

typedef struct tmm_memory_type {
    uint32_t heap;
    uint32_t flags; /* VkMemoryPropertyFlags */
} tmm_memory_type;

/* What tmm knows about one physical device: identity, and every limit and
 * feature that kernels and planners consult. */
typedef struct tmm_device_info {
    uint32_t index;                 /* position in Vulkan's enumeration */
    char name[256];
    tmm_device_type type;
    uint32_t vendor_id, device_id;
    uint32_t api_version;           /* packed as VK_MAKE_API_VERSION */
    uint32_t driver_version;        /* vendor-specific packing */
    char driver_name[256];
    char driver_info[256];
    uint8_t device_uuid[16];
    uint8_t pipeline_cache_uuid[16];
    bool has_compute_queue;

    uint64_t max_storage_buffer_range;
    uint64_t min_storage_buffer_offset_alignment;
    uint32_t max_workgroup_count[3];
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_invocations;
    uint32_t max_shared_memory;     /* bytes */
    uint32_t max_push_constants;    /* bytes */
    uint32_t max_memory_allocation_count;
    uint64_t max_memory_allocation_size;

    uint32_t subgroup_size;
    uint32_t subgroup_size_min, subgroup_size_max; /* the sizes the driver may run compute shaders with
                                       (subgroup size control: Vulkan 1.3 or VK_EXT_subgroup_size_control;
                                       without it both are subgroup_size) */
    bool subgroup_size_control;     /* a compute pipeline can require its subgroup size (Vulkan 1.3 with the
                                       subgroupSizeControl feature and compute among the required-size stages) */
    uint32_t subgroup_operations;   /* VkSubgroupFeatureFlags */
    bool subgroup_in_compute;
    bool shader_float16;
    bool storage_buffer_16bit;

    float timestamp_period_ns;      /* nanoseconds per timestamp tick */
    uint32_t timestamp_valid_bits;  /* 0: the compute queue has no timestamps */

    uint32_t heap_count;
    tmm_memory_heap heaps[TMM_MAX_HEAPS];
    uint32_t memory_type_count;
    tmm_memory_type memory_types[TMM_MAX_MEMORY_TYPES];
    bool unified_memory;            /* device memory is host-visible: no staging copies */
    bool memory_budget;             /* VK_EXT_memory_budget: heaps carry the driver's budget and usage */
    uint32_t coopmat_shape[3];      /* the cooperative-matrix matmul's M x N x K (fp16 inputs, fp32 sums;
                                       docs/gpu.md); 0: the device does not get it */
    char coopmat_extension[32];     /* through which: VK_NV_cooperative_matrix or VK_KHR_cooperative_matrix */
    uint32_t coopmat_bf16_shape[3]; /* the same for bf16 inputs (--precision bf16: VK_KHR_cooperative_matrix
                                       with VK_KHR_shader_bfloat16); 0: not on this device */
    char coopmat_note[192];         /* why not, when it does not */
} tmm_device_info;

/* Lists every Vulkan device. *infos is malloc'ed (free() it); *preferred is
 * the index tmm picks by default: discrete > integrated > virtual > CPU. */
TMM_API tmm_status tmm_device_list(tmm_device_info **infos, uint32_t *count, uint32_t *preferred);

typedef struct tmm_device tmm_device;

typedef struct tmm_device_options {
    int index;              /* -1: $TMM_DEVICE if set, else the preferred device */
    int validate;           /* -1: $TMM_VALIDATE; 0 off; 1 Khronos validation layer on */
    bool no_pipeline_cache; /* do not read or write the on-disk pipeline cache */
} tmm_device_options;

#define TMM_DEVICE_OPTIONS_DEFAULT { -1, -1, false }

TMM_API tmm_status tmm_device_create(const tmm_device_options *options, tmm_device **out);
/* Saves the pipeline cache and frees everything the device owns. NULL is fine. */
TMM_API void tmm_device_destroy(tmm_device *device);
TMM_API const tmm_device_info *tmm_device_get_info(const tmm_device *device);
/* Validation warnings and errors reported since the device was created. */
TMM_API uint32_t tmm_device_validation_messages(const tmm_device *device);
/* Validation messages of every device of this process, including those
 * raised while devices were destroyed. */
TMM_API uint32_t tmm_validation_messages_total(void);

#ifdef __cplusplus
}
#endif
#endif
