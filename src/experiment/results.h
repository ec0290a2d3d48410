/* One training run of an experiment and its directory (docs/experiments.md,
 * "Results"): the trainer's run (config.json, metrics.jsonl, checkpoints/)
 * plus
 *   settings.json  the run's whole training config (run_dir left empty); its
 *                  hash names the directory, so a changed setting is a new run
 *   curve.jsonl    one object per logged step: step, tokens, seconds (device
 *                  wall-clock time of training, summed over resumptions),
 *                  loss, and at evaluations val_loss and accuracy
 *   result.json    written last: the run is finished and is reused as it is
 *                  (a diverged one too: "diverged": true)
 * A run killed before result.json continues from its latest checkpoint
 * (tmm_train's exact resume); one killed before its first checkpoint starts
 * over. */
#ifndef TMM_EXPERIMENT_RESULTS_H
#define TMM_EXPERIMENT_RESULTS_H

#include <signal.h>

#include "device.h"
#include "train/train_config.h"

#define TMM_EXP_LABEL_MAX 64
#define TMM_EXP_PATH_MAX 1024

/* One point of a run's curve. Absent values (no evaluation) are NAN. */
typedef struct tmm_exp_point {
    uint64_t step, tokens;
    double seconds, loss, val_loss, accuracy;
} tmm_exp_point;

typedef struct tmm_exp_run {
    /* set by the experiment */
    char name[TMM_EXP_LABEL_MAX];    /* "tmm-n64": the directory's prefix */
    char label[TMM_EXP_LABEL_MAX];   /* "tmm, n 64": legends and tables */
    tmm_train_config config;         /* everything that defines the run (run_dir is set by tmm_exp_run_train) */
    bool may_diverge;                /* a non-finite training loss ends the run as diverged instead of failing
                                        (the learning-rate sweep's runs) */
    /* set by tmm_exp_run_train */
    char dir[TMM_EXP_PATH_MAX];
    uint64_t params;
    tmm_exp_point *points;           /* the curve, in step order */
    uint32_t n_points;
    bool finished, reused, interrupted;
    bool diverged;                   /* may_diverge: the trainer stopped on a non-finite loss (val_loss NAN) */
    bool reached_target;             /* copy, mqar: the held-out accuracy reached target_accuracy */
    uint64_t steps;                  /* steps trained (fewer than config.steps when the target was reached) */
    double seconds;                  /* device wall-clock seconds of the whole run */
    double val_loss, accuracy;       /* the last evaluation */
} tmm_exp_run;

/* Trains the run into exp_dir/runs/NAME-HASH, or continues or reuses what is
 * there: a finished run is read back (reused), an unfinished one resumes from
 * its checkpoint. A directory of the same name whose settings.json differs is
 * an error. Progress lines go to stdout unless quiet. When *stop is set (a
 * signal), the trainer saves a checkpoint and run->interrupted is set. */
tmm_status tmm_exp_run_train(tmm_device *dev, const char *exp_dir, tmm_exp_run *run, volatile sig_atomic_t *stop,
                             bool quiet);

/* The run's directory name, NAME-<16 hex digits of the settings' hash>, into buf. */
tmm_status tmm_exp_run_key(const tmm_exp_run *run, char *buf, size_t size);

/* Reads curve.jsonl of dir into run->points (replacing them), keeping only
 * steps up to max_step. */
tmm_status tmm_exp_read_curve(const char *dir, uint64_t max_step, tmm_exp_run *run);

/* The first point with an evaluation at or after which accuracy >= target;
 * NULL if none. */
const tmm_exp_point *tmm_exp_first_reaching(const tmm_exp_run *run, double target);

void tmm_exp_run_free(tmm_exp_run *run);

#endif
