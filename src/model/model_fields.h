/* The model config's rows of the config table: its JSON keys (section
 * "model"), its `tmm train` flags, ranges and help. They are listed once,
 * here: the training config's table begins with them
 * (train/train_config.c), and a checkpoint writes, reads and compares them
 * (model/checkpoint.c), so a field added here needs no other edit there. */
#ifndef TMM_MODEL_FIELDS_H
#define TMM_MODEL_FIELDS_H

#include "io/config_field.h"
#include "tmm/model.h"

extern const char *const tmm_arch_names[]; /* tmm_arch, NULL-terminated (model/arch.c) */
extern const char *const tmm_init_names[]; /* tmm_init_scheme, NULL-terminated */

/* The rows, each AT(member) placing the value: a table of another struct
 * that holds a tmm_model_config passes its own offset. */
#define TMM_MODEL_FIELD_ROWS(AT)                                                                                      \
    TMM_FIELD_ENUM("model", "arch", "arch", "ARCH", AT(arch), tmm_arch_names,                                        \
                   "the sequence model: tmm, or a baseline (docs/baselines.md)"),                                    \
    TMM_FIELD_U32("model", "vocab", "vocab", AT(vocab), 0, TMM_MAX_VOCAB, "vocabulary size (0: the task's)"),        \
    TMM_FIELD_U32("model", "d_model", "d-model", AT(d_model), 1, TMM_MAX_D_MODEL, "model width d"),                  \
    TMM_FIELD_U32("model", "n_ctx", "n-ctx", AT(n_ctx), 1, TMM_MAX_N_CTX,                                            \
                  "context length n (every Toeplitz vector's length)"),                                              \
    TMM_FIELD_U32("model", "n_layers", "layers", AT(n_layers), 1, TMM_MAX_LAYERS, "layers"),                         \
    TMM_FIELD_U32("model", "heads", "heads", AT(heads), 0, TMM_MAX_HEADS,                                            \
                  "tmm: 0 flat mixing, H in/out projections and H groups; attention, mamba2: heads (0: default); "   \
                  "hyena: none (0)"),                                                                                \
    TMM_FIELD_U32("model", "expansion", "expansion", AT(expansion), 1, TMM_MAX_EXPANSION, "MLP hidden width / d"),   \
    TMM_FIELD_U32("model", "kernel", "kernel", AT(kernel), 1, TMM_MAX_KERNEL,                                        \
                  "channels mixed per Toeplitz tap window"),                                                         \
    TMM_FIELD_BOOL("model", "expanded", "expanded", AT(expanded), "Toeplitz -> SiLU -> Toeplitz mixing"),            \
    TMM_FIELD_BOOL("model", "frozen", "frozen", AT(frozen), "Toeplitz weights keep their initial values (ablation)"), \
    TMM_FIELD_U32("model", "window", "window", AT(window), 0, TMM_MAX_N_CTX,                                         \
                  "swa: keys each query attends to (0: others)"),                                                    \
    TMM_FIELD_U32("model", "state", "state", AT(state), 0, TMM_MAX_STATE,                                            \
                  "mamba2: SSM state size N (0: 64; 0 for the others)"),                                             \
    TMM_FIELD_U64("model", "seed", "model-seed", AT(seed), 0, UINT64_MAX, "initialization seed"),                    \
    TMM_FIELD_ENUM("model", "init", "init", "SCHEME", AT(init), tmm_init_names,                                      \
                   "weight init: the architecture's (the paper's for tmm), or PyTorch's module defaults (smaller)")

/* The rows alone, offsets in tmm_model_config, ended by a row with section NULL. */
extern const tmm_config_field tmm_model_fields[];

#endif
