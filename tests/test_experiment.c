/* tmm experiment's pieces: the SVG charts, and the runs' results
 * directories (settings keys, resumption, reuse). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/svg.h"
#include "experiment/experiment.h"
#include "experiment/results.h"
#include "files.h"
#include "harness.h"

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
