/* The matmul's device-dependent choices (src/ops/matmul.c): the shape of the
 * tiled (shared-memory) kernel from the device's limits, and the
 * cooperative-matrix kernel (src/ops/matmul_coopmat.c). */
#ifndef TMM_OPS_MATMUL_PATHS_H
#define TMM_OPS_MATMUL_PATHS_H

#include "ops.h"

/* shaders/matmul_tiled.comp: a workgroup of ts x ts invocations, each
 * computing per x per outputs of a (ts per)^2 tile of C, k in steps of bk. */
typedef struct tmm_matmul_tile {
    uint32_t ts, per, bk;
} tmm_matmul_tile;

/* The tile for an m x n product on a device: 16 x 16 invocations where
 * maxComputeWorkGroupInvocations allows and 256 is a multiple of the largest
 * subgroup size the driver may use (whole subgroups), else 8 x 8; 8 x 8 outputs each (128-wide tiles) for products
 * of at least 1024 x 1024, where the tiles still fill a GPU, else 4 x 4; the
 * largest bk of 16 and 8 whose 2 bk (ts per + 1) floats fit in
 * maxComputeSharedMemorySize. tuning->matmul_tile overrides it (tests). */
tmm_matmul_tile tmm_matmul_tile_for(const tmm_device_info *info, const tmm_device_tuning *tuning, uint64_t m,
                                    uint64_t n);
/* Whether a tile runs on the device (workgroup size, shared memory, and the
 * kernel's loop bound along k). */
bool tmm_matmul_tile_fits(const tmm_device_info *info, tmm_matmul_tile t);

/* Whether a product whose operands may be rounded to fp16 (bf16: to bf16;
 * B stored in that format, or half_inputs) may take the cooperative-matrix
 * kernel on dev: the device offers the path for that format
 * (info.coopmat_shape, coopmat_bf16_shape: runtime/coopmat.c) with room for
 * the kernel's tiles, and the kernel passed its self-check for that format,
 * which the first call on a device runs (one product per layout and per
 * format of B, edge tiles and two steps of k, compared to the bit with the
 * host's; a failure turns that path off for the device with one line on
 * stderr). */
bool tmm_matmul_coopmat_use(tmm_device *dev, bool bf16);
/* Its pipeline for matmul_common.glsl's specialization values (ids 3-9) and
 * push constants, with fp16 or (bf16) bf16 matrices, and the tile of C one
 * workgroup computes. */
tmm_status tmm_matmul_coopmat_pipeline(tmm_recorder *r, const uint32_t common[7], uint32_t push_size, bool bf16,
                                       tmm_pipeline **out, uint32_t *tile_m, uint32_t *tile_n);

#endif
