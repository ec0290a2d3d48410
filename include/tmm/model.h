/* TMM model configuration (docs/model.md). */
#ifndef TMM_MODEL_H
#define TMM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "tmm/tmm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest value of each field that tmm accepts, from any source (flags,
 * config files, checkpoints): tmm_model_config_check enforces them. */
#define TMM_MAX_VOCAB (1u << 24)
#define TMM_MAX_D_MODEL (1u << 16)
#define TMM_MAX_N_CTX (1u << 24)
#define TMM_MAX_LAYERS 1024u
#define TMM_MAX_HEADS (1u << 16)
#define TMM_MAX_EXPANSION 64u
#define TMM_MAX_KERNEL 16u
#define TMM_MAX_STATE 4096u

/* The sequence model: the TMM or one of the compared baselines
 * (docs/model.md, docs/baselines.md). */
typedef enum tmm_arch {
    TMM_ARCH_TMM = 0,      /* Toeplitz MLP Mixer */
    TMM_ARCH_TRANSFORMER,  /* Llama-style: RMSNorm, RoPE softmax attention, SwiGLU MLP */
    TMM_ARCH_SWA,          /* the transformer with sliding-window attention */
    TMM_ARCH_LINEAR,       /* the transformer block with causal linear attention */
    TMM_ARCH_HYENA,        /* order-2 Hyena: LayerNorm, implicit long convolutions, GELU MLP */
    TMM_ARCH_MAMBA2,       /* Mamba 2: RMSNorm, the SSD state-space mixer, no MLP */
} tmm_arch;
#define TMM_ARCH_COUNT (TMM_ARCH_MAMBA2 + 1)

/* How the weights start (docs/model.md "Initialization"). */
typedef enum tmm_init_scheme {
    TMM_INIT_SCHEME_ARCH = 0, /* the architecture's own: the paper's for the TMM */
    TMM_INIT_SCHEME_TORCH,    /* PyTorch's module defaults: every Linear, Conv1d and Toeplitz weight
                                 U(-1/sqrt(fan_in), 1/sqrt(fan_in)), embeddings N(0, 1) */
} tmm_init_scheme;
#define TMM_INIT_SCHEME_COUNT (TMM_INIT_SCHEME_TORCH + 1)

typedef struct tmm_model_config {
    tmm_arch arch;
    uint32_t vocab;      /* V */
    uint32_t d_model;    /* d */
    uint32_t n_ctx;      /* n: context length, the length of every Toeplitz vector */
    uint32_t n_layers;   /* L */
    uint32_t heads;      /* tmm: 0 flat mixing (one w, beta per layer, no projections), H >= 1
                            in-projection, H groups of d/H channels, out-projection;
                            attention: H >= 1 heads of d/H channels;
                            mamba2: H >= 1 heads of P = 2d/H channels; hyena: 0 (none) */
    uint32_t expansion;  /* e: MLP hidden width e*d (mamba2 has no MLP: ignored) */
    uint32_t kernel;     /* k taps per Toeplitz layer (1: plain) */
    bool expanded;       /* Toeplitz -> SiLU -> Toeplitz */
    bool frozen;         /* Toeplitz w and beta keep their initial values */
    uint32_t window;     /* swa: keys per query (t - window < s <= t); 0 for the other models */
    uint32_t state;      /* mamba2: the SSM state size N; 0 for the other models */
    uint64_t seed;       /* initialization */
    tmm_init_scheme init;
} tmm_model_config;

/* How the Toeplitz layers are computed (docs/model.md "Computing the mixing"). */
typedef enum tmm_toeplitz_impl {
    TMM_TOEPLITZ_AUTO = 0,  /* FFT from the crossover length measured on the device, direct below */
    TMM_TOEPLITZ_DIRECT,    /* O(n^2) per channel, w[t-s] read by index, no n x n matrix */
    TMM_TOEPLITZ_FFT,       /* O(n log n) per channel */
} tmm_toeplitz_impl;
/* The former names ("mixer" meant the Toeplitz choice there; now it means
 * any sequence mixer): deprecated, removed in version 0.2. */
typedef tmm_toeplitz_impl tmm_mixer_impl;
#define TMM_MIXER_AUTO TMM_TOEPLITZ_AUTO
#define TMM_MIXER_DIRECT TMM_TOEPLITZ_DIRECT
#define TMM_MIXER_FFT TMM_TOEPLITZ_FFT

/* The number format of the activations kept between the forward and the
 * backward pass and of the weight matrices the matmuls read (a 16-bit copy
 * of the parameters; docs/model.md "Precision and recomputation").
 * Arithmetic, the parameters themselves, gradients and AdamW moments stay fp32. */
typedef enum tmm_precision {
    TMM_PRECISION_FP32 = 0,
    TMM_PRECISION_FP16,    /* IEEE half: 11-bit significand, up to 65504; dynamic loss scaling */
    TMM_PRECISION_BF16,    /* bfloat16: 8-bit significand, fp32's range */
} tmm_precision;
#define TMM_PRECISION_COUNT (TMM_PRECISION_BF16 + 1)

/* What the forward pass keeps for the backward (activation checkpointing). */
typedef enum tmm_recompute {
    TMM_RECOMPUTE_NONE = 0, /* every activation of every block */
    TMM_RECOMPUTE_MIXER,    /* the frame's activations; each mixer's are recomputed in the backward */
    TMM_RECOMPUTE_BLOCK,    /* each block's input; the block is recomputed in the backward */
} tmm_recompute;
#define TMM_RECOMPUTE_COUNT (TMM_RECOMPUTE_BLOCK + 1)

/* "tmm", "transformer", "swa", "linear", "hyena", "mamba2"; NULL for a value
 * outside the enum. */
TMM_API const char *tmm_arch_name(tmm_arch arch);

/* A small flat TMM: V 256, d 64, n 64, L 2, e 4, k 1, seed 1. */
TMM_API tmm_model_config tmm_model_config_default(void);
/* Gives the fields whose 0 means "the architecture's default" their value:
 * an attention model's heads (heads of 64 channels where they divide d_model,
 * else one head), swa's window (128), mamba2's heads (heads of P = 64 of its
 * 2·d_model inner channels where 64 divides them, else one head) and state
 * (64). */
TMM_API void tmm_model_config_resolve(tmm_model_config *config);
/* TMM_OK, or TMM_ERR_INVALID_ARGUMENT with a message naming the bad field. */
TMM_API tmm_status tmm_model_config_check(const tmm_model_config *config);
/* Number of parameters (trainable or not). */
TMM_API uint64_t tmm_model_param_count(const tmm_model_config *config);

#ifdef __cplusplus
}
#endif
#endif
