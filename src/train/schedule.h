/* Learning-rate schedules on the host: a pure function of the step.
 *
 * Steps count updates from 0: lr(s) is the rate of update s + 1, for s in
 * [0, total_steps). With W warmup steps:
 *   warmup (s < W):  peak * (s + 1) / W  (the W-th update runs at peak)
 *   after warmup, with f = (s - W) / (total_steps - W), from 0 at s = W
 *   towards 1 at s = total_steps:
 *     CONSTANT  peak
 *     LINEAR    min + (peak - min) * (1 - f)             (the paper's, to 0)
 *     COSINE    min + (peak - min) * (1 + cos(pi f)) / 2
 * so the decaying schedules reach min_lr at s = total_steps, one step after
 * the last update. Steps at or past total_steps give min_lr (CONSTANT: peak);
 * when total_steps <= W a decaying schedule never leaves its warmup before
 * the end. */
#ifndef TMM_TRAIN_SCHEDULE_H
#define TMM_TRAIN_SCHEDULE_H

#include <stdint.h>

#include "tmm/tmm.h"

typedef enum tmm_lr_kind {
    TMM_LR_LINEAR = 0,   /* warmup, then linear decay to min_lr */
    TMM_LR_COSINE,       /* warmup, then half a cosine down to min_lr */
    TMM_LR_CONSTANT,     /* warmup (optional: 0 steps), then peak */
} tmm_lr_kind;

typedef struct tmm_lr_schedule {
    tmm_lr_kind kind;
    double peak_lr;
    uint64_t warmup_steps;
    double min_lr;       /* where LINEAR and COSINE end (0: the paper's) */
} tmm_lr_schedule;

/* The paper's reference runs: 500 warmup steps of 200k, then linear decay to 0. */
#define TMM_PAPER_PEAK_LR 5e-4
#define TMM_PAPER_WARMUP_STEPS 500u
#define TMM_PAPER_TOTAL_STEPS 200000u

/* LINEAR, peak 5e-4, 500 warmup steps, to 0. */
tmm_lr_schedule tmm_lr_schedule_default(void);
/* The paper's warmup scaled to a run of total_steps: 500 * total / 200000,
 * rounded, at least 1 (0 when total_steps is 0). */
uint64_t tmm_lr_scaled_warmup(uint64_t total_steps);

/* TMM_OK, or TMM_ERR_INVALID_ARGUMENT naming the bad field: rates must be
 * finite, peak >= 0, 0 <= min_lr <= peak; decaying schedules need
 * total_steps >= 1. */
tmm_status tmm_lr_schedule_check(const tmm_lr_schedule *s, uint64_t total_steps);
/* The learning rate of 0-based step `step` (see above). Pure. */
double tmm_lr_at(const tmm_lr_schedule *s, uint64_t step, uint64_t total_steps);

/* "linear", "cosine", "constant" */
const char *tmm_lr_kind_name(tmm_lr_kind kind);
/* TMM_ERR_INVALID_ARGUMENT, listing the names, for an unknown one. */
tmm_status tmm_lr_kind_parse(const char *name, tmm_lr_kind *out);

#endif
