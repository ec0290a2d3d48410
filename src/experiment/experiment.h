/* tmm experiment: the paper's comparisons (docs/experiments.md), each one
 * command that trains its runs through the trainer (results.h) and writes a
 * results directory: runs/ (one directory per architecture and setting),
 * summary.json, SVG plots and report.md. */
#ifndef TMM_EXPERIMENT_H
#define TMM_EXPERIMENT_H

#include <signal.h>

#include "device.h"
#include "experiment/results.h"
#include "model/arch.h"
#include "tmm/model.h"

typedef enum tmm_exp_preset { TMM_EXP_SMALL, TMM_EXP_MEDIUM, TMM_EXP_PAPER, TMM_EXP_PRESET_COUNT } tmm_exp_preset;

#define TMM_EXP_MAX_POSITIONS 8
#define TMM_EXP_MAX_RATES 8 /* the learning-rate sweep's grid */

/* Cached decoding time of a model of config c with random weights: ms per
 * token at each position (the generate benchmark's code, supplied by the CLI). */
typedef tmm_status (*tmm_exp_decode_fn)(tmm_device *dev, const tmm_model_config *c, const uint32_t *positions,
                                        uint32_t count, double *ms, void *user);

typedef struct tmm_exp_options {
    tmm_exp_preset preset;
    bool archs[TMM_N_ARCHS];     /* the architectures to compare; none set: every one */
    const char *out;                /* results root: the experiment writes OUT/NAME */
    uint64_t seed;                  /* model initialization and data */
    const char *const *data;        /* efficiency: the --data values (as tmm train --data) */
    uint32_t n_data;
    bool ablations;                 /* efficiency: the TMM ablation rows too */
    bool lr_sweep;                  /* efficiency, recall: each architecture at its best rate of a grid */
    double lr_grid[TMM_EXP_MAX_RATES]; /* the sweep's peak rates, ascending (none: the experiment's grid) */
    uint32_t n_lr_grid;
    bool quiet;                     /* no progress lines */
    volatile sig_atomic_t *stop;    /* set by a signal: save, stop, report interrupted */
    tmm_exp_decode_fn decode;       /* NULL: no decoding measurement */
    void *decode_user;
} tmm_exp_options;

typedef struct tmm_exp_outcome {
    char dir[TMM_EXP_PATH_MAX];     /* OUT/NAME */
    bool interrupted;               /* stopped by *stop: rerun the same command to continue */
    char verdict[32];               /* "held", "not held", "partly held", "not tested" */
    uint32_t runs, reused;
} tmm_exp_outcome;

typedef struct tmm_experiment {
    const char *name;               /* "copy" */
    const char *title;              /* "E1, copying" */
    const char *claim;              /* the paper's claim, one sentence */
    const char *presets[TMM_EXP_PRESET_COUNT]; /* what each preset runs, one line */
    tmm_status (*run)(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out);
    bool lr_sweep;                  /* takes --lr-sweep */
} tmm_experiment;

/* The experiments, terminated by a row with name NULL. */
extern const tmm_experiment tmm_experiments[];
const tmm_experiment *tmm_experiment_find(const char *name);
const char *tmm_exp_preset_name(tmm_exp_preset p);
tmm_status tmm_exp_preset_parse(const char *name, tmm_exp_preset *out);

/* A learning-rate grid, "1e-4,3e-4,1e-3": 1 to TMM_EXP_MAX_RATES distinct
 * rates in (0, 1], into rates sorted ascending. */
tmm_status tmm_exp_lr_grid_parse(const char *text, double *rates, uint32_t *n);

/* Runs the experiment: creates OUT/NAME, trains or reuses its runs, writes the
 * summary, plots and report. */
tmm_status tmm_experiment_run(tmm_device *dev, const tmm_experiment *e, const tmm_exp_options *o,
                              tmm_exp_outcome *out);

#endif
