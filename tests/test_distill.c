/* Distilled decoding end to end (tmm distill, docs/model.md "Distilled
 * decoding"): on a TMM whose Toeplitz vectors are exactly of low order, the
 * realizations reproduce them and distilled decoding equals exact decoding
 * (prompts of several lengths, short prompts through the shorter prefill
 * models, heads, kernel taps, the expanded pair, exact heads of 1 and 3
 * lags); on a random model, distilled decoding equals the forward pass of
 * the model with every vector replaced by its realization (what tmm eval of
 * a distilled checkpoint computes); distill.safetensors is refused when
 * damaged, made from other weights, unstable or incomplete; tmm_gen_load
 * finds it beside the model and TMM_LOAD_EXACT ignores it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/realize.h"
#include "gen/generator.h"
#include "harness.h"
#include "model/distilled.h"
#include "train/data.h"

static const tmm_model_config config = { .arch = TMM_ARCH_TMM, .vocab = 11, .d_model = 8, .n_ctx = 48,
                                         .n_layers = 2, .heads = 2, .expansion = 2, .kernel = 2, .expanded = true,
                                         .seed = 5 };

/* Every Toeplitz vector's tail replaced by three modes (a real pole and a
 * complex pair: order 3) of its own. */
static void make_low_order(const tmm_param_table *t, float *params)
{
    const uint32_t n = t->config.n_ctx;
    float r[5];
    uint32_t v = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        for (uint64_t o = 0; p->kind == TMM_PARAM_TOEPLITZ_W && o < p->numel; o += n, v++) {
            h_rand(r, 5, 900 + v, -1, 1);
            const double a = 0.75 + 0.2 * r[0], rho = 0.7 + 0.25 * fabs(r[1]), th = 0.4 + fabs(r[2]);
            for (uint32_t k = 1; k < n; k++) {
                const double j = k - 1;
                params[p->offset + o + k] = (float)(0.4 * r[3] * pow(a, j) + 0.5 * r[4] * pow(rho, j) * cos(th * j));
            }
        }
    }
}

/* The realizations of every Toeplitz vector at this order and head. */
static void distill(const tmm_param_table *t, const float *params, uint32_t order, uint32_t head, tmm_distilled *set,
                    double *worst)
{
    const uint32_t n = t->config.n_ctx;
    const tmm_realize_options ro = { .head = head, .order = order };
    *set = (tmm_distilled){ .head = head, .t = calloc(t->count, sizeof *set->t) };
    *worst = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        if (p->kind != TMM_PARAM_TOEPLITZ_W)
            continue;
        const uint32_t vectors = (uint32_t)(p->numel / n);
        tmm_distilled_tensor *dt = &set->t[set->count++];
        *dt = (tmm_distilled_tensor){ .param = (int)i, .modes = order, .data = calloc((size_t)vectors * order * 4, 4) };
        for (uint32_t v = 0; v < vectors; v++) {
            tmm_realization re;
            H_OK(tmm_realize(params + p->offset + (uint64_t)v * n, n, &ro, &re));
            cr_assert_leq(re.modes, order);
            for (uint32_t j = 0; j < re.modes; j++) {
                float *md = dt->data + ((size_t)v * order + j) * 4;
                md[0] = re.pole_re[j], md[1] = re.pole_im[j], md[2] = re.res_re[j], md[3] = re.res_im[j];
            }
            *worst = fmax(*worst, re.max_abs);
            tmm_realization_free(&re);
        }
    }
}

static float *model_params(const tmm_param_table *t)
{
    float *params = h_floats(t->arena_floats);
    tmm_param_init(t, params);
    for (uint32_t i = 0; i < t->count; i++)
        if (t->params[i].kind == TMM_PARAM_TOEPLITZ_BETA || t->params[i].kind == TMM_PARAM_LINEAR_BIAS)
            h_rand(params + t->params[i].offset, t->params[i].numel, 100 + i, -0.5f, 0.5f);
    return params;
}

static uint32_t argmax(const float *x, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        best = x[i] > x[best] ? i : best;
    return best;
}

static void check_low_order(uint32_t head)
{
    tmm_param_table t;
    H_OK(tmm_param_table_build(&config, &t));
    float *params = model_params(&t);
    make_low_order(&t, params);
    tmm_distilled set;
    double worst;
    distill(&t, params, 3, head, &set, &worst);
    cr_assert_lt(worst, 2e-6, "the realizations of order 3 miss exactly-order-3 vectors by %g", worst);

    enum { B = 3, STEPS = 30 };
    const uint32_t V = config.vocab, lengths[B] = { 1, 7, 40 }; /* 1 and 7 through the 32-position prefill model */
    tmm_generator *exact, *dist;
    H_OK(tmm_gen_create(h_dev, &t, params, TMM_TOKENIZER_COPY, B, TMM_TOEPLITZ_AUTO, NULL, &exact));
    H_OK(tmm_gen_create(h_dev, &t, params, TMM_TOKENIZER_COPY, B, TMM_TOEPLITZ_AUTO, &set, &dist));
    cr_assert(!tmm_generator_get_info(exact)->distilled && tmm_generator_get_info(dist)->distilled);
    cr_assert_eq(tmm_generator_get_info(dist)->distill_head, head);
    uint32_t prompts[B][40], tok[B];
    const uint32_t *pp[B] = { prompts[0], prompts[1], prompts[2] };
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t i = 0; i < 40; i++)
            prompts[b][i] = (b * 7 + i * 3 + i * i) % V;
    float le[B * 11], ld[B * 11];
    H_OK(tmm_generator_prefill(exact, pp, lengths, le));
    H_OK(tmm_generator_prefill(dist, pp, lengths, ld));
    h_compare("prefill logits", ld, le, B * V, 1e-5, 1e-5);
    for (int s = 0; s < STEPS; s++) {
        for (uint32_t b = 0; b < B; b++) /* greedy from the exact model; a full context repeats its last step */
            tok[b] = argmax(le + b * V, V);
        bool full = false;
        for (uint32_t b = 0; b < B; b++)
            full |= tmm_generator_position(exact, b) >= config.n_ctx;
        if (full)
            break;
        H_OK(tmm_generator_step(exact, tok, le));
        H_OK(tmm_generator_step(dist, tok, ld));
        h_compare("distilled vs exact decoding", ld, le, B * V, 2e-4, 2e-4);
    }
    tmm_generator_destroy(exact), tmm_generator_destroy(dist);
    tmm_distilled_free(&set);
    tmm_param_table_free(&t);
    free(params);
}

H_TEST(distill, exactly_low_order_decodes_exactly) { check_low_order(1); }
H_TEST(distill, exactly_low_order_decodes_exactly_head3) { check_low_order(3); }

/* Distilled decoding from a prompt no longer than the exact head computes
 * the model with ŵ: its logits equal that model's forward, position by
 * position. */
static void check_equals_applied(uint32_t order, uint32_t head)
{
    tmm_param_table t;
    H_OK(tmm_param_table_build(&config, &t));
    float *params = model_params(&t), *applied = h_floats(t.arena_floats);
    tmm_distilled set;
    double worst;
    distill(&t, params, order, head, &set, &worst);
    cr_assert_gt(worst, 1e-3, "a random model is not of order %u: its realization must differ", order);
    memcpy(applied, params, t.arena_floats * sizeof *applied);
    H_OK(tmm_distilled_apply(&set, &t, applied));

    const uint32_t n = config.n_ctx, V = config.vocab;
    uint32_t *seq = malloc(n * sizeof *seq);
    int32_t *ignore = malloc(n * sizeof *ignore);
    for (uint32_t i = 0; i < n; i++)
        seq[i] = (i * 5 + i * i / 3) % V, ignore[i] = TMM_TARGET_IGNORE;
    tmm_model *m;
    H_OK(tmm_model_create_impl(h_dev, &config, 1, TMM_TOEPLITZ_AUTO, &m));
    H_OK(tmm_model_write_params(m, applied));
    H_OK(tmm_model_set_batch(m, seq, ignore));
    H_OK(tmm_model_run(m, false));
    float *full = h_floats((size_t)n * V), *got = h_floats(V);
    H_OK(tmm_model_logits_rows(m, 0, n, full));

    tmm_generator *g;
    H_OK(tmm_gen_create(h_dev, &t, params, TMM_TOKENIZER_COPY, 1, TMM_TOEPLITZ_AUTO, &set, &g));
    const uint32_t *pp = seq;
    H_OK(tmm_generator_prefill(g, &pp, &head, got));
    h_compare("prefill within the head", got, full + (size_t)(head - 1) * V, V, 1e-4, 1e-4);
    for (uint32_t pos = head; pos < n; pos++) {
        H_OK(tmm_generator_step(g, &seq[pos], got));
        h_compare("distilled decoding vs the forward with ŵ", got, full + (size_t)pos * V, V, 2e-4, 2e-4);
    }
    tmm_generator_destroy(g);
    tmm_model_destroy(m);
    tmm_distilled_free(&set);
    tmm_param_table_free(&t);
    free(params), free(applied), free(seq), free(ignore), free(full), free(got);
}

H_TEST(distill, decoding_computes_the_realized_model) { check_equals_applied(4, 1); }
H_TEST(distill, decoding_computes_the_realized_model_head3) { check_equals_applied(2, 3); }

/* ---- distill.safetensors --------------------------------------------------- */

static void write_and_expect(const char *path, const tmm_param_table *t, const float *params, const tmm_distilled *set,
                             const float *read_params, const char *what)
{
    H_OK(tmm_distilled_write(path, t, params, set, NULL, 0));
    tmm_distilled back;
    cr_assert_eq(tmm_distilled_read(path, t, read_params, &back), TMM_ERR_IO, "%s: accepted", what);
    cr_assert_null(back.t);
}

H_TEST(distill, file_round_trip_and_refusals)
{
    h_checkpoint f;
    h_checkpoint_make(&f, &config, "copy-symbols", 3);
    char path[160];
    snprintf(path, sizeof path, "%s/%s", f.dir, TMM_DISTILL_FILE);
    tmm_distilled set, back;
    double worst;
    distill(&f.table, f.params, 3, 2, &set, &worst);
    H_OK(tmm_distilled_write(path, &f.table, f.params, &set, NULL, 0));
    H_OK(tmm_distilled_read(path, &f.table, f.params, &back));
    cr_assert_eq(back.head, 2);
    cr_assert_eq(back.count, set.count);
    for (uint32_t i = 0; i < set.count; i++) {
        cr_assert_eq(back.t[i].param, set.t[i].param);
        cr_assert_eq(back.t[i].modes, set.t[i].modes);
        const size_t floats = f.table.params[set.t[i].param].numel / config.n_ctx * set.t[i].modes * 4;
        cr_assert(memcmp(back.t[i].data, set.t[i].data, floats * sizeof(float)) == 0);
    }
    tmm_distilled_free(&back);

    /* tmm_gen_load decodes with it; TMM_LOAD_EXACT does not */
    tmm_generator *g;
    H_OK(tmm_gen_load(h_dev, f.path, 1, TMM_TOEPLITZ_AUTO, 0, &g));
    cr_assert(tmm_generator_get_info(g)->distilled);
    tmm_generator_destroy(g);
    H_OK(tmm_gen_load(h_dev, f.path, 1, TMM_TOEPLITZ_AUTO, TMM_LOAD_EXACT, &g));
    cr_assert(!tmm_generator_get_info(g)->distilled);
    tmm_generator_destroy(g);

    /* one flipped byte of data */
    FILE *fp = fopen(path, "r+b");
    cr_assert_not_null(fp);
    fseek(fp, -3, SEEK_END);
    int c = fgetc(fp);
    fseek(fp, -3, SEEK_END);
    fputc(c ^ 0x10, fp);
    fclose(fp);
    cr_assert_eq(tmm_distilled_read(path, &f.table, f.params, &back), TMM_ERR_IO);
    cr_assert_null(back.t);
    cr_assert_neq(tmm_gen_load(h_dev, f.path, 1, TMM_TOEPLITZ_AUTO, 0, &g), TMM_OK);

    /* other weights */
    float *other = h_floats(f.table.arena_floats);
    memcpy(other, f.params, f.table.arena_floats * sizeof *other);
    other[f.table.params[set.t[0].param].offset + 5] += 1e-3f;
    write_and_expect(path, &f.table, f.params, &set, other, "other weights");
    /* an unstable pole */
    const float keep = set.t[1].data[0];
    set.t[1].data[0] = 1.0f, set.t[1].data[1] = 0.0f;
    write_and_expect(path, &f.table, f.params, &set, f.params, "an unstable pole");
    set.t[1].data[0] = keep;
    /* a head of 0 or past n */
    set.head = 0;
    write_and_expect(path, &f.table, f.params, &set, f.params, "head 0");
    set.head = config.n_ctx + 1;
    write_and_expect(path, &f.table, f.params, &set, f.params, "head past n");
    set.head = 2;
    /* a missing tensor */
    set.count--;
    write_and_expect(path, &f.table, f.params, &set, f.params, "a missing tensor");
    set.count++;
    /* not a number */
    set.t[0].data[2] = NAN;
    write_and_expect(path, &f.table, f.params, &set, f.params, "NaN");

    unlink(path);
    tmm_distilled_free(&set);
    free(other);
    h_checkpoint_drop(&f);
}

/* The fuzzer's seed (tests/fuzz/corpus/safetensors/distill.safetensors, for
 * the small TMM with zero weights of fuzz_safetensors.c) is a valid file, so
 * that fuzzing reaches past the checksums. */
H_TEST(distill, fuzz_seed_is_valid)
{
    const tmm_model_config c = { .arch = TMM_ARCH_TMM, .vocab = 4, .d_model = 4, .n_ctx = 8, .n_layers = 1,
                                 .heads = 2, .expansion = 1, .kernel = 2, .expanded = true };
    tmm_param_table t;
    H_OK(tmm_param_table_build(&c, &t));
    float *params = calloc(t.arena_floats, sizeof *params);
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fuzz/corpus/safetensors/distill.safetensors", getenv("TMM_SOURCE_DIR"));
    tmm_distilled set;
    H_OK(tmm_distilled_read(path, &t, params, &set));
    cr_assert_eq(set.head, 2);
    cr_assert_eq(set.count, 2);
    cr_assert_eq(set.t[0].modes, 1);
    cr_assert_eq(set.t[1].modes, 2);
    tmm_distilled_free(&set);
    tmm_param_table_free(&t);
    free(params);
}
