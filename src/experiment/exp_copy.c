/* E1, copying (docs/experiments.md): per architecture and length n, the
 * steps and device seconds to 99% held-out copy accuracy (or the accuracy
 * after the budget), at matched parameters; and the width claim, a narrow
 * TMM against a wide Hyena. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment/exp_util.h"
#include "model/arch.h"

#define MAX_NS 4
#define TARGET 0.99
#define MAX_RUNS (MAX_NS * TMM_N_ARCHS + 2)

typedef struct copy_preset {
    uint32_t ns[MAX_NS], n_count;
    exp_shape shape;
} copy_preset;

/* small: the tiny-copy model (flat mixing, which needs its Toeplitz layer to copy). */
static const copy_preset presets[TMM_EXP_PRESET_COUNT] = {
    [TMM_EXP_SMALL] = { { 64, 128 }, 2, { 64, 2, 0, 2, 16, 200, 20, 4, 100 } },
    [TMM_EXP_MEDIUM] = { { 128, 256, 512, 1024 }, 4, { 64, 2, 0, 2, 16, 2000, 50, 8, 100 } },
    [TMM_EXP_PAPER] = { { 128, 256, 512, 1024 }, 4, { 256, 4, 4, 4, 32, 5000, 100, 8, 200 } },
};

static tmm_status copy_config(const copy_preset *p, uint64_t seed, uint32_t n, uint32_t d, tmm_train_config *c)
{
    TMM_TRY(exp_base_config("tiny-copy", seed, c));
    exp_shape shape = p->shape;
    shape.d = d;
    exp_set_shape(c, &shape, n);
    c->target_accuracy = TARGET;
    return exp_resolve(c);
}

/* The run of arch at n: the TMM as the preset gives it, a baseline matched to it. */
static tmm_status add_run(const copy_preset *p, uint64_t seed, uint32_t n, tmm_arch arch, tmm_exp_run *r,
                          const char **knob)
{
    TMM_TRY(copy_config(p, seed, n, p->shape.d, &r->config));
    tmm_model_config m;
    tmm_status s = exp_matched_model(&r->config.model, arch, &m, knob);
    if (s == TMM_OK && arch != exp_arch("tmm")) {
        r->config.model = m;
        s = exp_resolve(&r->config);
    }
    char label[32];
    snprintf(r->name, sizeof r->name, "%s-n%u", tmm_arch_name(arch), n);
    snprintf(r->label, sizeof r->label, "%s, n %u", tmm_arch_label(&r->config.model, label, sizeof label), n);
    return s;
}

/* The width claim's two runs at the preset's largest n: the TMM at half the
 * width, Hyena at twice (not matched: the claim is about width). */
static tmm_status add_width_runs(const copy_preset *p, uint64_t seed, tmm_exp_run *r)
{
    const uint32_t n = p->ns[p->n_count - 1];
    TMM_TRY(copy_config(p, seed, n, p->shape.d / 2, &r[0].config));
    snprintf(r[0].name, sizeof r[0].name, "tmm-narrow-d%u-n%u", p->shape.d / 2, n);
    snprintf(r[0].label, sizeof r[0].label, "tmm d %u, n %u", p->shape.d / 2, n);
    TMM_TRY(copy_config(p, seed, n, 2 * p->shape.d, &r[1].config));
    r[1].config.model.arch = exp_arch("hyena");
    r[1].config.model.heads = 0, r[1].config.model.kernel = 1;
    snprintf(r[1].name, sizeof r[1].name, "hyena-wide-d%u-n%u", 2 * p->shape.d, n);
    snprintf(r[1].label, sizeof r[1].label, "hyena d %u, n %u", 2 * p->shape.d, n);
    return exp_resolve(&r[1].config);
}

/* Steps to the target, or INFINITY. */
static double steps_to(const tmm_exp_run *r)
{
    const tmm_exp_point *p = tmm_exp_first_reaching(r, TARGET);
    return p ? (double)p->step : INFINITY;
}

static double seconds_to(const tmm_exp_run *r)
{
    const tmm_exp_point *p = tmm_exp_first_reaching(r, TARGET);
    return p ? p->seconds : NAN;
}

/* "About as efficiently": within 1.5 times the other's steps, or two
 * evaluations of it. "Struggles": does not reach the target, or takes at
 * least twice the TMM's steps. */
static bool about_as_fast(double a, double b, uint32_t eval_every)
{
    return isfinite(a) && (!isfinite(b) || a <= fmax(1.5 * b, b + 2.0 * eval_every));
}
static bool struggles(double other, double tmm) { return !isfinite(other) || other >= 2 * tmm; }

typedef struct copy_table {
    const tmm_exp_run *at[MAX_NS][TMM_N_ARCHS]; /* NULL: not run */
} copy_table;

/* The rule at one n: NULL when it cannot be decided (no TMM or transformer). */
static const char *rule_at(const copy_table *t, uint32_t i, uint32_t eval_every, bool *held)
{
    const tmm_exp_run *tmm = t->at[i][exp_arch("tmm")], *tr = t->at[i][exp_arch("transformer")];
    if (!tmm || !tr)
        return NULL;
    const double T = steps_to(tmm);
    *held = about_as_fast(T, steps_to(tr), eval_every);
    if (t->at[i][exp_arch("hyena")])
        *held = *held && struggles(steps_to(t->at[i][exp_arch("hyena")]), T);
    if (t->at[i][exp_arch("mamba2")])
        *held = *held && struggles(steps_to(t->at[i][exp_arch("mamba2")]), T);
    return *held ? "held" : "not held";
}

static void fmt_steps(char *buf, size_t size, double steps, double seconds)
{
    if (isfinite(steps))
        snprintf(buf, size, "%.0f (%.1f s)", steps, seconds);
    else
        snprintf(buf, size, "not reached");
}

static tmm_status write_outputs(exp_ctx *x, const copy_preset *p, tmm_exp_run *runs, uint32_t n_runs,
                                const copy_table *t, const tmm_exp_run *width)
{
    tmm_status s = TMM_OK;
    /* accuracy against steps, per n; and against device seconds */
    for (uint32_t i = 0; i < p->n_count && s == TMM_OK; i++) {
        for (int by_time = 0; by_time < 2 && s == TMM_OK; by_time++) {
            tmm_chart_series ser[TMM_N_ARCHS];
            double *xs[TMM_N_ARCHS] = { 0 }, *ys[TMM_N_ARCHS] = { 0 };
            uint32_t k = 0;
            for (int a = 0; a < TMM_N_ARCHS; a++) {
                const tmm_exp_run *r = t->at[i][a];
                if (!r)
                    continue;
                xs[k] = malloc((r->n_points + 1) * sizeof(double));
                ys[k] = malloc((r->n_points + 1) * sizeof(double));
                if (!xs[k] || !ys[k]) {
                    s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
                    k++;
                    break;
                }
                for (uint32_t j = 0; j < r->n_points; j++)
                    xs[k][j] = by_time ? r->points[j].seconds : (double)r->points[j].step,
                    ys[k][j] = r->points[j].accuracy;
                ser[k] = (tmm_chart_series){ r->label, xs[k], ys[k], r->n_points };
                k++;
            }
            char title[128], file[64];
            snprintf(title, sizeof title, "Copying n = %u: held-out accuracy against %s", p->ns[i],
                     by_time ? "device time" : "training steps");
            snprintf(file, sizeof file, "accuracy-%s-n%u.svg", by_time ? "seconds" : "steps", p->ns[i]);
            tmm_chart c = { .title = title, .x_label = by_time ? "device time (s)" : "training steps (batches of sequences)",
                            .y_label = "held-out copy accuracy (fraction of copied symbols)", .y_from_zero = true,
                            .series = ser, .n_series = k,
                            .note = "matched parameters; chance is 1/alphabet; a run stops at 99%" };
            if (s == TMM_OK && k)
                s = exp_save_chart(x, file, &c, false);
            for (uint32_t j = 0; j < k; j++)
                free(xs[j]), free(ys[j]);
        }
    }
    /* steps to 99%: a bar per architecture and n */
    double bars[MAX_NS][TMM_N_ARCHS];
    const char *cats[TMM_N_ARCHS];
    char cat_names[TMM_N_ARCHS][32], ser_names[MAX_NS][32];
    tmm_chart_series bser[MAX_NS];
    uint32_t nc = 0;
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        bool any = false;
        for (uint32_t i = 0; i < p->n_count; i++)
            any = any || t->at[i][a];
        if (!any)
            continue;
        for (uint32_t i = 0; i < p->n_count; i++)
            bars[i][nc] = t->at[i][a] ? steps_to(t->at[i][a]) : NAN;
        snprintf(cat_names[nc], sizeof cat_names[nc], "%s", tmm_arch_name((tmm_arch)a));
        cats[nc] = cat_names[nc];
        nc++;
    }
    for (uint32_t i = 0; i < p->n_count; i++) {
        snprintf(ser_names[i], sizeof ser_names[i], "n %u", p->ns[i]);
        bser[i] = (tmm_chart_series){ ser_names[i], NULL, bars[i], nc };
    }
    char note[128];
    snprintf(note, sizeof note, "a dash: not reached within the budget of %u steps", p->shape.steps);
    tmm_chart bc = { .title = "Copying: training steps to 99% held-out accuracy", .x_label = "architecture",
                     .y_label = "training steps to 99% (fewer is better)", .series = bser, .n_series = p->n_count,
                     .categories = cats, .n_categories = nc, .note = note };
    if (s == TMM_OK && nc)
        s = exp_save_chart(x, "steps-to-99.svg", &bc, true);
    if (s == TMM_OK && width) {
        double wx[2][4096], wy[2][4096];
        tmm_chart_series ws[2];
        for (int k = 0; k < 2; k++) {
            uint32_t m = width[k].n_points < 4096 ? width[k].n_points : 4096;
            for (uint32_t j = 0; j < m; j++)
                wx[k][j] = (double)width[k].points[j].step, wy[k][j] = width[k].points[j].accuracy;
            ws[k] = (tmm_chart_series){ width[k].label, wx[k], wy[k], m };
        }
        tmm_chart wc = { .title = "Copying: a narrow TMM against a wide Hyena", .x_label = "training steps",
                         .y_label = "held-out copy accuracy (fraction)", .y_from_zero = true, .series = ws,
                         .n_series = 2, .note = "not matched: the TMM has a quarter of Hyena's width" };
        s = exp_save_chart(x, "width.svg", &wc, false);
    }
    if (s != TMM_OK)
        return s;

    /* the verdicts */
    uint32_t held_n = 0, tested_n = 0;
    const char *at_n[MAX_NS];
    for (uint32_t i = 0; i < p->n_count; i++) {
        bool held = false;
        at_n[i] = rule_at(t, i, p->shape.eval_every, &held);
        tested_n += at_n[i] != NULL;
        held_n += at_n[i] && held;
    }
    const char *width_verdict = "not tested";
    if (width)
        width_verdict =
            about_as_fast(steps_to(&width[0]), steps_to(&width[1]), p->shape.eval_every) ? "held" : "not held";
    snprintf(x->out->verdict, sizeof x->out->verdict, "%s", exp_verdict(held_n, tested_n));

    cJSON *root = exp_summary(x, runs, n_runs);
    cJSON *rows = cJSON_AddArrayToObject(root, "steps_to_99");
    for (uint32_t i = 0; i < n_runs; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "label", runs[i].label);
        const double st = steps_to(&runs[i]);
        if (isfinite(st)) {
            cJSON_AddNumberToObject(o, "steps", st);
            cJSON_AddNumberToObject(o, "seconds", seconds_to(&runs[i]));
        } else {
            cJSON_AddNullToObject(o, "steps");
            cJSON_AddNullToObject(o, "seconds");
        }
        cJSON_AddItemToArray(rows, o);
    }
    cJSON_AddStringToObject(root, "width_verdict", width_verdict);
    TMM_TRY(exp_save_summary(x, root, "at each n: the TMM reaches 99% within max(1.5 x, +2 evaluations) of the "
                                      "transformer's steps, and Hyena and Mamba 2 each do not reach it or take at "
                                      "least twice the TMM's steps; held if at every n", NULL));

    exp_stream report;
    TMM_TRY(exp_stream_open(&report));
    FILE *f = report.f;
    exp_report_head(f, x, runs, n_runs,
                    "The TMM as the preset gives it; each baseline at the MLP expansion (Mamba 2: the number of "
                    "layers) whose parameter count is nearest the TMM's, with its own default heads; swa's window "
                    "is n/4, shorter than the copy distance n/2. The copy task of docs/model.md: n/2 random symbols "
                    "of an alphabet of 16, repeated; only the copy is scored. Held-out accuracy (teacher-forced "
                    "argmax over the copy) at every evaluation; a run stops when it reaches 99%.");
    fprintf(f, "## Measured\n\n| run | params | steps (device s) to 99%% | accuracy at the end | steps run | "
               "device s |\n|---|---|---|---|---|---|\n");
    for (uint32_t i = 0; i < n_runs; i++) {
        char st[48];
        fmt_steps(st, sizeof st, steps_to(&runs[i]), seconds_to(&runs[i]));
        fprintf(f, "| %s | %llu | %s | %.4f | %llu | %.1f |\n", runs[i].label, (unsigned long long)runs[i].params, st,
                runs[i].accuracy, (unsigned long long)runs[i].steps, runs[i].seconds);
    }
    fprintf(f, "\nPlots: ");
    for (uint32_t i = 0; i < p->n_count; i++)
        fprintf(f, "[accuracy against steps, n %u](accuracy-steps-n%u.svg), [against device time](accuracy-seconds-n%u.svg); ",
                p->ns[i], p->ns[i], p->ns[i]);
    fprintf(f, "[steps to 99%%](steps-to-99.svg)%s.\n\n", width ? ", [width](width.svg)" : "");
    fprintf(f, "## Did the claim hold at this scale?\n\nRule: at each n, the TMM reaches 99%% within 1.5 times the "
               "transformer's steps (or two evaluations, %u steps, more), and Hyena and Mamba 2 each either do not "
               "reach 99%% within the budget or take at least twice the TMM's steps. The claim holds if that holds "
               "at every n.\n\n", 2 * p->shape.eval_every);
    for (uint32_t i = 0; i < p->n_count; i++)
        fprintf(f, "- n %u: %s\n", p->ns[i], at_n[i] ? at_n[i] : "not tested (needs tmm and transformer)");
    fprintf(f, "\n**Copying claim: %s.**\n\n", x->out->verdict);
    if (width) {
        char a[48], b[48];
        fmt_steps(a, sizeof a, steps_to(&width[0]), seconds_to(&width[0]));
        fmt_steps(b, sizeof b, steps_to(&width[1]), seconds_to(&width[1]));
        fprintf(f, "Width (a TMM much narrower than Hyena copies about as efficiently; same rule): %s to 99%% for %s "
                   "(%llu parameters), %s for %s (%llu parameters). **Width claim: %s.**\n", a, width[0].label,
                (unsigned long long)width[0].params, b, width[1].label, (unsigned long long)width[1].params,
                width_verdict);
    } else {
        fprintf(f, "Width claim: not tested (needs tmm and hyena in --archs).\n");
    }
    return exp_stream_save(x, "report.md", &report);
}

tmm_status exp_copy(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    const copy_preset *p = &presets[o->preset];
    exp_ctx x = exp_context(dev, o, "copy", out);
    tmm_exp_run *runs = calloc(MAX_RUNS, sizeof *runs);
    if (!runs)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    copy_table t = { 0 };
    uint32_t n = 0;
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < p->n_count && s == TMM_OK; i++)
        for (int a = 0; a < TMM_N_ARCHS && s == TMM_OK; a++) {
            const char *knob;
            if (!exp_selected(o, (tmm_arch)a))
                continue;
            s = add_run(p, o->seed, p->ns[i], (tmm_arch)a, &runs[n], &knob);
            t.at[i][a] = &runs[n++];
        }
    const bool width = exp_selected(o, exp_arch("tmm")) && exp_selected(o, exp_arch("hyena"));
    const uint32_t first_width = n;
    if (s == TMM_OK && width) {
        s = add_width_runs(p, o->seed, &runs[n]);
        n += 2;
    }
    if (s == TMM_OK)
        s = exp_train_runs(&x, runs, n);
    if (s == TMM_OK && !out->interrupted)
        s = write_outputs(&x, p, runs, n, &t, width ? &runs[first_width] : NULL);
    exp_runs_free(runs, MAX_RUNS);
    return s;
}
