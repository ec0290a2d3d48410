/* The training loop: one recording of [forward, backward, clip + AdamW]
 * replayed every step, batches prepared on the CPU while the device works,
 * periodic evaluation, metrics, checkpoints and exact resumption. */
#ifndef TMM_TRAINER_H
#define TMM_TRAINER_H

#include <signal.h>

#include "device.h"
#include "model/model.h"
#include "train/train_config.h"

typedef struct tmm_train_progress {
    uint64_t step, steps;        /* optimizer steps done, of the run's total */
    double loss, lr, grad_norm;
    double tokens_per_s, elapsed_s;
    double loss_scale;           /* fp16: the dynamic loss scale this step ran with (0: no loss scaling) */
    uint64_t overflow_steps;     /* fp16: steps skipped so far because the scaled gradients overflowed */
    bool eval;                   /* an evaluation finished at this step */
    double val_loss, accuracy;   /* held-out: mean loss, teacher-forced argmax accuracy on scored tokens */
} tmm_train_progress;

typedef struct tmm_train_hooks {
    void (*on_progress)(const tmm_train_progress *progress, void *user); /* every log_every steps and each eval */
    void *user;
    volatile sig_atomic_t *stop;  /* set (e.g. by SIGINT): save a checkpoint and return */
    uint64_t stop_after;          /* stop (and save) after this many steps; 0: never */
    bool replace_run;             /* the run directory may hold another run: remove it first */
    struct tmm_data *data;        /* the config's data, already prepared (tmm_train_prepare), or NULL;
                                     the caller keeps it */
    struct tmm_dist *dist;        /* the group of ranks training together (train/dist.h, mpirun), or NULL:
                                     one process. See tmm_train. */
} tmm_train_hooks;

typedef struct tmm_train_result {
    uint64_t step;               /* optimizer steps done */
    double loss;                 /* the last step's training loss */
    double val_loss, accuracy;   /* the last evaluation (accuracy < 0: none ran) */
    double seconds;              /* wall time of this invocation */
    bool interrupted;            /* stopped by hooks->stop */
    bool reached_target;         /* the copy or mqar accuracy reached config->target_accuracy */
    char checkpoint[1100];       /* the last checkpoint written */
} tmm_train_result;

/* Resolves what the config leaves open (vocab from the task), checks it,
 * creates the data source and returns its description. */
typedef struct tmm_data tmm_data;
tmm_status tmm_train_prepare(tmm_train_config *config, tmm_data **data);

/* Trains config->steps steps into config->run_dir. With resume set (a run or
 * checkpoint directory), continues from that checkpoint's weights, optimizer
 * state, step and data position: N steps then a resumed N give the same
 * weights, bit for bit, as 2N steps in one go.
 * The run directory is locked for the whole run (another process gets an
 * error naming this one). It must not hold another run: one is refused unless
 * hooks->replace_run, and continuing the run whose checkpoint is resumed
 * appends to its metrics.
 *
 * Data parallel (hooks->dist with N ranks, each calling tmm_train with the
 * same config on its own device): config->batch is the global batch. Rank r
 * trains on rows r*batch/N .. (r+1)*batch/N - 1 of each step's batch (in
 * accum micro-batches of batch/(N*accum) rows), so the ranks together read
 * exactly the rows of a one-process run; batch must be a multiple of
 * N * accum. Each rank's loss and gradients are divided by the scored
 * targets of the whole global batch; after the backward the gradients are
 * copied to a host-visible staging buffer, summed across ranks
 * (tmm_dist_sum_f32, in buckets), copied back, and every rank runs the same
 * clipped AdamW step. The result equals the one-process run up to the
 * rounding of sums taken in another order. Evaluations split their batches
 * across ranks the same way. Only rank 0 touches the run directory (lock,
 * config, metrics, checkpoints); the others only read a checkpoint to
 * resume. Every check_every steps the weights' checksums are compared; a
 * difference stops the run. A checkpoint resumes with any rank count N for
 * which batch is a multiple of N * accum (batch and accum unchanged). */
tmm_status tmm_train(tmm_device *device, tmm_train_config *config, const char *resume,
                     const tmm_train_hooks *hooks, tmm_train_result *result);

/* Where a run's memory limit comes from. */
typedef enum tmm_memory_limit_source {
    TMM_LIMIT_MAX_MEMORY,  /* --max-memory (train.max_memory): enforced on every device */
    TMM_LIMIT_BUDGET,      /* the device's budget (VK_EXT_memory_budget) */
    TMM_LIMIT_HEAP,        /* the size of the device's largest device-local heap */
} tmm_memory_limit_source;

/* Device memory a run of this config needs: the model at its micro-batch
 * (tmm_model_memory_plan, with the config's precision and recomputation),
 * the optimizer (AdamW moments and its small buffers) and, with
 * accumulation, the gradient sum; and the limit the run is held to. */
typedef struct tmm_train_memory {
    tmm_model_memory model;
    uint64_t optimizer;      /* AdamW m and v, and the optimizer's reduction buffers */
    uint64_t accumulation;   /* the gradient sum of accum > 1 */
    uint64_t total;
    uint64_t limit;          /* --max-memory, else the device's budget, else its heap */
    tmm_memory_limit_source limit_source;
} tmm_train_memory;
tmm_status tmm_train_memory_plan(tmm_device *device, const tmm_train_config *config, tmm_train_memory *out);
/* The limit in words: "--max-memory 4 GiB", "the device's budget of 3.80 GiB"
 * or "the device's 4.00 GiB heap". Returns buf. */
const char *tmm_train_memory_limit_text(const tmm_train_memory *memory, char *buf, size_t size);
/* What would fit `limit` bytes, for a config whose plan does not, as one
 * phrase with each option's planned total: the first that fits of
 * --recompute (mixer, then block) at the same precision, of --precision
 * (fp16, then bf16), and of both, then the largest micro-batch (--accum):
 * "--recompute mixer fits (2.10 GiB), or --accum 4 (3.20 GiB)". Options
 * whose plan fails (not built, or not on this device) do not fit. When
 * nothing does, says what the smallest would need. */
void tmm_train_memory_advice(tmm_device *device, const tmm_train_config *config, uint64_t limit, char *buf,
                             size_t size);

/* The model options of a run: its mixer implementation, precision and recomputation. */
tmm_model_options tmm_train_model_options(const tmm_train_config *config);

/* Reads the training config a checkpoint was made with. */
tmm_status tmm_train_config_from_checkpoint(const char *path, tmm_train_config *config);

typedef struct tmm_eval_result {
    double loss, perplexity, accuracy;
    uint64_t tokens;             /* scored tokens evaluated (a row seen twice counts twice) */
    uint64_t rows;               /* rows evaluated: batches x batch size */
    uint64_t split_rows;         /* distinct held-out rows (0: unbounded, copy and mqar) */
    uint64_t split_tokens;       /* tokens of the held-out split (text) */
    uint32_t batches;
    bool copy;                   /* accuracy is the copy task's held-out accuracy */
    tmm_data_task task;          /* the checkpoint's task (mqar: recall accuracy on the queried values) */
    bool distilled;              /* evaluated with the realizations of its distill.safetensors */
    uint32_t distill_head;
} tmm_eval_result;

/* Evaluates a checkpoint on its task's held-out data, in batches of its batch
 * size: `batches` of them, or with 0 one pass over the held-out split (text:
 * every row scored once) or the config's eval_batches (copy and mqar, whose held-out
 * rows are unbounded). load_flags: tmm_checkpoint_load's, and
 * TMM_LOAD_EXACT: a checkpoint with a distill.safetensors (tmm distill) is
 * evaluated with every Toeplitz vector replaced by its realization (what
 * distilled decoding computes) unless this flag is given (which a checkpoint
 * without one refuses). A loss that is not finite is an error. */
tmm_status tmm_eval_checkpoint(tmm_device *device, const char *path, uint32_t batches, unsigned load_flags,
                               tmm_eval_result *result);

#endif
