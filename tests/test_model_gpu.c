/* Verification 2: the Vulkan model against the reference model (double) on
 * the same weights and batch, for every variant; n not a power of two and d
 * not a multiple of any tile size. Also: memory grows linearly in n, and
 * runs are deterministic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model.h"
#include "model/rng.h"
#include "ref/ref_model.h"

typedef struct variant {
    const char *name;
    tmm_model_config config;
} variant;

#define CFG(h, k, e, f) { .vocab = 37, .d_model = 20, .n_ctx = 13, .n_layers = 2, .heads = (h), .expansion = 2, \
                          .kernel = (k), .expanded = (e), .frozen = (f), .seed = 3 }
static const variant variants[] = {
    { "flat", CFG(0, 1, false, false) },
    { "heads 4", CFG(4, 1, false, false) },
    { "kernel 3", CFG(0, 3, false, false) },
    { "expanded heads 4", CFG(4, 1, true, false) },
    { "frozen heads 4", CFG(4, 2, false, true) },
    { "transformer", { .arch = TMM_ARCH_TRANSFORMER, .vocab = 37, .d_model = 20, .n_ctx = 13, .n_layers = 2,
                       .heads = 2, .expansion = 2, .kernel = 1, .seed = 3 } },
    { "swa window 4", { .arch = TMM_ARCH_SWA, .vocab = 37, .d_model = 20, .n_ctx = 13, .n_layers = 2, .heads = 2,
                        .expansion = 2, .kernel = 1, .window = 4, .seed = 3 } },
    { "linear heads 4", { .arch = TMM_ARCH_LINEAR, .vocab = 37, .d_model = 20, .n_ctx = 13, .n_layers = 2,
                          .heads = 4, .expansion = 2, .kernel = 1, .seed = 3 } },
    /* d = 20: the short conv's part views start aligned on lavapipe (16 bytes); d = 10 goes through staging */
    { "hyena", { .arch = TMM_ARCH_HYENA, .vocab = 37, .d_model = 20, .n_ctx = 13, .n_layers = 2, .expansion = 2,
                 .kernel = 1, .seed = 3 } },
    { "hyena d 10", { .arch = TMM_ARCH_HYENA, .vocab = 37, .d_model = 10, .n_ctx = 13, .n_layers = 2,
                      .expansion = 2, .kernel = 1, .seed = 3 } },
};

enum { B = 2, MAX_N = 64 }; /* the longest n of a variant */

static void make_batch(const tmm_model_config *c, uint32_t *tok, int32_t *tgt)
{
    for (uint32_t i = 0; i < B * c->n_ctx; i++) {
        tok[i] = (uint32_t)(tmm_rng_bits(21, i) % c->vocab);
        tgt[i] = i % 5 == 3 ? -100 : (int32_t)(tmm_rng_bits(22, i) % c->vocab);
    }
}

/* Largest |got - ref| over a tensor, and the bound it must meet: float32
 * kernels against double, through L blocks of sums of up to max(e*d, n, V)
 * terms; errors grow with the tensor's scale, so the bound is relative to
 * its largest |ref| (measured margins are printed). */
static double deviation(const float *got, const double *ref, uint64_t n, double *scale)
{
    double worst = 0, big = 0;
    for (uint64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - ref[i]));
        big = fmax(big, fabs(ref[i]));
    }
    *scale = big;
    return worst;
}

static void check_variant(const variant *v, tmm_toeplitz_impl impl)
{
    const tmm_model_config *c = &v->config;
    tmm_model *m;
    H_OK(tmm_model_create(h_dev, c, B, &m));
    H_OK(tmm_model_set_toeplitz_impl(m, impl));
    const tmm_param_table *t = tmm_model_table(m);
    float *w = h_floats(t->arena_floats), *g = h_floats(t->arena_floats);
    double *wd = calloc(t->arena_floats, sizeof *wd), *gd = calloc(t->arena_floats, sizeof *gd);
    H_OK(tmm_model_read_params(m, w)); /* initialized on the device from the seed */
    /* the baselines' N(0, 0.02²) weights made larger, or their logits would be too small to show errors */
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        double spread = p->init == TMM_INIT_SMALL ? 1.0 : 0.2;
        for (uint64_t j = p->offset; j < p->offset + p->numel; j++)
            wd[j] = w[j] = w[j] + (float)(spread * (tmm_rng_uniform(4, j) - 0.5));
    }
    H_OK(tmm_model_write_params(m, w));

    const uint32_t N = B * c->n_ctx, V = c->vocab;
    cr_assert_leq(c->n_ctx, MAX_N);
    uint32_t tok[B * MAX_N];
    int32_t tgt[B * MAX_N];
    make_batch(c, tok, tgt);
    H_OK(tmm_model_set_batch(m, tok, tgt));

    double *ref_logits = calloc((size_t)N * V, sizeof *ref_logits);
    double ref_loss = ref_model_run(t, wd, B, tok, tgt, ref_logits, gd);

    float loss, *logits = h_floats((size_t)N * V);
    H_OK(tmm_model_run(m, false));
    H_OK(tmm_model_loss(m, &loss));
    H_OK(tmm_model_logits(m, logits));
    double scale, dev = deviation(logits, ref_logits, (uint64_t)N * V, &scale);
    printf("  %-18s %-6s logits: max|dev| %.2g (scale %.2g); loss %.7g vs %.7g\n", v->name,
           tmm_toeplitz_impl_name(impl), dev, scale, (double)loss, ref_loss);
    cr_assert(dev <= 1e-5 * (1 + scale), "%s: logits deviate by %g", v->name, dev);
    cr_assert(fabs(loss - ref_loss) <= 1e-5 * (1 + ref_loss), "%s: loss %g vs %g", v->name, (double)loss, ref_loss);

    uint32_t am[B * MAX_N];
    H_OK(tmm_model_argmax(m, am));
    for (uint32_t r = 0; r < N; r++) {
        uint32_t best = 0;
        for (uint32_t j = 1; j < V; j++)
            if (ref_logits[(size_t)r * V + j] > ref_logits[(size_t)r * V + best])
                best = j;
        cr_assert_eq(am[r], best, "%s: argmax at row %u is %u, reference %u", v->name, r, am[r], best);
    }

    H_OK(tmm_model_run(m, true));
    float loss2;
    H_OK(tmm_model_loss(m, &loss2));
    cr_assert_eq(loss2, loss, "the forward of a training run gives another loss");
    H_OK(tmm_model_read_grads(m, g));
    double worst_rel = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        dev = deviation(g + p->offset, gd + p->offset, p->numel, &scale);
        worst_rel = fmax(worst_rel, dev / (1e-6 + scale));
        cr_assert(dev <= 1e-4 * scale + 1e-6, "%s: gradient of %s deviates by %g (scale %g)", v->name, p->name,
                  dev, scale);
        if (!p->trainable)
            cr_assert_eq(scale, 0.0, "%s: frozen %s has a gradient", v->name, p->name);
    }
    printf("  %-18s %-6s gradients: max |dev| / max |ref| over tensors = %.2g\n", v->name,
           tmm_toeplitz_impl_name(impl), worst_rel);

    /* replaying the recording gives the same bits */
    float *g2 = h_floats(t->arena_floats);
    H_OK(tmm_model_run(m, true));
    H_OK(tmm_model_read_grads(m, g2));
    cr_assert(memcmp(g, g2, t->arena_floats * 4) == 0, "%s: two identical runs differ", v->name);

    free(w), free(g), free(g2), free(wd), free(gd), free(ref_logits), free(logits);
    tmm_model_destroy(m);
}

H_TEST(model_gpu, flat) { check_variant(&variants[0], TMM_TOEPLITZ_DIRECT); }
H_TEST(model_gpu, heads4) { check_variant(&variants[1], TMM_TOEPLITZ_DIRECT); }
H_TEST(model_gpu, kernel3) { check_variant(&variants[2], TMM_TOEPLITZ_DIRECT); }
H_TEST(model_gpu, expanded) { check_variant(&variants[3], TMM_TOEPLITZ_DIRECT); }
H_TEST(model_gpu, frozen) { check_variant(&variants[4], TMM_TOEPLITZ_DIRECT); }
H_TEST(model_gpu, transformer) { check_variant(&variants[5], TMM_TOEPLITZ_AUTO); }
H_TEST(model_gpu, swa) { check_variant(&variants[6], TMM_TOEPLITZ_AUTO); }
H_TEST(model_gpu, linear) { check_variant(&variants[7], TMM_TOEPLITZ_AUTO); }
H_TEST(model_gpu, hyena) { check_variant(&variants[8], TMM_TOEPLITZ_DIRECT); }
H_TEST(model_gpu, hyena_unaligned) { check_variant(&variants[9], TMM_TOEPLITZ_DIRECT); }
/* Hyena's long conv (G = d groups of one channel) in many passes of 3 loop
 * iterations, and the FFT path in chunks of 7 channel rows */
H_TEST(model_gpu, hyena_many_passes)
{
    h_dev->tuning.loop_budget = 3;
    check_variant(&variants[8], TMM_TOEPLITZ_DIRECT);
    h_dev->tuning.max_chunk_rows = 7;
    check_variant(&variants[9], TMM_TOEPLITZ_FFT);
    h_dev->tuning.loop_budget = 0, h_dev->tuning.max_chunk_rows = 0;
}

/* The same checks with the Toeplitz layers computed by FFT */
H_TEST(model_gpu_fft, flat) { check_variant(&variants[0], TMM_TOEPLITZ_FFT); }
H_TEST(model_gpu_fft, heads4) { check_variant(&variants[1], TMM_TOEPLITZ_FFT); }
H_TEST(model_gpu_fft, kernel3) { check_variant(&variants[2], TMM_TOEPLITZ_FFT); }
H_TEST(model_gpu_fft, expanded) { check_variant(&variants[3], TMM_TOEPLITZ_FFT); }
H_TEST(model_gpu_fft, frozen) { check_variant(&variants[4], TMM_TOEPLITZ_FFT); }
H_TEST(model_gpu_fft, hyena) { check_variant(&variants[8], TMM_TOEPLITZ_FFT); }
H_TEST(model_gpu_fft, hyena_unaligned) { check_variant(&variants[9], TMM_TOEPLITZ_FFT); }

/* Mamba 2: n = 41 is two SSD chunks of 32 (the second partial), d = 20 (di
 * 40, conv 50); two heads of 20 and N = 5, or one head of 40 and N = 16 with
 * the device's loop budget at 1 so that every scan over the chunks and every
 * parameter sum runs in one pass per step */
static const variant mamba2_variants[] = {
    { "mamba2 heads 2 N 5", { .arch = TMM_ARCH_MAMBA2, .vocab = 37, .d_model = 20, .n_ctx = 41, .n_layers = 2,
                              .heads = 2, .state = 5, .expansion = 2, .kernel = 1, .seed = 3 } },
    { "mamba2 1 head N 16", { .arch = TMM_ARCH_MAMBA2, .vocab = 37, .d_model = 20, .n_ctx = 41, .n_layers = 2,
                              .heads = 1, .state = 16, .expansion = 2, .kernel = 1, .seed = 4 } },
};
H_TEST(model_gpu, mamba2) { check_variant(&mamba2_variants[0], TMM_TOEPLITZ_AUTO); }
H_TEST(model_gpu, mamba2_one_pass_per_chunk)
{
    h_dev->tuning.loop_budget = 1;
    check_variant(&mamba2_variants[1], TMM_TOEPLITZ_AUTO);
    h_dev->tuning.loop_budget = 0;
}

H_TEST(model_gpu, activation_memory_grows_linearly_in_n)
{
    tmm_model_config c = { .vocab = 256, .d_model = 256, .n_ctx = 512, .n_layers = 4, .heads = 4, .expansion = 4,
                           .kernel = 1, .seed = 1 };
    tmm_model_memory a, b, fa, fb;
    H_OK(tmm_model_memory_plan(NULL, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_DIRECT }, &a));
    H_OK(tmm_model_memory_plan(h_dev, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_FFT }, &fa));
    c.n_ctx = 1024;
    H_OK(tmm_model_memory_plan(NULL, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_DIRECT }, &b));
    H_OK(tmm_model_memory_plan(h_dev, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_FFT }, &fb));
    /* the FFT plan's buffers are planned with the model, and linear in n too */
    printf("  FFT plan: %llu bytes at n=512, %llu at n=1024\n", (unsigned long long)fa.fft_plans,
           (unsigned long long)fb.fft_plans);
    cr_assert(a.fft_plans == 0 && fa.fft_plans > 0 && fb.fft_plans <= 2 * fa.fft_plans);
    cr_assert_eq(fa.total, a.total + fa.fft_plans);
    cr_assert_eq(tmm_model_memory_plan(NULL, &c, 2, &(tmm_model_options){ .impl = TMM_TOEPLITZ_FFT }, &fa), TMM_ERR_INVALID_ARGUMENT);
    printf("  n=512: params %llu, activations %llu bytes; n=1024: activations %llu bytes\n",
           (unsigned long long)a.params, (unsigned long long)a.activations, (unsigned long long)b.activations);
    cr_assert_eq(b.activations, 2 * a.activations, "activations are not linear in n");
    cr_assert_lt(b.workspace, 2 * a.workspace + 4096 * 1024, "workspace grows faster than n");
    cr_assert_eq(a.total, a.params + a.grads + a.activations + a.workspace);
}

/* Every row of the architecture table, as the generic path builds it. */
H_TEST(model_gpu, every_row)
{
    for (int a = 0; a < TMM_ARCH_COUNT; a++) {
        const variant v = { tmm_arch_name((tmm_arch)a), h_tiny_row((tmm_arch)a) };
        check_variant(&v, TMM_TOEPLITZ_AUTO);
    }
}

H_TEST(model_gpu, bad_batches_are_refused)
{
    tmm_model_config c = CFG(0, 1, false, false);
    tmm_model *m;
    H_OK(tmm_model_create(h_dev, &c, 1, &m));
    cr_assert_eq(tmm_model_run(m, false), TMM_ERR_INVALID_ARGUMENT, "run before a batch");
    uint32_t tok[13] = { 0 };
    int32_t tgt[13] = { 0 };
    tok[5] = 37;
    cr_assert_eq(tmm_model_set_batch(m, tok, tgt), TMM_ERR_INVALID_ARGUMENT);
    tok[5] = 0;
    tgt[7] = 99;
    cr_assert_eq(tmm_model_set_batch(m, tok, tgt), TMM_ERR_INVALID_ARGUMENT);
    tmm_model_destroy(m);
    tmm_model *none;
    cr_assert_eq(tmm_model_create(h_dev, &c, 0, &none), TMM_ERR_INVALID_ARGUMENT);
}
