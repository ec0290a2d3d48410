/* E6, operator structure over training (docs/experiments.md): E2's TMM run
 * with every evaluation's checkpoint kept, and tmm index on the initial
 * weights and on each checkpoint: the histogram of the Toeplitz vectors'
 * Fredholm indices and min |a| against the training step; beside it the same
 * analysis of E4's joint TMM autoencoders, when the capacity experiment has
 * run into the same results root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/index.h"
#include "experiment/exp_util.h"
#include "files.h"
#include "model/checkpoint.h"

#define MAX_POINTS 64 /* 1 + checkpoints: the paper preset saves 40 */
#define MAX_AE 32     /* autoencoder model files: E4's presets write 2 per setting, at most 3 settings */
#define AE_SUFFIX ".safetensors" /* NAME-HASH.encoder.safetensors and .decoder.safetensors of OUT/capacity/autoenc */

/* Fredholm index bins; UNDEF: min |a| within the tolerance, no index. */
enum { BIN_MINUS1, BIN_ZERO, BIN_BELOW, BIN_ABOVE, BIN_UNDEF, N_BINS };
static const char *const bin_labels[N_BINS] = { "index -1 (shift-like)", "index 0 (invertible)", "index <= -2",
                                                "index >= 1", "undefined (zero on the circle)" };

typedef struct idx_point {
    char source[TMM_NAME_MAX];                         /* "lm", or an autoencoder's model file */
    uint64_t step;
    uint32_t vectors, bins[N_BINS];
    double min_abs_median, min_abs_least, min_abs_most; /* min over the circle of |a|, across the vectors */
    double index_median, index_least, index_most;       /* of the vectors with an index (NAN: none) */
    double rel_min_abs_median;                         /* of min |a| / ‖w‖₁: scale-free distance from singular */
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
static tmm_status analyse(const tmm_checkpoint *ck, const char *source, uint64_t step, idx_point *pt, FILE *f)
{
    const tmm_index_options opt = TMM_INDEX_OPTIONS_DEFAULT;
    tmm_index_result r;
    TMM_TRY(tmm_index_model(ck, &opt, &r));
    double *mins = malloc(3 * (r.count ? r.count : 1) * sizeof *mins);
    if (!mins) {
        tmm_index_result_free(&r);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    double *index = mins + r.count, *rel = mins + 2 * r.count, unused;
    uint32_t defined = 0;
    snprintf(pt->source, sizeof pt->source, "%s", source);
    pt->step = step, pt->vectors = r.count;
    memset(pt->bins, 0, sizeof pt->bins);
    for (uint32_t i = 0; i < r.count; i++) {
        const tmm_index_entry *e = &r.entries[i];
        const tmm_symbol_report *s = &e->report;
        pt->bins[bin_of(s)]++;
        mins[i] = s->wind.min_abs;
        rel[i] = s->l1 > 0 ? s->wind.min_abs / s->l1 : 0;
        if (s->wind.defined)
            index[defined++] = -s->wind.winding;
        fprintf(f, "{\"source\": \"%s\", \"step\": %llu, \"layer\": %u, \"head\": %u, \"tap\": %u, \"w2\": %s, "
                "\"index\": ", source, (unsigned long long)step, e->layer, e->head, e->tap,
                e->second ? "true" : "false");
        s->wind.defined ? fprintf(f, "%d", -s->wind.winding) : fprintf(f, "null");
        fprintf(f, ", \"min_abs\": %.6g, \"l1\": %.6g, \"w0_abs\": %.6g}\n", s->wind.min_abs, s->l1, s->w0_abs);
    }
    spread(mins, r.count, &pt->min_abs_least, &pt->min_abs_median, &pt->min_abs_most);
    spread(index, defined, &pt->index_least, &pt->index_median, &pt->index_most);
    spread(rel, r.count, &unused, &pt->rel_min_abs_median, &unused);
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

static int by_name(const void *a, const void *b) { return strcmp(*(const tmm_dir_entry *)a, *(const tmm_dir_entry *)b); }

/* E4's joint TMM autoencoders' model files in OUT/capacity/autoenc (none
 * when the capacity experiment has not run there), in name order. */
static tmm_status analyse_autoencoders(exp_ctx *x, idx_point *ae, uint32_t *n_ae, FILE *f)
{
    char dir[TMM_EXP_PATH_MAX], cap[TMM_EXP_PATH_MAX];
    *n_ae = 0;
    TMM_TRY(tmm_path_join(cap, sizeof cap, x->o->out, "capacity"));
    TMM_TRY(tmm_path_join(dir, sizeof dir, cap, "autoenc"));
    if (!tmm_is_dir(dir))
        return TMM_OK;
    tmm_dir_entry *names;
    uint32_t count;
    TMM_TRY(tmm_list_dir(dir, &names, &count));
    qsort(names, count, sizeof *names, by_name);
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < count && s == TMM_OK && *n_ae < MAX_AE; i++) {
        const size_t len = strlen(names[i]), sl = strlen(AE_SUFFIX);
        if (len <= sl || strcmp(names[i] + len - sl, AE_SUFFIX) != 0)
            continue;
        char path[TMM_EXP_PATH_MAX + TMM_NAME_MAX];
        tmm_checkpoint ck = { 0 };
        s = tmm_path_join(path, sizeof path, dir, names[i]);
        if (s == TMM_OK)
            s = tmm_checkpoint_load_model(path, NULL, &ck);
        if (s == TMM_OK && ck.table.config.arch == exp_arch("tmm")) {
            s = analyse(&ck, names[i], ck.step, &ae[*n_ae], f);
            ae[(*n_ae)++].val_loss = NAN; /* reconstruction, not language modelling: E4's report has it */
        }
        tmm_checkpoint_free(&ck);
    }
    free(names);
    return s;
}

static tmm_status analyse_run(exp_ctx *x, const tmm_exp_run *r, idx_point *pts, uint32_t *n_pts, idx_point *ae,
                              uint32_t *n_ae)
{
    uint64_t steps[MAX_POINTS];
    const uint32_t n = checkpoint_steps(r, steps);
    exp_stream jsonl;
    TMM_TRY(exp_stream_open(&jsonl));
    FILE *f = jsonl.f;
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < n && s == TMM_OK; i++) {
        tmm_checkpoint ck = { 0 };
        char dir[TMM_EXP_PATH_MAX + 64];
        if (steps[i] == 0)
            s = initial(&r->config.model, &ck);
        else if ((s = tmm_checkpoint_step_dir(r->dir, steps[i], dir, sizeof dir)) == TMM_OK)
            s = tmm_checkpoint_load_model(dir, &r->config.model, &ck);
        if (s == TMM_OK)
            s = analyse(&ck, "lm", steps[i], &pts[i], f);
        pts[i].val_loss = val_loss_at(r, steps[i]);
        tmm_checkpoint_free(&ck);
        if (s == TMM_OK && !x->o->quiet)
            printf("  step %llu: %u vectors, %u of index -1, %u of index 0\n", (unsigned long long)steps[i],
                   pts[i].vectors, pts[i].bins[BIN_MINUS1], pts[i].bins[BIN_ZERO]);
    }
    *n_pts = n;
    if (s == TMM_OK)
        s = analyse_autoencoders(x, ae, n_ae, f);
    tmm_status w = exp_stream_save(x, "index.jsonl", &jsonl);
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

static double share_minus1(const idx_point *p, uint32_t n)
{
    uint64_t v = 0, m = 0;
    for (uint32_t i = 0; i < n; i++)
        v += p[i].vectors, m += p[i].bins[BIN_MINUS1];
    return v ? (double)m / (double)v : NAN;
}

/* Part 1: index -1 is the most common index of the LM's last checkpoint.
 * Part 2, with E4's autoencoders: the LM's share of index -1 is at least
 * theirs (pooled over their models) and its median min |a| / ‖w‖₁ above
 * theirs (the median of their models' medians). */
static const char *verdict(const idx_point *last, idx_point *ae, uint32_t n_ae, char *why, size_t size)
{
    uint32_t top = 0;
    for (int b = 1; b < N_BINS; b++)
        top = last->bins[b] > last->bins[top] ? (uint32_t)b : top;
    int len = snprintf(why, size, "at step %llu, %u of %u Toeplitz vectors have index -1, %u index 0, %u index <= -2, "
                       "%u index >= 1, %u undefined", (unsigned long long)last->step, last->bins[BIN_MINUS1],
                       last->vectors, last->bins[BIN_ZERO], last->bins[BIN_BELOW], last->bins[BIN_ABOVE],
                       last->bins[BIN_UNDEF]);
    if (last->vectors == 0)
        return "not tested";
    const bool first = top == BIN_MINUS1;
    if (n_ae == 0) {
        snprintf(why + len, size - (size_t)len, "; no autoencoders of E4 in the results root: the comparison was not "
                 "made (run tmm experiment capacity with the same --out first)");
        return first ? "held" : "not held";
    }
    double med[MAX_AE], unused, ae_rel;
    for (uint32_t i = 0; i < n_ae; i++)
        med[i] = ae[i].rel_min_abs_median;
    spread(med, n_ae, &unused, &ae_rel, &unused);
    const double lm_share = share_minus1(last, 1), ae_share = share_minus1(ae, n_ae);
    const bool second = lm_share >= ae_share && last->rel_min_abs_median > ae_rel;
    snprintf(why + len, size - (size_t)len, "; index -1: %.3f of the LM's vectors, %.3f of %u autoencoder models'; "
             "median min |a| / l1: LM %.4g, autoencoders %.4g", lm_share, ae_share, n_ae, last->rel_min_abs_median,
             ae_rel);
    return first && second ? "held" : first || second ? "partly held" : "not held";
}

#define RULE                                                                                                       \
    "part 1: index -1 is the most common Fredholm index of the trained LM's Toeplitz vectors (the last "           \
    "checkpoint); part 2, when E4's joint TMM autoencoders are in the same results root: the LM's share of index " \
    "-1 is at least theirs and its median min |a| / l1 above theirs. Held: both (or part 1 without autoencoders); " \
    "partly held: one"

static cJSON *point_json(const idx_point *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", p->source);
    cJSON_AddNumberToObject(o, "step", (double)p->step);
    cJSON_AddNumberToObject(o, "vectors", p->vectors);
    cJSON_AddNumberToObject(o, "index_minus1", p->bins[BIN_MINUS1]);
    cJSON_AddNumberToObject(o, "index_0", p->bins[BIN_ZERO]);
    cJSON_AddNumberToObject(o, "index_below_minus1", p->bins[BIN_BELOW]);
    cJSON_AddNumberToObject(o, "index_above_0", p->bins[BIN_ABOVE]);
    cJSON_AddNumberToObject(o, "undefined", p->bins[BIN_UNDEF]);
    cJSON_AddItemToObject(o, "index_median", exp_number_or_null(p->index_median));
    cJSON_AddItemToObject(o, "index_smallest", exp_number_or_null(p->index_least));
    cJSON_AddItemToObject(o, "index_largest", exp_number_or_null(p->index_most));
    cJSON_AddItemToObject(o, "min_abs_median", exp_number_or_null(p->min_abs_median));
    cJSON_AddItemToObject(o, "min_abs_smallest", exp_number_or_null(p->min_abs_least));
    cJSON_AddItemToObject(o, "rel_min_abs_median", exp_number_or_null(p->rel_min_abs_median));
    cJSON_AddItemToObject(o, "val_loss", exp_number_or_null(p->val_loss));
    return o;
}

static void table_row(FILE *f, const char *first, const idx_point *p)
{
    char loss[32] = "-";
    if (isfinite(p->val_loss))
        snprintf(loss, sizeof loss, "%.4f", p->val_loss);
    fprintf(f, "| %s | %s | %u | %u | %u | %u | %u | %u | %g (%g .. %g) | %.4g | %.4g | %.4g |\n", first, loss,
            p->vectors, p->bins[BIN_MINUS1], p->bins[BIN_ZERO], p->bins[BIN_BELOW], p->bins[BIN_ABOVE],
            p->bins[BIN_UNDEF], p->index_median, p->index_least, p->index_most, p->min_abs_median, p->min_abs_least,
            p->rel_min_abs_median);
}

static const char *const table_head =
    " | val loss | vectors | index -1 | index 0 | index <= -2 | index >= 1 | undefined | median index (range) | "
    "median min abs(a) | smallest min abs(a) | median min abs(a) / l1 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";

static tmm_status write_outputs(exp_ctx *x, const tmm_exp_run *run, idx_point *pts, uint32_t n, idx_point *ae,
                                uint32_t n_ae)
{
    TMM_TRY(charts(x, pts, n));
    char why[640];
    snprintf(x->out->verdict, sizeof x->out->verdict, "%s", verdict(&pts[n - 1], ae, n_ae, why, sizeof why));

    cJSON *root = exp_summary(x, run, 1), *arr = cJSON_AddArrayToObject(root, "steps");
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, point_json(&pts[i]));
    arr = cJSON_AddArrayToObject(root, "autoencoders");
    for (uint32_t i = 0; i < n_ae; i++)
        cJSON_AddItemToArray(arr, point_json(&ae[i]));
    TMM_TRY(exp_save_summary(x, root, RULE, why));

    exp_stream report;
    TMM_TRY(exp_stream_open(&report));
    FILE *f = report.f;
    exp_report_head(f, x, run, 1,
                    "E2's TMM run (tmm experiment efficiency: the same model, text, steps and seed) with the "
                    "checkpoint of every evaluation kept; `tmm index` on each (every Toeplitz vector per layer, "
                    "head and tap, double precision, tolerance 1e-6 of ‖w‖₁) and on the initial weights (step 0).");
    fprintf(f, "## Measured\n\nThe causal LM over training:\n\n| step%s", table_head);
    for (uint32_t i = 0; i < n; i++) {
        char step[32];
        snprintf(step, sizeof step, "%llu", (unsigned long long)pts[i].step);
        table_row(f, step, &pts[i]);
    }
    if (n_ae) {
        fprintf(f, "\nE4's joint TMM autoencoders (OUT/capacity/autoenc; encoder and decoder, at the end of their "
                   "training):\n\n| model%s", table_head);
        for (uint32_t i = 0; i < n_ae; i++)
            table_row(f, ae[i].source, &ae[i]);
    } else {
        fprintf(f, "\nNo autoencoders: `tmm experiment capacity` has not run into this results root.\n");
    }
    fprintf(f, "\nPlots: [index shares](index-shares.svg), [index range](index-range.svg), [min |a|](min-abs.svg). "
               "Every vector at every step (and of every autoencoder): index.jsonl.\n\n## Did the claim hold at "
               "this scale?\n\nRule: " RULE ".\n\n%s. **Claim: %s.**\n", why, x->out->verdict);
    return exp_stream_save(x, "report.md", &report);
}

tmm_status exp_index(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    if (!exp_selected(o, exp_arch("tmm")))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the index experiment analyses the TMM's Toeplitz layers: "
                        "--archs must include tmm");
    exp_ctx x = exp_context(dev, o, "index", out);
    tmm_exp_run run = { .name = "tmm", .label = "tmm" };
    idx_point *pts = calloc(MAX_POINTS + MAX_AE, sizeof *pts), *ae = pts ? pts + MAX_POINTS : NULL;
    uint32_t n = 0, n_ae = 0;
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
        s = analyse_run(&x, &run, pts, &n, ae, &n_ae);
    if (s == TMM_OK && !out->interrupted)
        s = write_outputs(&x, &run, pts, n, ae, n_ae);
    tmm_exp_run_free(&run);
    free(pts);
    return s;
}
