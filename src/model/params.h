/* The parameter table of a model: every tensor's name, shape, initializer and
 * place in the arena. Parameters live in one contiguous float arena and their
 * gradients in a second arena with the same layout, so an optimizer can run
 * over one flat buffer.
 *
 * Names (also the checkpoint's tensor names):
 *   embed.weight            [V, d]     N(0, 1)
 *   blocks.L.ln1.weight     [d]        1          blocks.L.ln1.bias   [d]      0
 *   blocks.L.mlp.fc1.weight [e*d, d]   Kaiming    blocks.L.mlp.fc1.bias [e*d] 0
 *   blocks.L.mlp.fc2.weight [d, e*d]   Kaiming    blocks.L.mlp.fc2.bias [d]   0
 *   blocks.L.ln2.weight     [d]        1          blocks.L.ln2.bias   [d]      0
 *   blocks.L.mix.in.weight  [d, d]     Kaiming    blocks.L.mix.in.bias [d]    0   (heads only)
 *   blocks.L.mix.w          [G, k, n]  Kaiming, fan_in n
 *   blocks.L.mix.beta       [G, n]     0
 *   blocks.L.mix.w2, blocks.L.mix.beta2                                          (expanded only)
 *   blocks.L.mix.out.weight [d, d]     Kaiming    blocks.L.mix.out.bias [d]   0   (heads only)
 *   lm_head.weight          [V, d]     Kaiming
 * G = H for multi-head mixing, 1 for flat. Linear weights are [out, in];
 * Kaiming is normal with std sqrt(2 / fan_in), fan_in = in. */
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
    uint32_t fan_in;
    tmm_param_kind kind;
    bool trainable;      /* false for frozen Toeplitz parameters */
} tmm_param;

/* Where a block's tensors are in the table (index, or -1 when absent). */
typedef struct tmm_block_params {
    int ln1_w, ln1_b, fc1_w, fc1_b, fc2_w, fc2_b, ln2_w, ln2_b;
    int in_w, in_b, w, beta, w2, beta2, out_w, out_b;
} tmm_block_params;

typedef struct tmm_param_table {
    tmm_model_config config;
    tmm_param *params;
    uint32_t count;
    uint64_t arena_floats;   /* arena size including alignment padding */
    int embed, head;
    tmm_block_params *blocks;
} tmm_param_table;

tmm_status tmm_param_table_build(const tmm_model_config *config, tmm_param_table *table);
void tmm_param_table_free(tmm_param_table *table);
/* Index of a parameter by name, or -1. */
int tmm_param_find(const tmm_param_table *table, const char *name);
/* Fills a host arena (table->arena_floats floats) with the initial weights:
 * a pure function of the seed and the parameter names. Padding is zero. */
void tmm_param_init(const tmm_param_table *table, float *arena);

#endif
