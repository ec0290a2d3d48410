/* Every embedded shader's interface, read from its SPIR-V: a push-constant
 * block the reader can size, within the 128 bytes every Vulkan device
 * offers, and storage buffers at bindings 0..n-1 of set 0 (pipeline.h's
 * conventions). Pipeline creation checks each kernel's host side (push
 * struct size, buffer count) against the same reflection, so a C struct that
 * drifts from its GLSL block fails the first test that records the op; the
 * last test shows that it does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/op_util.h"
#include "pipeline.h"
#include "spirv_coopmat.h"
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

/* A pipeline may require its subgroup size where the device can (the
 * cooperative-matrix kernel does, so that its workgroup is the subgroups
 * the host planned); a size the device cannot require is refused. */
H_TEST(shaders, required_subgroup_size)
{
    const tmm_device_info *info = &h_dev->info;
    tmm_kernel k = { .spirv = &tmm_spv_axpy, .n_buffers = 2, .push_size = 8, .n_spec = 3,
                     .spec = { 64, 1, 1 }, .subgroup_size = info->subgroup_size_max * 2 };
    tmm_pipeline *p;
    cr_assert_eq(tmm_pipeline_get(h_dev, &k, &p), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "cannot require that size"), "%s", tmm_last_error());
    if (!info->subgroup_size_control)
        cr_skip_test("skipped: the device cannot require a subgroup size");
    k.subgroup_size = info->subgroup_size;
    H_OK(tmm_pipeline_get(h_dev, &k, &p));
    k.subgroup_size = 0;
    tmm_pipeline *q;
    H_OK(tmm_pipeline_get(h_dev, &k, &q));
    cr_assert(p != q, "a required size is part of the pipeline's key");
}

/* The KHR cooperative-matrix module (runtime/spirv_coopmat.h), read back. */
typedef struct spv {
    const uint32_t *w;
    size_t n; /* words */
} spv;

static size_t count_op(spv m, uint32_t op)
{
    size_t c = 0;
    for (size_t i = 5; i < m.n && (m.w[i] >> 16); i += m.w[i] >> 16)
        c += (m.w[i] & 0xffffu) == op;
    return c;
}

/* The type (result in word 1) or constant (word 2) that defines id, or NULL. */
static const uint32_t *def(spv m, uint32_t id)
{
    for (size_t i = 5; i < m.n && (m.w[i] >> 16); i += m.w[i] >> 16) {
        const uint32_t op = m.w[i] & 0xffffu, len = m.w[i] >> 16;
        const bool type = (op >= 19 && op <= 39) || op == 4456; /* OpTypeVoid .. OpTypeForwardPointer */
        const bool constant = op >= 41 && op <= 52;             /* OpConstantTrue .. OpSpecConstantOp */
        if ((type && len > 1 && m.w[i + 1] == id) || (constant && len > 2 && m.w[i + 2] == id))
            return m.w + i;
    }
    return NULL;
}

/* The value of an OpConstant of a 32-bit int type; UINT32_MAX otherwise. */
static uint32_t const_value(spv m, uint32_t id)
{
    const uint32_t *c = def(m, id);
    return c && (c[0] & 0xffffu) == 43 && (c[0] >> 16) == 4 ? c[3] : UINT32_MAX;
}

static uint32_t spec_id(spv m, uint32_t id)
{
    for (size_t i = 5; i < m.n && (m.w[i] >> 16); i += m.w[i] >> 16)
        if ((m.w[i] & 0xffffu) == 71 && (m.w[i] >> 16) == 4 && m.w[i + 1] == id && m.w[i + 2] == 1)
            return m.w[i + 3];
    return UINT32_MAX;
}

static bool has_string(spv m, uint32_t op, const char *s)
{
    for (size_t i = 5; i < m.n && (m.w[i] >> 16); i += m.w[i] >> 16)
        if ((m.w[i] & 0xffffu) == op && ((m.w[i] >> 16) - 1) * 4 > strlen(s) &&
            memcmp(m.w + i + 1, s, strlen(s) + 1) == 0)
            return true;
    return false;
}

Test(shaders, coopmat_khr_rewrite_of_the_kernel)
{
    const spv nv = { tmm_spv_matmul_coopmat.code, tmm_spv_matmul_coopmat.size / 4 };
    uint32_t *code;
    size_t bytes;
    H_OK(tmm_spirv_coopmat_khr(nv.w, nv.n * 4, "matmul_coopmat", false, &code, &bytes));
    const spv khr = { code, bytes / 4 };
    /* NV opcodes 5358-5362 and capability 5357 become KHR 4456-4460 and 6022 */
    for (uint32_t op = 5358; op <= 5362; op++)
        cr_assert_eq(count_op(khr, op), 0u, "NV opcode %u left", op);
    cr_assert_eq(count_op(nv, 5358), 3u, "the kernel has three matrix types: A, B and C");
    for (uint32_t op = 0; op < 4; op++)
        cr_assert_eq(count_op(khr, 4456 + op), count_op(nv, 5358 + op), "opcode %u", 4456 + op);
    cr_assert(has_string(khr, 10, "SPV_KHR_cooperative_matrix") && !has_string(khr, 10, "SPV_NV_cooperative_matrix"));
    bool cap = false;
    for (size_t i = 5; i < khr.n; i += khr.w[i] >> 16) {
        const uint32_t *w = khr.w + i, op = w[0] & 0xffffu;
        cr_assert(!(op == 17 && w[1] == 5357), "capability CooperativeMatrixNV left");
        cap = cap || (op == 17 && w[1] == 6022);
        if (op == 4456) { /* type: result, component, scope, rows, columns, use */
            const uint32_t *comp = def(khr, w[2]), use = const_value(khr, w[6]);
            const uint32_t rows = spec_id(khr, w[4]), cols = spec_id(khr, w[5]);
            cr_assert(comp && (comp[0] & 0xffffu) == 22, "a float component type");
            /* the shader's CM, CN, CK are specialization constants 10, 11, 12:
             * A is CM x CK, B is CK x CN, the accumulator CM x CN in fp32 */
            const uint32_t want_use = comp[2] == 32 ? 2 : rows == 10 ? 0 : 1;
            cr_assert_eq(use, want_use, "type %%%u (%u x %u, fp%u) has use %u", w[1], rows, cols, comp[2], use);
            cr_assert(want_use != 0 || (rows == 10 && cols == 12));
            cr_assert(want_use != 1 || (rows == 12 && cols == 11));
            cr_assert(want_use != 2 || (rows == 10 && cols == 11));
        }
        if (op == 4457 || op == 4458) { /* the layout (row major: the shader passes false) before the stride */
            const uint32_t at = op == 4457 ? 4 : 3;
            cr_assert_eq(const_value(khr, w[at]), 0u, "layout of a load or store");
            cr_assert_neq(const_value(khr, w[at + 1]), 0u, "the stride follows the layout");
        }
        if (op == 4459) /* multiply-add: the result is the accumulator type */
            cr_assert_eq(const_value(khr, def(khr, w[1])[6]), 2u);
    }
    cr_assert(cap, "capability CooperativeMatrixKHR");
    cr_assert_eq(khr.w[3], nv.w[3] + 3, "three new constants: the uses and layouts 0, 1, 2");
    tmm_spirv_iface a, b;
    H_OK(tmm_spirv_reflect(nv.w, nv.n * 4, "nv", &a));
    H_OK(tmm_spirv_reflect(khr.w, khr.n * 4, "khr", &b));
    cr_assert(a.push_size == b.push_size && a.n_buffers == b.n_buffers && a.binding_mask == b.binding_mask);
    free(code);
}

/* What the rewrite cannot do, it refuses with the module's name. */
Test(shaders, coopmat_khr_rewrite_refuses)
{
    uint32_t *code = NULL;
    size_t bytes = 0;
    const uint32_t junk[6] = { 0x12345678u, 0, 0, 10, 0, 0 };
    cr_assert_eq(tmm_spirv_coopmat_khr(junk, sizeof junk, "junk", false, &code, &bytes), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_spirv_coopmat_khr(tmm_spv_axpy.code, tmm_spv_axpy.size, "axpy", false, &code, &bytes),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "axpy: the module has no NV cooperative matrices"), "%s", tmm_last_error());
    cr_assert(code == NULL && bytes == 0);

    const size_t n = tmm_spv_matmul_coopmat.size / 4;
    uint32_t *m = malloc(n * 4);
    cr_assert(m);
    /* cut inside its first instruction (OpCapability, two words) */
    memcpy(m, tmm_spv_matmul_coopmat.code, n * 4);
    cr_assert_eq(tmm_spirv_coopmat_khr(m, 6 * 4, "cut", false, &code, &bytes), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "overruns"), "%s", tmm_last_error());
    /* A given as B too: one type in two roles */
    size_t muladd = 0, load = 0;
    for (size_t i = 5; i < n; i += m[i] >> 16) {
        if ((m[i] & 0xffffu) == 5361 && !muladd)
            muladd = i;
        if ((m[i] & 0xffffu) == 5359 && !load)
            load = i;
    }
    cr_assert(muladd && load);
    m[muladd + 4] = m[muladd + 3];
    cr_assert_eq(tmm_spirv_coopmat_khr(m, n * 4, "roles", false, &code, &bytes), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "give each role its own type"), "%s", tmm_last_error());
    /* a layout that is not a constant bool (the load's pointer) */
    memcpy(m, tmm_spv_matmul_coopmat.code, n * 4);
    m[load + 5] = m[load + 3];
    cr_assert_eq(tmm_spirv_coopmat_khr(m, n * 4, "layout", false, &code, &bytes), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "not a constant bool"), "%s", tmm_last_error());
    cr_assert(code == NULL);
    /* as bf16, a 16-bit constant other than zero would change its value: an fp32 1.0 made 16-bit */
    memcpy(m, tmm_spv_matmul_coopmat.code, n * 4);
    uint32_t half = 0, one = 0;
    for (size_t i = 5; i < n; i += m[i] >> 16) {
        if ((m[i] & 0xffffu) == 22 && (m[i] >> 16) == 3 && m[i + 2] == 16)
            half = m[i + 1];
        if ((m[i] & 0xffffu) == 43 && (m[i] >> 16) == 4 && m[i + 3] == 0x3f800000u && !one)
            one = (uint32_t)i;
    }
    cr_assert(half && one);
    m[one + 1] = half;
    m[one + 3] = 0x3c00u;
    cr_assert_eq(tmm_spirv_coopmat_khr(m, n * 4, "constant", true, &code, &bytes), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "16-bit constant"), "%s", tmm_last_error());
    H_OK(tmm_spirv_coopmat_khr(m, n * 4, "constant", false, &code, &bytes)); /* fp16 keeps its meaning */
    free(code);
    free(m);
}

/* The bf16 module: the 16-bit float type becomes bfloat16 (SPV_KHR_bfloat16),
 * and with it the A and B matrices, the shared memory that stages them and
 * the conversions into it; the rest is the KHR rewrite. */
Test(shaders, coopmat_khr_bf16_rewrite)
{
    const spv nv = { tmm_spv_matmul_coopmat.code, tmm_spv_matmul_coopmat.size / 4 };
    uint32_t *code, *plain;
    size_t bytes, plain_bytes;
    H_OK(tmm_spirv_coopmat_khr(nv.w, nv.n * 4, "matmul_coopmat", true, &code, &bytes));
    H_OK(tmm_spirv_coopmat_khr(nv.w, nv.n * 4, "matmul_coopmat", false, &plain, &plain_bytes));
    const spv bf = { code, bytes / 4 };
    cr_assert(has_string(bf, 10, "SPV_KHR_bfloat16") && has_string(bf, 10, "SPV_KHR_cooperative_matrix"));
    uint32_t bf16 = 0, caps = 0, ab = 0, converts = 0;
    for (size_t i = 5; i < bf.n; i += bf.w[i] >> 16) {
        const uint32_t *w = bf.w + i, op = w[0] & 0xffffu, len = w[0] >> 16;
        if (op == 17 && (w[1] == 5116 || w[1] == 5118)) /* BFloat16TypeKHR, BFloat16CooperativeMatrixKHR */
            caps++;
        if (op == 22 && w[2] == 16) {
            cr_assert(len == 4 && w[3] == 0, "the 16-bit float type carries the BFloat16KHR encoding");
            bf16 = w[1];
        }
        if (op == 4456 && w[2] == bf16 && bf16)
            ab |= 1u << const_value(bf, w[6]);
        if (op == 115 && w[1] == bf16 && bf16) /* OpFConvert into bf16: staging A and B */
            converts++;
    }
    cr_assert_eq(caps, 2u);
    cr_assert_eq(ab, 3u, "A and B are bf16 matrices");
    cr_assert_geq(converts, 2u);
    /* the same module but for the type, two capabilities and one extension */
    cr_assert_eq(bytes, plain_bytes + (1 + 2 * 2 + 6) * 4);
    free(code);
    free(plain);
}
