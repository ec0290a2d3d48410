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

/* What heads 0 resolves to (tmm_model_config_resolve). */
typedef enum tmm_heads_rule {
    TMM_HEADS_AS_GIVEN,    /* stays 0: one vector over all channels (the TMM) */
    TMM_HEADS_OF_64,       /* heads of 64 channels where 64 divides d, else one; heads divide d */
    TMM_HEADS_OF_64_INNER, /* the same over the 2d inner channels; heads divide 2d (the mixer checks) */
    TMM_HEADS_NONE,        /* no heads: always 0, whatever a preset or flag says */
} tmm_heads_rule;

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
    tmm_heads_rule heads;
    uint32_t default_window;     /* what window 0 resolves to; 0: the architecture has no window */
    uint32_t default_state;      /* what state 0 resolves to; 0: it has no state size */
    bool toeplitz;               /* its mixing is the TMM's causal Toeplitz matrix: the variants kernel,
                                    expanded and frozen, tmm distill and tmm index apply to it */
    const tmm_mixer_class *mixer;
} tmm_arch_desc;

/* The number of rows, for arrays with an entry per architecture: code above
 * the registry and the mixers never names an architecture's constant. */
enum { TMM_N_ARCHS = TMM_ARCH_COUNT };

/* The descriptor of an architecture; NULL for one tmm does not build. */
const tmm_arch_desc *tmm_arch_of(tmm_arch arch);
/* Its name, with the knob that tells its variants apart ("swa (W 64)"). */
const char *tmm_arch_label(const tmm_model_config *c, char *buf, size_t size);
/* The names of the architectures whose row has `has`, comma-separated
 * ("swa"), for messages. */
const char *tmm_arch_names_where(bool (*has)(const tmm_arch_desc *d), char *buf, size_t size);

#endif
