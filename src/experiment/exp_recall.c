/* E5, in-context recall (docs/experiments.md): multi-query associative recall
 * (MQAR, docs/data.md) per architecture at matched parameters; the held-out
 * recall accuracy against the number of key-value pairs at one n, and (the
 * medium and paper presets) against n, with the pairs growing as n/4 so that
 * every row is full. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment/exp_util.h"
#include "experiment/lr_sweep.h"
#include "model/arch.h"

#define MAX_PAIRS 4
#define MAX_NS 4
#define MAX_SETTINGS (MAX_PAIRS + MAX_NS)
#define MAX_RUNS (MAX_SETTINGS * TMM_N_ARCHS)
#define TARGET 0.99
#define MARGIN 0.10 /* "competitive": the TMM's accuracy at least the best baseline's minus this */

typedef struct recall_preset {
    uint32_t n, pairs[MAX_PAIRS], pair_count; /* the pairs sweep, at n */
    uint32_t ns[MAX_NS], n_count;             /* the n sweep, at n/4 pairs (none: 0) */
    uint32_t keys, values;
    exp_shape shape;
} recall_preset;

static const recall_preset presets[TMM_EXP_PRESET_COUNT] = {
    [TMM_EXP_SMALL] = { 64, { 2, 4, 8 }, 3, { 0 }, 0, 16, 16, { 32, 2, 4, 2, 16, 300, 50, 8, 30 } },
    [TMM_EXP_MEDIUM] = { 128, { 4, 8, 16, 32 }, 4, { 64, 128, 256, 512 }, 4, 128, 64,
                         { 64, 2, 4, 2, 32, 2000, 100, 8, 100 } },
    [TMM_EXP_PAPER] = { 256, { 8, 16, 32, 64 }, 4, { 128, 256, 512, 1024 }, 4, 256, 256,
                        { 256, 4, 4, 4, 32, 5000, 100, 8, 200 } },
};

/* One (n, pairs) of either sweep; a setting both sweeps share is trained once. */
typedef struct recall_setting {
    uint32_t n, pairs;
    bool in_pairs, in_n; /* which sweeps hold it */
    const tmm_exp_run *at[TMM_N_ARCHS]; /* NULL: not run */
} recall_setting;

typedef struct recall_table {
    recall_setting s[MAX_SETTINGS];
    uint32_t count;
} recall_table;

static recall_setting *setting_of(recall_table *t, uint32_t n, uint32_t pairs)
{
    for (uint32_t i = 0; i < t->count; i++)
        if (t->s[i].n == n && t->s[i].pairs == pairs)
            return &t->s[i];
    t->s[t->count] = (recall_setting){ .n = n, .pairs = pairs };
    return &t->s[t->count++];
}

static tmm_status recall_config(const recall_preset *p, uint64_t seed, uint32_t n, uint32_t pairs,
                                tmm_train_config *c)
{
    TMM_TRY(exp_base_config("tiny-copy", seed, c));
    c->task = TMM_DATA_MQAR;
    c->mqar = (tmm_mqar_config){ .pairs = pairs, .queries = 0, .keys = p->keys, .values = p->values };
    c->model.vocab = 0; /* the task's: 1 + keys + values */
    exp_set_shape(c, &p->shape, n);
    c->target_accuracy = TARGET;
    return exp_resolve(c);
}

/* The run of arch at (n, pairs): the TMM as the preset gives it, a baseline matched to it. */
static tmm_status add_run(const recall_preset *p, uint64_t seed, uint32_t n, uint32_t pairs, tmm_arch arch,
                          tmm_exp_run *r)
{
    TMM_TRY(recall_config(p, seed, n, pairs, &r->config));
    tmm_model_config m;
    const char *knob;
    tmm_status s = exp_matched_model(&r->config.model, arch, &m, &knob);
    if (s == TMM_OK && arch != exp_arch("tmm")) {
        r->config.model = m;
        s = exp_resolve(&r->config);
    }
    char label[32];
    snprintf(r->name, sizeof r->name, "%s-n%u-p%u", tmm_arch_name(arch), n, pairs);
    snprintf(r->label, sizeof r->label, "%s, n %u, %u pairs", tmm_arch_label(&r->config.model, label, sizeof label),
             n, pairs);
    return s;
}

/* The sweep's grid when --lr-grid gives none: around the generated tasks'
 * 3e-3, reaching 3e-2 since the small preset's TMM and transformer chose the
 * top of 3e-3, 1e-2. */
static const double default_grid[] = { 1e-3, 3e-3, 1e-2, 3e-2 };

typedef struct recall_sweep_user {
    const recall_preset *p;
    uint64_t seed;
} recall_sweep_user;

/* The pairs sweep's middle setting, where the sweep runs. */
static uint32_t sweep_pairs(const recall_preset *p) { return p->pairs[p->pair_count / 2]; }

/* The sweep run of arch: the whole budget trained (no stop at 99%), every
 * step's loss on the curve (exp_sweep_fresh_loss). */
static tmm_status build_sweep_run(const void *user, tmm_arch arch, tmm_exp_run *r)
{
    const recall_sweep_user *u = user;
    TMM_TRY(add_run(u->p, u->seed, u->p->n, sweep_pairs(u->p), arch, r));
    r->config.target_accuracy = 0;
    r->config.log_every = 1;
    return TMM_OK;
}

static tmm_status sweep(exp_ctx *x, const recall_preset *p, tmm_exp_run *runs, uint32_t n, exp_sweep *sw,
                        char *setting, size_t size)
{
    const tmm_exp_options *o = x->o;
    const recall_sweep_user user = { p, o->seed };
    exp_sweep_grid(sw, o, default_grid, sizeof default_grid / sizeof *default_grid);
    for (int a = 0; a < TMM_N_ARCHS; a++)
        if (exp_selected(o, (tmm_arch)a))
            sw->archs[sw->n_archs++] = (tmm_arch)a;
    snprintf(setting, size, "MQAR at n %u with %u pairs, the pairs sweep's middle setting", p->n, sweep_pairs(p));
    sw->setting = setting;
    sw->criterion = "the mean training loss of the sweep run's last tenth of steps: each step's loss is measured "
                    "on newly generated rows before the step trains on them, so it is held out, and it is not "
                    "the final evaluation's fixed held-out stream";
    sw->build = build_sweep_run, sw->user = &user, sw->judge = exp_sweep_fresh_loss;
    TMM_TRY(exp_sweep_run(x, sw));
    exp_sweep_apply(sw, runs, n);
    return TMM_OK;
}

static double final_accuracy(const tmm_exp_run *r) { return r ? r->accuracy : NAN; }

/* The accuracy without recall: a uniform guess among the distinct values of
 * the row (which a model can learn without binding them to their keys),
 * E[1/D] for D the distinct values of P uniform draws of V (occupancy). */
static double no_recall(uint32_t P, uint32_t V)
{
    double *p = calloc((size_t)P + 2, sizeof *p);
    if (!p)
        return NAN;
    p[0] = 1;
    for (uint32_t draw = 0; draw < P; draw++)
        for (uint32_t d = draw + 1; d-- > 0;) { /* d distinct before this draw */
            const double q = p[d];
            p[d] = q * d / V;
            p[d + 1] += q * (V - d) / V;
        }
    double e = 0;
    for (uint32_t d = 1; d <= P; d++)
        e += p[d] / d;
    free(p);
    return e;
}

/* The best baseline at a setting: its arch, or -1 when none ran. */
static int best_baseline(const recall_setting *s)
{
    int best = -1;
    for (int a = 0; a < TMM_N_ARCHS; a++)
        if ((tmm_arch)a != exp_arch("tmm") && s->at[a] && isfinite(final_accuracy(s->at[a])) &&
            (best < 0 || final_accuracy(s->at[a]) > final_accuracy(s->at[best])))
            best = a;
    return best;
}

/* The rule at one setting: NULL when it cannot be decided (no TMM or no baseline). */
static const char *rule_at(const recall_setting *s, bool *held)
{
    const int b = best_baseline(s);
    if (!s->at[exp_arch("tmm")] || b < 0 || !isfinite(final_accuracy(s->at[exp_arch("tmm")])))
        return NULL;
    *held = final_accuracy(s->at[exp_arch("tmm")]) >= final_accuracy(s->at[b]) - MARGIN;
    return *held ? "held" : "not held";
}

/* Final accuracy against the pairs (by_n false) or n of one sweep: a series per architecture. */
static tmm_status sweep_chart(exp_ctx *x, const recall_preset *p, const recall_table *t, bool by_n)
{
    tmm_chart_series ser[TMM_N_ARCHS + 1];
    double xs[TMM_N_ARCHS + 1][MAX_SETTINGS], ys[TMM_N_ARCHS + 1][MAX_SETTINGS];
    char names[TMM_N_ARCHS][32];
    uint32_t k = 0;
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        uint32_t m = 0;
        const tmm_exp_run *any = NULL;
        for (uint32_t i = 0; i < t->count; i++) {
            const recall_setting *s = &t->s[i];
            if (!(by_n ? s->in_n : s->in_pairs) || !s->at[a])
                continue;
            xs[k][m] = by_n ? s->n : s->pairs;
            ys[k][m++] = final_accuracy(s->at[a]);
            any = s->at[a];
        }
        if (!any)
            continue;
        tmm_arch_label(&any->config.model, names[k], sizeof names[k]);
        if (tmm_arch_of((tmm_arch)a)->default_window) /* its window follows n */
            snprintf(names[k], sizeof names[k], "%s (W n/4)", tmm_arch_name((tmm_arch)a));
        ser[k] = (tmm_chart_series){ names[k], xs[k], ys[k], m };
        k++;
    }
    if (!k)
        return TMM_OK;
    uint32_t m = 0;
    for (uint32_t i = 0; i < t->count; i++)
        if (by_n ? t->s[i].in_n : t->s[i].in_pairs) {
            xs[k][m] = by_n ? t->s[i].n : t->s[i].pairs;
            ys[k][m++] = no_recall(t->s[i].pairs, p->values);
        }
    ser[k] = (tmm_chart_series){ "no recall (a guess among the row's values)", xs[k], ys[k], m };
    k++;
    char title[128], note[160];
    if (by_n) {
        snprintf(title, sizeof title, "MQAR: held-out recall accuracy against the context length (n/4 pairs)");
        snprintf(note, sizeof note, "matched parameters; %u keys, %u values (chance 1/%u); %u steps of %u, a run "
                 "stops at 99%%", p->keys, p->values, p->values, p->shape.steps, p->shape.batch);
    } else {
        snprintf(title, sizeof title, "MQAR n = %u: held-out recall accuracy against the number of pairs", p->n);
        snprintf(note, sizeof note, "matched parameters; %u keys, %u values (chance 1/%u); every pair queried; %u "
                 "steps of %u, a run stops at 99%%", p->keys, p->values, p->values, p->shape.steps, p->shape.batch);
    }
    tmm_chart c = { .title = title, .x_label = by_n ? "context length n (tokens)" : "key-value pairs per row",
                    .y_label = "held-out recall accuracy at the end (fraction of queried values)",
                    .y_from_zero = true, .series = ser, .n_series = k, .note = note };
    return exp_save_chart(x, by_n ? "accuracy-n.svg" : "accuracy-pairs.svg", &c, false);
}

/* Held-out accuracy against training steps at one setting. */
static tmm_status curve_chart(exp_ctx *x, const recall_setting *s)
{
    tmm_chart_series ser[TMM_N_ARCHS];
    double *xs[TMM_N_ARCHS] = { 0 }, *ys[TMM_N_ARCHS] = { 0 };
    char names[TMM_N_ARCHS][32];
    uint32_t k = 0;
    tmm_status st = TMM_OK;
    for (int a = 0; a < TMM_N_ARCHS && st == TMM_OK; a++) {
        const tmm_exp_run *r = s->at[a];
        if (!r)
            continue;
        xs[k] = malloc((r->n_points + 1) * sizeof(double));
        ys[k] = malloc((r->n_points + 1) * sizeof(double));
        if (!xs[k] || !ys[k])
            st = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t j = 0; st == TMM_OK && j < r->n_points; j++)
            xs[k][j] = (double)r->points[j].step, ys[k][j] = r->points[j].accuracy;
        ser[k] = (tmm_chart_series){ tmm_arch_label(&r->config.model, names[k], sizeof names[k]), xs[k], ys[k],
                                     r->n_points };
        k++;
    }
    char title[128], file[64];
    snprintf(title, sizeof title, "MQAR n = %u, %u pairs: held-out recall accuracy against training steps", s->n,
             s->pairs);
    snprintf(file, sizeof file, "accuracy-steps-n%u-p%u.svg", s->n, s->pairs);
    tmm_chart c = { .title = title, .x_label = "training steps (batches of sequences)",
                    .y_label = "held-out recall accuracy (fraction of queried values)", .y_from_zero = true,
                    .series = ser, .n_series = k, .note = "matched parameters; a run stops at 99%" };
    if (st == TMM_OK && k)
        st = exp_save_chart(x, file, &c, false);
    for (uint32_t j = 0; j < k; j++)
        free(xs[j]), free(ys[j]);
    return st;
}

static void setting_json(cJSON *arr, const recall_setting *s, const char *at, uint32_t values)
{
    cJSON *o = cJSON_CreateObject(), *acc = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", s->n);
    cJSON_AddNumberToObject(o, "pairs", s->pairs);
    cJSON_AddNumberToObject(o, "no_recall", no_recall(s->pairs, values));
    cJSON_AddStringToObject(o, "sweep", s->in_pairs && s->in_n ? "both" : s->in_pairs ? "pairs" : "n");
    for (int a = 0; a < TMM_N_ARCHS; a++)
        if (s->at[a])
            cJSON_AddItemToObject(acc, tmm_arch_name((tmm_arch)a), isfinite(final_accuracy(s->at[a]))
                                                                       ? cJSON_CreateNumber(final_accuracy(s->at[a]))
                                                                       : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "accuracy", acc);
    const int b = best_baseline(s);
    if (b >= 0)
        cJSON_AddStringToObject(o, "best_baseline", tmm_arch_name((tmm_arch)b));
    else
        cJSON_AddNullToObject(o, "best_baseline");
    if (at)
        cJSON_AddStringToObject(o, "verdict", at);
    else
        cJSON_AddStringToObject(o, "verdict", "not tested");
    cJSON_AddItemToArray(arr, o);
}

static void table_rows(FILE *f, const recall_table *t, bool by_n, const char *const *at, uint32_t values)
{
    fprintf(f, "| n | pairs | no recall |");
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        bool any = false;
        for (uint32_t i = 0; i < t->count; i++)
            any = any || t->s[i].at[a];
        if (any)
            fprintf(f, " %s |", tmm_arch_name((tmm_arch)a));
    }
    fprintf(f, " rule |\n|---|---|---|");
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        bool any = false;
        for (uint32_t i = 0; i < t->count; i++)
            any = any || t->s[i].at[a];
        if (any)
            fprintf(f, "---|");
    }
    fprintf(f, "---|\n");
    for (uint32_t i = 0; i < t->count; i++) {
        const recall_setting *s = &t->s[i];
        if (!(by_n ? s->in_n : s->in_pairs))
            continue;
        fprintf(f, "| %u | %u | %.4f |", s->n, s->pairs, no_recall(s->pairs, values));
        for (int a = 0; a < TMM_N_ARCHS; a++) {
            bool any = false;
            for (uint32_t j = 0; j < t->count; j++)
                any = any || t->s[j].at[a];
            if (!any)
                continue;
            if (s->at[a])
                fprintf(f, " %.4f |", final_accuracy(s->at[a]));
            else
                fprintf(f, " - |");
        }
        fprintf(f, " %s |\n", at[i] ? at[i] : "not tested");
    }
    fprintf(f, "\n");
}

static tmm_status write_outputs(exp_ctx *x, const recall_preset *p, tmm_exp_run *runs, uint32_t n_runs,
                                const recall_table *t, const exp_sweep *sw)
{
    tmm_status s = sweep_chart(x, p, t, false);
    if (s == TMM_OK && p->n_count)
        s = sweep_chart(x, p, t, true);
    for (uint32_t i = 0; i < t->count && s == TMM_OK; i++)
        s = curve_chart(x, &t->s[i]);
    if (s != TMM_OK)
        return s;

    /* the verdicts */
    uint32_t held_n = 0, tested_n = 0;
    const char *at[MAX_SETTINGS];
    for (uint32_t i = 0; i < t->count; i++) {
        bool held = false;
        at[i] = rule_at(&t->s[i], &held);
        tested_n += at[i] != NULL;
        held_n += at[i] && held;
    }
    snprintf(x->out->verdict, sizeof x->out->verdict, "%s", exp_verdict(held_n, tested_n));
    char rule[320];
    snprintf(rule, sizeof rule, "at each (n, pairs): the TMM's held-out recall accuracy at the end of its run is at "
             "least the best baseline's minus %.2f; held if at every setting, partly held if at some", MARGIN);

    cJSON *root = exp_summary(x, runs, n_runs);
    cJSON_AddNumberToObject(root, "keys", p->keys);
    cJSON_AddNumberToObject(root, "values", p->values);
    cJSON_AddNumberToObject(root, "chance", 1.0 / p->values);
    cJSON_AddNumberToObject(root, "margin", MARGIN);
    cJSON *arr = cJSON_AddArrayToObject(root, "settings");
    for (uint32_t i = 0; i < t->count; i++)
        setting_json(arr, &t->s[i], at[i], p->values);
    if (sw)
        exp_sweep_json(root, sw);
    TMM_TRY(exp_save_summary(x, root, rule, NULL));

    exp_stream report;
    TMM_TRY(exp_stream_open(&report));
    FILE *f = report.f;
    char setup[1280];
    snprintf(setup, sizeof setup,
             "The TMM as the preset gives it; each baseline at the MLP expansion (Mamba 2: the number of layers) "
             "whose parameter count is nearest the TMM's, with its own default heads; swa's window is n/4. The MQAR "
             "task of docs/data.md: P key-value pairs (%u keys, %u values, vocabulary %u), then every key asked "
             "once in random order, each query followed by its value; only the value after a queried key is "
             "scored (chance 1/%u). The pairs sweep at n %u%s. Held-out recall accuracy (teacher-forced argmax on "
             "the queried values, %u batches of %u new rows) at every evaluation; a run stops when it reaches 99%%. "
             "Peak rates: %s.",
             p->keys, p->values, 1 + p->keys + p->values, p->values, p->n,
             p->n_count ? "; the n sweep with n/4 pairs, every row full" : "", p->shape.eval_batches,
             p->shape.batch, sw ? "each architecture's best of the learning-rate sweep below, at every setting"
                                : "the generated tasks' 3e-3 for every architecture");
    exp_report_head(f, x, runs, n_runs, setup);
    if (sw)
        exp_sweep_report(f, sw);
    fprintf(f, "## Measured\n\nHeld-out recall accuracy at the end of each run (after its %u-step budget, or when "
               "it reached 99%%), against the number of pairs at n %u. \"No recall\" is what a model scores that "
               "has learned which tokens are values but not which key each belongs to: a uniform guess among the "
               "distinct values of the row; only accuracy above it is recall.\n\n", p->shape.steps, p->n);
    table_rows(f, t, false, at, p->values);
    if (p->n_count) {
        fprintf(f, "Against n, with n/4 pairs:\n\n");
        table_rows(f, t, true, at, p->values);
    }
    fprintf(f, "| run | params | accuracy at the end | steps run | device s |\n|---|---|---|---|---|\n");
    for (uint32_t i = 0; i < n_runs; i++)
        fprintf(f, "| %s | %llu | %.4f | %llu | %.1f |\n", runs[i].label, (unsigned long long)runs[i].params,
                runs[i].accuracy, (unsigned long long)runs[i].steps, runs[i].seconds);
    fprintf(f, "\nPlots: [accuracy against pairs](accuracy-pairs.svg)%s; accuracy against steps: ",
            p->n_count ? ", [against n](accuracy-n.svg)" : "");
    for (uint32_t i = 0; i < t->count; i++)
        fprintf(f, "%s[n %u, %u pairs](accuracy-steps-n%u-p%u.svg)", i ? ", " : "", t->s[i].n, t->s[i].pairs,
                t->s[i].n, t->s[i].pairs);
    fprintf(f, ".\n\n## Did the claim hold at this scale?\n\nRule: at each setting (n, pairs), the TMM's held-out "
               "recall accuracy at the end of its run is at least the best baseline's minus %.2f%s. The claim holds "
               "if that holds at every setting, partly if at some.\n\n", MARGIN,
            sw ? ", each architecture at its rate of the learning-rate sweep" : "");
    for (uint32_t i = 0; i < t->count; i++) {
        const int b = best_baseline(&t->s[i]);
        double top = -1; /* the best accuracy of any architecture */
        for (int a = 0; a < TMM_N_ARCHS; a++)
            if (t->s[i].at[a] && isfinite(final_accuracy(t->s[i].at[a])))
                top = fmax(top, final_accuracy(t->s[i].at[a]));
        const bool recalled = top >= no_recall(t->s[i].pairs, p->values) + MARGIN;
        if (at[i])
            fprintf(f, "- n %u, %u pairs: %s (tmm %.4f, best baseline %s %.4f; no recall %.4f)%s\n", t->s[i].n,
                    t->s[i].pairs, at[i], final_accuracy(t->s[i].at[exp_arch("tmm")]), tmm_arch_name((tmm_arch)b),
                    final_accuracy(t->s[i].at[b]), no_recall(t->s[i].pairs, p->values),
                    recalled ? "" : ": no architecture is 0.10 above no recall, so the budget is too small for "
                                    "this setting to say much about recall");
        else
            fprintf(f, "- n %u, %u pairs: not tested (needs tmm and a baseline)\n", t->s[i].n, t->s[i].pairs);
    }
    fprintf(f, "\n**Recall claim: %s.**\n", x->out->verdict);
    return exp_stream_save(x, "report.md", &report);
}

tmm_status exp_recall(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    const recall_preset *p = &presets[o->preset];
    exp_ctx x = exp_context(dev, o, "recall", out);
    tmm_exp_run *runs = calloc(MAX_RUNS, sizeof *runs);
    recall_table *t = calloc(1, sizeof *t);
    tmm_status s = runs && t ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; s == TMM_OK && i < p->pair_count; i++)
        setting_of(t, p->n, p->pairs[i])->in_pairs = true;
    for (uint32_t i = 0; s == TMM_OK && i < p->n_count; i++)
        setting_of(t, p->ns[i], p->ns[i] / 4)->in_n = true;
    uint32_t n = 0;
    for (uint32_t i = 0; s == TMM_OK && i < t->count; i++)
        for (int a = 0; a < TMM_N_ARCHS && s == TMM_OK; a++) {
            if (!exp_selected(o, (tmm_arch)a))
                continue;
            s = add_run(p, o->seed, t->s[i].n, t->s[i].pairs, (tmm_arch)a, &runs[n]);
            t->s[i].at[a] = &runs[n++];
        }
    exp_sweep sw = { 0 };
    char setting[128];
    if (s == TMM_OK && o->lr_sweep)
        s = sweep(&x, p, runs, n, &sw, setting, sizeof setting);
    if (s == TMM_OK && !out->interrupted)
        s = exp_train_runs(&x, runs, n);
    if (s == TMM_OK && !out->interrupted)
        s = write_outputs(&x, p, runs, n, t, o->lr_sweep ? &sw : NULL);
    exp_sweep_free(&sw);
    exp_runs_free(runs, MAX_RUNS);
    free(t);
    return s;
}
