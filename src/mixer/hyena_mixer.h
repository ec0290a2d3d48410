/* Hyena's mixer, order 2 (docs/baselines.md section 4):
 *
 *     u  = ShortConv3(x · Winᵀ + bin)            [n, 3d], depthwise causal, kernel 3, with bias
 *     x0, x1, v = the three d-channel slices of u, in that order
 *     w  = v ⊙ x1
 *     y1[t, c] = Σ_{s<=t} hf[t-s, c] · w[s, c] + D[c] · w[t, c]
 *     h += (y1 ⊙ x0) · Woutᵀ + bout
 *
 * The long filter hf [n, d] is generated from fixed positional features by
 * the implicit filter MLP and decayed by a fixed window:
 *
 *     z_t  = [tt_t, cos(2π·1e-4·t/n), -sin(2π·1e-4·t/n)],  tt_t = t/(n-1) (0 when n = 1)
 *     a    = sin(ω1 ⊙ (z·A1ᵀ + c1)), a = sin(ω2 ⊙ (a·A2ᵀ + c2)), a = sin(ω3 ⊙ (a·A3ᵀ + c3))
 *     hf[t, c] = (a_t · A4[c]) · exp(-tt_t · |δ_c|)
 *     δ_c = ln(0.01)/1.5 + (ln(0.01)/0.3 - ln(0.01)/1.5) · c/(d-1)   (δ_0 alone when d = 1)
 *
 * z and the window are FIXED (not parameters: functions of n and d below).
 * They depend on n, so a model of another context length computes another
 * filter: decoding must use the full model's hf. */
#ifndef TMM_MIXER_HYENA_MIXER_H
#define TMM_MIXER_HYENA_MIXER_H

#include "mixer/mixer.h"

#define TMM_HYENA_FEATURES 3      /* z_t */
#define TMM_HYENA_ORDER 64        /* the filter MLP's width */
#define TMM_HYENA_SHORT_TAPS 3    /* the short convolution's kernel */

/* Its tensors in tmm_block_params.mix, in this order (every one trains):
 *   blocks.L.hyena.in_proj.weight      [3d, d]   Kaiming N(0, 2/d)      .in_proj.bias [3d]   0
 *   blocks.L.hyena.short_conv.weight   [3d, 3]   U(±1/sqrt(3))         .short_conv.bias [3d] U(±1/sqrt(3))
 *   blocks.L.hyena.filter.fc1.weight   [64, 3]   U(±1/sqrt(3))         .fc1.bias [64]  U(±1/sqrt(3))
 *   blocks.L.hyena.filter.omega1       [64]      1
 *   blocks.L.hyena.filter.fc2.weight   [64, 64]  U(±1/8)               .fc2.bias [64]  U(±1/8)
 *   blocks.L.hyena.filter.omega2       [64]      1
 *   blocks.L.hyena.filter.fc3.weight   [64, 64]  U(±1/8)               .fc3.bias [64]  U(±1/8)
 *   blocks.L.hyena.filter.omega3       [64]      1
 *   blocks.L.hyena.filter.fc4.weight   [d, 64]   U(±1/8)               (no bias)
 *   blocks.L.hyena.D                   [d]       N(0, 1)
 *   blocks.L.hyena.out_proj.weight     [d, d]    Kaiming N(0, 2/d)     .out_proj.bias [d]   0
 * short_conv.weight[c, j] multiplies u[t-2+j, c]. */
enum {
    TMM_HY_IN_W, TMM_HY_IN_B, TMM_HY_CONV_W, TMM_HY_CONV_B,
    TMM_HY_F1_W, TMM_HY_F1_B, TMM_HY_F1_OMEGA,
    TMM_HY_F2_W, TMM_HY_F2_B, TMM_HY_F2_OMEGA,
    TMM_HY_F3_W, TMM_HY_F3_B, TMM_HY_F3_OMEGA,
    TMM_HY_F4_W, TMM_HY_D, TMM_HY_OUT_W, TMM_HY_OUT_B,
    TMM_HY_COUNT
};

/* The fixed positional features z_t [3] of position t < n. */
void tmm_hyena_features(uint32_t n, uint32_t t, double z[TMM_HYENA_FEATURES]);
/* The fixed window exp(-tt_t · |δ_c|) of position t < n, channel c < d. */
double tmm_hyena_decay(uint32_t n, uint32_t d, uint32_t t, uint32_t c);

#endif
