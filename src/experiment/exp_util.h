/* What the experiments share: their context, the matched models, training
 * their runs, FLOP counts and the pieces of the results directory. Internal
 * to src/experiment. */
#ifndef TMM_EXPERIMENT_UTIL_H
#define TMM_EXPERIMENT_UTIL_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "analysis/svg.h"
#include "experiment/experiment.h"

/* Trains, resumes or reuses one run: tmm_exp_run_train, which a test's fake
 * replaces (the seam of the learning-rate sweep's tests). */
typedef tmm_status (*exp_train_fn)(tmm_device *dev, const char *exp_dir, tmm_exp_run *run,
                                   volatile sig_atomic_t *stop, bool quiet);

typedef struct exp_ctx {
    tmm_device *dev;
    exp_train_fn train;
    const tmm_exp_options *o;
    const tmm_experiment *e;
    const char *device;             /* its name */
    tmm_exp_outcome *out;           /* out->dir: the results directory */
} exp_ctx;

/* The context of the experiment named `name` (tmm_experiments) run on dev. */
exp_ctx exp_context(tmm_device *dev, const tmm_exp_options *o, const char *name, tmm_exp_outcome *out);

/* The experiments (exp_copy.c, exp_efficiency.c, exp_recall.c, exp_index.c): the run of tmm_experiments. */
tmm_status exp_copy(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out);
tmm_status exp_efficiency(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out);
tmm_status exp_retention(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out); /* exp_autoenc.c */
tmm_status exp_capacity(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out);  /* exp_autoenc.c */
tmm_status exp_recall(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out);
tmm_status exp_index(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out);

/* E2's TMM run at o's preset, seed and data (E6 analyses its checkpoints). */
tmm_status exp_efficiency_tmm_config(const tmm_exp_options *o, tmm_train_config *c);

/* Whether the options select arch (none selected: all are). */
bool exp_selected(const tmm_exp_options *o, tmm_arch arch);

/* A training config from a built-in preset (assets/presets) with the
 * experiment's seed for the model and the data; every evaluation step saves a
 * checkpoint (so a killed run resumes from its last evaluation). */
tmm_status exp_base_config(const char *preset, uint64_t seed, tmm_train_config *out);

/* The text of c: --data (o->data) as tmm train --data takes it, else the
 * license texts in /usr/share/common-licenses (E2, E3, E4, E6). */
tmm_status exp_set_text_data(const tmm_exp_options *o, tmm_train_config *c);

/* A preset's model and training budget (the sequence length is the run's). */
typedef struct exp_shape {
    uint32_t d, layers, heads, expansion;
    uint32_t batch, steps, eval_every, eval_batches, warmup;
} exp_shape;
/* c's model (n_ctx n) and budget from shape: every step runs the whole batch
 * (accum 1), every evaluation is logged and saves a checkpoint (one kept). */
void exp_set_shape(tmm_train_config *c, const exp_shape *shape, uint32_t n);
/* A causal LM on text (E2, E3, E4) of this shape at n: the small-text
 * preset's optimizer, the text of o (exp_set_text_data), no accuracy target;
 * resolved (exp_resolve). */
tmm_status exp_text_config(const tmm_exp_options *o, const exp_shape *shape, uint32_t n, tmm_train_config *c);

/* Resolves what the trainer would (tmm_train_prepare): the vocabulary from
 * the task, the model's defaults, the architecture's peak lr. Runs are keyed
 * by resolved settings, so their reports show what ran. */
tmm_status exp_resolve(tmm_train_config *c);

/* arch's model at the TMM model tmm's parameter count (tmm_model_match_params):
 * the same width, context, layers and vocabulary, its own default heads,
 * swa's window n/4. *knob names what was matched ("expansion", "layers"). */
tmm_status exp_matched_model(const tmm_model_config *tmm, tmm_arch arch, tmm_model_config *out, const char **knob);

/* A claim's verdict from the settings where its rule was tested and those
 * where it held: "held" (all), "partly held", "not held" or "not tested". */
const char *exp_verdict(uint32_t held, uint32_t tested);

/* Trains, resumes or reuses each run in order (x->train), printing a
 * line per run; stops early, with ctx->out->interrupted, when asked to. */
tmm_status exp_train_runs(exp_ctx *x, tmm_exp_run *runs, uint32_t n);
/* Frees runs[0..n) (tmm_exp_run_free) and the array (NULL: nothing). */
void exp_runs_free(tmm_exp_run *runs, uint32_t n);

/* The architecture that the experiments' spec names ("tmm", "hyena", ...:
 * docs/experiments.md): a claim is about named models, which the loops over
 * every architecture compare. */
tmm_arch exp_arch(const char *name);

/* Training FLOPs per token of a model (docs/experiments.md, "FLOPs"). */
double exp_flops_per_token(const tmm_model_config *c);

/* Files of the results directory, written atomically. */
tmm_status exp_save_chart(const exp_ctx *x, const char *file, const tmm_chart *chart, bool bars);
tmm_status exp_save_json(const exp_ctx *x, const char *file, const cJSON *json);
/* A file of the results directory written in memory first (f, an
 * open_memstream on buf and size), then atomically by exp_stream_save. */
typedef struct exp_stream {
    FILE *f;
    char *buf;
    size_t size;
} exp_stream;
tmm_status exp_stream_open(exp_stream *s);
/* Closes s->f and writes what it holds as `file`. */
tmm_status exp_stream_save(const exp_ctx *x, const char *file, exp_stream *s);

/* Adds rule, the verdict (x->out->verdict) and, when not NULL, verdict_detail
 * to root, writes it as summary.json and frees it. */
tmm_status exp_save_summary(const exp_ctx *x, cJSON *root, const char *rule, const char *detail);
/* A JSON number, or null when v is not finite. */
cJSON *exp_number_or_null(double v);

/* summary.json's common part: experiment, claim, preset, seed, device, runs[]
 * (label, arch, dir, params, the model, steps, tokens, seconds, final
 * evaluation). */
cJSON *exp_summary(const exp_ctx *x, const tmm_exp_run *runs, uint32_t n);
/* report.md's head: title, claim, device, preset, the command, and the
 * models' table. */
void exp_report_head(FILE *f, const exp_ctx *x, const tmm_exp_run *runs, uint32_t n, const char *matched);

#endif
