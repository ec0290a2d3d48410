/* tmm experiment's pieces: the SVG charts, and the runs' results
 * directories (settings keys, resumption, reuse). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/svg.h"
#include "experiment/experiment.h"
#include "experiment/lr_sweep.h"
#include "experiment/results.h"
#include "files.h"
#include "harness.h"
#include "train/data.h"
#include "train/trainer.h"

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(svg, line_chart_has_title_axes_legend_and_escapes)
{
    const double x[] = { 1, 10, 100, 1000 }, y1[] = { 0.1, 0.5, NAN, 0.99 }, y2[] = { 0.05, 0.1, 0.2, 0.3 };
    const tmm_chart_series s[] = { { "tmm <d 64>", x, y1, 4 }, { "hyena & co", x, y2, 4 } };
    tmm_chart c = { .title = "accuracy", .x_label = "training steps", .y_label = "accuracy (fraction)",
                    .log_x = true, .series = s, .n_series = 2 };
    tmm_svg t = { 0 };
    cr_assert_eq(tmm_svg_line_chart(&c, &t), TMM_OK);
    tmm_svg_put(&t, "%c", '\0');
    cr_assert(strncmp(t.buf, "<?xml", 5) == 0);
    cr_assert_eq(count(t.buf, "<svg "), 1);
    cr_assert_eq(count(t.buf, "</svg>"), 1);
    cr_assert(strstr(t.buf, "<title>accuracy</title>"));
    cr_assert(strstr(t.buf, "class=\"x-label\"") && strstr(t.buf, ">training steps</text>"));
    cr_assert(strstr(t.buf, ">accuracy (fraction)</text>"));
    cr_assert(strstr(t.buf, "tmm &lt;d 64&gt;") && strstr(t.buf, "hyena &amp; co"), "legend entries escaped");
    cr_assert_eq(count(t.buf, "class=\"series\""), 2);
    cr_assert(strstr(t.buf, ">1000</text>") && strstr(t.buf, ">1</text>"), "decade ticks on the log axis");
    tmm_svg_free(&t);
    c.n_series = 0;
    cr_assert_eq(tmm_svg_line_chart(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    tmm_svg_free(&t);
}

Test(svg, bar_chart_marks_missing_values)
{
    const double a[] = { 120, NAN, 300 }, b[] = { 140, 200, NAN };
    const tmm_chart_series s[] = { { "n 64", NULL, a, 3 }, { "n 128", NULL, b, 3 } };
    const char *cats[] = { "tmm", "transformer", "hyena" };
    tmm_chart c = { .title = "steps", .x_label = "architecture", .y_label = "steps to 99%", .series = s,
                    .n_series = 2, .categories = cats, .n_categories = 3, .note = "a dash: not reached" };
    tmm_svg t = { 0 };
    cr_assert_eq(tmm_svg_bar_chart(&c, &t), TMM_OK);
    tmm_svg_put(&t, "%c", '\0');
    cr_assert_eq(count(t.buf, "class=\"bar\""), 4);
    cr_assert_eq(count(t.buf, "&#8212;"), 2);
    cr_assert(strstr(t.buf, ">transformer</text>") && strstr(t.buf, "a dash: not reached"));
    tmm_svg_free(&t);
    c.n_categories = 0;
    cr_assert_eq(tmm_svg_bar_chart(&c, &t), TMM_ERR_INVALID_ARGUMENT);
    tmm_svg_free(&t);
}

static void tiny_run(tmm_exp_run *r, uint64_t steps)
{
    memset(r, 0, sizeof *r);
    tmm_train_config *c = &r->config;
    tmm_train_config_default(c);
    c->model.d_model = 32, c->model.n_ctx = 32, c->model.n_layers = 2, c->model.heads = 0;
    c->copy_alphabet = 8, c->batch = 8, c->steps = steps;
    c->schedule.warmup_steps = 4;
    c->eval_every = c->save_every = c->log_every = 4;
    c->eval_batches = 2, c->keep = 1, c->target_accuracy = 0;
    snprintf(r->name, sizeof r->name, "tmm-tiny");
    snprintf(r->label, sizeof r->label, "tmm tiny");
}

static void temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/tmm-exp-XXXXXX");
    cr_assert_not_null(mkdtemp(buf));
}

static void append(const char *dir, const char *file, const char *text)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "a");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(experiment, run_key_follows_the_settings)
{
    tmm_exp_run a, b;
    char ka[128], kb[128];
    tiny_run(&a, 12), tiny_run(&b, 12);
    cr_assert_eq(tmm_exp_run_key(&a, ka, sizeof ka), TMM_OK);
    cr_assert_eq(tmm_exp_run_key(&b, kb, sizeof kb), TMM_OK);
    cr_assert_str_eq(ka, kb);
    cr_assert(strncmp(ka, "tmm-tiny-", 9) == 0);
    b.config.schedule.peak_lr = 1e-3;
    cr_assert_eq(tmm_exp_run_key(&b, kb, sizeof kb), TMM_OK);
    cr_assert_str_neq(ka, kb);
    tmm_exp_run_free(&a), tmm_exp_run_free(&b);
}

H_TEST(experiment, interrupted_run_continues_to_the_same_curve_and_is_reused)
{
    char da[64], db[64];
    temp_dir(da, sizeof da), temp_dir(db, sizeof db);
    tmm_exp_run whole, parts;
    tiny_run(&whole, 12);
    H_OK(tmm_exp_run_train(h_dev, da, &whole, NULL, true));
    cr_assert(whole.finished && !whole.reused && !whole.interrupted);
    cr_assert_eq(whole.steps, 12);
    cr_assert_eq(whole.n_points, 3);

    /* stopped after its first step (as by SIGTERM), then killed after a
     * logged step past that checkpoint: the rerun drops that step */
    volatile sig_atomic_t stop = 1;
    tiny_run(&parts, 12);
    H_OK(tmm_exp_run_train(h_dev, db, &parts, &stop, true));
    cr_assert(parts.interrupted && !parts.finished);
    append(parts.dir, "curve.jsonl", "{\"step\": 8, \"tokens\": 1, \"seconds\": 1, \"loss\": 9}\n");
    stop = 0;
    tmm_exp_run_free(&parts);
    tiny_run(&parts, 12);
    H_OK(tmm_exp_run_train(h_dev, db, &parts, &stop, true));
    cr_assert(parts.finished && !parts.reused);
    cr_assert_eq(parts.n_points, whole.n_points, "%u points", parts.n_points);
    for (uint32_t i = 0; i < whole.n_points; i++) {
        cr_assert_eq(parts.points[i].step, whole.points[i].step);
        cr_assert_eq(parts.points[i].tokens, whole.points[i].tokens);
        cr_assert_eq(parts.points[i].loss, whole.points[i].loss, "step %llu", (unsigned long long)whole.points[i].step);
        cr_assert_eq(parts.points[i].val_loss, whole.points[i].val_loss);
        cr_assert_eq(parts.points[i].accuracy, whole.points[i].accuracy);
        cr_assert(whole.points[i].accuracy >= 0 && whole.points[i].accuracy <= 1 && isfinite(whole.points[i].loss));
    }

    /* finished: reused without training (its curve read back) */
    tmm_exp_run again;
    tiny_run(&again, 12);
    H_OK(tmm_exp_run_train(h_dev, da, &again, NULL, true));
    cr_assert(again.reused && again.finished);
    cr_assert_eq(again.n_points, whole.n_points);
    cr_assert_eq(again.val_loss, whole.val_loss);
    cr_assert_str_eq(again.dir, whole.dir);

    /* a changed setting is another run in another directory */
    tmm_exp_run changed;
    tiny_run(&changed, 8);
    H_OK(tmm_exp_run_train(h_dev, da, &changed, NULL, true));
    cr_assert(!changed.reused && changed.finished);
    cr_assert_eq(changed.steps, 8);
    cr_assert_str_neq(changed.dir, whole.dir);

    /* a directory whose settings.json differs from its name's settings is refused */
    append(whole.dir, "settings.json", "tampered\n");
    tmm_exp_run_free(&again);
    tiny_run(&again, 12);
    cr_assert_eq(tmm_exp_run_train(h_dev, da, &again, NULL, true), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "other settings"), "%s", tmm_last_error());

    /* a curve that is not ours is refused, naming the line */
    append(changed.dir, "curve.jsonl", "{\"step\": \"x\"}\n");
    cr_assert_eq(tmm_exp_read_curve(changed.dir, UINT64_MAX, &changed), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "line 3"), "%s", tmm_last_error());

    tmm_exp_run_free(&whole), tmm_exp_run_free(&parts), tmm_exp_run_free(&again), tmm_exp_run_free(&changed);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", da, db);
    cr_assert_eq(system(cmd), 0);
}

Test(experiment, registry_names_each_experiment_with_claim_and_presets)
{
    static const char *const built[] = { "copy", "efficiency", "retention", "capacity", "recall", "index" };
    for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) {
        const tmm_experiment *e = tmm_experiment_find(built[i]);
        cr_assert_not_null(e, "no experiment %s", built[i]);
        cr_assert(e->title && e->claim && e->run, "%s", built[i]);
        for (int p = 0; p < TMM_EXP_PRESET_COUNT; p++)
            cr_assert(e->presets[p] && *e->presets[p], "%s preset %d", built[i], p);
    }
    cr_assert(strstr(tmm_experiment_find("recall")->claim, "competitive on recall"));
    cr_assert_null(tmm_experiment_find("nope"));
}

/* ---- the learning-rate sweep (lr_sweep.h) ---------------------------------- */

Test(lr_sweep, grid_is_sorted_and_bad_lists_refused)
{
    double r[TMM_EXP_MAX_RATES];
    uint32_t n;
    cr_assert_eq(tmm_exp_lr_grid_parse("1e-3,1e-4,3e-4", r, &n), TMM_OK);
    cr_assert_eq(n, 3);
    cr_assert(r[0] == 1e-4 && r[1] == 3e-4 && r[2] == 1e-3);
    cr_assert_eq(tmm_exp_lr_grid_parse("0.5", r, &n), TMM_OK);
    cr_assert(n == 1 && r[0] == 0.5);
    static const char *const bad[] = { "", ",", "1e-3,", "0", "-1e-3", "2", "nan", "1e-3,1e-3", "abc", "1e-3;2e-3",
                                       "1e-4,2e-4,3e-4,4e-4,5e-4,6e-4,7e-4,8e-4,9e-4" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_eq(tmm_exp_lr_grid_parse(bad[i], r, &n), TMM_ERR_INVALID_ARGUMENT, "'%s' accepted", bad[i]);
}

Test(lr_sweep, best_is_the_smallest_finite_loss)
{
    cr_assert_eq(exp_sweep_best((const double[]){ 3.1, 2.5, 2.7 }, 3), 1);
    cr_assert_eq(exp_sweep_best((const double[]){ 2.0, 2.0, 3.0 }, 3), 0, "a tie goes to the lower rate");
    cr_assert_eq(exp_sweep_best((const double[]){ NAN, 5.0, INFINITY, -INFINITY }, 4), 1);
    cr_assert_eq(exp_sweep_best((const double[]){ INFINITY, NAN }, 2), -1);
}

/* The fake experiment: each (architecture, rate) has a known held-out loss;
 * a negative one is a run that diverged although its curve looked best. */
static const double fake_rates[] = { 1e-4, 3e-4, 1e-3 };
static const struct {
    const char *arch;
    double loss[3];
} fake_losses[] = {
    { "tmm", { 3.0, 2.5, 2.8 } },        /* the middle */
    { "hyena", { 3.2, -0.1, 3.1 } },     /* the lowest curve diverged: the highest rate */
    { "mamba2", { -1.0, -1.0, -1.0 } },  /* all diverged: its default */
};
static uint32_t fake_calls;

static tmm_status fake_train(tmm_device *dev, const char *exp_dir, tmm_exp_run *run, volatile sig_atomic_t *stop,
                             bool quiet)
{
    (void)dev, (void)exp_dir, (void)stop, (void)quiet;
    fake_calls++;
    cr_assert(run->may_diverge, "a sweep run may diverge");
    cr_assert_eq(run->config.steps, 100, "half the budget");
    cr_assert_eq(run->config.schedule.warmup_steps, 10, "half the warmup");
    for (size_t a = 0; a < sizeof fake_losses / sizeof *fake_losses; a++)
        for (int k = 0; k < 3; k++)
            if (run->config.model.arch == exp_arch(fake_losses[a].arch) &&
                run->config.schedule.peak_lr == fake_rates[k]) {
                const double l = fake_losses[a].loss[k];
                run->points = calloc(1, sizeof *run->points);
                run->n_points = 1;
                run->points[0] = (tmm_exp_point){ .step = 100, .loss = fabs(l), .val_loss = fabs(l) };
                run->steps = 100;
                run->diverged = l < 0;
                run->val_loss = l < 0 ? NAN : l;
                run->finished = true;
                snprintf(run->dir, sizeof run->dir, "/fake/runs/%s", run->name);
                return TMM_OK;
            }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no fake loss for %s", run->name);
}

static tmm_status fake_build(const void *user, tmm_arch arch, tmm_exp_run *r)
{
    (void)user;
    memset(r, 0, sizeof *r);
    tmm_train_config_default(&r->config);
    r->config.model.arch = arch;
    r->config.steps = 200, r->config.schedule.warmup_steps = 20;
    r->config.schedule.peak_lr = 7e-4;
    return TMM_OK;
}

Test(lr_sweep, fake_experiment_chooses_the_argmin_never_a_diverged_rate)
{
    tmm_exp_options o = { .quiet = true };
    tmm_exp_outcome out = { 0 };
    exp_ctx x = { .train = fake_train, .o = &o, .device = "fake", .out = &out };
    exp_sweep sw = { .n_rates = 3, .setting = "the fake's", .criterion = "known losses", .build = fake_build,
                     .judge = exp_sweep_val_loss };
    memcpy(sw.rates, fake_rates, sizeof fake_rates);
    for (size_t a = 0; a < sizeof fake_losses / sizeof *fake_losses; a++)
        sw.archs[sw.n_archs++] = exp_arch(fake_losses[a].arch);
    fake_calls = 0;
    H_OK(exp_sweep_run(&x, &sw));
    cr_assert(sw.done && !out.interrupted);
    cr_assert_eq(fake_calls, 9);
    cr_assert_eq(out.runs, 9);
    cr_assert_eq(sw.best[0], 1);
    cr_assert_eq(sw.best[1], 2);
    cr_assert_eq(sw.best[2], -1);
    cr_assert(isinf(sw.loss[1][1]), "a diverged run's loss is infinite, whatever its curve said");
    cr_assert_eq(exp_sweep_lr(&sw, exp_arch("tmm"), 7e-4), 3e-4);
    cr_assert_eq(exp_sweep_lr(&sw, exp_arch("hyena"), 7e-4), 1e-3);
    cr_assert_eq(exp_sweep_lr(&sw, exp_arch("mamba2"), 7e-4), 7e-4, "every rate diverged: the default");
    cr_assert_eq(exp_sweep_lr(&sw, exp_arch("transformer"), 2e-4), 2e-4, "not swept");
    cr_assert_eq(sw.default_lr[0], 7e-4);

    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    exp_sweep_report(f, &sw);
    fclose(f);
    cr_assert(strstr(buf, "## Learning-rate sweep"), "%s", buf);
    cr_assert(strstr(buf, "| tmm | 0.0007 | 3.0000 | **2.5000** | 2.8000 | 0.0003 |"), "%s", buf);
    cr_assert(strstr(buf, "| hyena | 0.0007 | 3.2000 | diverged | **3.1000** | 0.001 | the grid's highest"), "%s",
              buf);
    cr_assert(strstr(buf, "| mamba2 | 0.0007 | diverged | diverged | diverged | 0.0007 | every rate diverged"), "%s",
              buf);
    free(buf);

    cJSON *root = cJSON_CreateObject();
    exp_sweep_json(root, &sw);
    const cJSON *archs = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "lr_sweep"), "archs");
    cr_assert_eq(cJSON_GetArraySize(archs), 3);
    const cJSON *hy = cJSON_GetArrayItem(archs, 1);
    cr_assert_eq(cJSON_GetObjectItem(hy, "chosen_lr")->valuedouble, 1e-3);
    cr_assert(cJSON_IsNull(cJSON_GetArrayItem(cJSON_GetObjectItem(hy, "held_out_loss"), 1)));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(archs, 2), "all_diverged")));
    cJSON_Delete(root);
    exp_sweep_free(&sw);
}

/* The real trainer, stopped (as by SIGTERM) after the sweep's first run. */
static volatile sig_atomic_t sweep_stop;
static bool stop_after_a_run;

static tmm_status train_then_stop(tmm_device *dev, const char *exp_dir, tmm_exp_run *run, volatile sig_atomic_t *stop,
                                  bool quiet)
{
    tmm_status s = tmm_exp_run_train(dev, exp_dir, run, stop, quiet);
    if (stop_after_a_run)
        sweep_stop = 1;
    return s;
}

static tmm_status tiny_build(const void *user, tmm_arch arch, tmm_exp_run *r)
{
    (void)user;
    tiny_run(r, 12);
    r->config.model.arch = arch;
    return TMM_OK;
}

static void tiny_sweep(exp_ctx *x, exp_sweep *sw, const char *dir)
{
    memset(x->out, 0, sizeof *x->out);
    snprintf(x->out->dir, sizeof x->out->dir, "%s", dir);
    *sw = (exp_sweep){ .n_rates = 2, .rates = { 1e-3, 3e-3 }, .n_archs = 1, .archs = { exp_arch("tmm") },
                       .setting = "tiny copy", .criterion = "validation loss", .build = tiny_build,
                       .judge = exp_sweep_val_loss };
    H_OK(exp_sweep_run(x, sw));
}

H_TEST(lr_sweep, interrupted_sweep_resumes_and_reuses_its_finished_runs)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    tmm_exp_options o = { .quiet = true, .stop = &sweep_stop };
    tmm_exp_outcome out;
    exp_ctx x = { .dev = h_dev, .train = train_then_stop, .o = &o, .device = "test", .out = &out };
    exp_sweep sw;

    /* stopped after the first run: nothing chosen yet */
    sweep_stop = 0, stop_after_a_run = true;
    tiny_sweep(&x, &sw, dir);
    cr_assert(out.interrupted && !sw.done);
    cr_assert_eq(out.runs, 1);
    cr_assert(sw.runs[0].finished && !sw.runs[0].reused);
    exp_sweep_free(&sw);

    /* rerun: the finished run is reused, the other trained */
    sweep_stop = 0, stop_after_a_run = false;
    tiny_sweep(&x, &sw, dir);
    cr_assert(!out.interrupted && sw.done);
    cr_assert_eq(out.runs, 2);
    cr_assert_eq(out.reused, 1);
    cr_assert(sw.runs[0].reused && !sw.runs[1].reused);
    cr_assert_eq(sw.runs[1].steps, 6, "half of the 12 steps");
    cr_assert(isfinite(sw.loss[0][0]) && isfinite(sw.loss[0][1]));
    const int best = sw.best[0];
    const double loss[2] = { sw.loss[0][0], sw.loss[0][1] };
    cr_assert_eq(best, exp_sweep_best(loss, 2));
    exp_sweep_free(&sw);

    /* again: everything reused, the same choice */
    tiny_sweep(&x, &sw, dir);
    cr_assert_eq(out.reused, 2);
    cr_assert_eq(sw.best[0], best);
    cr_assert(sw.loss[0][0] == loss[0] && sw.loss[0][1] == loss[1]);

    /* a run recorded as diverged is reused as diverged and never chosen */
    char path[TMM_EXP_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/result.json", sw.runs[best].dir);
    char *text;
    size_t size;
    H_OK(tmm_read_file(path, "result", 4096, (void **)&text, &size));
    char *flag = strstr(text, "\"diverged\": false");
    cr_assert_not_null(flag, "%s", text);
    memcpy(flag + 12, "true ", 5);
    H_OK(tmm_write_file_atomic(path, text, size));
    exp_sweep_free(&sw);
    tiny_sweep(&x, &sw, dir);
    cr_assert_eq(out.reused, 2);
    cr_assert(sw.runs[best].diverged && isinf(sw.loss[0][best]));
    cr_assert_eq(sw.best[0], 1 - best);
    memcpy(flag + 12, "0    ", 5); /* not a boolean: refused */
    H_OK(tmm_write_file_atomic(path, text, size));
    free(text);
    exp_sweep_free(&sw);
    memset(&out, 0, sizeof out);
    snprintf(out.dir, sizeof out.dir, "%s", dir);
    sw = (exp_sweep){ .n_rates = 2, .rates = { 1e-3, 3e-3 }, .n_archs = 1, .archs = { exp_arch("tmm") },
                      .build = tiny_build, .judge = exp_sweep_val_loss };
    cr_assert_eq(exp_sweep_run(&x, &sw), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "result.json"), "%s", tmm_last_error());
    exp_sweep_free(&sw);

    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* The held-out data of text's sweep: windows of the final runs' training
 * split that the sweep does not train on, just before the final held-out part. */
Test(lr_sweep, text_sweep_holds_out_windows_before_the_final_evaluations)
{
    char dir[64], file[96];
    temp_dir(dir, sizeof dir);
    snprintf(file, sizeof file, "%s/text.txt", dir);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 700; i++)
        fprintf(f, "line %d of the sweep's text.\n", i);
    fclose(f);
    tmm_train_config c;
    tmm_train_config_default(&c);
    c.task = TMM_DATA_TEXT;
    c.text_files[c.text_file_count++] = strdup(file);
    c.model.n_ctx = 32, c.batch = 4, c.eval_batches = 3;
    tmm_train_config sweep = c; /* shallow: the same file name */
    H_OK(exp_sweep_text_split(&sweep));
    tmm_data *final_data, *sweep_data;
    H_OK(tmm_train_prepare(&c, &final_data));
    H_OK(tmm_train_prepare(&sweep, &sweep_data));
    const tmm_data_info *fi = tmm_data_get_info(final_data), *si = tmm_data_get_info(sweep_data);
    const uint64_t N = fi->train_tokens + fi->val_tokens, n = 32, rows = 3 * 4;
    cr_assert_eq(si->train_tokens + si->val_tokens, N);
    cr_assert(si->train_tokens < fi->train_tokens, "the sweep trains on less");
    /* the sweep's evaluations read rows 0 .. rows-1: windows of n + 1 from its held-out start */
    const uint64_t start = si->train_tokens, end = start + (rows - 1) * n + n + 1;
    cr_assert(end <= fi->train_tokens, "the sweep's held-out windows [%llu, %llu) reach the final held-out part "
              "from %llu", (unsigned long long)start, (unsigned long long)end, (unsigned long long)fi->train_tokens);
    cr_assert(fi->train_tokens - end < n + 2, "just before it");
    cr_assert_geq(tmm_data_val_rows(sweep_data), rows, "no wrapping around");
    tmm_data_destroy(final_data);
    tmm_data_destroy(sweep_data);

    c.text_mode = TMM_TEXT_DOCUMENTS;
    sweep = c;
    cr_assert_eq(exp_sweep_text_split(&sweep), TMM_ERR_INVALID_ARGUMENT, "document mode's split does not move");
    tmm_train_config_free(&c);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
