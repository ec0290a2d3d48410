/* E6, operator structure over training (docs/experiments.md): E2's TMM run
 * with every evaluation's checkpoint kept, and tmm index on the initial
 * weights and on each checkpoint: the histogram of the Toeplitz vectors'
 * Fredholm indices and min |a| against the training step. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/index.h"
#include "experiment/exp_util.h"
#include "train/checkpoint.h"

#define MAX_POINTS 64 /* 1 + checkpoints: the paper preset saves 40 */

/* Fredholm index bins; UNDEF: min |a| within the tolerance, no index. */
enum { BIN_MINUS1, BIN_ZERO, BIN_BELOW, BIN_ABOVE, BIN_UNDEF, N_BINS };
static const char *const bin_labels[N_BINS] = { "index -1 (shift-like)", "index 0 (invertible)", "index <= -2",
                                                "index >= 1", "undefined (zero on the circle)" };

typedef struct idx_point {
    uint64_t step;
    uint32_t vectors, bins[N_BINS];
    double min_abs_median, min_abs_least, min_abs_most; /* min over the circle of |a|, across the vectors */
    double index_median, index_least, index_most;       /* of the vectors with an index (NAN: none) */
    double val_loss;                                   /* the run's evaluation at this step (NAN: none) */
} idx_point;

static int bin_of(const tmm_symbol_report *r)
{
    if (!r->wind.defined)
        return BIN_UNDEF;
    const int index = -r->wind.winding;
    return index == -1 ? BIN_MINUS1 : index == 0 ? BIN_ZERO : index < 0 ? BIN_BELOW : BIN_ABOVE;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and gives its smallest, median and largest (NAN when n is 0). */
static void spread(double *v, uint32_t n, double *least, double *median, double *most)
{
    qsort(v, n, sizeof *v, by_value);
    *least = n ? v[0] : NAN;
    *most = n ? v[n - 1] : NAN;
    *median = !n ? NAN : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Analyses ck's Toeplitz vectors into pt and appends one JSONL line per vector to f. */
static tmm_status analyse(const tmm_checkpoint *ck, uint64_t step, idx_point *pt, FILE *f)
{
    const tmm_index_options opt = TMM_INDEX_OPTIONS_DEFAULT;
    tmm_index_result r;
    TMM_TRY(tmm_index_model(ck, &opt, &r));
    double *mins = malloc(2 * (r.count ? r.count : 1) * sizeof *mins);
    if (!mins) {
        tmm_index_result_free(&r);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    double *index = mins + r.count;
    uint32_t defined = 0;
    pt->step = step, pt->vectors = r.count;
    memset(pt->bins, 0, sizeof pt->bins);
    for (uint32_t i = 0; i < r.count; i++) {
        const tmm_index_entry *e = &r.entries[i];
        const tmm_symbol_report *s = &e->report;
        pt->bins[bin_of(s)]++;
        mins[i] = s->wind.min_abs;
        if (s->wind.defined)
            index[defined++] = -s->wind.winding;
        fprintf(f, "{\"step\": %llu, \"layer\": %u, \"head\": %u, \"tap\": %u, \"w2\": %s, \"index\": ",
                (unsigned long long)step, e->layer, e->head, e->tap, e->second ? "true" : "false");
        s->wind.defined ? fprintf(f, "%d", -s->wind.winding) : fprintf(f, "null");
        fprintf(f, ", \"min_abs\": %.6g, \"l1\": %.6g, \"w0_abs\": %.6g}\n", s->wind.min_abs, s->l1, s->w0_abs);
    }
    spread(mins, r.count, &pt->min_abs_least, &pt->min_abs_median, &pt->min_abs_most);
    spread(index, defined, &pt->index_least, &pt->index_median, &pt->index_most);
    free(mins);
    tmm_index_result_free(&r);
    return TMM_OK;
}

/* The initial weights (step 0) as a checkpoint in memory. */
static tmm_status initial(const tmm_model_config *m, tmm_checkpoint *ck)
{
    memset(ck, 0, sizeof *ck);
    TMM_TRY(tmm_param_table_build(m, &ck->table));
    ck->params = malloc(ck->table.arena_floats * sizeof *ck->params);
    if (!ck->params) {
        tmm_checkpoint_free(ck);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    tmm_param_init(&ck->table, ck->params);
    return TMM_OK;
}

static double val_loss_at(const tmm_exp_run *r, uint64_t step)
{
    for (uint32_t i = 0; i < r->n_points; i++)
        if (r->points[i].step == step)
            return r->points[i].val_loss;
    return NAN;
}

/* Steps with a checkpoint: every save_every, and the last. */
static uint32_t checkpoint_steps(const tmm_exp_run *r, uint64_t *steps)
{
    uint32_t n = 0;
    steps[n++] = 0;
    for (uint64_t s = r->config.save_every; s < r->steps && n < MAX_POINTS - 1; s += r->config.save_every)
        steps[n++] = s;
    steps[n++] = r->steps;
    return n;
}

static tmm_status analyse_run(exp_ctx *x, const tmm_exp_run *r, idx_point *pts, uint32_t *n_pts)
{
    uint64_t steps[MAX_POINTS];
    const uint32_t n = checkpoint_steps(r, steps);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < n && s == TMM_OK; i++) {
        tmm_checkpoint ck = { 0 };
        char dir[TMM_EXP_PATH_MAX + 64];
        if (steps[i] == 0)
            s = initial(&r->config.model, &ck);
        else if ((s = tmm_checkpoint_step_dir(r->dir, steps[i], dir, sizeof dir)) == TMM_OK)
            s = tmm_checkpoint_load_model(dir, &r->config.model, &ck);
        if (s == TMM_OK)
            s = analyse(&ck, steps[i], &pts[i], f);
        pts[i].val_loss = val_loss_at(r, steps[i]);
        tmm_checkpoint_free(&ck);
        if (s == TMM_OK && !x->o->quiet)
            printf("  step %llu: %u vectors, %u of index -1, %u of index 0\n", (unsigned long long)steps[i],
                   pts[i].vectors, pts[i].bins[BIN_MINUS1], pts[i].bins[BIN_ZERO]);
    }
    *n_pts = n;
    tmm_status w = exp_save_stream(x, "index.jsonl", &buf, &size, f);
    return s != TMM_OK ? s : w;
}

static tmm_status charts(exp_ctx *x, const idx_point *pts, uint32_t n)
{
    double xs[MAX_POINTS], share[N_BINS][MAX_POINTS], m[3][MAX_POINTS], ix[3][MAX_POINTS];
    for (uint32_t i = 0; i < n; i++) {
        xs[i] = (double)pts[i].step;
        for (int b = 0; b < N_BINS; b++)
            share[b][i] = pts[i].vectors ? (double)pts[i].bins[b] / pts[i].vectors : NAN;
        m[0][i] = pts[i].min_abs_least, m[1][i] = pts[i].min_abs_median, m[2][i] = pts[i].min_abs_most;
        ix[0][i] = pts[i].index_least, ix[1][i] = pts[i].index_median, ix[2][i] = pts[i].index_most;
    }
    tmm_chart_series ser[N_BINS];
    for (int b = 0; b < N_BINS; b++)
        ser[b] = (tmm_chart_series){ bin_labels[b], xs, share[b], n };
    tmm_chart c = { .title = "TMM Toeplitz layers: Fredholm index over training", .x_label = "training step",
                    .y_label = "share of the Toeplitz vectors", .y_from_zero = true, .series = ser,
                    .n_series = N_BINS, .note = "index = -wind(a, 0) of each vector's symbol; step 0: the init" };
    TMM_TRY(exp_save_chart(x, "index-shares.svg", &c, false));
    static const char *const ml[3] = { "smallest", "median", "largest" };
    tmm_chart_series ms[3], is[3];
    for (int k = 0; k < 3; k++)
        ms[k] = (tmm_chart_series){ ml[k], xs, m[k], n }, is[k] = (tmm_chart_series){ ml[k], xs, ix[k], n };
    tmm_chart ic = { .title = "TMM Toeplitz layers: Fredholm index over training", .x_label = "training step",
                     .y_label = "Fredholm index (-1: shift-like, 0: invertible)", .series = is, .n_series = 3,
                     .note = "across the layers' vectors with an index at each step; a random init has about -n/2" };
    TMM_TRY(exp_save_chart(x, "index-range.svg", &ic, false));
    tmm_chart mc = { .title = "TMM Toeplitz layers: distance from a non-invertible symbol",
                     .x_label = "training step", .y_label = "min over the unit circle of |a(z)|", .log_y = true,
                     .series = ms, .n_series = 3, .note = "across the layers' vectors at each step" };
    return exp_save_chart(x, "min-abs.svg", &mc, false);
}

/* Held when index -1 is the most common index of the trained layers (the
 * last checkpoint). */
static const char *verdict(const idx_point *last, char *why, size_t size)
{
    uint32_t top = 0;
    for (int b = 1; b < N_BINS; b++)
        top = last->bins[b] > last->bins[top] ? (uint32_t)b : top;
    snprintf(why, size, "at step %llu, %u of %u Toeplitz vectors have index -1, %u index 0, %u index <= -2, "
             "%u index >= 1, %u undefined", (unsigned long long)last->step, last->bins[BIN_MINUS1], last->vectors,
             last->bins[BIN_ZERO], last->bins[BIN_BELOW], last->bins[BIN_ABOVE], last->bins[BIN_UNDEF]);
    return last->vectors == 0 ? "not tested" : top == BIN_MINUS1 ? "held" : "not held";
}

static tmm_status write_outputs(exp_ctx *x, const tmm_exp_run *run, const idx_point *pts, uint32_t n)
{
    TMM_TRY(charts(x, pts, n));
    char why[256];
    snprintf(x->out->verdict, sizeof x->out->verdict, "%s", verdict(&pts[n - 1], why, sizeof why));

    cJSON *root = exp_summary(x, run, 1), *arr = cJSON_AddArrayToObject(root, "steps");
    for (uint32_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "step", (double)pts[i].step);
        cJSON_AddNumberToObject(o, "vectors", pts[i].vectors);
        cJSON_AddNumberToObject(o, "index_minus1", pts[i].bins[BIN_MINUS1]);
        cJSON_AddNumberToObject(o, "index_0", pts[i].bins[BIN_ZERO]);
        cJSON_AddNumberToObject(o, "index_below_minus1", pts[i].bins[BIN_BELOW]);
        cJSON_AddNumberToObject(o, "index_above_0", pts[i].bins[BIN_ABOVE]);
        cJSON_AddNumberToObject(o, "undefined", pts[i].bins[BIN_UNDEF]);
        cJSON_AddItemToObject(o, "index_median", exp_number_or_null(pts[i].index_median));
        cJSON_AddItemToObject(o, "index_smallest", exp_number_or_null(pts[i].index_least));
        cJSON_AddItemToObject(o, "index_largest", exp_number_or_null(pts[i].index_most));
        cJSON_AddNumberToObject(o, "min_abs_median", pts[i].min_abs_median);
        cJSON_AddNumberToObject(o, "min_abs_smallest", pts[i].min_abs_least);
        cJSON_AddItemToObject(o, "val_loss", exp_number_or_null(pts[i].val_loss));
    }
    cJSON_AddStringToObject(root, "rule", "held if index -1 is the most common Fredholm index of the trained "
                                          "model's Toeplitz vectors (the last checkpoint); the comparison with "
                                          "autoencoders (E4) is not part of it yet");
    cJSON_AddStringToObject(root, "verdict", x->out->verdict);
    cJSON_AddStringToObject(root, "verdict_detail", why);
    tmm_status js = exp_save_json(x, "summary.json", root);
    cJSON_Delete(root);
    TMM_TRY(js);

    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    exp_report_head(f, x, run, 1,
                    "E2's TMM run (tmm experiment efficiency: the same model, text, steps and seed) with the "
                    "checkpoint of every evaluation kept; `tmm index` on each (every Toeplitz vector per layer, "
                    "head and tap, double precision, tolerance 1e-6 of ‖w‖₁) and on the initial weights (step 0).");
    fprintf(f, "## Measured\n\n| step | val loss | vectors | index -1 | index 0 | index <= -2 | index >= 1 | "
               "undefined | median index (range) | median min abs(a) | smallest min abs(a) |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (uint32_t i = 0; i < n; i++) {
        const idx_point *p = &pts[i];
        char loss[32] = "-";
        if (isfinite(p->val_loss))
            snprintf(loss, sizeof loss, "%.4f", p->val_loss);
        fprintf(f, "| %llu | %s | %u | %u | %u | %u | %u | %u | %g (%g .. %g) | %.4g | %.4g |\n",
                (unsigned long long)p->step, loss, p->vectors, p->bins[BIN_MINUS1], p->bins[BIN_ZERO],
                p->bins[BIN_BELOW], p->bins[BIN_ABOVE], p->bins[BIN_UNDEF], p->index_median, p->index_least,
                p->index_most, p->min_abs_median, p->min_abs_least);
    }
    fprintf(f, "\nPlots: [index shares](index-shares.svg), [index range](index-range.svg), [min |a|](min-abs.svg). "
               "Every vector at every step: "
               "index.jsonl.\n\n## Did the claim hold at this scale?\n\nRule: index -1 is the most common index "
               "of the trained layers (held) or not (not held). The paper's second part, that causal LMs' layers "
               "are more often index -1 and nearer invertible than autoencoders', waits for the autoencoders of "
               "E4 and is not tested here.\n\n%s. **Claim: %s.**\n", why, x->out->verdict);
    return exp_save_stream(x, "report.md", &buf, &size, f);
}

tmm_status exp_index(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    if (!exp_selected(o, TMM_ARCH_TMM))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the index experiment analyses the TMM's Toeplitz layers: "
                        "--archs must include tmm");
    exp_ctx x = { .dev = dev, .o = o, .e = tmm_experiment_find("index"), .device = tmm_device_get_info(dev)->name,
                  .out = out };
    tmm_exp_run run = { .name = "tmm", .label = "tmm" };
    idx_point *pts = calloc(MAX_POINTS, sizeof *pts);
    uint32_t n = 0;
    tmm_status s = pts ? exp_efficiency_tmm_config(o, &run.config)
                       : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        run.config.keep = 0; /* every checkpoint stays */
        if (run.config.steps / run.config.save_every + 2 > MAX_POINTS)
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "too many checkpoints for the index experiment");
    }
    if (s == TMM_OK)
        s = exp_train_runs(&x, &run, 1);
    if (s == TMM_OK && !out->interrupted)
        s = analyse_run(&x, &run, pts, &n);
    if (s == TMM_OK && !out->interrupted)
        s = write_outputs(&x, &run, pts, n);
    tmm_exp_run_free(&run);
    free(pts);
    return s;
}
