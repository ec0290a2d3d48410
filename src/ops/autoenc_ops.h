/* The retention/capacity autoencoder's own op (docs/model.md, "Autoencoder"):
 * the decoder's "unroll" of one vector per sequence into a sequence.
 *
 *   unroll_forward:  for each sequence b, h_b = row src_row of its n_src rows
 *                    of h [batch * n_src, d] (d even); u [batch * n, d/2]:
 *                        u[b, i, j] = h_b[(i + j) mod d],   j < d/2
 *   unroll_backward: dh [batch * n_src, d] = 0 except row src_row of each
 *                    sequence, where
 *                        dh_b[c] = sum over i < n, j < d/2, (i + j) mod d = c of du[b, i, j]
 *                    (summed in ascending i: the same bits on every run;
 *                    passes of TMM_MAX_LOOP positions each).
 *
 * Both views are bound whole: each must start at an aligned offset and fit
 * one binding (maxStorageBufferRange). Reference: ref_unroll_fwd_d and
 * ref_unroll_bwd_d (src/ref/ref_autoenc.h). Kernels: shaders/unroll_fwd.comp,
 * shaders/unroll_bwd.comp. */
#ifndef TMM_OPS_AUTOENC_OPS_H
#define TMM_OPS_AUTOENC_OPS_H

#include "ops/ops.h"

/* TMM_OK, or TMM_ERR_INVALID_ARGUMENT explaining why (d odd or 0, zero sizes,
 * src_row >= n_src, more than 2^32 elements). */
tmm_status tmm_unroll_check(uint32_t batch, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n);

tmm_status tmm_op_unroll_forward(tmm_recorder *r, tmm_view h, uint32_t batch, uint32_t n_src, uint32_t src_row,
                                 uint32_t d, uint32_t n, tmm_view u);
tmm_status tmm_op_unroll_backward(tmm_recorder *r, tmm_view du, uint32_t batch, uint32_t n_src, uint32_t src_row,
                                  uint32_t d, uint32_t n, tmm_view dh);

#endif
