/* A distilled TMM (tmm distill; docs/model.md "Distilled decoding"): for
 * every Toeplitz vector of a model, an exact head of m lags and a tail of
 * modes, ŵ[m + j] = Σ_i Re(res_i · pole_i^j), which decoding runs as a
 * state recurrence (ops/tz_ssm_ops.h). Stored beside the checkpoint's
 * model.safetensors as distill.safetensors (docs/formats.md):
 *   tensors  "<name>.modes" F32 [G, K, M, 4] for every Toeplitz vector tensor
 *            <name> (blocks.L.mix.w, blocks.L.mix.w2) of the model: per
 *            vector M modes (pole re, pole im, res re, res im), unused ones 0
 *   metadata format "tmm-distill", format_version "1", head (m),
 *            weights_fnv1a64 (FNV-1a 64 of the Toeplitz vectors' float bytes
 *            in table order: the realizations belong to these weights),
 *            data_fnv1a64 (of the data section), and the caller's keys. */
#ifndef TMM_MODEL_DISTILLED_H
#define TMM_MODEL_DISTILLED_H

#include <stdbool.h>

#include "io/safetensors.h"
#include "model/params.h"

#define TMM_DISTILL_FILE "distill.safetensors"
#define TMM_DISTILL_MAX_MODES 1024u

typedef struct tmm_distilled_tensor {
    int param;        /* the Toeplitz vector tensor's index in the table */
    uint32_t modes;   /* M */
    float *data;      /* [G, K, M, 4] */
} tmm_distilled_tensor;

typedef struct tmm_distilled {
    uint32_t head;
    uint32_t count;
    tmm_distilled_tensor *t;
} tmm_distilled;

/* FNV-1a 64 of the Toeplitz vectors of params (a host arena of t's layout). */
uint64_t tmm_distilled_weights_hash(const tmm_param_table *t, const float *params);

/* The modes of table tensor `param`, or NULL. */
const tmm_distilled_tensor *tmm_distilled_find(const tmm_distilled *d, int param);

/* Writes path (atomically) for the model (t, params). */
tmm_status tmm_distilled_write(const char *path, const tmm_param_table *t, const float *params,
                               const tmm_distilled *d, const tmm_st_meta *extra, uint32_t n_extra);

/* Reads path for the model (t, params), checking everything: format,
 * version, checksums (the file's, and that it was made from these
 * weights), head in 1..n, one tensor per Toeplitz vector of the right
 * shape, finite values, every pole inside the unit circle. */
tmm_status tmm_distilled_read(const char *path, const tmm_param_table *t, const float *params, tmm_distilled *out);

/* Loaders of checkpoints (tmm_gen_load, tmm_eval_checkpoint) take this flag
 * beside tmm_checkpoint_load's: use the exact weights, not distill.safetensors. */
#define TMM_LOAD_EXACT (1u << 8)

/* The distill.safetensors of checkpoint directory dir, for the model
 * (t, params), when there is one (*found). Under TMM_LOAD_EXACT (in
 * load_flags) none is read, and a dir without one is an error: the option
 * that asked for exactness (--exact) would do nothing there. */
tmm_status tmm_distilled_load_dir(const char *dir, unsigned load_flags, const tmm_param_table *t,
                                  const float *params, tmm_distilled *out, bool *found);

/* out[j] += Re(res · pole^j) for j < len, pole^j by repeated
 * multiplication in double: one mode's share of a realized tail. */
void tmm_mode_accumulate(double pole_re, double pole_im, double res_re, double res_im, uint32_t len, double *out);

/* Replaces every Toeplitz vector of params by its realization ŵ (the head
 * kept, the tail Σ Re(res·pole^j) computed in double): the model that
 * distilled decoding computes, for evaluating it. */
tmm_status tmm_distilled_apply(const tmm_distilled *d, const tmm_param_table *t, float *params);

void tmm_distilled_free(tmm_distilled *d);

#endif
