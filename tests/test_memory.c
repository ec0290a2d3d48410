/* Device memory: the budget query, the runtime's allocation counters, the
 * plan against what a model and its optimizer hold, and --max-memory's
 * refusal with its advice, for every precision and recomputation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "train/optim.h"
#include "train/trainer.h"

H_TEST(memory_budget, is_the_drivers_or_the_heap_and_this_devices_blocks)
{
    const tmm_device_info *info = tmm_device_get_info(h_dev);
    tmm_memory_budget b;
    tmm_device_memory_budget(h_dev, &b);
    cr_assert_lt(b.heap, info->heap_count);
    cr_assert(info->heaps[b.heap].device_local);
    for (uint32_t i = 0; i < info->heap_count; i++)
        cr_assert(!info->heaps[i].device_local || info->heaps[i].size <= info->heaps[b.heap].size);
    cr_assert_eq(b.reported, info->memory_budget);
    tmm_buffer *buf = h_buffer(NULL, 1 << 18);
    tmm_memory_budget after;
    tmm_device_memory_budget(h_dev, &after);
    if (b.reported) {
        cr_assert_gt(after.budget, 0);
    } else {
        tmm_memory_stats st;
        tmm_device_memory_stats(h_dev, &st);
        cr_assert_eq(after.budget, info->heaps[b.heap].size);
        cr_assert_geq(after.usage, b.usage + (1u << 20), "usage %llu after a 1 MiB buffer, %llu before",
                      (unsigned long long)after.usage, (unsigned long long)b.usage);
        cr_assert_leq(after.usage, st.block_bytes);
    }
    tmm_buffer_destroy(buf);
}

H_TEST(memory_counters, follow_buffer_sizes_exactly)
{
    tmm_memory_stats st0, st;
    tmm_device_memory_stats(h_dev, &st0);
    tmm_device_memory_reset_peak(h_dev);
    const uint64_t sizes[] = { 4, 1000, 123457, 3u << 20 };
    tmm_buffer *b[4];
    uint64_t sum = 0;
    for (int i = 0; i < 4; i++) {
        H_OK(tmm_buffer_create(h_dev, sizes[i], i % 2 ? TMM_MEMORY_HOST : TMM_MEMORY_DEVICE, &b[i]));
        sum += sizes[i];
        tmm_device_memory_stats(h_dev, &st);
        cr_assert_eq(st.used_bytes, st0.used_bytes + sum);
        cr_assert_eq(st.peak_bytes, st0.used_bytes + sum);
    }
    tmm_buffer_destroy(b[3]);
    tmm_buffer_destroy(b[1]);
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.used_bytes, st0.used_bytes + sizes[0] + sizes[2]);
    cr_assert_eq(st.peak_bytes, st0.used_bytes + sum, "the peak stays");
    tmm_device_memory_reset_peak(h_dev);
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.peak_bytes, st.used_bytes, "a reset starts from what is held");
    tmm_buffer_destroy(b[0]);
    tmm_buffer_destroy(b[2]);
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.used_bytes, st0.used_bytes);
    cr_assert_eq(st.peak_bytes, st0.used_bytes + sizes[0] + sizes[2]);
}

static void small_run(tmm_train_config *c, const char *dir)
{
    tmm_train_config_default(c);
    c->model.vocab = 16;
    c->model.d_model = 16;
    c->model.n_ctx = 16;
    c->model.n_layers = 4; /* with one layer there is nothing to keep or recompute */
    c->batch = 8;
    c->steps = 1;
    c->eval_every = 0;
    c->log_every = 0;
    c->target_accuracy = 0;
    c->toeplitz_impl = TMM_TOEPLITZ_DIRECT;
    snprintf(c->run_dir, sizeof c->run_dir, "%s", dir);
}

/* Every (precision, recompute) the plan is checked against. */
static const struct {
    tmm_precision precision;
    tmm_recompute recompute;
} combos[] = {
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE },  { TMM_PRECISION_FP16, TMM_RECOMPUTE_NONE },
    { TMM_PRECISION_BF16, TMM_RECOMPUTE_NONE },  { TMM_PRECISION_FP32, TMM_RECOMPUTE_MIXER },
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_BLOCK }, { TMM_PRECISION_FP16, TMM_RECOMPUTE_MIXER },
    { TMM_PRECISION_FP16, TMM_RECOMPUTE_BLOCK },
};

/* The model holds what its plan counts, buffer for buffer; the optimizer
 * what tmm_optim_memory says; together, the run's plan. */
H_TEST(memory_plan, equals_what_the_model_and_optimizer_hold)
{
    tmm_train_config c;
    small_run(&c, "/nonexistent");
    tmm_model_config_resolve(&c.model);
    int checked = 0;
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        c.precision = combos[i].precision;
        c.recompute = combos[i].recompute;
        tmm_train_memory plan;
        H_OK(tmm_train_memory_plan(h_dev, &c, &plan));
        tmm_memory_stats st0, st1, st2;
        tmm_device_memory_stats(h_dev, &st0);
        tmm_model *m;
        tmm_optim *o;
        const tmm_model_options opts = tmm_train_model_options(&c);
        H_OK(tmm_model_create_opts(h_dev, &c.model, c.batch, &opts, &m));
        tmm_device_memory_stats(h_dev, &st1);
        H_OK(tmm_optim_create(h_dev, tmm_model_table(m), &c.optim, &o));
        tmm_device_memory_stats(h_dev, &st2);
        cr_assert_eq(st1.used_bytes - st0.used_bytes, plan.model.total, "combo %zu: the model holds %llu, plans %llu",
                     i, (unsigned long long)(st1.used_bytes - st0.used_bytes),
                     (unsigned long long)plan.model.total);
        cr_assert_eq(st2.used_bytes - st1.used_bytes, plan.optimizer, "optimizer holds %llu, plans %llu", (unsigned long long)(st2.used_bytes - st1.used_bytes), (unsigned long long)plan.optimizer);
        cr_assert_eq(st2.used_bytes - st0.used_bytes, plan.total);
        tmm_optim_destroy(o);
        tmm_model_destroy(m);
        checked++;
    }
    cr_assert_eq(checked, (int)(sizeof combos / sizeof combos[0]));
    tmm_train_config_free(&c);
}

/* Each case: the limit is the plan of these options, and the advice names them. */
static const struct {
    tmm_precision precision;
    tmm_recompute recompute;
    uint32_t accum;
    const char *flags;
} advice_cases[] = {
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE, 2, "--accum 2" },
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE, 8, "--accum 8" },
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_MIXER, 1, "--recompute mixer" },
    { TMM_PRECISION_FP16, TMM_RECOMPUTE_NONE, 1, "--precision fp16" },
    { TMM_PRECISION_FP16, TMM_RECOMPUTE_BLOCK, 1, "--precision fp16 --recompute block" },
};

/* The advice offers these flags, first ("FLAGS fits (") or later ("or FLAGS ("). */
static bool offers(const char *advice, const char *flags)
{
    char first[96], later[96];
    snprintf(first, sizeof first, "%s fits (", flags);
    snprintf(later, sizeof later, "or %s (", flags);
    return strncmp(advice, first, strlen(first)) == 0 || strstr(advice, later);
}

H_TEST(memory_advice, names_what_fits)
{
    tmm_train_config c;
    small_run(&c, "/nonexistent");
    tmm_model_config_resolve(&c.model);
    char advice[600];
    for (size_t i = 0; i < sizeof advice_cases / sizeof advice_cases[0]; i++) {
        tmm_train_config t = c;
        t.precision = advice_cases[i].precision;
        t.recompute = advice_cases[i].recompute;
        t.accum = advice_cases[i].accum;
        tmm_train_memory plan;
        H_OK(tmm_train_memory_plan(h_dev, &t, &plan));
        tmm_train_memory_advice(h_dev, &c, plan.total, advice, sizeof advice);
        cr_assert(offers(advice, advice_cases[i].flags), "case %zu: '%s' does not offer '%s'", i, advice,
                  advice_cases[i].flags);
    }
    tmm_train_memory_advice(h_dev, &c, 1, advice, sizeof advice);
    cr_assert(strncmp(advice, "nothing fits: even ", 19) == 0 && strstr(advice, "--accum 8") &&
              strstr(advice, "use a smaller model"), "%s", advice);
    tmm_train_config_free(&c);
}

H_TEST(memory_limit, refuses_before_anything_is_made_and_accepts_what_fits)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tmm-memory-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    char run[96];
    snprintf(run, sizeof run, "%s/run", dir);
    tmm_train_config c;
    small_run(&c, run);
    c.max_memory_gib = 0.0001; /* 105 KiB: the model alone plans more */
    tmm_memory_stats st0, st;
    tmm_device_memory_stats(h_dev, &st0);
    tmm_device_memory_reset_peak(h_dev);
    tmm_train_result r;
    cr_assert_eq(tmm_train(h_dev, &c, NULL, NULL, &r), TMM_ERR_OUT_OF_DEVICE_MEMORY);
    const char *msg = tmm_last_error();
    cr_assert(strstr(msg, "more than --max-memory 0.0001 GiB: ") && strstr(msg, "parameters ") &&
              strstr(msg, "AdamW moments ") && strstr(msg, "activations ") && strstr(msg, "workspace ") &&
              strstr(msg, "--accum "), "%s", msg);
    cr_assert_null(strchr(msg, '\n'), "one line: %s", msg);
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.peak_bytes, st0.used_bytes, "nothing was allocated before the refusal");
    struct stat sb;
    cr_assert_neq(stat(run, &sb), 0, "the run directory was made");

    c.max_memory_gib = 1;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &r));
    cr_assert_eq(r.step, 1);
    tmm_train_config_free(&c);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
