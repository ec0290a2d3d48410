/* The benchmarks as a library (src/bench): each bench of tmm bench called on
 * a tiny shape, its result's fields sane (positive times, the counts asked
 * for, memory that adds up) and its JSON parsed, with the keys that
 * `tmm bench NAME --json` has always printed (tests/cli_test.sh reads them
 * through the command). The values themselves are measurements: no test
 * checks a speed (DEVELOPERS.md: performance is measured by tmm bench). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "harness.h"
#include "model/arch.h"

/* Parses text (and frees it); fails the test unless it is JSON. */
static cJSON *parse_json(char *text)
{
    cr_assert_not_null(text, "no JSON: %s", tmm_last_error());
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root, "not JSON: %s", text);
    free(text);
    return root;
}

/* Every key of the NULL-ended list is in o. */
static void has_keys(const cJSON *o, const char *const *keys)
{
    cr_assert(cJSON_IsObject(o));
    for (; *keys; keys++)
        cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(o, *keys), "no \"%s\" in the JSON", *keys);
}

static double number(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_assert(cJSON_IsNumber(v), "\"%s\" is not a number", key);
    return v->valuedouble;
}

Test(bench, median_and_heads)
{
    double odd[] = { 3, 1, 2 }, even[] = { 4, 1, 3, 2 };
    cr_assert_eq(tmm_bench_median(odd, 3), 2);
    cr_assert_eq(tmm_bench_median(even, 4), 2.5);
    tmm_model_config c = tmm_model_config_default();
    c.arch = TMM_ARCH_HYENA;
    tmm_bench_set_heads(&c, 4, true);
    cr_assert_eq(c.heads, 0, "Hyena has no heads");
    c.arch = TMM_ARCH_MAMBA2;
    tmm_bench_set_heads(&c, 4, false);
    cr_assert_eq(c.heads, 0, "Mamba 2 resolves its own heads unless given");
    tmm_bench_set_heads(&c, 4, true);
    cr_assert_eq(c.heads, 4);
}

H_TEST(bench, matmul)
{
    tmm_bench_matmul_opts o = { .desc = { .m = 33, .n = 17, .k = 9, .batch = 1, .trans_b = true },
                                .variants = { TMM_MATMUL_REGISTER, TMM_MATMUL_TILED },
                                .n_variants = 2,
                                .repeat = 2 };
    tmm_bench_matmul_result r;
    H_OK(tmm_bench_matmul(h_dev, &o, &r));
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(r.rows[i].variant, o.variants[i]);
        cr_assert_eq(r.rows[i].repeat, 2);
        cr_assert(r.rows[i].ms > 0, "variant %d: %g ms", i, r.rows[i].ms);
        cr_assert(r.rows[i].max_error < 1e-4, "variant %d: error %g", i, r.rows[i].max_error);
    }
    cJSON *root = parse_json(tmm_bench_matmul_json(h_dev, &o, &r));
    cr_assert_eq(cJSON_GetArraySize(root), 2);
    static const char *const keys[] = { "bench", "variant", "m", "n", "k", "trans_a", "trans_b", "repeat",
                                        "ms", "gflops", "timing", "device", NULL };
    has_keys(cJSON_GetArrayItem(root, 0), keys);
    cr_assert_eq(number(cJSON_GetArrayItem(root, 1), "m"), 33);
    cr_assert(number(cJSON_GetArrayItem(root, 1), "gflops") > 0);
    cJSON_Delete(root);

    /* auto: what the device resolves it to, and a repeat count sized from a timed run */
    o.variants[0] = TMM_MATMUL_AUTO, o.n_variants = 1, o.repeat = 0;
    H_OK(tmm_bench_matmul(h_dev, &o, &r));
    cr_assert(r.rows[0].repeat >= TMM_BENCH_MATMUL_MIN_AUTO_REPEAT && r.rows[0].repeat <= TMM_BENCH_MATMUL_MAX_AUTO_REPEAT);
    root = parse_json(tmm_bench_matmul_json(h_dev, &o, &r));
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(root, 0), "resolved")->valuestring,
                     tmm_bench_matmul_resolved(h_dev));
    cJSON_Delete(root);
}

typedef struct events {
    int measured, skipped, failed;
} events;

static void count_event(void *user, const tmm_bench_mixer_event *e)
{
    events *ev = user;
    ev->measured += e->kind == TMM_BENCH_MIXER_MEASURED;
    ev->skipped += e->kind == TMM_BENCH_MIXER_SKIPPED;
    ev->failed += e->kind == TMM_BENCH_MIXER_FAILED;
    if (e->kind == TMM_BENCH_MIXER_MEASURED)
        cr_assert_eq(e->row->impl, e->impl);
}

H_TEST(bench, mixer)
{
    /* one length, every implementation */
    tmm_bench_mixer_opts o = { .d = 16, .heads = 2, .batch = 1, .window = 8, .only_n = 64, .cap_s = 20, .repeat = 1,
                               .wanted = { true, true, true, true, true, true } };
    tmm_bench_mixer_result *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    events ev = { 0 };
    H_OK(tmm_bench_mixer(h_dev, &o, count_event, &ev, r));
    cr_assert_eq(r->count, TMM_BENCH_MIXER_IMPLS, "%d rows (%d failed)", r->count, r->failed);
    cr_assert_eq(ev.measured, TMM_BENCH_MIXER_IMPLS);
    cr_assert_eq(ev.skipped + ev.failed + r->skipped + r->failed, 0);
    for (int i = 0; i < r->count; i++) {
        const tmm_bench_mixer_row *row = &r->rows[i];
        cr_assert_eq(row->impl, i);
        cr_assert_eq(row->n, 64);
        cr_assert(row->fwd_ms > 0 && row->fwd_bwd_ms > 0, "%s: %g, %g ms", tmm_bench_mixer_impl_names[i],
                  row->fwd_ms, row->fwd_bwd_ms);
        cr_assert(row->peak_bytes >= 4 * 64 * 16, "%s: %llu bytes", tmm_bench_mixer_impl_names[i],
                  (unsigned long long)row->peak_bytes);
        cr_assert(isnan(tmm_bench_mixer_exponent(r, i, 0)), "one point has no slope");
    }
    cJSON *root = parse_json(tmm_bench_mixer_json(h_dev, &o, r));
    static const char *const keys[] = { "device", "d", "heads", "batch", "window", "rows", "fit_from", "exponents",
                                        NULL };
    has_keys(root, keys);
    const cJSON *rows = cJSON_GetObjectItem(root, "rows");
    cr_assert_eq(cJSON_GetArraySize(rows), TMM_BENCH_MIXER_IMPLS);
    static const char *const row_keys[] = { "impl", "n", "fwd_ms", "fwd_bwd_ms", "peak_bytes", NULL };
    has_keys(cJSON_GetArrayItem(rows, 0), row_keys);
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 5), "impl")->valuestring, "linear");
    cJSON_Delete(root);

    /* a series: n = 256, 512 of the direct op, its slope, the plot */
    o = (tmm_bench_mixer_opts){ .d = 16, .heads = 2, .batch = 1, .window = 8, .max_n = 512, .cap_s = 20,
                                .repeat = 1, .fit_from = 256, .wanted = { [TMM_BENCH_MIXER_DIRECT] = true } };
    H_OK(tmm_bench_mixer(h_dev, &o, NULL, NULL, r));
    cr_assert_eq(r->count, 2);
    cr_assert_eq(r->rows[1].n, 512);
    cr_assert(isfinite(tmm_bench_mixer_exponent(r, TMM_BENCH_MIXER_DIRECT, 256)));
    char svg[] = "/tmp/tmm-bench-XXXXXX";
    int fd = mkstemp(svg);
    cr_assert(fd >= 0);
    close(fd);
    H_OK(tmm_bench_mixer_svg(svg, &o, r));
    FILE *f = fopen(svg, "r");
    char text[4096] = { 0 };
    cr_assert_not_null(f);
    cr_assert(fread(text, 1, sizeof text - 1, f) > 0);
    fclose(f);
    unlink(svg);
    cr_assert_not_null(strstr(text, "<polyline"), "no curve in the plot");
    cr_assert_neq(tmm_bench_mixer_svg("/nonexistent/dir/x.svg", &o, r), TMM_OK);
    cr_assert_not_null(strstr(tmm_last_error(), "cannot write plot /nonexistent/dir/x.svg"));
    o.repeat = TMM_BENCH_MIXER_MAX_REPEAT + 1;
    cr_assert_eq(tmm_bench_mixer(h_dev, &o, NULL, NULL, r), TMM_ERR_INVALID_ARGUMENT);
    free(r);
}

/* The tiny model of the training benches. */
static void tiny_train(tmm_train_config *c)
{
    tmm_train_config_default(c);
    c->model.d_model = 16, c->model.n_ctx = 16, c->model.n_layers = 1, c->model.vocab = 16;
    c->batch = 2, c->accum = 1;
    tmm_model_config_resolve(&c->model);
    H_OK(tmm_model_config_check(&c->model));
}

H_TEST(bench, train)
{
    tmm_train_config c;
    tiny_train(&c);
    tmm_bench_train_report r;
    H_OK(tmm_bench_train(h_dev, &c, NULL, 2, &r));
    const tmm_bench_train_result *res = &r.res;
    cr_assert_eq(r.steps, 2);
    cr_assert_eq(r.ranks, 1);
    cr_assert(res->tokens_per_s > 0 && res->ms_per_step > 0 && res->cpu_ms_per_step > 0);
    cr_assert_eq(res->comm_ms_per_step, 0, "one process sums nothing");
    cr_assert_eq(r.total_tokens_per_s, res->tokens_per_s);
    cr_assert_eq(r.rank_tokens_per_s[0], res->tokens_per_s);
    cr_assert(r.mem.total > 0 && r.mem.optimizer > 0);
    if (res->timed) { /* the device has timestamps: the profile adds up */
        double sum = 0;
        bool adamw = false;
        cr_assert(res->n_ops > 3);
        for (int i = 0; i < res->n_ops; i++) {
            cr_assert(res->ops[i].ms >= 0 && res->ops[i].name[0]);
            sum += res->ops[i].ms;
            adamw = adamw || strcmp(res->ops[i].name, "adamw") == 0;
        }
        cr_assert(adamw, "no adamw in the profile");
        cr_assert(fabs(sum - res->device_ms) <= 1e-9 * res->device_ms + 1e-12);
        /* the roofline: every op records commands and binds bytes; the matmuls declare 2 m n k */
        double flops = 0;
        uint32_t commands = 0;
        for (int i = 0; i < res->n_ops; i++) {
            cr_assert(res->ops[i].commands > 0 && res->ops[i].bytes > 0, "op %s records nothing", res->ops[i].name);
            flops += strncmp(res->ops[i].name, "matmul", 6) == 0 ? res->ops[i].flops : 0;
            commands += res->ops[i].commands;
        }
        cr_assert(flops > 0, "the matmuls declare no FLOPs");
        cr_assert(commands <= res->commands_per_step);
        cr_assert(r.peaks.copy_gbs > 0 && r.peaks.matmul_gflops > 0);
        tmm_bench_peaks_result again; /* kept by the device: the same figures, not measured again */
        H_OK(tmm_bench_peaks(h_dev, &again));
        cr_assert(again.copy_gbs == r.peaks.copy_gbs && again.matmul_gflops == r.peaks.matmul_gflops);
    }
    cJSON *root = parse_json(tmm_bench_train_json(h_dev, &c, &r));
    static const char *const keys[] = { "device", "model", "batch", "steps", "tokens_per_s", "ms_per_step",
                                        "cpu_ms_per_step", "memory_bytes", "commands_per_step", "ops", NULL };
    static const char *const model_keys[] = { "arch", "vocab", "d_model", "n_ctx", "n_layers", "heads", "params",
                                              NULL };
    has_keys(root, keys);
    has_keys(cJSON_GetObjectItem(root, "model"), model_keys);
    cr_assert_null(cJSON_GetObjectItem(root, "ranks"), "one process: no ranks");
    cr_assert_eq(number(root, "steps"), 2);
    cr_assert_eq(number(root, "memory_bytes"), (double)r.mem.total);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "ops")), res->timed ? res->n_ops : 0);
    cJSON_Delete(root);
    tmm_bench_train_report_free(&r);
    tmm_train_config_free(&c);
}

H_TEST(bench, generate)
{
    tmm_bench_generate_opts o = { .config = tmm_model_config_default(), .impl = TMM_TOEPLITZ_AUTO, .repeat = 2,
                                  .prompts = { 8, 32, 100 }, .n_prompts = 3,
                                  .positions = { 1, 40, 70 }, .n_positions = 3 };
    o.config.d_model = 16, o.config.n_ctx = 64, o.config.n_layers = 1, o.config.heads = 2, o.config.vocab = 32;
    tmm_model_config_resolve(&o.config);
    H_OK(tmm_model_config_check(&o.config));
    /* what fits the context of 64: prompts up to 64, positions up to 62, and 62 itself */
    cr_assert(tmm_bench_generate_fit(&o, false));
    cr_assert_eq(o.n_prompts, 2);
    cr_assert_eq(o.n_positions, 3);
    cr_assert_eq(o.positions[2], 62);
    tmm_bench_generate_result r;
    H_OK(tmm_bench_generate(h_dev, &o, &r));
    cr_assert_not(r.distilled);
    cr_assert_eq(r.speedup_at_1000, -1);
    cr_assert(r.commands_per_token >= o.config.n_layers, "a decode step records %u commands", r.commands_per_token);
    cr_assert_eq(r.distilled_commands_per_token, 0);
    for (unsigned i = 0; i < o.n_prompts; i++)
        cr_assert(r.first_token_ms[i] > 0);
    for (unsigned i = 0; i < o.n_positions; i++)
        cr_assert(r.cached_ms[i] > 0 && r.naive_ms[i] > 0, "position %u: %g, %g ms", o.positions[i], r.cached_ms[i],
                  r.naive_ms[i]);
    cJSON *root = parse_json(tmm_bench_generate_json(h_dev, &o, &r));
    static const char *const keys[] = { "device", "model", "arch", "first_token", "decode", "decode_speedup_at_1000",
                                        NULL };
    static const char *const decode_keys[] = { "position", "cached_ms", "naive_ms", "speedup", NULL };
    has_keys(root, keys);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(root, "decode_speedup_at_1000")));
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "first_token")), 2);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "decode")), 3);
    has_keys(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "decode"), 0), decode_keys);
    cr_assert_null(cJSON_GetObjectItem(root, "distilled_fidelity"));
    cr_assert_not_null(strstr(cJSON_GetObjectItem(root, "model")->valuestring, "random model (tmm): d 16"));
    cJSON_Delete(root);

    /* nothing fits a context shorter than every prompt and position */
    o.prompts[0] = 80, o.n_prompts = 1, o.positions[0] = 80, o.n_positions = 1;
    cr_assert_not(tmm_bench_generate_fit(&o, true));
}

static void count_row(void *user, const tmm_bench_arch_row *row)
{
    cr_assert(row->train.tokens_per_s > 0);
    ++*(int *)user;
}

H_TEST(bench, arch)
{
    tmm_bench_arch_opts o = { .d = 16, .n = 32, .layers = 1, .heads = 2, .window = 8, .batch = 2, .vocab = 16,
                              .steps = 1, .repeat = 2, .positions = { 1, 20 }, .np = 2 };
    o.selected[TMM_ARCH_TMM] = o.selected[TMM_ARCH_SWA] = true;
    tmm_bench_arch_result r;
    H_OK(tmm_bench_arch_models(&o, &r));
    cr_assert_eq(r.rows[TMM_ARCH_TMM].c.expansion, TMM_BENCH_ARCH_EXPANSION, "the TMM as given");
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        cr_assert_eq(r.rows[a].c.arch, (tmm_arch)a);
        cr_assert(r.rows[a].params > 0);
        cr_assert_eq(r.rows[a].params, tmm_model_param_count(&r.rows[a].c), "%s", tmm_arch_name((tmm_arch)a));
    }
    cr_assert_eq(r.rows[TMM_ARCH_SWA].c.window, 8);
    int rows = 0;
    H_OK(tmm_bench_arch(h_dev, &o, &r, count_row, &rows));
    cr_assert_eq(rows, 2, "a row reported as each is measured");
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        if (!o.selected[a])
            continue;
        const tmm_bench_arch_row *row = &r.rows[a];
        cr_assert(row->train.tokens_per_s > 0 && row->train.ms_per_step > 0, "%s", tmm_arch_name((tmm_arch)a));
        cr_assert(row->mem.total > 0);
        cr_assert(row->decode_ms[0] > 0 && row->decode_ms[1] > 0);
    }
    cJSON *root = parse_json(tmm_bench_arch_json(h_dev, &o, &r));
    static const char *const keys[] = { "device", "d_model", "n_ctx", "n_layers", "heads", "vocab", "window", "batch",
                                        "steps", "warmup_steps", "repeat", "archs", NULL };
    static const char *const arch_keys[] = { "arch", "params", "n_layers", "heads", "tokens_per_s", "ms_per_step",
                                             "cpu_ms_per_step", "memory_bytes", "memory", "decode", NULL };
    has_keys(root, keys);
    const cJSON *archs = cJSON_GetObjectItem(root, "archs");
    cr_assert_eq(cJSON_GetArraySize(archs), 2);
    has_keys(cJSON_GetArrayItem(archs, 0), arch_keys);
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(archs, 1), "arch")->valuestring, "swa");
    cr_assert_eq(number(cJSON_GetArrayItem(archs, 1), "window"), 8);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(archs, 0), "decode")), 2);
    cJSON_Delete(root);

    /* a bad model is refused before any device work, naming the architecture */
    o.d = 512;
    cr_assert_neq(tmm_bench_arch_models(&o, &r), TMM_OK);
    cr_assert_not_null(strstr(tmm_last_error(), "head width"), "%s", tmm_last_error());
}

H_TEST(bench, memory)
{
    tmm_train_config c;
    tiny_train(&c);
    const tmm_bench_memory_opts o = { .config = &c, .steps = 1, .limit = 1ull << 30 };
    tmm_bench_memory_result *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    H_OK(tmm_bench_memory(h_dev, &o, r));
    for (int i = 0; i < TMM_BENCH_MEMORY_ROWS; i++) {
        const tmm_bench_memory_row *row = &r->rows[i];
        const tmm_train_memory *p = &row->plan;
        cr_assert(p->total > 0 && p->model.params > 0 && p->optimizer > 0, "row %d", i);
        cr_assert(p->total >= p->model.params + p->model.grads + p->optimizer + p->model.activations, "row %d", i);
        cr_assert(row->peak > 0, "row %d: nothing measured", i);
        cr_assert(row->max_batch >= c.batch, "row %d: max batch %u", i, row->max_batch);
        cr_assert(row->train.tokens_per_s > 0, "row %d", i);
    }
    cJSON *root = parse_json(tmm_bench_memory_json(h_dev, &o, r));
    static const char *const keys[] = { "device", "memory_budget", "model", "batch", "limit_bytes", "steps", "rows",
                                        NULL };
    static const char *const row_keys[] = { "precision", "recompute", "params_grads", "optimizer", "activations",
                                            "workspace", "planned_bytes", "measured_peak_bytes", "heap_delta_bytes",
                                            "max_batch", "tokens_per_s", NULL };
    has_keys(root, keys);
    const cJSON *rows = cJSON_GetObjectItem(root, "rows");
    cr_assert_eq(cJSON_GetArraySize(rows), TMM_BENCH_MEMORY_ROWS);
    has_keys(cJSON_GetArrayItem(rows, 0), row_keys);
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 4), "precision")->valuestring, "fp16");
    cr_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 4), "recompute")->valuestring, "mixer");
    cr_assert_eq(number(root, "limit_bytes"), (double)(1ull << 30));
    cJSON_Delete(root);
    free(r);
    tmm_train_config_free(&c);
}
