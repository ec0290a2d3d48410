/* Mamba 2's mixer (docs/baselines.md section 5), one group (B and C shared by
 * every head); d_inner = 2d, nh = heads, P = d_inner/nh, N = state:
 *
 *     [z, xBC, dtr] = x · Winᵀ              z [di], xBC [di + 2N], dtr [nh]
 *     xBC = silu(CausalConv4(xBC))          depthwise, with bias:
 *                                           c[t, k] = b[k] + Σ_{j<4} w[k, j] · xBC[t-3+j, k]
 *     xs, Bt, Ct = the slices [di], [N], [N] of xBC
 *     dt[t, h] = softplus(dtr[t, h] + dt_bias[h]),  A_h = -exp(A_log[h])
 *     S_t = exp(dt_t A_h) S_{t-1} + dt_t · xs_{h,t} ⊗ Bt_t     S [P, N] per head, S_{-1} = 0
 *     y[t, hP + p] = Σ_k S_t[p, k] Ct[t, k] + D[h] · xs[t, hP + p]
 *     h += (RMSNorm(y ⊙ silu(z)) ⊙ gn) · Woutᵀ                 over di, eps 1e-5
 *
 * softplus(a) = ln(1 + e^a) exactly (no threshold). */
#ifndef TMM_MIXER_MAMBA2_MIXER_H
#define TMM_MIXER_MAMBA2_MIXER_H

#include "mixer/mixer.h"

#define TMM_MAMBA2_CONV_TAPS 4
#define TMM_MAMBA2_NORM_EPS 1e-5  /* the gated RMSNorm's */

/* Its tensors in tmm_block_params.mix, in this order (every one trains):
 *   blocks.L.mamba.in_proj.weight   [2di + 2N + nh, d]  U(±1/sqrt(d))   rows: z, xBC, dtr
 *   blocks.L.mamba.conv1d.weight    [di + 2N, 4]        U(±1/2)
 *   blocks.L.mamba.conv1d.bias      [di + 2N]           U(±1/2)
 *   blocks.L.mamba.dt_bias          [nh]                softplus⁻¹(dt0), dt0 = exp(U(ln 1e-3, ln 1e-1))
 *   blocks.L.mamba.A_log            [nh]                ln U(1, 16)
 *   blocks.L.mamba.D                [nh]                1
 *   blocks.L.mamba.norm.weight      [di]                1
 *   blocks.L.mamba.out_proj.weight  [d, di]             U(±1/sqrt(di)) */
enum {
    TMM_M2_IN_W, TMM_M2_CONV_W, TMM_M2_CONV_B, TMM_M2_DT_BIAS, TMM_M2_A_LOG, TMM_M2_D, TMM_M2_NORM_W, TMM_M2_OUT_W,
    TMM_M2_COUNT
};

typedef struct tmm_mamba2_dims {
    uint32_t d, di, heads, P, N;
    uint32_t conv;   /* di + 2N: the convolved channels xBC */
    uint32_t in;     /* 2di + 2N + nh: the in-projection's rows */
} tmm_mamba2_dims;

/* The widths of a (checked) mamba2 config. */
tmm_mamba2_dims tmm_mamba2_dims_of(const tmm_model_config *c);

#endif
