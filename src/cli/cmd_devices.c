/* tmm devices: one block per Vulkan device. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>

#include "cli.h"
#include "ops/matmul_paths.h"
#include "ops/nn_ops.h"

static void print_size(uint64_t bytes)
{
    char text[32];
    fputs(cli_size(bytes, text, sizeof text), stdout);
}

static void print_subgroup_ops(uint32_t ops)
{
    static const struct { uint32_t bit; const char *name; } names[] = {
        { VK_SUBGROUP_FEATURE_BASIC_BIT, "basic" },        { VK_SUBGROUP_FEATURE_VOTE_BIT, "vote" },
        { VK_SUBGROUP_FEATURE_ARITHMETIC_BIT, "arithmetic" }, { VK_SUBGROUP_FEATURE_BALLOT_BIT, "ballot" },
        { VK_SUBGROUP_FEATURE_SHUFFLE_BIT, "shuffle" },    { VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT, "shuffle_relative" },
        { VK_SUBGROUP_FEATURE_CLUSTERED_BIT, "clustered" }, { VK_SUBGROUP_FEATURE_QUAD_BIT, "quad" },
    };
    const char *sep = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (ops & names[i].bit) {
            printf("%s%s", sep, names[i].name);
            sep = " ";
        }
    if (!*sep)
        printf("none");
}

/* The kernels tmm picks on this device (docs/gpu.md "Fast paths"). */
static void print_fast_paths(const tmm_device_info *d)
{
    const bool sg = tmm_op_row_subgroups_for(d, 0);
    printf("  fast paths\n    subgroup reductions      %s\n", sg ? "yes (norms, cross-entropy, softmax, gradient norm)"
           : d->type == TMM_DEVICE_CPU ? "no (a CPU device: the plain kernels are faster)"
                                       : "no (the device lacks subgroup arithmetic in compute)");
    if (sg)
        printf("      workgroup              %u invocations\n", tmm_op_sg_workgroup(d));
    const tmm_matmul_tile small = tmm_matmul_tile_for(d, NULL, 64, 64), big = tmm_matmul_tile_for(d, NULL, 4096, 4096);
    printf("    tiled matmul             %u x %u invocations; tiles %u x %u (k step %u), %u x %u from 1024 x 1024 "
           "(k step %u)%s\n", small.ts, small.ts, small.ts * small.per, small.ts * small.per, small.bk,
           big.ts * big.per, big.ts * big.per, big.bk,
           d->type == TMM_DEVICE_CPU ? "; not used: the register kernel is faster on CPU devices" : "");
    if (d->coopmat_shape[0]) {
        printf("    cooperative-matrix matmul yes: %s, fp16 x fp16 + fp32 in %u x %u x %u (--precision fp16)",
               d->coopmat_extension, d->coopmat_shape[0], d->coopmat_shape[1], d->coopmat_shape[2]);
        if (d->coopmat_bf16_shape[0])
            printf(", bf16 x bf16 + fp32 in %u x %u x %u (--precision bf16)", d->coopmat_bf16_shape[0],
                   d->coopmat_bf16_shape[1], d->coopmat_bf16_shape[2]);
        printf("; self-checked at first use\n");
    } else
        printf("    cooperative-matrix matmul no (%s)\n", d->coopmat_note);
}

static void print_device(const tmm_device_info *d, bool picked)
{
    printf("device %u: %s%s\n", d->index, d->name, picked ? "   <- tmm uses this one" : "");
    printf("  type                 %s\n", tmm_device_type_name(d->type));
    printf("  vendor / device id   0x%04x / 0x%04x\n", d->vendor_id, d->device_id);
    printf("  Vulkan               %u.%u.%u\n", VK_API_VERSION_MAJOR(d->api_version),
           VK_API_VERSION_MINOR(d->api_version), VK_API_VERSION_PATCH(d->api_version));
    printf("  driver               %s%s%s (version 0x%x)\n", d->driver_name[0] ? d->driver_name : "unknown",
           d->driver_info[0] ? ", " : "", d->driver_info, d->driver_version);
    printf("  device uuid          ");
    for (int i = 0; i < 16; i++)
        printf("%02x%s", d->device_uuid[i], (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
    printf("\n  memory heaps        ");
    for (uint32_t i = 0; i < d->heap_count; i++) {
        printf(" %u: ", i);
        print_size(d->heaps[i].size);
        printf("%s", d->heaps[i].device_local ? " device-local" : " host");
        if (d->memory_budget) {
            printf(" (budget ");
            print_size(d->heaps[i].budget);
            printf(", in use ");
            print_size(d->heaps[i].usage);
            printf(")");
        }
        printf(i + 1 < d->heap_count ? ";" : "");
    }
    if (!d->memory_budget)
        printf("\n  memory budget        not reported (no VK_EXT_memory_budget): limits use the heap size");
    printf("\n  unified memory       %s\n", d->unified_memory ? "yes (no staging copies)" : "no (staged uploads)");
    printf("  maxStorageBufferRange      ");
    print_size(d->max_storage_buffer_range);
    printf("\n  maxMemoryAllocationSize    ");
    print_size(d->max_memory_allocation_size);
    printf("\n  maxMemoryAllocationCount   %u\n", d->max_memory_allocation_count);
    printf("  maxComputeWorkGroupCount   %u x %u x %u\n", d->max_workgroup_count[0], d->max_workgroup_count[1],
           d->max_workgroup_count[2]);
    printf("  maxComputeWorkGroupSize    %u x %u x %u (%u invocations)\n", d->max_workgroup_size[0],
           d->max_workgroup_size[1], d->max_workgroup_size[2], d->max_workgroup_invocations);
    printf("  maxComputeSharedMemory     %u bytes\n", d->max_shared_memory);
    printf("  maxPushConstantsSize       %u bytes\n", d->max_push_constants);
    printf("  subgroup size              %u (%s in compute; the driver may use %u to %u%s)\n", d->subgroup_size,
           d->subgroup_in_compute ? "usable" : "not usable", d->subgroup_size_min, d->subgroup_size_max,
           d->subgroup_size_control ? ", a pipeline may require one" : "");
    printf("  subgroup operations        ");
    print_subgroup_ops(d->subgroup_operations);
    printf("\n  shaderFloat16              %s\n", d->shader_float16 ? "yes" : "no");
    printf("  16-bit storage buffers     %s\n", d->storage_buffer_16bit ? "yes" : "no");
    if (d->timestamp_valid_bits)
        printf("  timestamps                 %u bits, %g ns per tick\n", d->timestamp_valid_bits,
               (double)d->timestamp_period_ns);
    else
        printf("  timestamps                 not on the compute queue\n");
    print_fast_paths(d);
    if (!d->has_compute_queue || d->api_version < VK_API_VERSION_1_1)
        printf("  (unusable: tmm needs Vulkan 1.1 with a compute queue)\n");
}

int cmd_devices(int argc, char **argv)
{
    static const struct option longopts[] = { { "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 } };
    int c;
    cli_args args = { .longopts = longopts };
    while ((c = cli_getopt(&args, argc, argv)) != -1) {
        if (c == 'h') {
            printf("usage: tmm devices\n\n"
                   "Lists every Vulkan device with its limits and features, and marks the one tmm\n"
                   "uses by default (discrete GPU > integrated GPU > virtual GPU > CPU).\n"
                   "Choose another with --device N on any command, or TMM_DEVICE=N.\n"
                   "Under \"fast paths\", what each device gets (docs/gpu.md). The cooperative-matrix\n"
                   "matmul (tensor cores, --precision fp16 or bf16) comes through VK_NV_cooperative_matrix\n"
                   "or else VK_KHR_cooperative_matrix; TMM_COOPMAT_EXTENSION=NV or KHR keeps one, and\n"
                   "TMM_DISABLE_COOPMAT=1 turns it off.\n");
            return 0;
        }
        return 2;
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    tmm_device_info *infos;
    uint32_t count, preferred;
    tmm_status s = tmm_device_list(&infos, &count, &preferred);
    if (s != TMM_OK)
        return cli_error("cannot list Vulkan devices", s);
    int env_index;
    if ((s = tmm_env_device_index(&env_index)) != TMM_OK) {
        free(infos);
        return cli_error("bad environment", s);
    }
    long picked = env_index >= 0 && env_index < (long)count ? env_index : (long)preferred;
    for (uint32_t i = 0; i < count; i++) {
        if (i)
            printf("\n");
        print_device(&infos[i], (long)i == picked);
    }
    free(infos);
    return 0;
}
