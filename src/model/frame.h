/* The pieces of a block that the training forward (model.c) and the cached
 * decode step (step.c) share, so that the block is written once: its halves
 * in the architecture's order, each half's norm, and the MLP. `rows` rows of
 * width d; the ops are recorded on rec (rec->scratch: the norms' scratch). */
#ifndef TMM_MODEL_FRAME_H
#define TMM_MODEL_FRAME_H

#include "mixer/mixer.h"
#include "model/arch.h"

/* How many halves a block has (1 without an MLP) and, for each in order,
 * whether it is the mixer's. */
uint32_t tmm_frame_halves(const tmm_arch_desc *a, bool mixer_half[2]);

/* y = Norm(h) (LayerNorm with w, b; or RMSNorm with w), saving mean (LayerNorm
 * only) and rstd for a backward. */
tmm_status tmm_frame_norm(const tmm_rec *rec, const tmm_arch_desc *a, uint32_t rows, uint32_t d, tmm_view h,
                          tmm_view w, tmm_view b, tmm_view y, tmm_view mean, tmm_view rstd);

/* A block's MLP weights and where its activations go: act, the
 * pre-activation [rows, e] ([rows, 2e] for SwiGLU), and z [rows, e]. */
typedef struct tmm_frame_mlp {
    tmm_view w_in, b_in, w_out, b_out;
    tmm_view act, z;
} tmm_frame_mlp;

/* h += W2 act(W1 x + b1) + b2 (act silu or gelu), or Wdown (silu(Wgate x) ⊙ Wup x);
 * few_rows: the matmuls of a decode step (one row per sequence). */
tmm_status tmm_frame_mlp_forward(const tmm_rec *rec, const tmm_arch_desc *a, uint32_t rows, uint32_t d, uint32_t e,
                                 bool few_rows, tmm_view x, const tmm_frame_mlp *mlp, tmm_view h);

#endif
