/* The TMM's mixer (docs/model.md "Mix"): the causal Toeplitz layer, flat or
 * multi-head, plain or expanded, one or k taps. */
#ifndef TMM_MIXER_TOEPLITZ_MIXER_H
#define TMM_MIXER_TOEPLITZ_MIXER_H

#include "mixer/mixer.h"

/* Its tensors in tmm_block_params.mix (-1 when the config has none):
 *   blocks.L.mix.in.weight  [d, d]     Kaiming    blocks.L.mix.in.bias [d]    0   (heads only)
 *   blocks.L.mix.w          [G, k, n]  Kaiming, fan_in n
 *   blocks.L.mix.beta       [G, n]     0
 *   blocks.L.mix.w2, blocks.L.mix.beta2                                          (expanded only)
 *   blocks.L.mix.out.weight [d, d]     Kaiming    blocks.L.mix.out.bias [d]   0   (heads only)
 * G = H with heads, 1 for flat mixing. */
enum {
    TMM_TZ_IN_W, TMM_TZ_IN_B, TMM_TZ_W, TMM_TZ_BETA, TMM_TZ_W2, TMM_TZ_BETA2, TMM_TZ_OUT_W, TMM_TZ_OUT_B,
};

/* A decoder of the Toeplitz mixer (made by its class's decoder_create)
 * decodes with the realizations of tmm distill instead of the cached dot
 * product; before its record_prefill and record_step. */
tmm_status tmm_toeplitz_decoder_distill(tmm_mixer_decoder *d, const tmm_distilled *set);

#endif
