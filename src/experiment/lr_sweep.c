/* The learning-rate sweep (lr_sweep.h): the grid, the sweep runs, the choice,
 * the held-out split of text, and the sweep's part of the report. */
#include "experiment/lr_sweep.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "train/data.h"
#include "train/trainer.h"

tmm_status tmm_exp_lr_grid_parse(const char *text, double *rates, uint32_t *n)
{
    *n = 0;
    for (const char *p = text;; p++) {
        char *end;
        const double v = strtod(p, &end);
        if (end == p || (*end && *end != ',') || !(v > 0 && v <= 1))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "'%s' is not a list of learning rates in (0, 1] separated by "
                            "commas, e.g. 1e-4,3e-4,1e-3", text);
        if (*n == TMM_EXP_MAX_RATES)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "at most %d learning rates, got more in '%s'",
                            TMM_EXP_MAX_RATES, text);
        uint32_t i = (*n)++; /* insertion keeps them ascending */
        for (; i > 0 && rates[i - 1] > v; i--)
            rates[i] = rates[i - 1];
        if (i > 0 && rates[i - 1] == v)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "learning rate %g is twice in '%s'", v, text);
        rates[i] = v;
        if (!*end)
            return TMM_OK;
        p = end;
    }
}

int exp_sweep_best(const double *loss, uint32_t n)
{
    int best = -1;
    for (uint32_t i = 0; i < n; i++)
        if (isfinite(loss[i]) && (best < 0 || loss[i] < loss[best]))
            best = (int)i;
    return best;
}

double exp_sweep_lr(const exp_sweep *sw, tmm_arch arch, double fallback)
{
    for (uint32_t a = 0; sw && sw->done && a < sw->n_archs; a++)
        if (sw->archs[a] == arch && sw->best[a] >= 0)
            return sw->rates[sw->best[a]];
    return fallback;
}

void exp_sweep_apply(const exp_sweep *sw, tmm_exp_run *runs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        runs[i].config.schedule.peak_lr = exp_sweep_lr(sw, runs[i].config.model.arch, runs[i].config.schedule.peak_lr);
}

void exp_sweep_grid(exp_sweep *sw, const tmm_exp_options *o, const double *grid, uint32_t n)
{
    sw->n_rates = o->n_lr_grid ? o->n_lr_grid : n;
    memcpy(sw->rates, o->n_lr_grid ? o->lr_grid : grid, sw->n_rates * sizeof *sw->rates);
}

double exp_sweep_val_loss(const tmm_exp_run *run)
{
    const tmm_exp_point *last = run->n_points ? &run->points[run->n_points - 1] : NULL;
    if (run->diverged || !last || last->step != run->steps || !isfinite(last->val_loss))
        return INFINITY;
    return last->val_loss;
}

double exp_sweep_fresh_loss(const tmm_exp_run *run)
{
    if (run->diverged || !run->steps)
        return INFINITY;
    const uint64_t from = run->steps - (run->steps >= 10 ? run->steps / 10 : 1); /* steps after it */
    double sum = 0;
    uint32_t count = 0;
    for (uint32_t i = 0; i < run->n_points; i++)
        if (run->points[i].step > from)
            sum += run->points[i].loss, count++;
    return count ? sum / count : INFINITY;
}

tmm_status exp_sweep_text_split(tmm_train_config *c)
{
    if (c->task != TMM_DATA_TEXT || c->text_mode != TMM_TEXT_WINDOWS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the learning-rate sweep's held-out split needs text in window mode");
    tmm_train_config copy = *c; /* shallow: prepare only sets values */
    tmm_data *data = NULL;
    TMM_TRY(tmm_train_prepare(&copy, &data));
    const tmm_data_info *info = tmm_data_get_info(data);
    const bool shards = tmm_data_tokenizer_path(data) != NULL;
    const uint64_t N = info->train_tokens + info->val_tokens, V = info->val_tokens;
    tmm_data_destroy(data);
    if (shards)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "--lr-sweep needs text files: prepared shards keep their own "
                        "held-out split, so the sweep could not hold out other data than the final evaluation's");
    /* the sweep's evaluations read its first eval_batches x batch windows of n + 1 */
    const uint64_t need = V + (uint64_t)c->eval_batches * c->batch * c->model.n_ctx + 1;
    c->val_fraction = ((double)need + 0.5) / (double)N; /* ceil(f N) = need + 1 */
    if (c->val_fraction >= 1)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the text (%llu tokens) is too short for the learning-rate sweep's "
                        "held-out split (%llu tokens before the final one's %llu)", (unsigned long long)N,
                        (unsigned long long)(need - V), (unsigned long long)V);
    return TMM_OK;
}

/* The sweep's budget: half the run's steps and warmup, the same evaluations. */
static void sweep_budget(tmm_train_config *c)
{
    c->steps = c->steps >= 2 ? c->steps / 2 : 1;
    c->schedule.warmup_steps /= 2;
}

tmm_status exp_sweep_run(exp_ctx *x, exp_sweep *sw)
{
    sw->done = false;
    const uint32_t n = sw->n_archs * sw->n_rates;
    sw->runs = calloc(n ? n : 1, sizeof *sw->runs);
    if (!sw->runs)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t a = 0; a < sw->n_archs; a++)
        for (uint32_t k = 0; k < sw->n_rates; k++) {
            tmm_exp_run *r = &sw->runs[a * sw->n_rates + k];
            TMM_TRY(sw->build(sw->user, sw->archs[a], r));
            sw->default_lr[a] = r->config.schedule.peak_lr;
            r->config.schedule.peak_lr = sw->rates[k];
            sweep_budget(&r->config);
            r->may_diverge = true;
            const char *arch = tmm_arch_name(sw->archs[a]);
            snprintf(r->name, sizeof r->name, "sweep-%s-lr%g", arch, sw->rates[k]);
            snprintf(r->label, sizeof r->label, "%s, lr %g (sweep)", arch, sw->rates[k]);
        }
    TMM_TRY(exp_train_runs(x, sw->runs, n));
    if (x->out->interrupted)
        return TMM_OK;
    for (uint32_t a = 0; a < sw->n_archs; a++) {
        for (uint32_t k = 0; k < sw->n_rates; k++)
            sw->loss[a][k] = sw->judge(&sw->runs[a * sw->n_rates + k]);
        sw->best[a] = exp_sweep_best(sw->loss[a], sw->n_rates);
    }
    sw->done = true;
    if (!x->o->quiet) {
        printf("learning-rate sweep: the comparison's peak rates:");
        for (uint32_t a = 0; a < sw->n_archs; a++)
            printf(" %s %g%s", tmm_arch_name(sw->archs[a]), exp_sweep_lr(sw, sw->archs[a], sw->default_lr[a]),
                   sw->best[a] < 0 ? " (its default: every rate diverged)" : "");
        printf("\n");
        fflush(stdout);
    }
    return TMM_OK;
}

/* Where the choice sits in the grid, for the report. */
static const char *choice_note(const exp_sweep *sw, uint32_t a)
{
    if (sw->best[a] < 0)
        return "every rate diverged: its default rate";
    if (sw->n_rates > 1 && sw->best[a] == 0)
        return "the grid's lowest: a lower rate may be better";
    if (sw->n_rates > 1 && sw->best[a] == (int)sw->n_rates - 1)
        return "the grid's highest: a higher rate may be better";
    return "";
}

void exp_sweep_report(FILE *f, const exp_sweep *sw)
{
    fprintf(f, "## Learning-rate sweep\n\nEach architecture trained at every peak rate of the grid (%s), ",
            sw->setting);
    fprintf(f, "each run at half the step budget and warmup of the comparison's runs, then linear decay. Judged "
               "on %s; the chosen rate is the one of the lowest loss (ties: the lower rate; a run whose loss "
               "became infinite or NaN is marked diverged and never chosen), and the comparison below trains "
               "every run of an architecture at it (the TMM ablation rows at the TMM's).\n\n", sw->criterion);
    fprintf(f, "| arch | default lr |");
    for (uint32_t k = 0; k < sw->n_rates; k++)
        fprintf(f, " lr %g |", sw->rates[k]);
    fprintf(f, " chosen lr | note |\n|---|---|");
    for (uint32_t k = 0; k < sw->n_rates; k++)
        fprintf(f, "---|");
    fprintf(f, "---|---|\n");
    for (uint32_t a = 0; a < sw->n_archs; a++) {
        fprintf(f, "| %s | %g |", tmm_arch_name(sw->archs[a]), sw->default_lr[a]);
        for (uint32_t k = 0; k < sw->n_rates; k++) {
            const double l = sw->loss[a][k];
            if (!isfinite(l))
                fprintf(f, " diverged |");
            else
                fprintf(f, (int)k == sw->best[a] ? " **%.4f** |" : " %.4f |", l);
        }
        fprintf(f, " %g | %s |\n", exp_sweep_lr(sw, sw->archs[a], sw->default_lr[a]), choice_note(sw, a));
    }
    fprintf(f, "\n");
}

void exp_sweep_json(cJSON *root, const exp_sweep *sw)
{
    cJSON *o = cJSON_AddObjectToObject(root, "lr_sweep");
    cJSON *grid = cJSON_AddArrayToObject(o, "grid");
    for (uint32_t k = 0; k < sw->n_rates; k++)
        cJSON_AddItemToArray(grid, cJSON_CreateNumber(sw->rates[k]));
    cJSON_AddStringToObject(o, "setting", sw->setting);
    cJSON_AddStringToObject(o, "criterion", sw->criterion);
    cJSON *archs = cJSON_AddArrayToObject(o, "archs");
    for (uint32_t a = 0; a < sw->n_archs; a++) {
        cJSON *e = cJSON_CreateObject(), *loss = cJSON_CreateArray(), *dirs = cJSON_CreateArray();
        cJSON_AddItemToArray(archs, e);
        cJSON_AddStringToObject(e, "arch", tmm_arch_name(sw->archs[a]));
        cJSON_AddNumberToObject(e, "default_lr", sw->default_lr[a]);
        cJSON_AddNumberToObject(e, "chosen_lr", exp_sweep_lr(sw, sw->archs[a], sw->default_lr[a]));
        cJSON_AddBoolToObject(e, "all_diverged", sw->best[a] < 0);
        cJSON_AddItemToObject(e, "held_out_loss", loss); /* null: diverged */
        cJSON_AddItemToObject(e, "runs", dirs);
        for (uint32_t k = 0; k < sw->n_rates; k++) {
            const tmm_exp_run *r = &sw->runs[a * sw->n_rates + k];
            const char *slash = strrchr(r->dir, '/');
            char rel[TMM_EXP_PATH_MAX + 8];
            snprintf(rel, sizeof rel, "runs/%s", slash ? slash + 1 : r->dir);
            cJSON_AddItemToArray(loss, exp_number_or_null(sw->loss[a][k]));
            cJSON_AddItemToArray(dirs, cJSON_CreateString(rel));
        }
        cJSON_AddNumberToObject(e, "steps", sw->n_rates ? (double)sw->runs[a * sw->n_rates].config.steps : 0);
    }
}

void exp_sweep_free(exp_sweep *sw)
{
    exp_runs_free(sw->runs, sw->n_archs * sw->n_rates);
    sw->runs = NULL;
}
