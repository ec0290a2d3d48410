/* The parameter table of a model: every tensor's name, shape, initializer and
 * place in the arena. Parameters live in one contiguous float arena and their
 * gradients in a second arena with the same layout, so an optimizer can run
 * over one flat buffer.
 *
 * The frame's tensors (src/model/arch.c) and each mixer's own (src/mixer/)
 * are listed, with their names (also the checkpoint's tensor names), in
 * docs/model.md (the TMM) and docs/baselines.md. Linear weights are [out, in]. */
#ifndef TMM_PARAMS_H
#define TMM_PARAMS_H

#include <stddef.h>

#include "tmm/model.h"

#define TMM_PARAM_NAME_MAX 48
#define TMM_PARAM_ALIGN 64 /* floats: each tensor starts 256-byte aligned */

typedef enum tmm_init {
    TMM_INIT_ZERO,
    TMM_INIT_ONE,
    TMM_INIT_NORMAL,   /* N(0, 1) */
    TMM_INIT_KAIMING,  /* N(0, 2 / fan_in) */
    TMM_INIT_SMALL,    /* N(0, 0.02²): the baselines' Linear weights and embedding */
    TMM_INIT_UNIFORM,  /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default Linear and
                          Conv1d weight and bias (fan_in: the weight's inputs times taps) */
    TMM_INIT_A_LOG,    /* ln(U(1, 16)): Mamba 2's A_log */
    TMM_INIT_DT_BIAS,  /* softplus⁻¹(dt0), dt0 = max(exp(U(ln 1e-3, ln 1e-1)), 1e-4): Mamba 2's dt_bias */
} tmm_init;

typedef enum tmm_param_kind {
    TMM_PARAM_EMBED, TMM_PARAM_LN_WEIGHT, TMM_PARAM_LN_BIAS, TMM_PARAM_LINEAR_WEIGHT, TMM_PARAM_LINEAR_BIAS,
    TMM_PARAM_TOEPLITZ_W, TMM_PARAM_TOEPLITZ_BETA, TMM_PARAM_HEAD,
} tmm_param_kind;

typedef struct tmm_param {
    char name[TMM_PARAM_NAME_MAX];
    uint32_t ndim;
    uint32_t shape[3];
    uint64_t numel;
    uint64_t offset;     /* floats from the start of the arena */
    tmm_init init;
    uint32_t fan_in;     /* Kaiming and uniform */
    tmm_param_kind kind;
    bool trainable;      /* false for frozen Toeplitz parameters */
} tmm_param;

#define TMM_MIXER_MAX_PARAMS 20 /* Hyena declares 17 */

/* Where a block's tensors are in the table (index, or -1 when absent). The
 * mixer's are in the order its class declares them (src/mixer/). */
typedef struct tmm_block_params {
    int mlp_norm_w, mlp_norm_b;    /* the MLP's norm (bias: LayerNorm only); all MLP indices -1 without one */
    int mlp_in_w, mlp_in_b;        /* SiLU and GELU MLP: fc1; SwiGLU: gate and up, stacked [2e·d, d] */
    int mlp_out_w, mlp_out_b;      /* SiLU and GELU MLP: fc2; SwiGLU: down */
    int mix_norm_w, mix_norm_b;    /* the mixer's norm */
    int mix[TMM_MIXER_MAX_PARAMS];
} tmm_block_params;

typedef struct tmm_param_table {
    tmm_model_config config;
    tmm_param *params;
    uint32_t count;
    uint64_t arena_floats;   /* arena size including alignment padding */
    int embed, head;
    int final_norm_w;        /* -1 without a final norm */
    tmm_block_params *blocks;
} tmm_param_table;

/* Adds tensors to a table under construction (the mixers declare theirs
 * through it). */
typedef struct tmm_param_builder tmm_param_builder;
typedef struct tmm_param_spec {
    uint32_t ndim;
    uint32_t shape[3];
    tmm_init init;
    uint32_t fan_in;         /* Kaiming and uniform */
    tmm_param_kind kind;
    bool trainable;
} tmm_param_spec;
/* Adds "blocks.<layer>.<what>" (or just <what> when layer is UINT32_MAX);
 * returns its index, or -1 once an error has happened (the build reports it). */
int tmm_param_add(tmm_param_builder *b, uint32_t layer, const char *what, tmm_param_spec spec);

tmm_status tmm_param_table_build(const tmm_model_config *config, tmm_param_table *table);
void tmm_param_table_free(tmm_param_table *table);
/* Index of a parameter by name, or -1. */
int tmm_param_find(const tmm_param_table *table, const char *name);
/* Fills a host arena (table->arena_floats floats) with the initial weights:
 * a pure function of the seed and the parameter names. Padding is zero. */
void tmm_param_init(const tmm_param_table *table, float *arena);
/* The initializer p gets under the table's model.init: p->init for "arch",
 * PyTorch's module default for "torch" (docs/model.md "Initialization"). */
tmm_init tmm_param_init_of(const tmm_param_table *table, const tmm_param *p);

#endif
