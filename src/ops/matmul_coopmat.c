/* The cooperative-matrix matmul (shaders/matmul_coopmat.comp): which products
 * take it, its pipeline, and its self-check. The device side (extension,
 * feature, shapes, allow-list, TMM_DISABLE_COOPMAT) is runtime/coopmat.c;
 * the binding and batching of the operands are tmm_op_matmul's, shared with
 * the other kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_paths.h"
#include "coopmat.h"
#include "op_util.h"

/* Subgroups per workgroup along m and n (the shader's WM, WN); each holds
 * 2 x 2 accumulators, so a workgroup's tile is 4 CM x 4 CN. */
#define CM_WM 2u
#define CM_WN 2u
#define CM_R 2u

/* Shared memory of the kernel: A and B slices of 2 CK in fp16, rows padded by
 * 8 halves, and the fp32 tile of C, rows padded by 4 floats. */
static uint64_t coopmat_shared_bytes(const uint32_t s[3])
{
    const uint64_t bm = CM_WM * CM_R * s[0], bn = CM_WN * CM_R * s[1], bk = 2ull * s[2];
    return bm * (bk + 8) * 2 + bk * (bn + 8) * 2 + bm * (bn + 4) * 4;
}

/* The matrix shape for fp16 or (bf16) bf16 inputs; zeros where there is none. */
static const uint32_t *coopmat_shape(const tmm_device *dev, bool bf16)
{
    return bf16 ? dev->info.coopmat_bf16_shape : dev->info.coopmat_shape;
}

static bool coopmat_offered(const tmm_device *dev, bool bf16)
{
    const tmm_device_info *i = &dev->info;
    const uint32_t *s = coopmat_shape(dev, bf16);
    return s[0] && coopmat_shared_bytes(s) <= i->max_shared_memory &&
           CM_WM * CM_WN * i->subgroup_size <= i->max_workgroup_invocations;
}

tmm_status tmm_matmul_coopmat_pipeline(tmm_recorder *r, const uint32_t common[7], uint32_t push_size, bool bf16,
                                       tmm_pipeline **out, uint32_t *tile_m, uint32_t *tile_n)
{
    tmm_device *dev = tmm_recorder_device(r);
    const uint32_t *s = coopmat_shape(dev, bf16);
    /* The workgroup is WM x WN subgroups of the size the host reads; where
     * the driver may pick another size, the pipeline requires this one. */
    tmm_kernel k = { .n_buffers = 5, .push_size = push_size, .n_spec = 15,
                     .spec = { CM_WM * CM_WN * dev->info.subgroup_size, 1, 1,
                               /* ids 3-9 as matmul_common.glsl, then CM, CN, CK, WM, WN (10-14) */
                               common[0], common[1], common[2], common[3], common[4], common[5], common[6],
                               s[0], s[1], s[2], CM_WM, CM_WN },
                     .subgroup_size = dev->info.subgroup_size_control ? dev->info.subgroup_size : 0 };
    TMM_TRY(tmm_coopmat_module(dev, &tmm_spv_matmul_coopmat, bf16, &k.spirv));
    *tile_m = CM_WM * CM_R * s[0];
    *tile_n = CM_WN * CM_R * s[1];
    return tmm_pipeline_get(dev, &k, out);
}

/* fp16 (or bf16) bits of x, which is 0 or a normal value of that format
 * (the check's values are: exact in both). */
static uint16_t half_of(float x, bool bf16)
{
    uint32_t b;
    memcpy(&b, &x, 4);
    if (bf16 || (b & 0x7fffffffu) == 0)
        return (uint16_t)(b >> 16);
    return (uint16_t)(((b >> 16) & 0x8000u) | ((((b >> 23) & 0xffu) - 127u + 15u) << 10) | ((b >> 13) & 0x3ffu));
}

typedef struct check_product {
    tmm_matmul_desc d;
    tmm_view a, b, bias, c;
} check_product;

static tmm_status record_product(tmm_recorder *r, void *arg)
{
    const check_product *p = arg;
    return tmm_op_matmul(r, &p->d, p->a, p->b, p->bias, p->c);
}

/* One product of the check, in one layout, B stored in fp16 (bf16: bf16)
 * or (b32) in fp32 with half_inputs: values that are multiples of 1/8 in
 * [-1, 1] (exact in both formats), so every product and partial sum is
 * exact in fp32 and the device must match the host to the bit. *bad: it did
 * not. */
static tmm_status check_layout(tmm_device *dev, bool bf16, bool ta, bool tb, bool b32, uint32_t m, uint32_t n,
                               uint32_t k, bool *bad)
{
    const tmm_elem h = bf16 ? TMM_ELEM_BF16 : TMM_ELEM_F16;
    const uint64_t na = (uint64_t)m * k, nb = (uint64_t)k * n, nc = (uint64_t)m * n;
    float *a = malloc(na * 4), *b = malloc(nb * 4), *bias = malloc(n * 4), *c = malloc(nc * 4);
    uint16_t *b16 = calloc(nb + 1, 2);
    tmm_buffer *ba = NULL, *bb = NULL, *bbias = NULL, *bc = NULL;
    tmm_status s = a && b && bias && c && b16 ? TMM_OK
                                              : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "matmul: the coopmat check");
    if (s == TMM_OK) {
        for (uint64_t i = 0; i < na; i++)
            a[i] = (float)((int)((i * 7 + m) % 17) - 8) / 8.0f;
        for (uint64_t i = 0; i < nb; i++) {
            b[i] = (float)((int)((i * 5 + n) % 17) - 8) / 8.0f;
            b16[i] = half_of(b[i], bf16);
        }
        for (uint32_t j = 0; j < n; j++)
            bias[j] = (float)j / 4.0f;
        for (uint64_t i = 0; i < nc; i++)
            c[i] = -1.0f;
    }
    if (s == TMM_OK && (s = tmm_buffer_create(dev, na * 4, TMM_MEMORY_DEVICE, &ba)) == TMM_OK &&
        (s = tmm_buffer_create(dev, b32 ? nb * 4 : (nb + 1) * 2, TMM_MEMORY_DEVICE, &bb)) == TMM_OK &&
        (s = tmm_buffer_create(dev, n * 4ull, TMM_MEMORY_DEVICE, &bbias)) == TMM_OK &&
        (s = tmm_buffer_create(dev, nc * 4, TMM_MEMORY_DEVICE, &bc)) == TMM_OK &&
        (s = tmm_buffer_write(ba, 0, a, na * 4)) == TMM_OK &&
        (s = b32 ? tmm_buffer_write(bb, 0, b, nb * 4) : tmm_buffer_write(bb, 0, b16, (nb + 1) * 2)) == TMM_OK &&
        (s = tmm_buffer_write(bbias, 0, bias, n * 4ull)) == TMM_OK && (s = tmm_buffer_write(bc, 0, c, nc * 4)) == TMM_OK) {
        /* bias and accumulation in the layouts with B transposed (the forward's) */
        check_product p = { .d = { .m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb, .accumulate = tb,
                                   .variant = TMM_MATMUL_COOPMAT, .half_inputs = b32 ? h : TMM_ELEM_F32 },
                            .a = tmm_whole(ba),
                            .b = b32 ? tmm_whole(bb) : (tmm_view){ .buffer = bb, .size = nb * 2, .elem = h },
                            .bias = tb ? tmm_whole(bbias) : (tmm_view){ 0 }, .c = tmm_whole(bc) };
        if ((s = tmm_record_once(dev, record_product, &p)) == TMM_OK)
            s = tmm_buffer_read(bc, 0, c, nc * 4);
    }
    for (uint32_t i = 0; s == TMM_OK && i < m && !*bad; i++)
        for (uint32_t j = 0; j < n && !*bad; j++) {
            double want = tb ? -1.0 + bias[j] : 0.0;
            for (uint32_t l = 0; l < k; l++)
                want += (double)a[ta ? (uint64_t)l * m + i : (uint64_t)i * k + l] *
                        b[tb ? (uint64_t)j * k + l : (uint64_t)l * n + j];
            *bad = c[(uint64_t)i * n + j] != (float)want;
        }
    tmm_buffer_destroy(ba);
    tmm_buffer_destroy(bb);
    tmm_buffer_destroy(bbias);
    tmm_buffer_destroy(bc);
    free(a);
    free(b);
    free(bias);
    free(c);
    free(b16);
    return s;
}

/* Runs the kernel for one format once on every layout and both formats of
 * B, on sizes that leave edge tiles and take two steps of k, against the
 * host. */
static tmm_status self_check(tmm_device *dev, bool bf16, bool *bad)
{
    *bad = false;
    for (int l = 0; l < 8 && !*bad; l++)
        TMM_TRY(check_layout(dev, bf16, l & 1, (l >> 1) & 1, l >> 2, 70, 45, 41, bad));

    return TMM_OK;
}

bool tmm_matmul_coopmat_use(tmm_device *dev, bool bf16)
{
    int *check = &dev->coopmat_check[bf16];
    if (!coopmat_offered(dev, bf16) || *check < 0)
        return false;
    if (*check != 0)
        return true; /* passed, or being checked now */
    *check = 2;
    bool bad = false;
    tmm_status s = self_check(dev, bf16, &bad);
    if (s != TMM_OK || bad) {
        fprintf(stderr, "tmm: the %s cooperative-matrix matmul %s on %s; using the tiled kernel\n",
                bf16 ? "bf16" : "fp16", s != TMM_OK ? "failed to run" : "disagrees with the host's product",
                dev->info.name);
        *check = -1;
        return false;
    }
    *check = 1;
    return true;
}
