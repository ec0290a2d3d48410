/* A sequence model on a device: the frame of its architecture (arch.h) with
 * parameters and gradients in two arenas of the same layout (params.h), the
 * mixer's and the frame's activations planned from the config and the batch
 * size, and one recording of the forward (and backward) pass that is
 * replayed for every batch.
 *
 * The frame keeps per block (N = batch * n_ctx rows) the block input, each
 * half's norm statistics and normed input, the residual between the halves
 * and the MLP's two activations; the mixer keeps its own (src/mixer/). Plus
 * the final hidden state (and final norm), the logits [N,V] (replaced by
 * their gradient in the backward), gradient temporaries and one shared
 * scratch buffer. All of it grows linearly in n (tmm_model_memory_plan). */
#ifndef TMM_MODEL_MODEL_H
#define TMM_MODEL_MODEL_H

#include "model/memory.h"
#include "model/params.h"
#include "ops/toeplitz.h"
#include "recorder.h"

typedef struct tmm_model tmm_model;

/* Sets of host-visible inputs (tokens, targets) and outputs (loss, argmax):
 * while the device runs a step recorded on one slot, the host fills the next
 * batch into the other. */
#define TMM_MODEL_SLOTS 2


/* How a model is computed and what it keeps (none of it changes the
 * parameters' layout or the function computed, up to the rounding of the
 * weights and activations that precision stores in 16 bits). Zero: AUTO,
 * fp32, no recomputation. */
typedef struct tmm_model_options {
    tmm_toeplitz_impl impl;        /* how the Toeplitz layers are computed */
    tmm_precision precision;    /* the format of the kept activations and of the weights the matmuls read */
    tmm_recompute recompute;    /* what the backward recomputes instead of keeping */
} tmm_model_options;

/* Device memory a model of this config needs at this batch size with these
 * options (NULL: the zero options). The Toeplitz layers computed by FFT add
 * the plan's buffers (mixer, which depend on the device's binding limits:
 * device must not be NULL); DIRECT adds none; AUTO asks tmm_toeplitz_resolve
 * (which may calibrate the device once), or counts no plan when device is NULL. */
tmm_status tmm_model_memory_plan(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 const tmm_model_options *options, tmm_model_memory *out);

/* Allocates the model for `batch` sequences and initializes the parameters
 * from config->seed (tmm_param_init). The Toeplitz layers are computed as
 * AUTO picks (the device's measured crossover); when that is the FFT path its
 * plan is made here, compiling VkFFT's kernels once, never per step. */
tmm_status tmm_model_create(tmm_device *device, const tmm_model_config *config, uint32_t batch, tmm_model **out);
/* tmm_model_create with the Toeplitz implementation given up front (AUTO
 * measures the crossover, once per device; DIRECT makes no plan). */
tmm_status tmm_model_create_impl(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 tmm_toeplitz_impl impl, tmm_model **out);
/* tmm_model_create with every option (NULL: the zero options). */
tmm_status tmm_model_create_opts(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 const tmm_model_options *options, tmm_model **out);
void tmm_model_destroy(tmm_model *model);

const tmm_param_table *tmm_model_table(const tmm_model *model);
uint32_t tmm_model_batch(const tmm_model *model);
/* Chooses how the Toeplitz layers are computed (default AUTO; other mixers
 * ignore it): makes (or frees) the FFT plan now; recordings made before must
 * be made again. */
tmm_status tmm_model_set_toeplitz_impl(tmm_model *model, tmm_toeplitz_impl impl);

/* Wrap every op in a timestamp region labelled by op ("matmul", "toeplitz bwd",
 * ...) for per-op device time (tmm_recorder_region_time); next record. */
void tmm_model_set_profile(tmm_model *model, bool profile);

/* Host <-> device copies of the arenas (table->arena_floats floats). */
tmm_status tmm_model_write_params(tmm_model *model, const float *arena);
tmm_status tmm_model_read_params(tmm_model *model, float *arena);
tmm_status tmm_model_read_grads(tmm_model *model, float *arena);

/* The target of a position that is not scored (the reference's -100; every
 * negative target is ignored by the loss). */
#define TMM_TARGET_IGNORE (-100)

/* The next batch: tokens and targets [batch, n_ctx]; a negative target is not
 * scored. Checks every token and target against the vocabulary. The loss is
 * then the mean over the batch's scored targets (the denominator is their
 * count) until tmm_model_set_loss_denominator says otherwise. */
tmm_status tmm_model_set_batch(tmm_model *model, const uint32_t *tokens, const int32_t *targets);
/* The loss (and its gradient) of the current slot's batch becomes the sum of
 * its per-target losses divided by `count`: with the scored targets of a whole
 * accumulated step, the micro-batches' losses and gradients add up to the
 * step's mean, however their scored targets are spread. */
void tmm_model_set_loss_denominator(tmm_model *model, uint32_t count);

/* Runs the forward pass (and with backward, the backward pass, writing every
 * gradient of the mean loss into the gradient arena; frozen parameters keep a
 * zero gradient). Records on first use and whenever the mode or the number of
 * loss denominator changes; otherwise replays. */
tmm_status tmm_model_run(tmm_model *model, bool backward);
/* Selects the slot that set_batch fills, record binds and the result getters
 * read (default 0). */
void tmm_model_set_slot(tmm_model *model, uint32_t slot);

/* Records the forward (and backward) pass into an outside recorder, so a
 * trainer can append its optimizer and replay the whole step. The recording
 * bakes in the current batch's loss denominator (tmm_model_loss_denominator):
 * record again when it changes. After running it, tmm_model_mark_run lets
 * the result getters below read the outputs. */
tmm_status tmm_model_record(tmm_model *model, tmm_recorder *recorder, bool backward);
/* The backward alone, recorded after a forward that tmm_model_record (with
 * backward for an LM, without for an encoder) put earlier into the same
 * recorder: an encoder's backward waits for what the caller records in
 * between (the gradient of its hidden state). */
tmm_status tmm_model_record_backward(tmm_model *model, tmm_recorder *recorder);
/* The current slot's number of scored targets, and the loss's denominator. */
uint32_t tmm_model_scored(const tmm_model *model);
uint32_t tmm_model_loss_denominator(const tmm_model *model);
void tmm_model_mark_run(tmm_model *model, bool backward);
tmm_buffer *tmm_model_param_buffer(tmm_model *model);
tmm_buffer *tmm_model_grad_buffer(tmm_model *model);

/* Results of the last run. Logits ([batch, n_ctx, V]) only after a forward-only run. */
tmm_status tmm_model_loss(tmm_model *model, float *loss);
tmm_status tmm_model_logits(tmm_model *model, float *logits);
/* Logits of rows [row0, row0 + count) of the [batch * n_ctx, V] logits, after
 * a forward-only run. */
tmm_status tmm_model_logits_rows(tmm_model *model, uint64_t row0, uint64_t count, float *logits);
/* Predicted next token (argmax of the logits) at every position [batch, n_ctx]. */
tmm_status tmm_model_argmax(tmm_model *model, uint32_t *argmax);

/* The autoencoder's modes (docs/model.md, "Autoencoder"; src/train/autoenc.h).
 * Each takes effect at the next recording (tmm_model_run records again; an
 * outside recorder must record again).
 *
 * Input: the first block reads x [batch * n_ctx, d], a device view that must
 * stay valid, instead of the token embedding (tokens are still set by
 * set_batch, and checked, but not read; the embedding gets no gradient). The
 * backward writes dL/dx into dx, unless dx is empty. An empty x returns to
 * the token embedding. */
tmm_status tmm_model_set_input(tmm_model *model, tmm_view x, tmm_view dx);
/* Encoder: the forward ends at the final hidden state (tmm_model_hidden): no
 * LM head, no loss, no logits, no predictions (their getters fail); the
 * backward starts from d_hidden [batch * n_ctx, d], the gradient of that
 * state, which must then be given. false returns to the LM. */
tmm_status tmm_model_set_encoder(tmm_model *model, bool encoder, tmm_view d_hidden);
/* Dynamic loss scaling (train/optim.h): the backward's loss gradient is
 * multiplied by the float that `scale` holds on the device when the step
 * runs (tmm_optim_loss_scale_view); the loss stays unscaled. An empty view:
 * 1. Takes effect at the next recording. */
tmm_status tmm_model_set_loss_scale(tmm_model *model, tmm_view scale);
/* The final hidden state [batch * n_ctx, d] of the last forward: the LM
 * head's input (after the final norm where the architecture has one). With
 * 16-bit precision and no final norm, a backward reuses its buffer: read it
 * between the forward and the backward. */
tmm_view tmm_model_hidden(const tmm_model *model);

/* The model's mixer (src/mixer/mixer.h), and the input of layer l's mixer
 * [batch, n_ctx, d] as the last forward left it (the decoders read both; a
 * model made with the zero options, whose layers keep their own buffers). */
struct tmm_mixer *tmm_model_mixer(tmm_model *model);
tmm_view tmm_model_mixer_input(const tmm_model *model, uint32_t layer);

#endif
