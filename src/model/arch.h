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

/* How a run trains and initializes its tensors (--recipe, docs/config.md):
 * the architecture's original recipe (its parameter groups below), or one
 * rate and one weight decay for every tensor with the inits as declared, for
 * ablations (tmm's training before recipes existed, bit for bit). */
typedef enum tmm_recipe { TMM_RECIPE_UNIFORM, TMM_RECIPE_ORIGINAL, TMM_RECIPE_COUNT } tmm_recipe;
extern const char *const tmm_recipe_names[]; /* tmm_recipe, NULL-terminated */

/* A parameter group of an architecture's original recipe: the tensors whose
 * names match `match` (a glob, fnmatch(3); the first group that matches
 * wins), with their own rate, weight decay and init scale. Each choice is
 * the original code's, named in docs/baselines.md "Training recipes". */
#define TMM_GROUP_RUN_DECAY (-1.0) /* weight_decay: the run's (--weight-decay) */
typedef struct tmm_param_group {
    const char *name;            /* for messages and docs ("filter") */
    const char *match;
    double lr;                   /* > 0: its own peak rate, on the run's schedule (scaled by lr / the run's peak) */
    double lr_mult;              /* > 0 (lr 0): the run's rate times this; both 0: the run's rate */
    double weight_decay;         /* its own, or TMM_GROUP_RUN_DECAY; tensors that never decay (biases, norms,
                                    embeddings: tmm_optim_param_decays) stay without */
    double init_depth_power;     /* the declared init's values times n_layers^-p (0: as declared) */
} tmm_param_group;
#define TMM_ARCH_MAX_GROUPS 4

/* What one tensor gets under a recipe (tmm_param_rate_of). */
typedef struct tmm_param_rate {
    double lr_scale;             /* its rate over the run's, at every step */
    double weight_decay;         /* before the never-decaying kinds' exemption */
    double init_scale;           /* its initial values' factor */
    const tmm_param_group *group; /* NULL: none (the run's rate and decay, the declared init) */
} tmm_param_rate;

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
    tmm_param_group groups[TMM_ARCH_MAX_GROUPS]; /* its original recipe's groups, ended by match NULL */
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

/* The rate, weight decay and init scale of tensor `name` of a model of
 * config c under recipe r: uniform gives every tensor (1, run_decay, 1);
 * original the first matching group's. peak_lr: the run's peak rate, which a
 * group's own rate is divided by (0: unknown; such a group then runs at the
 * run's rate). */
tmm_param_rate tmm_param_rate_of(const tmm_model_config *c, tmm_recipe r, const char *name, double peak_lr,
                                 double run_decay);
/* Multiplies the initial weights in `arena` (tmm_param_init's) by their init
 * scales under recipe r (a new run's weights; a resumed run's come from its
 * checkpoint). */
void tmm_recipe_scale_init(const tmm_param_table *t, tmm_recipe r, float *arena);

#endif
