/* E2, training efficiency on text (docs/experiments.md): every architecture
 * at matched parameters on the same text, tokens and seed: validation loss
 * against tokens, device seconds and training FLOPs; a final table of loss,
 * tokens/s, planned peak memory and decoding ms/token; the TMM ablations as
 * optional extra rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiment/exp_util.h"
#include "experiment/lr_sweep.h"
#include "files.h"
#include "model/arch.h"
#include "train/trainer.h"

#define N_ABLATIONS 5
#define MAX_RUNS (TMM_N_ARCHS + N_ABLATIONS)
#define MAX_POS 3

typedef struct eff_preset {
    exp_shape shape;
    uint32_t n;
    uint32_t positions[MAX_POS]; /* decoding positions, each + 4 steps within n */
} eff_preset;

static const eff_preset presets[TMM_EXP_PRESET_COUNT] = {
    [TMM_EXP_SMALL] = { { 64, 2, 4, 4, 8, 200, 25, 4, 20 }, 64, { 1, 32, 60 } },
    [TMM_EXP_MEDIUM] = { { 128, 4, 4, 4, 16, 2000, 100, 16, 100 }, 256, { 1, 100, 250 } },
    [TMM_EXP_PAPER] = { { 512, 8, 8, 4, 32, 20000, 500, 32, 500 }, 512, { 1, 100, 500 } },
};

typedef struct eff_row {
    double tokens_per_s;
    uint64_t memory;
    double decode_ms[MAX_POS];
    bool decoded;
} eff_row;

static tmm_status base(const eff_preset *p, const tmm_exp_options *o, tmm_train_config *c)
{
    return exp_text_config(o, &p->shape, p->n, c);
}

/* A run whose model is m (its own peak lr). */
static tmm_status add_run(const eff_preset *p, const tmm_exp_options *o, const tmm_model_config *m, const char *name,
                          const char *label, tmm_exp_run *r)
{
    TMM_TRY(base(p, o, &r->config));
    r->config.model = *m;
    r->config.schedule.peak_lr = 0;
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->label, sizeof r->label, "%s", label);
    return exp_resolve(&r->config);
}

static tmm_status add_runs(const eff_preset *p, const tmm_exp_options *o, tmm_exp_run *runs, uint32_t *n,
                           int *tmm_row)
{
    tmm_train_config ref;
    TMM_TRY(base(p, o, &ref));
    tmm_status s = TMM_OK;
    *tmm_row = -1;
    for (int a = 0; a < TMM_N_ARCHS && s == TMM_OK; a++) {
        if (!exp_selected(o, (tmm_arch)a))
            continue;
        tmm_model_config m;
        const char *knob;
        char label[32];
        s = exp_matched_model(&ref.model, (tmm_arch)a, &m, &knob);
        if (s == TMM_OK)
            s = add_run(p, o, &m, tmm_arch_name((tmm_arch)a), tmm_arch_label(&m, label, sizeof label), &runs[*n]);
        if ((tmm_arch)a == exp_arch("tmm"))
            *tmm_row = (int)*n;
        (*n)++;
    }
    if (o->ablations && exp_selected(o, exp_arch("tmm"))) {
        static const struct {
            const char *name, *label;
            uint32_t heads, kernel;
            bool expanded;
            tmm_init_scheme init;
        } abl[N_ABLATIONS] = {
            { "tmm-flat", "tmm flat (no heads)", 0, 1, false, TMM_INIT_SCHEME_ARCH },
            { "tmm-expanded", "tmm expanded", ~0u, 1, true, TMM_INIT_SCHEME_ARCH },
            { "tmm-k3", "tmm kernel 3", ~0u, 3, false, TMM_INIT_SCHEME_ARCH },
            { "tmm-k5", "tmm kernel 5", ~0u, 5, false, TMM_INIT_SCHEME_ARCH },
            { "tmm-torch-init", "tmm PyTorch init", ~0u, 1, false, TMM_INIT_SCHEME_TORCH },
        };
        for (int i = 0; i < N_ABLATIONS && s == TMM_OK; i++) {
            tmm_model_config m = ref.model;
            m.heads = abl[i].heads == ~0u ? m.heads : abl[i].heads;
            m.kernel = abl[i].kernel, m.expanded = abl[i].expanded, m.init = abl[i].init;
            s = add_run(p, o, &m, abl[i].name, abl[i].label, &runs[(*n)++]);
        }
    }
    tmm_train_config_free(&ref);
    return s;
}

/* The sweep's grid when --lr-grid gives none: log-spaced from below the
 * paper's rates (5e-4 for the TMM, 2e-4 for the baselines) to 1e-1, since
 * the small preset's models chose 3e-3 to 3e-2 (docs/results/experiments.md). */
static const double default_grid[] = { 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1 };

typedef struct eff_sweep_user {
    const eff_preset *p;
    const tmm_exp_options *o;
    const tmm_exp_run *runs; /* the comparison's: each architecture's matched model */
    uint32_t n;
} eff_sweep_user;

/* The sweep run of arch: its comparison run's model, the sweep's held-out split. */
static tmm_status build_sweep_run(const void *user, tmm_arch arch, tmm_exp_run *r)
{
    const eff_sweep_user *u = user;
    for (uint32_t i = 0; i < u->n; i++)
        if (u->runs[i].config.model.arch == arch) {
            TMM_TRY(add_run(u->p, u->o, &u->runs[i].config.model, "", "", r));
            return exp_sweep_text_split(&r->config);
        }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no run of %s to sweep", tmm_arch_name(arch));
}

/* The sweep over the comparison's architectures (the first run of each, the
 * matched model; the ablations share the TMM's). */
static tmm_status sweep(exp_ctx *x, const eff_preset *p, tmm_exp_run *runs, uint32_t n, exp_sweep *sw)
{
    const tmm_exp_options *o = x->o;
    const eff_sweep_user user = { p, o, runs, n };
    exp_sweep_grid(sw, o, default_grid, sizeof default_grid / sizeof *default_grid);
    for (uint32_t i = 0; i < n; i++) {
        bool seen = false;
        for (uint32_t a = 0; a < sw->n_archs; a++)
            seen = seen || sw->archs[a] == runs[i].config.model.arch;
        if (!seen)
            sw->archs[sw->n_archs++] = runs[i].config.model.arch;
    }
    sw->setting = "the comparison's model, text, batch and seed";
    sw->criterion = "the validation loss at the sweep run's last step, on held-out windows of the comparison runs' "
                    "training split (the stream's tokens just before its last 5%, which the sweep does not train "
                    "on), never on the final evaluation's data";
    sw->build = build_sweep_run, sw->user = &user, sw->judge = exp_sweep_val_loss;
    TMM_TRY(exp_sweep_run(x, sw));
    exp_sweep_apply(sw, runs, n);
    return TMM_OK;
}

static tmm_status measure(exp_ctx *x, const eff_preset *p, const tmm_exp_run *r, eff_row *row)
{
    tmm_train_memory mem;
    TMM_TRY(tmm_train_memory_plan(x->dev, &r->config, &mem));
    row->memory = mem.total;
    row->tokens_per_s = r->seconds > 0 ? (double)r->steps * r->config.batch * r->config.model.n_ctx / r->seconds : 0;
    if (x->o->decode) {
        TMM_TRY(x->o->decode(x->dev, &r->config.model, p->positions, MAX_POS, row->decode_ms, x->o->decode_user));
        row->decoded = true;
    }
    return TMM_OK;
}

typedef enum { BY_TOKENS, BY_SECONDS, BY_FLOPS } x_axis;

static tmm_status loss_chart(exp_ctx *x, const tmm_exp_run *runs, uint32_t n, x_axis by)
{
    tmm_chart_series ser[MAX_RUNS];
    double *buf[MAX_RUNS] = { 0 };
    tmm_status s = TMM_OK;
    uint32_t k = 0;
    for (; k < n && s == TMM_OK; k++) {
        const tmm_exp_run *r = &runs[k];
        const double flops = exp_flops_per_token(&r->config.model);
        buf[k] = malloc(2 * (r->n_points + 1) * sizeof(double));
        if (!buf[k]) {
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            break;
        }
        double *xs = buf[k], *ys = buf[k] + r->n_points + 1;
        for (uint32_t j = 0; j < r->n_points; j++) {
            const tmm_exp_point *pt = &r->points[j];
            xs[j] = by == BY_TOKENS ? (double)pt->tokens : by == BY_SECONDS ? pt->seconds : (double)pt->tokens * flops;
            ys[j] = pt->val_loss;
        }
        ser[k] = (tmm_chart_series){ r->label, xs, ys, r->n_points };
    }
    static const char *const titles[] = { "Text: validation loss against tokens seen",
                                          "Text: validation loss against device time",
                                          "Text: validation loss against training compute" };
    static const char *const xl[] = { "training tokens", "device time (s)",
                                      "training FLOPs (each architecture's count per token x tokens)" };
    static const char *const files[] = { "loss-tokens.svg", "loss-seconds.svg", "loss-flops.svg" };
    tmm_chart c = { .title = titles[by], .x_label = xl[by], .y_label = "validation loss (nats per byte)",
                    .series = ser, .n_series = n, .note = "matched parameters except the TMM ablations; lower is better" };
    if (s == TMM_OK)
        s = exp_save_chart(x, files[by], &c, false);
    for (uint32_t j = 0; j < n; j++)
        free(buf[j]);
    return s;
}

static const char *verdict(const tmm_exp_run *runs, int tmm_row, const tmm_exp_run *hyena, const tmm_exp_run *mamba,
                           char *why, size_t size)
{
    if (tmm_row < 0 || (!hyena && !mamba)) {
        snprintf(why, size, "needs tmm and hyena or mamba2 in --archs");
        return "not tested";
    }
    const double t = runs[tmm_row].val_loss;
    uint32_t beaten = 0, compared = 0;
    int len = snprintf(why, size, "final validation loss: tmm %.4f", t);
    for (int i = 0; i < 2; i++) {
        const tmm_exp_run *r = i ? mamba : hyena;
        if (!r)
            continue;
        compared++;
        beaten += t < r->val_loss;
        len += snprintf(why + len, size - (size_t)len, ", %s %.4f", tmm_arch_name(r->config.model.arch), r->val_loss);
    }
    return beaten == compared ? "held" : beaten == 0 ? "not held" : "partly held";
}

static tmm_status write_outputs(exp_ctx *x, const eff_preset *p, const tmm_exp_run *runs, uint32_t n, int tmm_row,
                                const eff_row *rows, const exp_sweep *sw)
{
    for (int by = BY_TOKENS; by <= BY_FLOPS; by++)
        TMM_TRY(loss_chart(x, runs, n, (x_axis)by));
    const char *cats[MAX_RUNS];
    double loss[MAX_RUNS], tps[MAX_RUNS];
    for (uint32_t i = 0; i < n; i++)
        cats[i] = runs[i].name, loss[i] = runs[i].val_loss, tps[i] = rows[i].tokens_per_s;
    tmm_chart_series ls = { "final validation loss", NULL, loss, n }, ts = { "tokens per second", NULL, tps, n };
    tmm_chart lc = { .title = "Text: final validation loss at the same tokens", .x_label = "run",
                     .y_label = "validation loss (nats per byte)", .series = &ls, .n_series = 1, .categories = cats,
                     .n_categories = n };
    TMM_TRY(exp_save_chart(x, "final-loss.svg", &lc, true));
    tmm_chart tc = { .title = "Text: training speed", .x_label = "run", .y_label = "training tokens per second",
                     .series = &ts, .n_series = 1, .categories = cats, .n_categories = n,
                     .note = "device wall-clock time of training, evaluations included" };
    TMM_TRY(exp_save_chart(x, "tokens-per-second.svg", &tc, true));

    const tmm_exp_run *hyena = NULL, *mamba = NULL;
    for (uint32_t i = 0; i < n; i++) {
        if (runs[i].config.model.arch == exp_arch("hyena"))
            hyena = &runs[i];
        if (runs[i].config.model.arch == exp_arch("mamba2"))
            mamba = &runs[i];
    }
    char why[256];
    snprintf(x->out->verdict, sizeof x->out->verdict, "%s", verdict(runs, tmm_row, hyena, mamba, why, sizeof why));

    cJSON *root = exp_summary(x, runs, n);
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "runs");
    for (uint32_t i = 0; i < n; i++) {
        cJSON *o = cJSON_GetArrayItem(arr, (int)i);
        cJSON_AddNumberToObject(o, "tokens_per_s", rows[i].tokens_per_s);
        cJSON_AddNumberToObject(o, "memory_bytes", (double)rows[i].memory);
        if (rows[i].decoded) {
            cJSON *d = cJSON_AddArrayToObject(o, "decode");
            for (int j = 0; j < MAX_POS; j++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "position", p->positions[j]);
                cJSON_AddNumberToObject(e, "ms_per_token", rows[i].decode_ms[j]);
                cJSON_AddItemToArray(d, e);
            }
        }
    }
    if (sw)
        exp_sweep_json(root, sw);
    TMM_TRY(exp_save_summary(x, root, "held if the TMM's final validation loss is below Hyena's and Mamba 2's "
                                      "after the same tokens; partly if below one of them", why));

    exp_stream report;
    TMM_TRY(exp_stream_open(&report));
    FILE *f = report.f;
    char setup[1024];
    snprintf(setup, sizeof setup,
             "Causal language modelling on %u file(s), first %s, as bytes (windows of n bytes; the last 5%% of the "
             "stream held out). The TMM as the preset gives it; each baseline at the MLP expansion (Mamba 2: the "
             "number of layers) whose parameter count is nearest the TMM's, with its own default heads; swa's "
             "window is n/4. Every run: the same %u steps of %u sequences (%llu tokens), warmup %u then linear "
             "decay, each architecture at its own peak lr (%s). FLOPs per token: "
             "docs/experiments.md. Memory: the planned device memory of training (model, gradients, activations, "
             "AdamW moments). Decoding: one sequence, random weights, the median of 4 cached steps after a "
             "prefill to position t (tmm bench generate's code).",
             runs[0].config.text_file_count, runs[0].config.text_files[0], p->shape.steps, p->shape.batch,
             (unsigned long long)p->shape.steps * p->shape.batch * p->n, p->shape.warmup,
             sw ? "the best of the learning-rate sweep below" : "the paper's");
    exp_report_head(f, x, runs, n, setup);
    if (sw)
        exp_sweep_report(f, sw);
    fprintf(f, "## Measured\n\n| run | params | final val loss | val accuracy | tokens/s | device s | peak memory |");
    for (int j = 0; j < MAX_POS; j++)
        fprintf(f, " decode ms/token at t=%u |", p->positions[j]);
    fprintf(f, "\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (uint32_t i = 0; i < n; i++) {
        fprintf(f, "| %s | %llu | %.4f | %.4f | %.0f | %.1f | %.1f MiB |", runs[i].label,
                (unsigned long long)runs[i].params, runs[i].val_loss, runs[i].accuracy, rows[i].tokens_per_s,
                runs[i].seconds, (double)rows[i].memory / (1 << 20));
        for (int j = 0; j < MAX_POS; j++)
            rows[i].decoded ? fprintf(f, " %.3f |", rows[i].decode_ms[j]) : fprintf(f, " - |");
        fprintf(f, "\n");
    }
    fprintf(f, "\nPlots: [loss against tokens](loss-tokens.svg), [against device time](loss-seconds.svg), "
               "[against FLOPs](loss-flops.svg), [final loss](final-loss.svg), [tokens/s](tokens-per-second.svg).\n\n");
    fprintf(f, "## Did the claim hold at this scale?\n\nRule: the TMM's final validation loss is below Hyena's and "
               "Mamba 2's after the same tokens (held), below one of them (partly held) or neither (not held)%s.\n\n"
               "%s. **Claim: %s.**\n", sw ? ", each at its rate of the learning-rate sweep" : "", why,
            x->out->verdict);
    return exp_stream_save(x, "report.md", &report);
}

tmm_status exp_efficiency_tmm_config(const tmm_exp_options *o, tmm_train_config *c)
{
    return base(&presets[o->preset], o, c);
}

tmm_status exp_efficiency(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    const eff_preset *p = &presets[o->preset];
    exp_ctx x = exp_context(dev, o, "efficiency", out);
    tmm_exp_run *runs = calloc(MAX_RUNS, sizeof *runs);
    eff_row *rows = calloc(MAX_RUNS, sizeof *rows);
    uint32_t n = 0;
    int tmm_row = -1;
    tmm_status s = runs && rows ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    exp_sweep sw = { 0 };
    if (s == TMM_OK)
        s = add_runs(p, o, runs, &n, &tmm_row);
    if (s == TMM_OK && o->lr_sweep)
        s = sweep(&x, p, runs, n, &sw);
    if (s == TMM_OK && !out->interrupted)
        s = exp_train_runs(&x, runs, n);
    for (uint32_t i = 0; i < n && s == TMM_OK && !out->interrupted; i++)
        s = measure(&x, p, &runs[i], &rows[i]);
    if (s == TMM_OK && !out->interrupted)
        s = write_outputs(&x, p, runs, n, tmm_row, rows, o->lr_sweep ? &sw : NULL);
    exp_sweep_free(&sw);
    exp_runs_free(runs, MAX_RUNS);
    free(rows);
    return s;
}
