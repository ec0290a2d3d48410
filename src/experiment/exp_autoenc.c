/* E3, information retention, and E4, capacity (docs/experiments.md): the
 * autoencoder of docs/model.md ("Autoencoder", src/train/autoenc.h) on text
 * windows. E3 trains a causal LM per architecture through the trainer, then
 * a decoder on its frozen final hidden state (and on a random encoder of the
 * same shape: the floor); E4 trains encoder and decoder jointly, against n
 * and against width. Autoencoder runs are short: a finished one is kept as
 * autoenc/NAME-HASH.json (HASH of everything that defines it) and reused; an
 * interrupted one starts over. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "experiment/exp_util.h"
#include "files.h"
#include "io/limits.h"
#include "model/arch.h"
#include "train/autoenc.h"
#include "model/checkpoint.h"
#include "train/data.h"
#include "train/schedule.h"
#include "train/trainer.h"

#define MAX_SETTINGS 6

/* E3: a trained encoder retained something only when its decoder beats the
 * random encoder's by more than this (accuracy); with none above it the
 * comparison is not made ("not tested" at that budget). */
#define RETAINED_MARGIN 0.02

/* The autoencoder's training: decoder shape and budget. */
typedef struct ae_budget {
    uint32_t dec_layers, dec_heads, dec_expansion;
    uint32_t batch, steps, warmup, eval_batches;
    double lr;
} ae_budget;

typedef struct ae_result {
    double loss, accuracy, seconds;
    uint64_t steps, enc_params, dec_params;
    bool reused, done;
} ae_result;

/* ---- shared -------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A text LM training config of this shape (exp_text_config): 4 evaluation
 * batches, a tenth of the steps' warmup. */
static tmm_status text_config(const tmm_exp_options *o, uint32_t d, uint32_t n, uint32_t layers, uint32_t heads,
                              uint32_t expansion, uint32_t batch, uint32_t steps, uint32_t eval_every,
                              tmm_train_config *c)
{
    const exp_shape shape = { .d = d, .layers = layers, .heads = heads, .expansion = expansion, .batch = batch,
                              .steps = steps, .eval_every = eval_every, .eval_batches = 4,
                              .warmup = steps / 10 ? steps / 10 : 1 };
    return exp_text_config(o, &shape, n, c);
}

/* The model of arch matched to the TMM model tmm (exp_matched_model), with
 * the architecture's defaults resolved. */
static tmm_status matched(const tmm_model_config *tmm, tmm_arch arch, tmm_model_config *out)
{
    const char *knob;
    TMM_TRY(exp_matched_model(tmm, arch, out, &knob));
    tmm_model_config_resolve(out);
    return tmm_model_config_check(out);
}

static tmm_status read_result(const char *path, ae_result *r)
{
    char *text;
    size_t size;
    TMM_TRY(tmm_read_file(path, "experiment results file", TMM_LIMIT_RESULTS, (void **)&text, &size));
    cJSON *j = cJSON_ParseWithLength(text, size);
    free(text);
    const char *keys[] = { "loss", "accuracy", "seconds", "steps", "encoder_params", "decoder_params" };
    double v[6];
    bool ok = j && cJSON_IsTrue(cJSON_GetObjectItem(j, "finished"));
    for (int i = 0; i < 6 && ok; i++) {
        const cJSON *it = cJSON_GetObjectItem(j, keys[i]);
        ok = cJSON_IsNumber(it);
        v[i] = ok ? it->valuedouble : 0;
    }
    cJSON_Delete(j);
    if (!ok)
        return tmm_fail(TMM_ERR_IO, "%s is not an autoencoder result of tmm experiment: remove it to run it again",
                        path);
    *r = (ae_result){ v[0], v[1], v[2], (uint64_t)v[3], (uint64_t)v[4], (uint64_t)v[5], true, true };
    return TMM_OK;
}

static tmm_status write_result(const char *path, const ae_result *r)
{
    char buf[512];
    int len = snprintf(buf, sizeof buf,
                       "{\"finished\": true, \"loss\": %.9g, \"accuracy\": %.9g, \"seconds\": %.3f, \"steps\": %llu, "
                       "\"encoder_params\": %llu, \"decoder_params\": %llu}\n",
                       r->loss, r->accuracy, r->seconds, (unsigned long long)r->steps,
                       (unsigned long long)r->enc_params, (unsigned long long)r->dec_params);
    return tmm_write_file_atomic(path, buf, (size_t)len);
}

/* The held-out reconstruction loss and accuracy (argmax over every position). */
static tmm_status evaluate(tmm_autoenc *a, const tmm_data *data, const ae_budget *b, uint32_t n, uint32_t *tok,
                           uint32_t *pred, ae_result *r)
{
    double loss = 0;
    uint64_t right = 0, total = 0;
    for (uint32_t k = 0; k < b->eval_batches; k++) {
        TMM_TRY(tmm_data_batch(data, TMM_SPLIT_VAL, k, b->batch, n, tok, NULL));
        TMM_TRY(tmm_autoenc_set_batch(a, tok));
        TMM_TRY(tmm_autoenc_run(a, false));
        float l;
        TMM_TRY(tmm_autoenc_loss(a, &l));
        TMM_TRY(tmm_autoenc_argmax(a, pred));
        loss += l;
        for (uint64_t i = 0; i < (uint64_t)b->batch * n; i++)
            right += pred[i] == tok[i];
        total += (uint64_t)b->batch * n;
    }
    r->loss = loss / b->eval_batches;
    r->accuracy = (double)right / (double)total;
    return TMM_OK;
}

/* A joint TMM autoencoder's weights beside its result (RESULT.json ->
 * RESULT.encoder.safetensors, RESULT.decoder.safetensors): the index
 * experiment (E6) analyses their Toeplitz layers. */
static tmm_status save_models(tmm_autoenc *a, const char *result_path, uint64_t step)
{
    static const char *const parts[2] = { "encoder", "decoder" };
    tmm_status s = TMM_OK;
    for (int k = 0; k < 2 && s == TMM_OK; k++) {
        tmm_model *m = k ? tmm_autoenc_decoder(a) : tmm_autoenc_encoder(a);
        const tmm_param_table *t = tmm_model_table(m);
        char path[TMM_EXP_PATH_MAX + 160];
        snprintf(path, sizeof path, "%.*s.%s.safetensors", (int)(strlen(result_path) - strlen(".json")), result_path,
                 parts[k]);
        float *arena = malloc(t->arena_floats * sizeof *arena);
        s = arena ? tmm_model_read_params(m, arena) : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        if (s == TMM_OK)
            s = tmm_checkpoint_write_model(path, step, t, arena, NULL, 0);
        free(arena);
    }
    return s;
}

/* Trains (or reuses) one autoencoder: encoder config enc (with its trained
 * weights from lm_dir's checkpoint, or random when lm_dir is NULL), frozen or
 * joint, on the text of data_cfg. name: the result file's prefix. */
static tmm_status ae_run(exp_ctx *x, const char *name, const tmm_train_config *data_cfg, const tmm_model_config *enc,
                         const char *lm_dir, bool joint, const ae_budget *b, ae_result *r)
{
    memset(r, 0, sizeof *r);
    /* the key: the data settings with the encoder's model, the LM run, the autoencoder's own */
    tmm_train_config kc = *data_cfg; /* shallow: only read */
    kc.model = *enc;
    char *cfg_json = tmm_train_config_to_json(&kc);
    if (!cfg_json)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    const char *lm = lm_dir ? strrchr(lm_dir, '/') ? strrchr(lm_dir, '/') + 1 : lm_dir : "random";
    char own[512];
    snprintf(own, sizeof own, "autoenc 1\nlm %s\njoint %d\ndecoder L %u H %u e %u\nbatch %u steps %u warmup %u "
             "lr %.9g eval %u\n", lm, joint, b->dec_layers, b->dec_heads, b->dec_expansion, b->batch, b->steps,
             b->warmup, b->lr, b->eval_batches);
    uint64_t h = tmm_fnv1a64(cfg_json, strlen(cfg_json));
    h = tmm_fnv1a64_more(h, own, strlen(own));
    free(cfg_json);
    for (uint32_t i = 0; i < data_cfg->text_file_count; i++) { /* a changed data file is a new run */
        struct stat st;
        if (stat(data_cfg->text_files[i], &st) != 0)
            return tmm_fail(TMM_ERR_IO, "cannot read %s", data_cfg->text_files[i]);
        long long v[3] = { (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long long)st.st_mtim.tv_nsec };
        h = tmm_fnv1a64_more(h, v, sizeof v);
    }
    char dir[TMM_EXP_PATH_MAX], file[TMM_EXP_LABEL_MAX + 32], path[TMM_EXP_PATH_MAX + 128];
    TMM_TRY(tmm_path_join(dir, sizeof dir, x->out->dir, "autoenc"));
    TMM_TRY(tmm_make_dirs(dir));
    snprintf(file, sizeof file, "%s-%016llx.json", name, (unsigned long long)h);
    TMM_TRY(tmm_path_join(path, sizeof path, dir, file));
    if (tmm_path_exists(path))
        return read_result(path, r);

    tmm_train_config dc = *data_cfg; /* shallow: prepare only sets values */
    tmm_model_config dec = { .arch = exp_arch("tmm"), .vocab = enc->vocab, .d_model = enc->d_model,
                             .n_ctx = enc->n_ctx, .n_layers = b->dec_layers, .heads = b->dec_heads,
                             .expansion = b->dec_expansion, .kernel = 1, .seed = enc->seed + 1 };
    tmm_model_config_resolve(&dec);
    tmm_optim_config oc = data_cfg->optim;
    tmm_lr_schedule sched = { .kind = TMM_LR_LINEAR, .peak_lr = b->lr, .warmup_steps = b->warmup, .min_lr = 0 };
    tmm_data *data = NULL;
    tmm_autoenc *a = NULL;
    tmm_checkpoint ck = { 0 };
    bool have_ck = false;
    const uint64_t N = (uint64_t)b->batch * enc->n_ctx;
    uint32_t *tok = malloc(N * sizeof *tok), *pred = malloc(N * sizeof *pred);
    tmm_status s = tok && pred ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        s = tmm_train_prepare(&dc, &data);
    if (s == TMM_OK)
        s = tmm_autoenc_create(x->dev, enc, &dec, b->batch, joint, &oc, &a);
    if (s == TMM_OK && lm_dir && (s = tmm_checkpoint_load_model(lm_dir, enc, &ck)) == TMM_OK) {
        have_ck = true;
        s = tmm_model_write_params(tmm_autoenc_encoder(a), ck.params);
    }
    const double t0 = now_s();
    for (uint32_t step = 0; s == TMM_OK && step < b->steps; step++) {
        if (x->o->stop && *x->o->stop) {
            x->out->interrupted = true;
            break;
        }
        s = tmm_data_batch(data, TMM_SPLIT_TRAIN, step, b->batch, enc->n_ctx, tok, NULL);
        if (s == TMM_OK)
            s = tmm_autoenc_set_batch(a, tok);
        if (s == TMM_OK)
            s = tmm_autoenc_step(a, step + 1, tmm_lr_at(&sched, step, b->steps));
        r->steps = step + 1;
    }
    if (s == TMM_OK && !x->out->interrupted) {
        s = evaluate(a, data, b, enc->n_ctx, tok, pred, r);
        r->seconds = now_s() - t0;
        r->enc_params = tmm_model_param_count(enc);
        r->dec_params = tmm_model_param_count(&dec) + (uint64_t)dec.d_model * (enc->d_model / 2 + 1);
        r->done = true;
    }
    if (s == TMM_OK && r->done && joint && enc->arch == exp_arch("tmm"))
        s = save_models(a, path, r->steps);
    if (s == TMM_OK && r->done)
        s = write_result(path, r);
    if (have_ck)
        tmm_checkpoint_free(&ck);
    tmm_autoenc_destroy(a);
    tmm_data_destroy(data);
    free(tok), free(pred);
    return s;
}

static void progress(const exp_ctx *x, const char *what, const ae_result *r)
{
    if (x->o->quiet || !r->done)
        return;
    printf("  %s: %s loss %.4f, accuracy %.4f (%.1f s)\n", what, r->reused ? "reused," : "", r->loss, r->accuracy,
           r->seconds);
    fflush(stdout);
}

static cJSON *ae_json(const char *label, const tmm_model_config *m, const char *encoder, const ae_result *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", label);
    cJSON_AddStringToObject(o, "arch", tmm_arch_name(m->arch));
    cJSON_AddStringToObject(o, "encoder", encoder);
    cJSON_AddNumberToObject(o, "d_model", m->d_model);
    cJSON_AddNumberToObject(o, "n_ctx", m->n_ctx);
    cJSON_AddNumberToObject(o, "encoder_params", (double)r->enc_params);
    cJSON_AddNumberToObject(o, "decoder_params", (double)r->dec_params);
    cJSON_AddNumberToObject(o, "steps", (double)r->steps);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddNumberToObject(o, "loss", r->loss);
    cJSON_AddNumberToObject(o, "accuracy", r->accuracy);
    cJSON_AddBoolToObject(o, "reused", r->reused);
    return o;
}

/* ---- E3, retention ---------------------------------------------------------- */

typedef struct ret_preset {
    uint32_t d, n, layers, heads, expansion, batch, steps, eval_every;
    ae_budget ae;
} ret_preset;

static const ret_preset ret_presets[TMM_EXP_PRESET_COUNT] = {
    [TMM_EXP_SMALL] = { 64, 32, 2, 4, 4, 8, 200, 50, { 2, 4, 2, 8, 300, 30, 4, 3e-3 } },
    [TMM_EXP_MEDIUM] = { 128, 128, 4, 4, 4, 16, 2000, 200, { 2, 4, 2, 16, 2000, 100, 16, 1e-3 } },
    [TMM_EXP_PAPER] = { 512, 512, 8, 8, 4, 32, 20000, 1000, { 4, 8, 4, 32, 10000, 500, 32, 5e-4 } },
};

/* E3's report.md. */
static tmm_status retention_report(const exp_ctx *x, const ret_preset *p, const tmm_exp_run *runs, uint32_t n,
                                   const ae_result *trained, const ae_result *random)
{
    exp_stream report;
    TMM_TRY(exp_stream_open(&report));
    FILE *f = report.f;
    exp_report_head(f, x, runs, n,
                    "Step 1: a causal LM per architecture on bytes of the text (as E2), each baseline "
                    "matched to the TMM's parameter count. Step 2: each LM frozen, the final hidden state "
                    "(the LM head's input) at the last position of each held-out window is the only input "
                    "of a decoder (docs/model.md, \"Autoencoder\": unroll, Linear, causal TMM blocks, LM "
                    "head) trained to regenerate the whole window; the same with the LM's random "
                    "initialization as the floor.");
    fprintf(f, "Autoencoder: decoder %u TMM blocks, %u heads, e %u; %u steps of %u windows, peak lr %.3g, "
               "warmup %u, linear decay; evaluated on %u held-out batches.\n\n",
            p->ae.dec_layers, p->ae.dec_heads, p->ae.dec_expansion, p->ae.steps, p->ae.batch, p->ae.lr,
            p->ae.warmup, p->ae.eval_batches);
    fprintf(f, "## Measured\n\n| encoder | LM validation loss | reconstruction accuracy (trained) | loss "
               "(trained) | accuracy (random floor) | loss (random) | trained - floor |\n"
               "|---|---|---|---|---|---|---|\n");
    for (uint32_t i = 0; i < n; i++)
        fprintf(f, "| %s | %.4f | %.4f | %.4f | %.4f | %.4f | %+.4f |\n", runs[i].label, runs[i].val_loss,
                trained[i].accuracy, trained[i].loss, random[i].accuracy, random[i].loss,
                trained[i].accuracy - random[i].accuracy);
    const double positions = (double)p->ae.eval_batches * p->ae.batch * p->n;
    fprintf(f, "\nAccuracies are over %.0f held-out positions (one position: %.4f). A trained encoder at "
               "or below its random floor kept nothing that the decoder could use at this budget.\n",
            positions, 1.0 / positions);
    fprintf(f, "\nPlot: [accuracy](accuracy.svg).\n\n## Did the claim hold at this scale?\n\nRule: the "
               "TMM's trained encoder gives a higher reconstruction accuracy than each other architecture's "
               "(held: than all, partly: than some); made only when some trained encoder beats its "
               "random floor by more than %.2f, else not tested at this budget.\n\n**Retention claim: "
               "%s.**\n", RETAINED_MARGIN, x->out->verdict);
    return exp_stream_save(x, "report.md", &report);
}

tmm_status exp_retention(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    const ret_preset *p = &ret_presets[o->preset];
    exp_ctx x = exp_context(dev, o, "retention", out);
    tmm_exp_run runs[TMM_N_ARCHS] = { 0 };
    ae_result trained[TMM_N_ARCHS] = { 0 }, random[TMM_N_ARCHS] = { 0 };
    tmm_train_config ref;
    TMM_TRY(text_config(o, p->d, p->n, p->layers, p->heads, p->expansion, p->batch, p->steps, p->eval_every, &ref));
    uint32_t n = 0;
    tmm_status s = TMM_OK;
    for (int a = 0; a < TMM_N_ARCHS && s == TMM_OK; a++) {
        if (!exp_selected(o, (tmm_arch)a))
            continue;
        tmm_exp_run *r = &runs[n++];
        tmm_model_config m;
        char label[32];
        s = matched(&ref.model, (tmm_arch)a, &m);
        if (s == TMM_OK)
            s = text_config(o, p->d, p->n, p->layers, p->heads, p->expansion, p->batch, p->steps, p->eval_every,
                            &r->config);
        if (s == TMM_OK) {
            r->config.model = m;
            r->config.schedule.peak_lr = 0;
            s = exp_resolve(&r->config);
        }
        snprintf(r->name, sizeof r->name, "%s-lm", tmm_arch_name((tmm_arch)a));
        snprintf(r->label, sizeof r->label, "%s", tmm_arch_label(&m, label, sizeof label));
    }
    if (s == TMM_OK)
        s = exp_train_runs(&x, runs, n);
    for (uint32_t i = 0; i < n && s == TMM_OK && !out->interrupted; i++) {
        const tmm_model_config *m = &runs[i].config.model;
        char name[TMM_EXP_LABEL_MAX];
        if (!o->quiet)
            printf("[autoencoder %u/%u] %s: trained and random encoders\n", i + 1, n, runs[i].label);
        snprintf(name, sizeof name, "%s-trained", tmm_arch_name(m->arch));
        s = ae_run(&x, name, &runs[i].config, m, runs[i].dir, false, &p->ae, &trained[i]);
        progress(&x, "trained encoder", &trained[i]);
        snprintf(name, sizeof name, "%s-random", tmm_arch_name(m->arch));
        if (s == TMM_OK && !out->interrupted)
            s = ae_run(&x, name, &runs[i].config, m, NULL, false, &p->ae, &random[i]);
        progress(&x, "random encoder", &random[i]);
        out->runs += 2;
        out->reused += trained[i].reused + random[i].reused;
    }

    if (s == TMM_OK && !out->interrupted) {
        /* the rule: the TMM's trained encoder retains more than each other architecture's */
        int tmm = -1;
        for (uint32_t i = 0; i < n; i++)
            if (runs[i].config.model.arch == exp_arch("tmm"))
                tmm = (int)i;
        uint32_t held = 0, tested = 0;
        bool retained = false; /* some trained encoder is clearly above its random floor */
        for (uint32_t i = 0; i < n; i++)
            retained = retained || trained[i].accuracy - random[i].accuracy > RETAINED_MARGIN;
        for (uint32_t i = 0; tmm >= 0 && retained && i < n; i++) {
            if ((int)i == tmm)
                continue;
            tested++;
            held += trained[tmm].accuracy > trained[i].accuracy;
        }
        snprintf(out->verdict, sizeof out->verdict, "%s", exp_verdict(held, tested));

        /* bars: accuracy per architecture, trained and random encoders */
        double acc[2][TMM_N_ARCHS];
        const char *cats[TMM_N_ARCHS];
        for (uint32_t i = 0; i < n; i++) {
            acc[0][i] = trained[i].accuracy, acc[1][i] = random[i].accuracy;
            cats[i] = runs[i].label;
        }
        tmm_chart_series ser[2] = { { "trained LM encoder (frozen)", NULL, acc[0], n },
                                    { "random encoder (frozen): the floor", NULL, acc[1], n } };
        tmm_chart c = { .title = "Retention: reconstructing the input from the last hidden state",
                        .x_label = "encoder architecture",
                        .y_label = "held-out reconstruction accuracy (fraction of positions)", .series = ser,
                        .n_series = 2, .categories = cats, .n_categories = n,
                        .note = "decoder: unroll + Linear + TMM blocks, trained on the frozen encoder's vector" };
        s = exp_save_chart(&x, "accuracy.svg", &c, true);

        cJSON *root = exp_summary(&x, runs, n);
        cJSON *rows = cJSON_AddArrayToObject(root, "autoencoders");
        for (uint32_t i = 0; i < n; i++) {
            cJSON_AddItemToArray(rows, ae_json(runs[i].label, &runs[i].config.model, "trained", &trained[i]));
            cJSON_AddItemToArray(rows, ae_json(runs[i].label, &runs[i].config.model, "random", &random[i]));
        }
        if (s == TMM_OK)
            s = exp_save_summary(&x, root, "held if the TMM's trained encoder gives a higher held-out reconstruction "
                                 "accuracy than every other architecture's; partly if than some; not tested when no "
                                 "trained encoder beats its random floor by more than 0.02", NULL);
        else
            cJSON_Delete(root);

        if (s == TMM_OK)
            s = retention_report(&x, p, runs, n, trained, random);
    }
    for (uint32_t i = 0; i < TMM_N_ARCHS; i++)
        tmm_exp_run_free(&runs[i]);
    tmm_train_config_free(&ref);
    return s;
}

/* ---- E4, capacity ----------------------------------------------------------- */

typedef struct cap_preset {
    uint32_t ns[MAX_SETTINGS], n_count;       /* at width d */
    uint32_t widths[MAX_SETTINGS], w_count;   /* at the largest n */
    uint32_t d, layers, heads, expansion;
    ae_budget ae;
} cap_preset;

static const cap_preset cap_presets[TMM_EXP_PRESET_COUNT] = {
    [TMM_EXP_SMALL] = { { 16, 32 }, 2, { 32 }, 1, 64, 2, 4, 2, { 2, 4, 2, 8, 300, 30, 4, 3e-3 } },
    [TMM_EXP_MEDIUM] = { { 64, 128, 256 }, 3, { 64, 256 }, 2, 128, 2, 4, 2, { 2, 4, 2, 16, 2000, 100, 16, 1e-3 } },
    [TMM_EXP_PAPER] = { { 128, 256, 512 }, 3, { 128, 512 }, 2, 256, 4, 4, 4, { 4, 4, 4, 32, 10000, 500, 32, 5e-4 } },
};

typedef struct cap_row {
    tmm_model_config m;
    char label[TMM_EXP_LABEL_MAX];
    ae_result r;
} cap_row;

/* E4's report.md: settings k = 0..n_set-1 at n set_n[k], width set_d[k]. */
static tmm_status capacity_report(const exp_ctx *x, const cap_preset *p, const cap_row *rows,
                                  const bool present[TMM_N_ARCHS], uint32_t n_set, const uint32_t *set_n,
                                  const uint32_t *set_d)
{
    const uint32_t n_max = p->ns[p->n_count - 1];
    exp_stream report;
    TMM_TRY(exp_stream_open(&report));
    FILE *f = report.f;
    fprintf(f, "# %s\n\n**Claim**: %s.\n\n", x->e->title, x->e->claim);
    fprintf(f, "**Setup**: preset `%s` (%s), seed %llu, device: %s. The autoencoder of docs/model.md "
               "(\"Autoencoder\") with the encoder trained jointly: an encoder of each architecture (%u "
               "layers, matched to the TMM encoder's parameter count), its final hidden state at the last "
               "position unrolled into a decoder of %u TMM blocks (%u heads, e %u); %u steps of %u text "
               "windows, peak lr %.3g, warmup %u, linear decay; accuracy of the argmax at every position "
               "over %u held-out batches.\n\n",
            tmm_exp_preset_name(x->o->preset), x->e->presets[x->o->preset], (unsigned long long)x->o->seed,
            x->device, p->layers, p->ae.dec_layers, p->ae.dec_heads, p->ae.dec_expansion, p->ae.steps, p->ae.batch,
            p->ae.lr, p->ae.warmup, p->ae.eval_batches);
    fprintf(f, "## Measured\n\n| encoder | n | d | encoder params | accuracy | loss | seconds (training and "
               "evaluation) |\n"
               "|---|---|---|---|---|---|---|\n");
    for (uint32_t k = 0; k < n_set; k++)
        for (int a = 0; a < TMM_N_ARCHS; a++) {
            const cap_row *row = &rows[k * TMM_N_ARCHS + a];
            if (!present[a])
                continue;
            char label[32];
            fprintf(f, "| %s | %u | %u | %llu | %.4f | %.4f | %.1f |\n",
                    tmm_arch_label(&row->m, label, sizeof label), set_n[k], set_d[k],
                    (unsigned long long)row->r.enc_params, row->r.accuracy, row->r.loss, row->r.seconds);
        }
    fprintf(f, "\nAccuracies are over %u held-out batches of %u windows: n = %u gives %u positions (one "
               "position: %.4f).\n", p->ae.eval_batches, p->ae.batch, n_max,
            p->ae.eval_batches * p->ae.batch * n_max, 1.0 / (p->ae.eval_batches * p->ae.batch * n_max));
    fprintf(f, "\nPlots: [accuracy against n](accuracy-n.svg), [against width](accuracy-width.svg).\n\n"
               "## Did the claim hold at this scale?\n\nRule: at every setting the TMM's reconstruction "
               "accuracy is at least each other architecture's (held: at all, partly: at some).\n\n"
               "**Capacity claim: %s.**\n", x->out->verdict);
    return exp_stream_save(x, "report.md", &report);
}

tmm_status exp_capacity(tmm_device *dev, const tmm_exp_options *o, tmm_exp_outcome *out)
{
    const cap_preset *p = &cap_presets[o->preset];
    exp_ctx x = exp_context(dev, o, "capacity", out);
    /* settings: each n at width d, then each other width at the largest n */
    const uint32_t n_max = p->ns[p->n_count - 1];
    uint32_t set_n[2 * MAX_SETTINGS], set_d[2 * MAX_SETTINGS], n_set = 0;
    for (uint32_t i = 0; i < p->n_count; i++, n_set++)
        set_n[n_set] = p->ns[i], set_d[n_set] = p->d;
    for (uint32_t i = 0; i < p->w_count; i++)
        if (p->widths[i] != p->d)
            set_n[n_set] = n_max, set_d[n_set++] = p->widths[i];
    cap_row *rows = calloc((size_t)n_set * TMM_N_ARCHS, sizeof *rows);
    if (!rows)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    bool present[TMM_N_ARCHS] = { 0 };
    tmm_status s = TMM_OK;
    uint32_t total = 0;
    for (uint32_t k = 0; k < n_set && s == TMM_OK && !out->interrupted; k++) {
        tmm_train_config c;
        s = text_config(o, set_d[k], set_n[k], p->layers, p->heads, p->expansion, p->ae.batch, p->ae.steps,
                        p->ae.steps, &c);
        for (int a = 0; a < TMM_N_ARCHS && s == TMM_OK && !out->interrupted; a++) {
            if (!exp_selected(o, (tmm_arch)a))
                continue;
            cap_row *row = &rows[k * TMM_N_ARCHS + a];
            char label[32], name[TMM_EXP_LABEL_MAX];
            s = matched(&c.model, (tmm_arch)a, &row->m);
            if (s != TMM_OK)
                break;
            snprintf(row->label, sizeof row->label, "%s, n %u, d %u", tmm_arch_label(&row->m, label, sizeof label),
                     set_n[k], set_d[k]);
            snprintf(name, sizeof name, "%s-n%u-d%u", tmm_arch_name((tmm_arch)a), set_n[k], set_d[k]);
            if (!o->quiet)
                printf("[%u] %s\n", ++total, row->label);
            s = ae_run(&x, name, &c, &row->m, NULL, true, &p->ae, &row->r);
            progress(&x, "joint autoencoder", &row->r);
            present[a] = true;
            out->runs++;
            out->reused += row->r.reused;
        }
        tmm_train_config_free(&c);
    }

    if (s == TMM_OK && !out->interrupted) {
        /* the rule: the TMM reconstructs at least as well as each other architecture at each setting */
        uint32_t held = 0, tested = 0;
        for (uint32_t k = 0; k < n_set && present[exp_arch("tmm")]; k++)
            for (int a = 0; a < TMM_N_ARCHS; a++) {
                if ((tmm_arch)a == exp_arch("tmm") || !present[a])
                    continue;
                tested++;
                held += rows[k * TMM_N_ARCHS + exp_arch("tmm")].r.accuracy >= rows[k * TMM_N_ARCHS + a].r.accuracy;
            }
        snprintf(out->verdict, sizeof out->verdict, "%s", exp_verdict(held, tested));

        /* accuracy against n (width d) and against width (largest n), a line per architecture */
        for (int by_width = 0; by_width < 2 && s == TMM_OK; by_width++) {
            double xs[TMM_N_ARCHS][2 * MAX_SETTINGS], ys[TMM_N_ARCHS][2 * MAX_SETTINGS];
            tmm_chart_series ser[TMM_N_ARCHS];
            uint32_t ns = 0;
            for (int a = 0; a < TMM_N_ARCHS; a++) {
                if (!present[a])
                    continue;
                uint32_t m = 0;
                for (uint32_t k = 0; k < n_set; k++) {
                    bool on = by_width ? set_n[k] == n_max : k < p->n_count;
                    if (!on)
                        continue;
                    xs[ns][m] = by_width ? set_d[k] : set_n[k];
                    ys[ns][m++] = rows[k * TMM_N_ARCHS + a].r.accuracy;
                }
                /* the width points in increasing order (the preset's d sits among them) */
                for (uint32_t i = 1; i < m; i++)
                    for (uint32_t j = i; j > 0 && xs[ns][j - 1] > xs[ns][j]; j--) {
                        double t = xs[ns][j]; xs[ns][j] = xs[ns][j - 1]; xs[ns][j - 1] = t;
                        t = ys[ns][j]; ys[ns][j] = ys[ns][j - 1]; ys[ns][j - 1] = t;
                    }
                ser[ns] = (tmm_chart_series){ tmm_arch_name((tmm_arch)a), xs[ns], ys[ns], m };
                ns++;
            }
            char title[128];
            if (by_width)
                snprintf(title, sizeof title, "Capacity: reconstruction accuracy against width (n = %u)",
                         n_max);
            else
                snprintf(title, sizeof title, "Capacity: reconstruction accuracy against n (d = %u)", p->d);
            tmm_chart c = { .title = title, .x_label = by_width ? "model width d" : "sequence length n (tokens)",
                            .y_label = "held-out reconstruction accuracy (fraction)", .y_from_zero = true,
                            .series = ser, .n_series = ns,
                            .note = "encoder and decoder trained jointly; baselines matched to the TMM encoder" };
            s = exp_save_chart(&x, by_width ? "accuracy-width.svg" : "accuracy-n.svg", &c, false);
        }

        cJSON *root = exp_summary(&x, NULL, 0);
        cJSON *arr = cJSON_AddArrayToObject(root, "autoencoders");
        for (uint32_t k = 0; k < n_set; k++)
            for (int a = 0; a < TMM_N_ARCHS; a++)
                if (present[a])
                    cJSON_AddItemToArray(arr, ae_json(rows[k * TMM_N_ARCHS + a].label,
                                                      &rows[k * TMM_N_ARCHS + a].m, "joint",
                                                      &rows[k * TMM_N_ARCHS + a].r));
        if (s == TMM_OK)
            s = exp_save_summary(&x, root, "held if the TMM's reconstruction accuracy is at least each other "
                                 "architecture's at every setting; partly if at some", NULL);
        else
            cJSON_Delete(root);

        if (s == TMM_OK)
            s = capacity_report(&x, p, rows, present, n_set, set_n, set_d);
    }
    free(rows);
    return s;
}
