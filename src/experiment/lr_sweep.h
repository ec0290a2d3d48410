/* The learning-rate sweep of --lr-sweep (docs/experiments.md, "Learning-rate
 * sweep"): each architecture trained at every peak rate of a log-spaced grid
 * on a short budget (half the preset's steps and warmup), judged on held-out
 * data that is not the final evaluation's; its best rate (the argmin of that
 * loss) is the rate of its runs in the comparison. Internal to src/experiment
 * and its tests. */
#ifndef TMM_EXPERIMENT_LR_SWEEP_H
#define TMM_EXPERIMENT_LR_SWEEP_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "experiment/exp_util.h"

typedef struct exp_sweep {
    /* set by the experiment */
    double rates[TMM_EXP_MAX_RATES];      /* ascending */
    uint32_t n_rates;
    tmm_arch archs[TMM_N_ARCHS];
    uint32_t n_archs;
    const char *setting;                  /* what each sweep run trains, in words (the report) */
    const char *criterion;                /* what judge measures and on which data, in words */
    /* The sweep run of arch at the experiment's setting and resolved default
     * rate; exp_sweep_run then sets its rate, budget, name and label. */
    tmm_status (*build)(const void *user, tmm_arch arch, tmm_exp_run *run);
    const void *user;
    /* A finished sweep run's held-out loss; not finite for a diverged run
     * (never chosen). exp_sweep_val_loss or exp_sweep_fresh_loss. */
    double (*judge)(const tmm_exp_run *run);
    /* set by exp_sweep_run */
    tmm_exp_run *runs;                    /* n_archs x n_rates, row by row */
    double default_lr[TMM_N_ARCHS];
    double loss[TMM_N_ARCHS][TMM_EXP_MAX_RATES];
    int best[TMM_N_ARCHS];                /* the chosen rate's index; -1: every rate diverged */
    bool done;                            /* every sweep run finished and judged */
} exp_sweep;

/* The grid: o's --lr-grid, else the experiment's default of n rates. */
void exp_sweep_grid(exp_sweep *sw, const tmm_exp_options *o, const double *grid, uint32_t n);

/* Builds, trains (x->train: resumes and reuses as every run does) and judges
 * the sweep runs, and chooses each architecture's rate. Interrupted (x->out):
 * sw->done stays false. */
tmm_status exp_sweep_run(exp_ctx *x, exp_sweep *sw);

/* The index of the smallest finite loss of n (ties: the lowest index, the
 * lower rate); -1 when none is finite. */
int exp_sweep_best(const double *loss, uint32_t n);

/* The peak rate of arch's runs in the comparison: the sweep's choice, or
 * fallback when arch was not swept or every rate diverged. */
double exp_sweep_lr(const exp_sweep *sw, tmm_arch arch, double fallback);
/* Sets each of the comparison's runs to its architecture's rate (exp_sweep_lr). */
void exp_sweep_apply(const exp_sweep *sw, tmm_exp_run *runs, uint32_t n);

/* The judges: the held-out validation loss of the run's last step (text),
 * and the mean training loss of its last tenth of steps, each step's on rows
 * no step had trained on (the generated tasks: every training row is new;
 * needs log_every 1). Both +inf for a diverged run. */
double exp_sweep_val_loss(const tmm_exp_run *run);
double exp_sweep_fresh_loss(const tmm_exp_run *run);

/* Text: sets c's validation fraction so that the held-out windows its
 * evaluations read lie in the final runs' training split, just before
 * their held-out part (window mode, docs/data.md: the last V tokens are
 * validation, its windows read from the first on). Refuses prepared shards
 * and document mode, whose split does not move. */
tmm_status exp_sweep_text_split(tmm_train_config *c);

/* The report's section (the table arch x rate, the chosen rates) and
 * summary.json's "lr_sweep". */
void exp_sweep_report(FILE *f, const exp_sweep *sw);
void exp_sweep_json(cJSON *root, const exp_sweep *sw);

void exp_sweep_free(exp_sweep *sw);

#endif
