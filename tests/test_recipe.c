/* Training recipes (--recipe, model/arch.h): the parameter groups' rates and
 * weight decays reach AdamW (the device step against the reference and
 * against the rates stated here, as docs/baselines.md "Training recipes"
 * states them), the init scales hold on fresh weights, uniform and original
 * differ exactly where a group is declared, and a run saved before recipes
 * (no "recipe" key) resumes as it trained: uniform. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "model/arch.h"
#include "model/checkpoint.h"
#include "ref/ref_optim.h"
#include "train/optim.h"
#include "train/trainer.h"

#define PEAK 2e-4
#define DECAY 0.1

/* The recipes as docs/baselines.md states them: Hyena's implicit filter at
 * lr 1e-3 without weight decay; Mamba 2's out_proj init over sqrt(n_layers). */
static bool in_hyena_filter(const tmm_param_table *t, const tmm_param *p)
{
    return t->config.arch == TMM_ARCH_HYENA && strstr(p->name, ".hyena.filter.") != NULL;
}
static bool is_mamba_out_proj(const tmm_param_table *t, const tmm_param *p)
{
    return t->config.arch == TMM_ARCH_MAMBA2 && strstr(p->name, ".mamba.out_proj.weight") != NULL;
}

static tmm_optim_config optim_config(tmm_recipe r)
{
    tmm_optim_config c = tmm_optim_config_default();
    c.recipe = r;
    c.peak_lr = PEAK;
    c.weight_decay = DECAY;
    c.max_grad_norm = 0; /* no clipping: step 1 moves each float by its tensor's rate */
    return c;
}

/* One device step at lr = PEAK from zero moments on p (updated in place). */
static void device_step(const tmm_param_table *t, const tmm_optim_config *cfg, float *p, const float *g)
{
    tmm_buffer *bp = h_buffer(p, t->arena_floats), *bg = h_buffer(g, t->arena_floats);
    tmm_optim *o;
    H_OK(tmm_optim_create(h_dev, t, cfg, &o));
    tmm_recorder *r = h_begin();
    H_OK(tmm_optim_record(o, r, tmm_whole(bp), tmm_whole(bg)));
    H_OK(tmm_recorder_end(r));
    H_OK(tmm_optim_set_step(o, 1, PEAK));
    H_OK(tmm_recorder_run(r));
    h_read(bp, p, t->arena_floats);
    tmm_recorder_destroy(r);
    tmm_optim_destroy(o);
    tmm_buffer_destroy(bp);
    tmm_buffer_destroy(bg);
}

/* Gradients of size 0.5..1 and random sign: step 1's Adam direction is
 * g / (|g| + eps), so each float moves by its tensor's rate. */
static void gradients(float *g, uint64_t n, uint64_t seed)
{
    h_rand(g, n, seed, -1, 1);
    for (uint64_t i = 0; i < n; i++)
        g[i] = copysignf(0.5f + 0.5f * fabsf(g[i]), g[i]);
}

H_TEST(recipe, groups_reach_adamw)
{
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        tmm_model_config c = h_tiny_row((tmm_arch)a);
        tmm_param_table t;
        H_OK(tmm_param_table_build(&c, &t));
        const uint64_t n = t.arena_floats;
        float *p0 = h_floats(n), *g = h_floats(n), *dev[TMM_RECIPE_COUNT];
        h_rand(p0, n, 10 + a, -1, 1);
        gradients(g, n, 20 + a);
        for (int r = 0; r < TMM_RECIPE_COUNT; r++) {
            const tmm_optim_config cfg = optim_config((tmm_recipe)r);
            dev[r] = h_floats(n);
            memcpy(dev[r], p0, n * 4);
            device_step(&t, &cfg, dev[r], g);
            /* the reference optimizer, from the same state */
            float *ref = h_floats(n), *m = h_floats(n), *v = h_floats(n);
            memcpy(ref, p0, n * 4);
            ref_adamw_step(&t, &cfg, 1, (float)PEAK, 1.0, ref, g, m, v);
            h_compare(tmm_arch_name((tmm_arch)a), dev[r], ref, n, 1e-7, 1e-6);
            free(ref), free(m), free(v);
            /* and the rates and decays as the docs state them */
            for (uint32_t i = 0; i < t.count; i++) {
                const tmm_param *p = &t.params[i];
                const bool filter = r == TMM_RECIPE_ORIGINAL && in_hyena_filter(&t, p);
                const double lr = filter ? 1e-3 : PEAK;
                const double wd = !filter && tmm_optim_param_decays(p, false) ? DECAY : 0;
                for (uint64_t j = p->offset; j < p->offset + p->numel; j++) {
                    const double want = p0[j] * (1 - lr * wd) - lr * g[j] / (fabs(g[j]) + 1e-8);
                    cr_assert(fabs(dev[r][j] - want) <= 2e-7, "%s %s, %s[%llu]: %.9g, want %.9g (lr %g, wd %g)",
                              tmm_arch_name((tmm_arch)a), tmm_recipe_names[r], p->name,
                              (unsigned long long)(j - p->offset), (double)dev[r][j], want, lr, wd);
                }
            }
        }
        /* uniform and original differ exactly in the declared groups */
        for (uint32_t i = 0; i < t.count; i++) {
            const tmm_param *p = &t.params[i];
            const bool same = memcmp(dev[0] + p->offset, dev[1] + p->offset, p->numel * 4) == 0;
            cr_assert(same != in_hyena_filter(&t, p), "%s: %s is %s under the two recipes",
                      tmm_arch_name((tmm_arch)a), p->name, same ? "the same" : "different");
        }
        free(p0), free(g), free(dev[0]), free(dev[1]);
        tmm_param_table_free(&t);
    }
}

/* A group with its own rate keeps it through the schedule: at any step the
 * ratio of its rate to the run's is 1e-3 / peak. */
H_TEST(recipe, own_rate_is_relative_to_the_peak)
{
    tmm_model_config c = h_tiny_row(TMM_ARCH_HYENA);
    const char *filter = "blocks.1.hyena.filter.fc2.weight", *other = "blocks.1.hyena.in_proj.weight";
    tmm_param_rate rf = tmm_param_rate_of(&c, TMM_RECIPE_ORIGINAL, filter, 5e-4, DECAY);
    tmm_param_rate ro = tmm_param_rate_of(&c, TMM_RECIPE_ORIGINAL, other, 5e-4, DECAY);
    cr_assert(fabs(rf.lr_scale - 2.0) < 1e-12 && rf.weight_decay == 0 && rf.group && !strcmp(rf.group->name, "filter"));
    cr_assert(ro.lr_scale == 1 && ro.weight_decay == DECAY && !ro.group);
    tmm_param_rate ru = tmm_param_rate_of(&c, TMM_RECIPE_UNIFORM, filter, 5e-4, DECAY);
    cr_assert(ru.lr_scale == 1 && ru.weight_decay == DECAY && ru.init_scale == 1 && !ru.group);
}

static double tensor_std(const float *x, uint64_t n)
{
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < n; i++)
        s += x[i], s2 += (double)x[i] * x[i];
    return sqrt(s2 / n - (s / n) * (s / n));
}

H_TEST(recipe, init_scales_hold)
{
    for (int a = 0; a < TMM_N_ARCHS; a++) {
        tmm_model_config c = h_tiny_row((tmm_arch)a);
        c.d_model = 64, c.n_layers = 4, c.heads = 0;
        tmm_model_config_resolve(&c);
        tmm_param_table t;
        H_OK(tmm_param_table_build(&c, &t));
        float *uni = h_floats(t.arena_floats), *orig = h_floats(t.arena_floats);
        tmm_param_init(&t, uni);
        tmm_param_init(&t, orig);
        tmm_recipe_scale_init(&t, TMM_RECIPE_UNIFORM, uni);
        tmm_recipe_scale_init(&t, TMM_RECIPE_ORIGINAL, orig);
        bool scaled = false;
        for (uint32_t i = 0; i < t.count; i++) {
            const tmm_param *p = &t.params[i];
            const bool same = memcmp(uni + p->offset, orig + p->offset, p->numel * 4) == 0;
            cr_assert(same != is_mamba_out_proj(&t, p), "%s: %s's init is %s under the two recipes",
                      tmm_arch_name((tmm_arch)a), p->name, same ? "the same" : "different");
            if (!is_mamba_out_proj(&t, p))
                continue;
            /* PyTorch's default Linear, U(±1/sqrt(fan_in)), over sqrt(n_layers) */
            const double want = 1.0 / sqrt(3.0 * p->fan_in) / sqrt((double)c.n_layers);
            const double got = tensor_std(orig + p->offset, p->numel);
            cr_assert(fabs(got / want - 1) < 0.04, "%s: std %g, want %g", p->name, got, want);
            cr_assert(fabs(tensor_std(uni + p->offset, p->numel) / (want * 2) - 1) < 0.04);
            scaled = true;
        }
        cr_assert_eq(scaled, a == TMM_ARCH_MAMBA2);
        free(uni), free(orig);
        tmm_param_table_free(&t);
    }
}

static void tiny_run(tmm_train_config *c, tmm_arch arch, const char *dir)
{
    tmm_train_config_default(c);
    c->model.arch = arch;
    c->model.d_model = 16;
    c->model.n_ctx = 16;
    c->model.n_layers = 4;
    c->copy_alphabet = 6;
    c->batch = 2;
    c->steps = 4;
    c->schedule.warmup_steps = 1;
    c->eval_every = 0;
    c->log_every = 0;
    c->target_accuracy = 0;
    snprintf(c->run_dir, sizeof c->run_dir, "%s", dir);
}

static void temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/tmm-recipe-XXXXXX");
    cr_assert_not_null(mkdtemp(buf));
}

static float *load_params(const char *dir, tmm_param_table *t)
{
    tmm_checkpoint ck;
    H_OK(tmm_checkpoint_load(dir, NULL, 0, &ck));
    float *p = h_floats(ck.table.arena_floats);
    memcpy(p, ck.params, ck.table.arena_floats * 4);
    H_OK(tmm_param_table_build(&ck.table.config, t));
    tmm_checkpoint_free(&ck);
    return p;
}

/* tmm train's fresh weights carry the init scales: a mamba2 run of one
 * step at a negligible rate saves out_proj at the declared std. */
H_TEST(recipe, trained_model_starts_from_the_scaled_init)
{
    char dir[64];
    temp_dir(dir, sizeof dir);
    tmm_train_config c;
    tiny_run(&c, TMM_ARCH_MAMBA2, dir);
    c.model.d_model = 64;
    c.steps = 1;
    c.schedule.peak_lr = 1e-12;
    cr_assert_eq(c.optim.recipe, TMM_RECIPE_ORIGINAL, "tmm train's default recipe is original");
    tmm_train_result res;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &res));
    tmm_param_table t;
    float *p = load_params(dir, &t);
    const tmm_param *w = &t.params[tmm_param_find(&t, "blocks.2.mamba.out_proj.weight")];
    const double want = 1.0 / sqrt(3.0 * w->fan_in) / 2; /* n_layers 4 */
    const double got = tensor_std(p + w->offset, w->numel);
    cr_assert(fabs(got / want - 1) < 0.04, "out_proj std %g, want %g", got, want);
    free(p);
    tmm_param_table_free(&t);
    H_OK(tmm_run_dir_clear(dir));
    rmdir(dir);
}

/* The checkpoint of a run saved before recipes: its train_config without
 * the "recipe" key (the model file rewritten with the same tensors, so the
 * train state still belongs to it). */
static void drop_recipe_key(const char *dir)
{
    tmm_checkpoint ck;
    H_OK(tmm_checkpoint_load(dir, NULL, 0, &ck));
    char *json = NULL;
    tmm_st_meta meta[16];
    cr_assert(ck.n_meta <= 16);
    for (uint32_t i = 0; i < ck.n_meta; i++) {
        meta[i] = ck.meta[i];
        if (strcmp(meta[i].key, "train_config"))
            continue;
        cJSON *root = cJSON_Parse(meta[i].value);
        cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
        cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(opt, "recipe"), "the config records its recipe");
        cJSON_DeleteItemFromObjectCaseSensitive(opt, "recipe");
        json = cJSON_Print(root);
        cJSON_Delete(root);
        meta[i].value = json;
    }
    cr_assert_not_null(json);
    H_OK(tmm_checkpoint_write_model(ck.model_path, ck.step, &ck.table, ck.params, meta, ck.n_meta));
    free(json);
    tmm_checkpoint_free(&ck);
}

H_TEST(recipe, old_run_resumes_uniform)
{
    char whole[64], old[64], orig[64];
    temp_dir(whole, sizeof whole);
    temp_dir(old, sizeof old);
    temp_dir(orig, sizeof orig);
    tmm_train_config c;
    tmm_train_result res;
    /* 4 uniform steps in one go */
    tiny_run(&c, TMM_ARCH_HYENA, whole);
    c.optim.recipe = TMM_RECIPE_UNIFORM;
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &res));
    /* 2 uniform steps saved as an old run, resumed from its checkpoint's config */
    tiny_run(&c, TMM_ARCH_HYENA, old);
    c.optim.recipe = TMM_RECIPE_UNIFORM;
    tmm_train_hooks stop = { .stop_after = 2 };
    H_OK(tmm_train(h_dev, &c, NULL, &stop, &res));
    drop_recipe_key(old);
    tmm_train_config resumed;
    H_OK(tmm_train_config_from_checkpoint(old, &resumed));
    cr_assert_eq(resumed.optim.recipe, TMM_RECIPE_UNIFORM, "an old run resumes as it trained");
    H_OK(tmm_train(h_dev, &resumed, old, NULL, &res));
    cr_assert_eq(res.step, 4);
    /* the original recipe trains another model */
    tiny_run(&c, TMM_ARCH_HYENA, orig);
    H_OK(tmm_train(h_dev, &c, NULL, NULL, &res));

    tmm_param_table t[3];
    float *pw = load_params(whole, &t[0]), *po = load_params(old, &t[1]), *pr = load_params(orig, &t[2]);
    cr_assert(memcmp(pw, po, t[0].arena_floats * 4) == 0, "2 + 2 resumed steps of an old run differ from 4 uniform "
              "ones");
    cr_assert(memcmp(pw, pr, t[0].arena_floats * 4) != 0, "the two recipes trained the same weights");
    for (int k = 0; k < 3; k++)
        tmm_param_table_free(&t[k]);
    free(pw), free(po), free(pr);
    tmm_train_config_free(&resumed);
    H_OK(tmm_run_dir_clear(whole));
    H_OK(tmm_run_dir_clear(old));
    H_OK(tmm_run_dir_clear(orig));
    rmdir(whole), rmdir(old), rmdir(orig);
}
