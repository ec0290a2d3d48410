/* Lazily created compute pipelines, keyed by (SPIR-V, layout, specialization). */
#include "pipeline.h"
#include "spirv_reflect.h"

#include <stdlib.h>
#include <string.h>

struct tmm_pipeline_set {
    tmm_pipeline **items;
    uint32_t count, cap;
};

static bool same_kernel(const tmm_kernel *a, const tmm_kernel *b)
{
    return a->spirv == b->spirv && a->n_buffers == b->n_buffers && a->push_size == b->push_size &&
           a->n_spec == b->n_spec && memcmp(a->spec, b->spec, a->n_spec * sizeof a->spec[0]) == 0 &&
           a->subgroup_size == b->subgroup_size;
}

static void pipeline_free(tmm_device *device, tmm_pipeline *p)
{
    if (p->pipeline)
        vkDestroyPipeline(device->device, p->pipeline, NULL);
    if (p->layout)
        vkDestroyPipelineLayout(device->device, p->layout, NULL);
    if (p->set_layout)
        vkDestroyDescriptorSetLayout(device->device, p->set_layout, NULL);
    free(p);
}

static tmm_status validate_kernel(const tmm_device *device, const tmm_kernel *k)
{
    if (!k->spirv || !k->spirv->code || k->spirv->size % 4)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel without valid SPIR-V");
    if (k->n_buffers > TMM_MAX_BINDINGS || k->n_spec > TMM_MAX_SPEC || k->push_size % 4)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel %s: too many buffers or spec constants, or a push "
                        "size that is not a multiple of 4", k->spirv->name);
    /* the host side must match the shader's interface exactly */
    tmm_spirv_iface iface;
    TMM_TRY(tmm_spirv_reflect(k->spirv->code, k->spirv->size, k->spirv->name, &iface));
    if (iface.push_size != k->push_size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel %s: the host pushes %u bytes of constants, the shader's "
                        "push block is %u bytes", k->spirv->name, k->push_size, iface.push_size);
    if (iface.n_buffers != k->n_buffers || iface.binding_mask != (1u << k->n_buffers) - 1u)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "kernel %s: the host binds %u storage buffers, the shader declares "
                        "bindings 0x%x", k->spirv->name, k->n_buffers, iface.binding_mask);
    if (k->subgroup_size && (!device->info.subgroup_size_control || k->subgroup_size < device->info.subgroup_size_min ||
                             k->subgroup_size > device->info.subgroup_size_max))
        return tmm_fail(TMM_ERR_UNSUPPORTED, "kernel %s requires subgroups of %u; the device cannot require that size",
                        k->spirv->name, k->subgroup_size);
    if (k->push_size > device->info.max_push_constants)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "kernel %s needs %u bytes of push constants; the device offers %u",
                        k->spirv->name, k->push_size, device->info.max_push_constants);
    if (k->n_spec >= 3) {
        uint64_t inv = (uint64_t)k->spec[0] * k->spec[1] * k->spec[2];
        for (int i = 0; i < 3; i++)
            if (k->spec[i] == 0 || k->spec[i] > device->info.max_workgroup_size[i])
                return tmm_fail(TMM_ERR_UNSUPPORTED, "kernel %s: workgroup size %u on axis %d exceeds the "
                                "device limit %u", k->spirv->name, k->spec[i], i,
                                device->info.max_workgroup_size[i]);
        if (inv > device->info.max_workgroup_invocations)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "kernel %s: %llu invocations per workgroup exceed the device "
                            "limit %u", k->spirv->name, (unsigned long long)inv,
                            device->info.max_workgroup_invocations);
    }
    return TMM_OK;
}

static tmm_status create(tmm_device *device, const tmm_kernel *k, tmm_pipeline *p)
{
    VkDevice dev = device->device;
    VkDescriptorSetLayoutBinding bindings[TMM_MAX_BINDINGS];
    for (uint32_t i = 0; i < k->n_buffers; i++)
        bindings[i] = (VkDescriptorSetLayoutBinding){ .binding = i,
                                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                      .descriptorCount = 1,
                                                      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT };
    VkDescriptorSetLayoutCreateInfo dl = { .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = k->n_buffers,
                                           .pBindings = bindings };
    TMM_VK_TRY(vkCreateDescriptorSetLayout(dev, &dl, NULL, &p->set_layout));
    VkPushConstantRange push = { VK_SHADER_STAGE_COMPUTE_BIT, 0, k->push_size };
    VkPipelineLayoutCreateInfo pl = { .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                      .setLayoutCount = 1,
                                      .pSetLayouts = &p->set_layout,
                                      .pushConstantRangeCount = k->push_size ? 1u : 0u,
                                      .pPushConstantRanges = &push };
    TMM_VK_TRY(vkCreatePipelineLayout(dev, &pl, NULL, &p->layout));

    VkShaderModuleCreateInfo mci = { .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                     .codeSize = k->spirv->size,
                                     .pCode = k->spirv->code };
    VkShaderModule module;
    TMM_VK_TRY(vkCreateShaderModule(dev, &mci, NULL, &module));
    VkSpecializationMapEntry entries[TMM_MAX_SPEC];
    for (uint32_t i = 0; i < k->n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){ i, i * 4, 4 };
    VkSpecializationInfo spec = { k->n_spec, entries, k->n_spec * 4, k->spec };
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo size = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = k->subgroup_size };
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        /* dispatch base lets the recorder split dispatches above the limits */
        .flags = VK_PIPELINE_CREATE_DISPATCH_BASE_BIT,
        .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                   .pNext = k->subgroup_size ? &size : NULL,
                   .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                   .module = module,
                   .pName = "main",
                   .pSpecializationInfo = k->n_spec ? &spec : NULL },
        .layout = p->layout };
    VkResult r = vkCreateComputePipelines(dev, device->pipeline_cache, 1, &ci, NULL, &p->pipeline);
    vkDestroyShaderModule(dev, module, NULL);
    if (r != VK_SUCCESS)
        return tmm_fail(r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? TMM_ERR_OUT_OF_DEVICE_MEMORY : TMM_ERR_VULKAN,
                        "creating the pipeline for shader %s failed with %s", k->spirv->name,
                        tmm_vk_result_name(r));
    for (int i = 0; i < 3; i++)
        p->local_size[i] = k->n_spec > (uint32_t)i ? k->spec[i] : 1;
    return TMM_OK;
}

tmm_status tmm_pipeline_get(tmm_device *device, const tmm_kernel *kernel, tmm_pipeline **out)
{
    *out = NULL;
    TMM_TRY(tmm_device_usable(device));
    if (!device->pipelines && !(device->pipelines = calloc(1, sizeof *device->pipelines)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    struct tmm_pipeline_set *set = device->pipelines;
    for (uint32_t i = 0; i < set->count; i++)
        if (same_kernel(&set->items[i]->kernel, kernel)) {
            *out = set->items[i];
            return TMM_OK;
        }
    TMM_TRY(validate_kernel(device, kernel));
    if (set->count == set->cap) {
        uint32_t cap = set->cap ? set->cap * 2 : 32;
        tmm_pipeline **items = realloc(set->items, cap * sizeof *items);
        if (!items)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        set->items = items;
        set->cap = cap;
    }
    tmm_pipeline *p = calloc(1, sizeof *p);
    if (!p)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    p->kernel = *kernel;
    tmm_status s = create(device, kernel, p);
    if (s != TMM_OK) {
        pipeline_free(device, p);
        return s;
    }
    set->items[set->count++] = p;
    *out = p;
    return TMM_OK;
}

void tmm_pipelines_destroy(tmm_device *device)
{
    struct tmm_pipeline_set *set = device->pipelines;
    if (!set)
        return;
    for (uint32_t i = 0; i < set->count; i++)
        pipeline_free(device, set->items[i]);
    free(set->items);
    free(set);
    device->pipelines = NULL;
}
