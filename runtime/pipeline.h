/* Compute pipelines from embedded SPIR-V, created on first use and cached per
 * device (and on disk through the VkPipelineCache).
 *
 * Shader conventions: storage buffers at set 0, bindings 0..n_buffers-1; one
 * push-constant block; specialization constants 0, 1, 2 are the workgroup
 * size (layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2)),
 * further ids select kernel variants. Large dispatches are split with
 * vkCmdDispatchBase, so gl_WorkGroupID is global but gl_NumWorkGroups is not:
 * pass sizes as push constants. */
#ifndef TMM_RT_PIPELINE_H
#define TMM_RT_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

/* One embedded SPIR-V module (generated from shaders/NAME.comp). */
typedef struct tmm_spirv {
    const char *name;
    const uint32_t *code;
    size_t size; /* bytes */
} tmm_spirv;

#define TMM_MAX_SPEC 16
#define TMM_MAX_BINDINGS 16

typedef struct tmm_kernel {
    const tmm_spirv *spirv;
    uint32_t n_buffers;          /* storage buffers at bindings 0..n_buffers-1 */
    uint32_t push_size;          /* bytes of push constants (multiple of 4) */
    uint32_t n_spec;             /* specialization constants 0..n_spec-1 */
    uint32_t spec[TMM_MAX_SPEC]; /* their values (32-bit: uint, int or float bits) */
    uint32_t subgroup_size;      /* the subgroup size the pipeline requires (0: the driver's choice; else
                                    only where info.subgroup_size_control) */
} tmm_kernel;

typedef struct tmm_pipeline {
    VkPipeline pipeline;
    VkPipelineLayout layout;
    VkDescriptorSetLayout set_layout;
    tmm_kernel kernel;
    uint32_t local_size[3];
} tmm_pipeline;

/* Returns the device's pipeline for this kernel, creating it on first use. */
tmm_status tmm_pipeline_get(tmm_device *device, const tmm_kernel *kernel, tmm_pipeline **out);
/* Frees every pipeline of the device (device.c calls it at teardown). */
void tmm_pipelines_destroy(tmm_device *device);

#endif
