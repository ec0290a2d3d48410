/* Precision and recomputation (docs/model.md "Precision and recomputation"):
 * recomputing the mixers or whole blocks in the backward gives fp32
 * gradients bit-identical to keeping every activation; fp16 or bf16 reads
 * the weight matrices in 16 bits, so the forward is the fp32 forward of
 * those matrices rounded (bit for bit), and keeping activations in 16 bits
 * moves the gradients by about the format's rounding; the memory plan
 * shrinks as the options say. Three layers, so that two layers restore
 * their set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/arch.h"
#include "model/model.h"
#include "model/rng.h"
#include "ref/ref.h"

enum { B = 2, L = 3 };

#define BASE .vocab = 37, .d_model = 20, .n_layers = L, .expansion = 2, .kernel = 1, .seed = 5
static const struct {
    const char *name;
    tmm_model_config c;
    tmm_toeplitz_impl impl;
} variants[] = {
    { "tmm flat", { .arch = TMM_ARCH_TMM, BASE, .n_ctx = 13 }, TMM_TOEPLITZ_DIRECT },
    { "tmm expanded heads 4 fft", { .arch = TMM_ARCH_TMM, BASE, .n_ctx = 13, .heads = 4, .expanded = true },
      TMM_TOEPLITZ_FFT },
    { "transformer", { .arch = TMM_ARCH_TRANSFORMER, BASE, .n_ctx = 13, .heads = 2 }, TMM_TOEPLITZ_AUTO },
    { "swa", { .arch = TMM_ARCH_SWA, BASE, .n_ctx = 13, .heads = 2, .window = 4 }, TMM_TOEPLITZ_AUTO },
    { "linear", { .arch = TMM_ARCH_LINEAR, BASE, .n_ctx = 13, .heads = 4 }, TMM_TOEPLITZ_AUTO },
    { "hyena", { .arch = TMM_ARCH_HYENA, BASE, .n_ctx = 13 }, TMM_TOEPLITZ_DIRECT },
    { "mamba2", { .arch = TMM_ARCH_MAMBA2, BASE, .n_ctx = 41, .heads = 2, .state = 5 }, TMM_TOEPLITZ_AUTO },
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

typedef struct result {
    float loss;
    float *grads;           /* arena */
    uint32_t dispatches;    /* of the recorded step */
} result;

/* Which weights a run rounds to a 16-bit format first. */
typedef enum rounding { ROUND_NONE, ROUND_ALL, ROUND_MATRICES } rounding;

/* x rounded to a 16-bit format. */
static float round16(float x, tmm_precision f)
{
    uint32_t bits;
    memcpy(&bits, &x, 4);
    bits = ref_16_to_f32(ref_f32_to_16(bits, f), f);
    memcpy(&x, &bits, 4);
    return x;
}

/* One forward + backward of variant v with these options on a fixed batch,
 * from the same (perturbed, so that gradients are not tiny) weights, rounded
 * to round_to as `which` says (ROUND_MATRICES: the Linear layers' weights
 * and the LM head). */
static result run_rounded(size_t v, tmm_precision precision, tmm_recompute recompute, rounding which,
                          tmm_precision round_to)
{
    const tmm_model_config *c = &variants[v].c;
    tmm_model_options o = { .impl = variants[v].impl, .precision = precision, .recompute = recompute };
    tmm_model *m;
    H_OK(tmm_model_create_opts(h_dev, c, B, &o, &m));
    const tmm_param_table *t = tmm_model_table(m);
    float *w = h_floats(t->arena_floats);
    H_OK(tmm_model_read_params(m, w));
    for (uint64_t j = 0; j < t->arena_floats; j++)
        w[j] += (float)(0.2 * (tmm_rng_uniform(9, j) - 0.5));
    for (uint32_t i = 0; which != ROUND_NONE && i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        if (which == ROUND_ALL || p->kind == TMM_PARAM_LINEAR_WEIGHT || p->kind == TMM_PARAM_HEAD)
            for (uint64_t j = p->offset; j < p->offset + p->numel; j++)
                w[j] = round16(w[j], round_to);
    }
    H_OK(tmm_model_write_params(m, w));
    const uint32_t N = B * c->n_ctx;
    uint32_t *tok = malloc(N * 4);
    int32_t *tgt = malloc(N * 4);
    cr_assert(tok && tgt);
    for (uint32_t i = 0; i < N; i++) {
        tok[i] = (uint32_t)(tmm_rng_bits(31, i) % c->vocab);
        tgt[i] = i % 7 == 2 ? -100 : (int32_t)(tmm_rng_bits(32, i) % c->vocab);
    }
    H_OK(tmm_model_set_batch(m, tok, tgt));
    result r = { 0, h_floats(t->arena_floats), 0 };
    H_OK(tmm_model_run(m, true));
    H_OK(tmm_model_loss(m, &r.loss));
    H_OK(tmm_model_read_grads(m, r.grads));
    /* a replay of the recording gives the same bits */
    float *again = h_floats(t->arena_floats);
    H_OK(tmm_model_run(m, true));
    H_OK(tmm_model_read_grads(m, again));
    cr_assert(memcmp(again, r.grads, t->arena_floats * 4) == 0, "%s: a replay differs", variants[v].name);
    tmm_recorder *rec = h_begin();
    H_OK(tmm_model_record(m, rec, true));
    H_OK(tmm_recorder_end(rec));
    r.dispatches = tmm_recorder_dispatches(rec);
    tmm_recorder_destroy(rec);
    free(again), free(w), free(tok), free(tgt);
    tmm_model_destroy(m);
    return r;
}

static result run(size_t v, tmm_precision precision, tmm_recompute recompute)
{
    return run_rounded(v, precision, recompute, ROUND_NONE, TMM_PRECISION_FP32);
}

static uint64_t arena_floats(size_t v)
{
    tmm_param_table t;
    H_OK(tmm_param_table_build(&variants[v].c, &t));
    uint64_t n = t.arena_floats;
    tmm_param_table_free(&t);
    return n;
}

Test(recompute, fp32_gradients_are_bit_identical, .init = h_init, .fini = h_fini, .timeout = 600)
{
    for (size_t v = 0; v < N_VARIANTS; v++) {
        result base = run(v, TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE);
        for (tmm_recompute rc = TMM_RECOMPUTE_MIXER; rc <= TMM_RECOMPUTE_BLOCK; rc++) {
            result r = run(v, TMM_PRECISION_FP32, rc);
            cr_assert_eq(r.loss, base.loss, "%s: the loss changed", variants[v].name);
            cr_assert(memcmp(r.grads, base.grads, arena_floats(v) * 4) == 0,
                      "%s, recompute %s: gradients differ from keeping every activation", variants[v].name,
                      rc == TMM_RECOMPUTE_MIXER ? "mixer" : "block");
            free(r.grads);
        }
        printf("  %-26s recompute mixer, block: gradients bit-identical (loss %.7g)\n", variants[v].name,
               (double)base.loss);
        free(base.grads);
    }
}

/* 16 bits, from weights already rounded to the format (so that reading them
 * in 16 bits loses nothing): the forward is the fp32 one bit for bit; each
 * kept activation is off by at most u = 2^-11 (fp16) or 2^-8 (bf16) of
 * itself, and the backward mixes a few of them per gradient, so each
 * tensor's gradient stays within 16 u of its largest |value| (measured
 * margins are printed). From weights not rounded: the loss is the fp32 loss
 * of the weight matrices rounded, bit for bit (for the architectures whose
 * every Linear weight and head a matmul reads as its B; Hyena's filter output
 * layer and Mamba 2's convolution are read in fp32), and it differs from the
 * fp32 loss of the weights as given. */
static void check_half(tmm_precision f)
{
    const double u = f == TMM_PRECISION_FP16 ? 0x1p-11 : 0x1p-8;
    h_dev->tuning.no_coopmat = true; /* the bit-for-bit claims are the fp32 kernels' (docs/gpu.md) */
    tmm_param_table t;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        result plain = run(v, TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE), as16 = run(v, f, TMM_RECOMPUTE_NONE);
        cr_assert_neq(as16.loss, plain.loss, "%s: the weights were not read in 16 bits", variants[v].name);
        if (variants[v].c.arch != TMM_ARCH_HYENA && variants[v].c.arch != TMM_ARCH_MAMBA2) {
            result matrices = run_rounded(v, TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE, ROUND_MATRICES, f);
            cr_assert_eq(as16.loss, matrices.loss, "%s: the 16-bit forward is not the fp32 forward of the rounded "
                         "weight matrices (%.9g, %.9g)", variants[v].name, (double)as16.loss, (double)matrices.loss);
            free(matrices.grads);
        }
        free(plain.grads), free(as16.grads);
        result base = run_rounded(v, TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE, ROUND_ALL, f);
        H_OK(tmm_param_table_build(&variants[v].c, &t));
        for (tmm_recompute rc = TMM_RECOMPUTE_NONE; rc <= TMM_RECOMPUTE_BLOCK; rc++) {
            result r = run_rounded(v, f, rc, ROUND_ALL, f);
            cr_assert_eq(r.loss, base.loss, "%s: 16-bit storage changed the forward", variants[v].name);
            double worst = 0;
            for (uint32_t i = 0; i < t.count; i++) {
                const tmm_param *p = &t.params[i];
                double dev = 0, scale = 0;
                for (uint64_t j = p->offset; j < p->offset + p->numel; j++) {
                    dev = fmax(dev, fabs((double)r.grads[j] - base.grads[j]));
                    scale = fmax(scale, fabs((double)base.grads[j]));
                }
                worst = fmax(worst, dev / (u * scale + 1e-30));
                cr_assert(dev <= 16 * u * scale + 1e-12, "%s %s: gradient of %s off by %g (scale %g, u %g)",
                          variants[v].name, rc == TMM_RECOMPUTE_NONE ? "none" : rc == TMM_RECOMPUTE_MIXER ? "mixer"
                                                                                                         : "block",
                          p->name, dev, scale, u);
            }
            printf("  %-26s %s recompute %-5s: worst gradient deviation %.2f u of the tensor's scale\n",
                   variants[v].name, f == TMM_PRECISION_FP16 ? "fp16" : "bf16",
                   rc == TMM_RECOMPUTE_NONE ? "none" : rc == TMM_RECOMPUTE_MIXER ? "mixer" : "block", worst);
            free(r.grads);
        }
        tmm_param_table_free(&t);
        free(base.grads);
    }
}

Test(recompute, fp16_gradients_follow_fp32, .init = h_init, .fini = h_fini, .timeout = 600)
{
    check_half(TMM_PRECISION_FP16);
}

Test(recompute, bf16_gradients_follow_fp32, .init = h_init, .fini = h_fini, .timeout = 600)
{
    check_half(TMM_PRECISION_BF16);
}

/* The MLP's SiLU or GELU in its first matmul's epilogue (the TMM's and
 * Hyena's MLPs, the default where the matmul takes one pass) gives the loss
 * and gradients of its own pass after the matmul (tuning.no_fused_act), bit
 * for bit: in fp32, with the weights read in 16 bits, and with the blocks
 * recomputed; and it saves one dispatch per layer and recomputed layer. */
Test(recompute, fused_mlp_activation_is_bit_identical, .init = h_init, .fini = h_fini, .timeout = 600)
{
    static const struct {
        tmm_precision precision;
        tmm_recompute recompute;
    } modes[] = { { TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE }, { TMM_PRECISION_FP16, TMM_RECOMPUTE_BLOCK } };
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const tmm_mlp_kind mlp = tmm_arch_of(variants[v].c.arch)->mlp;
        if (mlp != TMM_MLP_SILU && mlp != TMM_MLP_GELU)
            continue;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
            h_dev->tuning.no_fused_act = true;
            result unfused = run(v, modes[i].precision, modes[i].recompute);
            h_dev->tuning.no_fused_act = false;
            result fused = run(v, modes[i].precision, modes[i].recompute);
            /* one per layer's forward, and per recomputed layer: all but the last (docs/model.md) */
            const uint32_t saved = modes[i].recompute == TMM_RECOMPUTE_BLOCK ? 2 * L - 1 : L;
            cr_assert_eq(fused.dispatches + saved, unfused.dispatches, "%s: %u dispatches fused, %u unfused",
                         variants[v].name, fused.dispatches, unfused.dispatches);
            cr_assert_eq(fused.loss, unfused.loss, "%s: the loss changed", variants[v].name);
            cr_assert(memcmp(fused.grads, unfused.grads, arena_floats(v) * 4) == 0,
                      "%s: gradients differ from the unfused MLP's", variants[v].name);
            printf("  %-26s %s recompute %-5s: fused MLP activation bit-identical, %u -> %u dispatches\n",
                   variants[v].name, modes[i].precision == TMM_PRECISION_FP32 ? "fp32" : "fp16",
                   modes[i].recompute == TMM_RECOMPUTE_NONE ? "none" : "block", unfused.dispatches,
                   fused.dispatches);
            free(fused.grads), free(unfused.grads);
        }
    }
}

/* The plan: recomputation and 16-bit copies shrink the activations as
 * docs/model.md says; the workspace does not change. */
Test(recompute, memory_plan)
{
    const tmm_model_config c = { .vocab = 512, .d_model = 128, .n_ctx = 256, .n_layers = 8, .expansion = 4,
                                 .kernel = 1, .seed = 1 };
    tmm_model_memory m[TMM_PRECISION_COUNT][TMM_RECOMPUTE_COUNT];
    for (int p = 0; p < TMM_PRECISION_COUNT; p++)
        for (int r = 0; r < TMM_RECOMPUTE_COUNT; r++) {
            tmm_model_options o = { .impl = TMM_TOEPLITZ_DIRECT, .precision = (tmm_precision)p,
                                    .recompute = (tmm_recompute)r };
            H_OK(tmm_model_memory_plan(NULL, &c, 4, &o, &m[p][r]));
            /* 16 bits add the weights' 16-bit copy: 2 bytes per parameter, in whole words */
            cr_assert_eq(m[p][r].params, m[0][0].params + (p ? (m[0][0].params / 4 + 1) / 2 * 4 : 0));
            cr_assert_eq(m[p][r].workspace, m[0][0].workspace);
            printf("  %s recompute %-5s activations %6.2f MiB (%4.1f%% of fp32)\n", p == 0 ? "fp32" : p == 1 ? "fp16" : "bf16",
                   r == 0 ? "none" : r == 1 ? "mixer" : "block", m[p][r].activations / 1048576.0,
                   100.0 * (double)m[p][r].activations / (double)m[0][0].activations);
        }
    const tmm_model_memory *f32 = m[TMM_PRECISION_FP32], *f16 = m[TMM_PRECISION_FP16];
    cr_assert_lt(f32[TMM_RECOMPUTE_MIXER].activations, f32[TMM_RECOMPUTE_NONE].activations);
    cr_assert_lt(f32[TMM_RECOMPUTE_BLOCK].activations, f32[TMM_RECOMPUTE_MIXER].activations);
    cr_assert_lt(f16[TMM_RECOMPUTE_NONE].activations, 0.6 * f32[TMM_RECOMPUTE_NONE].activations);
    cr_assert_lt(f16[TMM_RECOMPUTE_BLOCK].activations, f32[TMM_RECOMPUTE_BLOCK].activations);
    cr_assert_leq(f16[TMM_RECOMPUTE_BLOCK].activations, 0.35 * f32[TMM_RECOMPUTE_NONE].activations,
                  "fp16 + block recompute: at most 35%% of fp32's activation memory");
    cr_assert_eq(memcmp(&m[TMM_PRECISION_BF16], f16, sizeof *m), 0, "bf16 and fp16 keep the same bytes");
}
