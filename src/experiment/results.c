/* An experiment's training runs: directories keyed by settings, the curve,
 * resumption and reuse (results.h). */
#define _POSIX_C_SOURCE 200809L /* stat's st_mtim */
#include "experiment/results.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "io/json.h"
#include "io/limits.h"
#include "model/model.h"
#include "model/checkpoint.h"
#include "train/trainer.h"

#define MAX_CURVE_POINTS (1u << 24)

/* The run's settings as text: its training config with run_dir left empty,
 * then the size and modification time of every data file, so that a file
 * changed in place is a new run too. */
static tmm_status settings_text(const tmm_exp_run *run, char **out)
{
    tmm_train_config c = run->config; /* shallow: only read */
    c.run_dir[0] = '\0';
    char *json = tmm_train_config_to_json(&c);
    size_t len = json ? strlen(json) : 0, cap = len + 64 + (size_t)c.text_file_count * 80;
    char *text = json ? malloc(cap) : NULL;
    if (!text) {
        free(json);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    memcpy(text, json, len + 1);
    free(json);
    for (uint32_t i = 0; i < c.text_file_count; i++) {
        struct stat st;
        if (stat(c.text_files[i], &st) != 0) {
            free(text);
            return tmm_fail(TMM_ERR_IO, "cannot read %s", c.text_files[i]);
        }
        len += (size_t)snprintf(text + len, cap - len, "data %u: %lld bytes, modified %lld.%09ld\n", i,
                                (long long)st.st_size, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
    }
    *out = text;
    return TMM_OK;
}

tmm_status tmm_exp_run_key(const tmm_exp_run *run, char *buf, size_t size)
{
    char *text;
    TMM_TRY(settings_text(run, &text));
    const uint64_t h = tmm_fnv1a64(text, strlen(text));
    free(text);
    if (snprintf(buf, size, "%s-%016llx", run->name, (unsigned long long)h) >= (int)size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "run name too long: %s", run->name);
    return TMM_OK;
}

/* A file of the run directory into a NUL-terminated buffer (with a size limit). */
static tmm_status read_run_file(const char *dir, const char *name, char **text)
{
    char path[TMM_EXP_PATH_MAX + 32];
    size_t size;
    TMM_TRY(tmm_path_join(path, sizeof path, dir, name));
    TMM_TRY(tmm_read_file(path, "experiment results file", TMM_LIMIT_RESULTS, (void **)text, &size));
    if (strlen(*text) != size) {
        free(*text);
        return tmm_fail(TMM_ERR_IO, "%s holds a NUL byte: not written by tmm experiment; remove %s to run it again",
                        path, dir);
    }
    return TMM_OK;
}

static tmm_status write_run_file(const char *dir, const char *name, const char *text)
{
    char path[TMM_EXP_PATH_MAX + 32];
    TMM_TRY(tmm_path_join(path, sizeof path, dir, name));
    return tmm_write_file_atomic(path, text, strlen(text));
}

/* A number member: required (a finite number in [lo, hi]) or optional
 * (absent or null gives NAN). */
static bool get_number(const cJSON *obj, const char *key, bool required, double lo, double hi, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NAN;
    if (!v || cJSON_IsNull(v))
        return !required;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return false;
    *out = v->valuedouble;
    return true;
}

#define MAX_COUNT 9007199254740992.0 /* 2^53: integers exact in a double */

static bool get_count(const cJSON *obj, const char *key, uint64_t *out)
{
    double v;
    if (!get_number(obj, key, true, 0, MAX_COUNT, &v) || v != floor(v))
        return false;
    *out = (uint64_t)v;
    return true;
}

static tmm_status parse_point(const char *line, size_t len, tmm_exp_point *p)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    bool ok = cJSON_IsObject(o) && !tmm_json_duplicate_key(o) && get_count(o, "step", &p->step) &&
              get_count(o, "tokens", &p->tokens) && get_number(o, "seconds", true, 0, 1e12, &p->seconds) &&
              get_number(o, "loss", true, 0, 1e6, &p->loss) && get_number(o, "val_loss", false, 0, 1e6, &p->val_loss) &&
              get_number(o, "accuracy", false, 0, 1, &p->accuracy);
    cJSON_Delete(o);
    return ok ? TMM_OK : TMM_ERR_IO;
}

tmm_status tmm_exp_read_curve(const char *dir, uint64_t max_step, tmm_exp_run *run)
{
    free(run->points);
    run->points = NULL, run->n_points = 0;
    char *text;
    TMM_TRY(read_run_file(dir, "curve.jsonl", &text));
    uint32_t lines = 0, cap = 0;
    tmm_status s = TMM_OK;
    for (const char *p = text; *p && s == TMM_OK; lines++) {
        const char *end = strchr(p, '\n');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        tmm_exp_point pt;
        if (parse_point(p, len, &pt) != TMM_OK)
            s = tmm_fail(TMM_ERR_IO, "%s/curve.jsonl line %u is not a curve point (step, tokens, seconds, loss; "
                         "val_loss, accuracy): remove %s to run it again", dir, lines + 1, dir);
        else if (run->n_points && pt.step <= run->points[run->n_points - 1].step)
            s = tmm_fail(TMM_ERR_IO, "%s/curve.jsonl line %u: step %llu does not follow step %llu: remove %s to run "
                         "it again", dir, lines + 1, (unsigned long long)pt.step,
                         (unsigned long long)run->points[run->n_points - 1].step, dir);
        else if (pt.step <= max_step) {
            if (run->n_points == cap) {
                cap = cap ? 2 * cap : 64;
                tmm_exp_point *grown = cap <= MAX_CURVE_POINTS ? realloc(run->points, cap * sizeof *grown) : NULL;
                if (!grown)
                    s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory reading %s/curve.jsonl", dir);
                else
                    run->points = grown;
            }
            if (s == TMM_OK)
                run->points[run->n_points++] = pt;
        }
        p = end ? end + 1 : p + len;
    }
    free(text);
    return s;
}

/* Writes the curve (after cutting it back to a checkpoint) as curve.jsonl. */
static void put_point(FILE *f, const tmm_exp_point *p)
{
    fprintf(f, "{\"step\": %llu, \"tokens\": %llu, \"seconds\": %.4f, \"loss\": %.9g", (unsigned long long)p->step,
            (unsigned long long)p->tokens, p->seconds, p->loss);
    if (isfinite(p->val_loss))
        fprintf(f, ", \"val_loss\": %.9g", p->val_loss);
    if (isfinite(p->accuracy))
        fprintf(f, ", \"accuracy\": %.9g", p->accuracy);
    fputs("}\n", f);
}

static tmm_status rewrite_curve(const tmm_exp_run *run)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < run->n_points; i++)
        put_point(f, &run->points[i]);
    const bool ok = fclose(f) == 0;
    tmm_status s = ok ? write_run_file(run->dir, "curve.jsonl", buf)
                      : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    free(buf);
    return s;
}

static tmm_status read_result(tmm_exp_run *run)
{
    char *text;
    TMM_TRY(read_run_file(run->dir, "result.json", &text));
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(o, "finished");
    const cJSON *reached = cJSON_GetObjectItemCaseSensitive(o, "reached_target");
    const cJSON *diverged = cJSON_GetObjectItemCaseSensitive(o, "diverged"); /* optional: false when absent */
    bool ok = cJSON_IsObject(o) && !tmm_json_duplicate_key(o) && cJSON_IsTrue(fin) && cJSON_IsBool(reached) &&
              (!diverged || cJSON_IsBool(diverged)) &&
              get_count(o, "steps", &run->steps) && get_count(o, "params", &run->params) &&
              get_number(o, "seconds", true, 0, 1e12, &run->seconds) &&
              get_number(o, "val_loss", false, 0, 1e6, &run->val_loss) &&
              get_number(o, "accuracy", false, 0, 1, &run->accuracy);
    run->reached_target = cJSON_IsTrue(reached);
    run->diverged = cJSON_IsTrue(diverged);
    cJSON_Delete(o);
    if (!ok)
        return tmm_fail(TMM_ERR_IO, "%s/result.json is not a finished run's result (finished, steps, params, "
                        "seconds, reached_target, val_loss, accuracy): remove %s to run it again", run->dir, run->dir);
    run->finished = true;
    return TMM_OK;
}

static tmm_status write_result(tmm_exp_run *run)
{
    char text[512], vl[32] = "null", acc[32] = "null";
    if (isfinite(run->val_loss))
        snprintf(vl, sizeof vl, "%.9g", run->val_loss);
    if (isfinite(run->accuracy))
        snprintf(acc, sizeof acc, "%.9g", run->accuracy);
    snprintf(text, sizeof text,
             "{\"finished\": true, \"steps\": %llu, \"params\": %llu, \"seconds\": %.4f, \"reached_target\": %s, "
             "\"val_loss\": %s, \"accuracy\": %s, \"diverged\": %s}\n",
             (unsigned long long)run->steps, (unsigned long long)run->params, run->seconds,
             run->reached_target ? "true" : "false", vl, acc, run->diverged ? "true" : "false");
    return write_run_file(run->dir, "result.json", text);
}

const tmm_exp_point *tmm_exp_first_reaching(const tmm_exp_run *run, double target)
{
    for (uint32_t i = 0; i < run->n_points; i++)
        if (isfinite(run->points[i].accuracy) && run->points[i].accuracy >= target)
            return &run->points[i];
    return NULL;
}

/* The last point with an evaluation, or NULL. */
static const tmm_exp_point *last_eval(const tmm_exp_run *run)
{
    for (uint32_t i = run->n_points; i-- > 0;)
        if (isfinite(run->points[i].val_loss))
            return &run->points[i];
    return NULL;
}

typedef struct progress_sink {
    FILE *curve;
    double offset;            /* seconds of the run before this invocation */
    double last_seconds;      /* the last point's */
    uint64_t tokens_per_step;
    const tmm_exp_run *run;
    bool quiet, failed;
} progress_sink;

static void on_progress(const tmm_train_progress *p, void *user)
{
    progress_sink *k = user;
    const tmm_exp_point pt = { .step = p->step, .tokens = p->step * k->tokens_per_step,
                               .seconds = k->offset + p->elapsed_s, .loss = p->loss,
                               .val_loss = p->eval ? p->val_loss : NAN, .accuracy = p->eval ? p->accuracy : NAN };
    put_point(k->curve, &pt);
    k->last_seconds = pt.seconds;
    k->failed |= fflush(k->curve) != 0 || ferror(k->curve);
    if (!k->quiet && p->eval) {
        printf("  %-24s step %6llu/%llu  loss %.4f  val_loss %.4f  accuracy %.4f  %.1f s\n", k->run->label,
               (unsigned long long)p->step, (unsigned long long)p->steps, p->loss, p->val_loss, p->accuracy,
               pt.seconds);
        fflush(stdout);
    }
}

/* Where an unfinished run stands: the step of its latest checkpoint (0: none). */
static tmm_status checkpoint_step(const char *dir, uint64_t *step)
{
    *step = 0;
    if (!tmm_run_dir_has_checkpoint(dir))
        return TMM_OK;
    tmm_checkpoint ck;
    TMM_TRY(tmm_checkpoint_load(dir, NULL, TMM_CHECKPOINT_ALLOW_NONFINITE, &ck));
    *step = ck.step;
    tmm_checkpoint_free(&ck);
    return TMM_OK;
}

/* Trains (or continues) an unfinished run whose curve is cut back to its
 * checkpoint at step `start`. */
static tmm_status train(tmm_device *dev, tmm_exp_run *run, tmm_data *data, uint64_t start,
                        volatile sig_atomic_t *stop, bool quiet)
{
    tmm_train_config *c = &run->config;
    const double offset = run->n_points ? run->points[run->n_points - 1].seconds : 0;
    progress_sink sink = { .offset = offset, .last_seconds = offset,
                           .tokens_per_step = (uint64_t)c->batch * c->model.n_ctx, .run = run, .quiet = quiet };
    char path[TMM_EXP_PATH_MAX + 32];
    TMM_TRY(tmm_path_join(path, sizeof path, run->dir, "curve.jsonl"));
    TMM_TRY(tmm_open_write(path, "learning curve", true, &sink.curve));
    tmm_train_hooks hooks = { .on_progress = on_progress, .user = &sink, .stop = stop, .replace_run = start == 0,
                             .data = data };
    tmm_train_result res;
    tmm_status s = tmm_train(dev, c, start ? run->dir : NULL, &hooks, &res);
    if (fclose(sink.curve) != 0 || sink.failed)
        s = s == TMM_OK ? tmm_fail(TMM_ERR_IO, "cannot write %s", path) : s;
    /* the trainer fails a run whose loss is not finite, leaving it in res.loss */
    run->diverged = s != TMM_OK && run->may_diverge && !isfinite(res.loss);
    if (run->diverged && !quiet)
        printf("  %-24s diverged at step %llu: %s\n", run->label, (unsigned long long)res.step, tmm_last_error());
    if (run->diverged) /* the trainer's clock stopped with the error: the last logged step's */
        res.seconds = sink.last_seconds - sink.offset;
    else if (s != TMM_OK)
        return s;
    run->interrupted = res.interrupted;
    run->reached_target = res.reached_target;
    run->steps = res.step;
    run->seconds = sink.offset + res.seconds;
    return TMM_OK;
}

tmm_status tmm_exp_run_train(tmm_device *dev, const char *exp_dir, tmm_exp_run *run, volatile sig_atomic_t *stop,
                             bool quiet)
{
    char key[TMM_EXP_LABEL_MAX + 24], *settings = NULL, *old = NULL;
    TMM_TRY(tmm_exp_run_key(run, key, sizeof key));
    char runs[TMM_EXP_PATH_MAX];
    TMM_TRY(tmm_path_join(runs, sizeof runs, exp_dir, "runs"));
    TMM_TRY(tmm_path_join(run->dir, sizeof run->dir, runs, key));
    if (snprintf(run->config.run_dir, sizeof run->config.run_dir, "%s", run->dir) >= (int)sizeof run->config.run_dir)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "results path too long: %s", run->dir);
    TMM_TRY(tmm_make_dirs(run->dir));
    TMM_TRY(settings_text(run, &settings));
    char path[TMM_EXP_PATH_MAX + 32];
    tmm_status s = tmm_path_join(path, sizeof path, run->dir, "settings.json");
    if (s == TMM_OK && tmm_path_exists(path) && (s = read_run_file(run->dir, "settings.json", &old)) == TMM_OK &&
        strcmp(old, settings) != 0)
        s = tmm_fail(TMM_ERR_IO, "%s holds a run of other settings (its settings.json differs): remove it to run "
                     "this one", run->dir);
    run->finished = run->reused = run->interrupted = run->diverged = false;
    run->val_loss = run->accuracy = NAN;
    if (s == TMM_OK && tmm_path_join(path, sizeof path, run->dir, "result.json") == TMM_OK && tmm_path_exists(path)) {
        s = read_result(run);
        if (s == TMM_OK)
            s = tmm_exp_read_curve(run->dir, UINT64_MAX, run);
        run->reused = s == TMM_OK;
        free(settings);
        free(old);
        return s;
    }
    uint64_t start = 0;
    if (s == TMM_OK)
        s = write_run_file(run->dir, "settings.json", settings);
    if (s == TMM_OK)
        s = checkpoint_step(run->dir, &start);
    if (s == TMM_OK && start) /* the curve as far as the checkpoint: what resuming repeats is dropped */
        s = tmm_exp_read_curve(run->dir, start, run);
    if (s == TMM_OK)
        s = rewrite_curve(run);
    tmm_data *data = NULL;
    if (s == TMM_OK && (s = tmm_train_prepare(&run->config, &data)) == TMM_OK)
        run->params = tmm_model_param_count(&run->config.model);
    const tmm_exp_point *last = s == TMM_OK ? last_eval(run) : NULL;
    const bool target_met = last && last->step == start && run->config.target_accuracy > 0 &&
                            tmm_data_task_generated(run->config.task) && last->accuracy >= run->config.target_accuracy;
    if (s == TMM_OK && (start >= run->config.steps || target_met)) { /* stopped after its last save */
        run->steps = start;
        run->reached_target = target_met;
        run->seconds = run->n_points ? run->points[run->n_points - 1].seconds : 0;
    } else if (s == TMM_OK) {
        s = train(dev, run, data, start, stop, quiet);
    }
    tmm_data_destroy(data);
    if (s == TMM_OK && !run->interrupted) {
        last = (s = tmm_exp_read_curve(run->dir, UINT64_MAX, run)) == TMM_OK ? last_eval(run) : NULL;
        run->val_loss = last && !run->diverged ? last->val_loss : NAN;
        run->accuracy = last && !run->diverged ? last->accuracy : NAN;
        if (s == TMM_OK)
            s = write_result(run);
        run->finished = s == TMM_OK;
    }
    free(settings);
    free(old);
    return s;
}

void tmm_exp_run_free(tmm_exp_run *run)
{
    free(run->points);
    run->points = NULL, run->n_points = 0;
    tmm_train_config_free(&run->config);
}
