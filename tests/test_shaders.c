/* Every embedded shader's interface, read from its SPIR-V: a push-constant
 * block the reader can size, within the 128 bytes every Vulkan device
 * offers, and storage buffers at bindings 0..n-1 of set 0 (pipeline.h's
 * conventions). Pipeline creation checks each kernel's host side (push
 * struct size, buffer count) against the same reflection, so a C struct that
 * drifts from its GLSL block fails the first test that records the op; the
 * last test shows that it does. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "ops/op_util.h"
#include "spirv_reflect.h"
#include "tmm_shaders.h"

Test(shaders, every_module_has_a_sound_interface)
{
    uint32_t count = 0;
    for (const tmm_spirv *const *s = tmm_spv_all; *s; s++, count++) {
        tmm_spirv_iface iface;
        H_OK(tmm_spirv_reflect((*s)->code, (*s)->size, (*s)->name, &iface));
        cr_assert(iface.push_size % 4 == 0 && iface.push_size <= 128, "%s: push block of %u bytes", (*s)->name,
                  iface.push_size);
        cr_assert(iface.n_buffers >= 1 && iface.binding_mask == (1u << iface.n_buffers) - 1u,
                  "%s: bindings 0x%x are not 0..n-1", (*s)->name, iface.binding_mask);
    }
    printf("  %u embedded shaders reflected\n", count);
    cr_assert_geq(count, 30);
}

/* Known interfaces, as the C side declares them (spot checks of the reader itself). */
Test(shaders, reader_sizes_known_blocks)
{
    tmm_spirv_iface i;
    H_OK(tmm_spirv_reflect(tmm_spv_axpy.code, tmm_spv_axpy.size, "axpy", &i));
    cr_assert(i.push_size == 8 && i.n_buffers == 2, "axpy: %u bytes, %u buffers", i.push_size, i.n_buffers);
    H_OK(tmm_spirv_reflect(tmm_spv_sum_cols.code, tmm_spv_sum_cols.size, "sum_cols", &i));
    cr_assert(i.push_size == 28 && i.n_buffers == 2, "sum_cols: %u bytes, %u buffers", i.push_size, i.n_buffers);
    H_OK(tmm_spirv_reflect(tmm_spv_matmul_reg.code, tmm_spv_matmul_reg.size, "matmul_reg", &i));
    cr_assert(i.push_size == 56 && i.n_buffers == 5, "matmul_reg: %u bytes, %u buffers", i.push_size, i.n_buffers);
    const uint32_t junk[6] = { 0x12345678u, 0, 0, 10, 0, 0 };
    cr_assert_eq(tmm_spirv_reflect(junk, sizeof junk, "junk", &i), TMM_ERR_INVALID_ARGUMENT);
}

/* A host side that disagrees with its shader is refused at pipeline creation. */
H_TEST(shaders, mismatched_host_side_is_refused)
{
    static const uint32_t local[3] = { 64, 1, 1 };
    tmm_recorder *r = h_begin();
    tmm_pipeline *p;
    cr_assert_eq(tmm_op_pipeline(r, &tmm_spv_axpy, 2, 12, local, NULL, 0, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "push block is 8 bytes"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_pipeline(r, &tmm_spv_axpy, 3, 8, local, NULL, 0, &p), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "binds 3 storage buffers"), "%s", tmm_last_error());
    H_OK(tmm_op_pipeline(r, &tmm_spv_axpy, 2, 8, local, NULL, 0, &p));
    h_run(r);
}
