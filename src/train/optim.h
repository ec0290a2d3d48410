/* AdamW with global gradient-norm clipping over the flat parameter arena
 * (model/params.h), as device ops that are recorded once and replayed.
 *
 * One step, recorded by tmm_optim_record:
 *   1. sumsq: sum of squares of the trainable gradient floats, in a fixed
 *      order (64-term partials per invocation, then tmm_op_sum's levels): the
 *      same bits on every run. norm = sqrt(sumsq).
 *   2. clip:  scale = min(1, max_norm / (norm + 1e-6)), or 1 when
 *      max_norm <= 0 (PyTorch's clip_grad_norm_). Written with the norm to a
 *      host-visible stats block (tmm_optim_get_stats), and with this step's
 *      coefficients to a small device buffer the update reads: no CPU round
 *      trip. With a loss scale S (below), norm and clip are those of the
 *      true gradients grad / S.
 *   3. AdamW (PyTorch's torch.optim.AdamW, decoupled weight decay), for every
 *      trainable float, g = scale / S * grad:
 *        m = beta1 m + (1 - beta1) g
 *        v = beta2 v + (1 - beta2) g^2
 *        p = p (1 - lr wd) - lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps)
 *      with wd = 0 for tensors that do not decay (tmm_optim_param_decays).
 *    Under the original recipe (config.recipe) a tensor of one of the
 *    architecture's parameter groups (model/arch.h) runs at lr times its
 *    group's scale and with its group's weight decay (tmm_optim_param_rate):
 *    the mask word of each block names its slot, one (rate, decay) pair, and
 *    the step's per-slot step size and decay factor are host-written like the
 *    step's other values. Under uniform every tensor has the run's rate.
 * Frozen tensors (tmm_param.trainable false) and the alignment padding
 * between tensors are never read into the norm nor written: parameters and
 * moments there keep their bits.
 *
 * Per-step values (step number t, learning rate, and the bias corrections
 * derived from them in double) are not push constants: they live in a small
 * host-visible block that tmm_optim_set_step writes before each submit, so
 * one recording serves every step.
 *
 * When the norm is not finite (inf or NaN gradients) and skip_nonfinite is
 * set (the default), the update is skipped on the device: parameters and
 * moments keep their values and the stats say so.
 *
 * Dynamic loss scaling (fp16 runs; PyTorch's GradScaler with growth 2,
 * backoff 1/2): the loss gradient, hence every gradient, carries a factor S
 * that lives in a small device buffer (tmm_optim_loss_scale_view; the
 * cross-entropy multiplies dlogits by it). The step divides it out and then
 * updates S on the device, so replayed recordings need no host round trip:
 *   non-finite sum of squares (overflow): the update is skipped (whatever
 *     skip_nonfinite says), S halves (not below TMM_LOSS_SCALE_MIN, so S
 *     and 1/S stay normal floats; gradients that still overflow there are
 *     NaN or diverged whatever the scale; PyTorch has no floor), the good
 *     count restarts at 0 and the overflow count grows by one;
 *   otherwise the good count grows by one, and on reaching `window` S
 *     doubles (not above TMM_LOSS_SCALE_MAX) and the count restarts.
 * S stays a power of two, so dividing it out is exact: a run whose scale
 * never overflows updates the weights bit for bit as with S = 1 (unless
 * gradients are so small that scaling changes which of them are subnormal).
 * Off after create and reset: S = 1 and fixed.
 *
 * Moments m and v are two device arenas with the parameters' layout, zero
 * after tmm_optim_create and tmm_optim_reset.
 *
 * Large arenas: every op binds at most maxStorageBufferRange bytes, in chunks
 * aligned to minStorageBufferOffsetAlignment; an invocation never loops more
 * than 64 times (lavapipe's loop cap, shaders/loop_limit.glsl).
 *
 * Synchronization: tmm_optim_set_step must not be called while a recording
 * that contains this optimizer is running (the recorder waits in
 * tmm_recorder_submit, so: set, submit, wait, read the stats). The stats
 * describe the last finished step until the next one starts. */
#ifndef TMM_TRAIN_OPTIM_H
#define TMM_TRAIN_OPTIM_H

#include "model/arch.h"
#include "model/params.h"
#include "recorder.h"

typedef struct tmm_optim_config {
    double beta1, beta2;      /* 0.9, 0.999 */
    double eps;               /* 1e-8 */
    double weight_decay;      /* 0 (the paper's runs) */
    double max_grad_norm;     /* 1.0; <= 0 disables clipping (the norm is still computed) */
    bool decay_all;           /* false: biases, norms, embeddings and Toeplitz beta do not decay */
    bool skip_nonfinite;      /* true: a step whose gradient norm is inf or NaN changes nothing */
    tmm_recipe recipe;        /* uniform (the default here; tmm train's is original) */
    double peak_lr;           /* the run's peak rate, which a group's own rate is relative to (tmm_train
                                 sets it from the schedule; 0: unknown, such groups run at the run's rate) */
} tmm_optim_config;

/* At most this many distinct (rate, decay) pairs over a table's tensors. */
#define TMM_OPTIM_MAX_SLOTS 16

tmm_optim_config tmm_optim_config_default(void);
/* TMM_OK, or TMM_ERR_INVALID_ARGUMENT naming the bad field. */
tmm_status tmm_optim_config_check(const tmm_optim_config *config);

/* Whether weight decay applies to a parameter: with decay_all every
 * trainable tensor; otherwise linear weights, Toeplitz w and the LM head,
 * not biases, LayerNorm weights, embeddings or Toeplitz beta. */
bool tmm_optim_param_decays(const tmm_param *param, bool decay_all);
/* A trainable tensor's rate, as a multiple of the step's lr, and its weight
 * decay (0 where tmm_optim_param_decays says no), under config's recipe. */
void tmm_optim_param_rate(const tmm_param_table *table, const tmm_optim_config *config, const tmm_param *param,
                          double *lr_scale, double *weight_decay);

/* The host-written block of one step, as the shaders read it (std430, 64
 * bytes). tmm_optim_set_step fills it; derived fields are computed in double
 * and rounded once. */
typedef struct tmm_optim_hyper {
    uint32_t step;            /* t, 1-based */
    float lr;
    float beta1, beta2;
    float one_minus_beta1, one_minus_beta2;
    float eps;
    float max_norm;           /* <= 0: no clipping */
    float bc2_rsqrt;          /* 1 / sqrt(1 - beta2^t); each slot's step size and decay factor: see above */
    uint32_t skip_nonfinite;
    uint32_t scale_window;    /* loss scaling: good steps before S doubles; 0: S is fixed (off) */
    uint32_t reserved[5];
} tmm_optim_hyper;

/* What the device reports after a step (std430, host-visible). */
typedef struct tmm_optim_stats {
    float sumsq;              /* sum of squares of the trainable gradient floats */
    float grad_norm;          /* sqrt(sumsq), before clipping */
    float clip_scale;         /* the factor the gradients were scaled by (1: no clipping) */
    uint32_t skipped;         /* 1: non-finite norm (with loss scaling: an overflow), the update was
                                 skipped; 2: tmm_optim_set_step was never called */
    uint32_t step;            /* the step number t the device ran with */
    float lr;                 /* the learning rate it ran with */
    float loss_scale;         /* S, the factor the gradients carried (1: no loss scaling) */
    uint32_t overflows;       /* loss scaling: overflow steps so far, this one included */
} tmm_optim_stats;

/* Dynamic loss scaling's state, as it lives on the device (std430). */
#define TMM_LOSS_SCALE_MIN 0x1p-24
#define TMM_LOSS_SCALE_MAX 0x1p24
typedef struct tmm_loss_scale {
    float scale;              /* S: a power of two in [TMM_LOSS_SCALE_MIN, TMM_LOSS_SCALE_MAX] */
    uint32_t good;            /* finite steps in a row since S last changed or overflowed */
    uint32_t overflows;       /* steps skipped for overflow, in all */
} tmm_loss_scale;

typedef struct tmm_optim tmm_optim;

/* An optimizer for arenas laid out by `table` (copied; the table may be
 * freed). Allocates the moments (2 arenas), the mask (one word per 64 floats)
 * and small buffers; the moments start at zero. */
tmm_status tmm_optim_create(tmm_device *device, const tmm_param_table *table, const tmm_optim_config *config,
                            tmm_optim **out);
/* NULL is fine. Destroy after every recording that uses it has finished. */
void tmm_optim_destroy(tmm_optim *optim);

const tmm_optim_config *tmm_optim_get_config(const tmm_optim *optim);

/* Records one whole step: gradient norm, clipping and AdamW. params and grads
 * hold the arenas (table->arena_floats floats each; padding included). */
tmm_status tmm_optim_record(tmm_optim *optim, tmm_recorder *r, tmm_view params, tmm_view grads);
/* Records the gradient norm and the stats only (no update; with loss scaling
 * on, the scale is updated as after a step). */
tmm_status tmm_optim_record_grad_norm(tmm_optim *optim, tmm_recorder *r, tmm_view grads);

/* Writes step t (>= 1) and its learning rate for the next submit (see
 * Synchronization above). lr must be finite and >= 0. */
tmm_status tmm_optim_set_step(tmm_optim *optim, uint32_t step, double lr);
/* The block that tmm_optim_set_step last wrote. */
tmm_optim_hyper tmm_optim_get_hyper(const tmm_optim *optim);
/* Stats of the last finished step (zeros before the first). */
tmm_optim_stats tmm_optim_get_stats(const tmm_optim *optim);

/* Turns dynamic loss scaling on (see above) with this state, S doubling
 * after `window` (>= 1) good steps; also restores a saved state. Writes the
 * device (waits): not while a recording with this optimizer runs. Fails
 * unless state->scale is a power of two in [TMM_LOSS_SCALE_MIN,
 * TMM_LOSS_SCALE_MAX]. */
tmm_status tmm_optim_set_loss_scale(tmm_optim *optim, uint32_t window, const tmm_loss_scale *state);
/* Reads the state after the last finished step (for checkpoints; waits). */
tmm_status tmm_optim_read_loss_scale(const tmm_optim *optim, tmm_loss_scale *state);
/* The float S on the device, for tmm_model_set_loss_scale (valid while the
 * optimizer lives). */
tmm_view tmm_optim_loss_scale_view(const tmm_optim *optim);

/* Zeros the moments and the stats and turns loss scaling off; waits until done. */
tmm_status tmm_optim_reset(tmm_optim *optim);
/* The moment arenas (for checkpoints: tmm_buffer_read / tmm_buffer_write). */
tmm_view tmm_optim_m(const tmm_optim *optim);
tmm_view tmm_optim_v(const tmm_optim *optim);

/* Bytes of device memory the optimizer holds for this table. */
uint64_t tmm_optim_memory(const tmm_param_table *table);

#endif
