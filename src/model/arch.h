/* The model frame of each architecture (docs/model.md, docs/baselines.md):
 *
 *     h0 = E[token];  h_{l+1} = Block_l(h_l);  logits = FinalNorm(h_L) · Wlmᵀ
 *     Block: two residual halves, each h = h + F(Norm(h)), F the mixer or the
 *            MLP, in the order the architecture uses; one half (the mixer's)
 *            for an architecture without an MLP (TMM_MLP_NONE).
 *
 * What differs between architectures is data in this table; the mixer is a
 * class (src/mixer/mixer.h). */
#ifndef TMM_MODEL_ARCH_H
#define TMM_MODEL_ARCH_H

#include "mixer/mixer.h"

typedef enum tmm_norm_kind {
    TMM_NORM_LAYER,  /* LayerNorm, affine gamma and beta */
    TMM_NORM_RMS,    /* RMSNorm, gain g */
} tmm_norm_kind;

typedef enum tmm_mlp_kind {
    TMM_MLP_SILU,    /* W2 · silu(W1 x + b1) + b2, hidden e·d */
    TMM_MLP_SWIGLU,  /* Wdown · (silu(Wgate x) ⊙ (Wup x)), hidden e·d, no biases */
    TMM_MLP_GELU,    /* W2 · gelu(W1 x + b1) + b2, hidden e·d, exact erf GELU */
    TMM_MLP_NONE,    /* no MLP: the block is the mixer's half alone */
} tmm_mlp_kind;

typedef struct tmm_arch_desc {
    tmm_arch arch;               /* its name: tmm_arch_name */
    tmm_norm_kind norm;
    double norm_eps;             /* of every frame norm (the blocks' and the final one) */
    tmm_mlp_kind mlp;
    bool mixer_first;            /* the mixer's half before the MLP's */
    bool final_norm;
    tmm_init linear_init;        /* Linear weights of the MLP (and the LM head) */
    tmm_init embed_init;
    const char *mlp_norm_name;   /* tensor names: blocks.L.<mlp_norm_name>.weight, ... (NULL: no MLP) */
    const char *mix_norm_name;
    double default_lr;           /* the peak learning rate the paper trained it at */
    const tmm_mixer_class *mixer;
} tmm_arch_desc;

/* The descriptor of an architecture; NULL for one tmm does not build. */
const tmm_arch_desc *tmm_arch_of(tmm_arch arch);

#endif
