/* Generation: cached decoding against the full forward (the double C
 * reference model, and the device's own prefill) at every position, for
 * every variant, with prompts of different lengths in one batch; greedy and
 * seeded sampling; the tokenizers; errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gen/generator.h"
#include "harness.h"
#include "model/rng.h"
#include "ref/ref_model.h"
#include "model/checkpoint.h"

#define CFG(n, h, k, e) { .vocab = 29, .d_model = 12, .n_ctx = (n), .n_layers = 2, .heads = (h), .expansion = 2, \
                          .kernel = (k), .expanded = (e), .seed = 5 }

/* max |got - ref| / (1 + max |ref|) over one row of logits */
static double row_error(const float *got, const double *ref, uint32_t V)
{
    double worst = 0, big = 0;
    for (uint32_t i = 0; i < V; i++) {
        worst = fmax(worst, fabs(got[i] - ref[i]));
        big = fmax(big, fabs(ref[i]));
    }
    return worst / (1 + big);
}

static void check_cached(const char *name, tmm_model_config c, uint32_t B, const uint32_t *lengths, tmm_toeplitz_impl impl)
{
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "copy-symbols", 7);
    const uint32_t n = c.n_ctx, V = c.vocab;
    uint32_t *tok = malloc((size_t)B * n * sizeof *tok);
    int32_t *tgt = malloc((size_t)B * n * sizeof *tgt);
    for (uint32_t i = 0; i < B * n; i++)
        tok[i] = (uint32_t)(tmm_rng_bits(77, i) % V), tgt[i] = -100;
    double *pd = malloc(f.table.arena_floats * sizeof *pd), *ref = malloc((size_t)B * n * V * sizeof *ref);
    for (uint64_t i = 0; i < f.table.arena_floats; i++)
        pd[i] = f.params[i];
    ref_model_run(&f.table, pd, B, tok, tgt, ref, NULL);

    tmm_generator *g;
    /* loaded for AUTO, then switched: set_toeplitz_impl is exercised too */
    H_OK(tmm_generator_load(h_dev, f.path, B, TMM_TOEPLITZ_AUTO, &g));
    H_OK(tmm_generator_set_toeplitz_impl(g, impl));
    const uint32_t *prompts[8];
    for (uint32_t b = 0; b < B; b++)
        prompts[b] = tok + (size_t)b * n;
    float *logits = h_floats((size_t)B * V), *again = h_floats((size_t)B * V);
    H_OK(tmm_generator_prefill(g, prompts, lengths, logits));
    double worst_prefill = 0, worst_step = 0;
    for (uint32_t b = 0; b < B; b++)
        worst_prefill = fmax(worst_prefill, row_error(logits + b * V, ref + ((size_t)b * n + lengths[b] - 1) * V, V));
    /* step every sequence through the rest of its row; a sequence that is
     * full is fed again from a fresh prefill of a longer prompt below */
    uint32_t steps = 0, next[8];
    for (;;) {
        bool full = false;
        for (uint32_t b = 0; b < B; b++) {
            uint32_t t = tmm_generator_position(g, b);
            full |= t == n;
            next[b] = t < n ? tok[(size_t)b * n + t] : 0;
        }
        if (full)
            break;
        H_OK(tmm_generator_step(g, next, logits));
        steps++;
        for (uint32_t b = 0; b < B; b++) {
            uint32_t t = tmm_generator_position(g, b) - 1;
            worst_step = fmax(worst_step, row_error(logits + b * V, ref + ((size_t)b * n + t) * V, V));
        }
    }
    /* the context is full for one sequence: a step is refused, nothing moves */
    uint32_t before = tmm_generator_position(g, 0);
    cr_assert_eq(tmm_generator_step(g, next, logits), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "context"), "%s", tmm_last_error());
    cr_assert_eq(tmm_generator_position(g, 0), before);

    /* the device's own full forward (a prefill of the longer prompt) agrees too */
    uint32_t longer[8];
    for (uint32_t b = 0; b < B; b++)
        longer[b] = tmm_generator_position(g, b);
    H_OK(tmm_generator_prefill(g, prompts, longer, again));
    double worst_self = 0;
    for (uint32_t b = 0; b < B; b++)
        worst_self = fmax(worst_self,
                          row_error(again + b * V, ref + ((size_t)b * n + longer[b] - 1) * V, V));
    printf("%-22s B %u n %u: %u steps; vs reference: prefill %.2e, cached %.2e, prefill again %.2e\n", name, B, n,
           steps, worst_prefill, worst_step, worst_self);
    cr_assert(steps > 0);
    cr_assert(worst_prefill < 2e-5 && worst_step < 2e-5 && worst_self < 2e-5, "%s: logits differ", name);

    tmm_generator_destroy(g);
    free(tok), free(tgt), free(pd), free(ref), free(logits), free(again);
    h_checkpoint_drop(&f);
}

static const uint32_t two_lengths[] = { 1, 9 };
static const uint32_t three_lengths[] = { 5, 17, 2 };

H_TEST(generate, cached_flat) { check_cached("flat", (tmm_model_config)CFG(23, 0, 1, false), 2, two_lengths, TMM_TOEPLITZ_DIRECT); }
H_TEST(generate, cached_heads) { check_cached("heads 3", (tmm_model_config)CFG(23, 3, 1, false), 3, three_lengths, TMM_TOEPLITZ_DIRECT); }
H_TEST(generate, cached_kernel) { check_cached("kernel 3", (tmm_model_config)CFG(23, 0, 3, false), 2, two_lengths, TMM_TOEPLITZ_DIRECT); }
H_TEST(generate, cached_expanded_fft) { check_cached("expanded heads 2, fft", (tmm_model_config)CFG(23, 2, 2, true), 3, three_lengths, TMM_TOEPLITZ_FFT); }
/* prompts shorter than the context: prefilled by a cropped shorter model
 * (context 32 and 64 here), whose caches the steps then extend */
/* Every row of the architecture table, as the generic path builds it. */
static const uint32_t row_lengths[] = { 5, 9, 1 }; /* the rows' n is 13 */
H_TEST(generate, every_row)
{
    for (int a = 0; a < TMM_ARCH_COUNT; a++)
        check_cached(tmm_arch_name((tmm_arch)a), h_tiny_row((tmm_arch)a), 3, row_lengths, TMM_TOEPLITZ_AUTO);
}

static const uint32_t short_lengths[] = { 5, 20 };
static const uint32_t mixed_lengths[] = { 40, 3 };
H_TEST(generate, cached_short_prompts) { check_cached("flat n 100, bucket 32", (tmm_model_config)CFG(100, 0, 1, false), 2, short_lengths, TMM_TOEPLITZ_DIRECT); }
H_TEST(generate, cached_short_prompts_expanded) { check_cached("expanded n 70, bucket 64", (tmm_model_config)CFG(70, 2, 2, true), 2, mixed_lengths, TMM_TOEPLITZ_FFT); }
/* the baselines: a KV cache (the activations), ring buffers of the window
 * (wrapping around several times), and both after a shorter model's prefill */
#define ARCH(a, n, h, w) { .arch = (a), .vocab = 29, .d_model = 12, .n_ctx = (n), .n_layers = 2, .heads = (h), \
                           .expansion = 2, .kernel = 1, .window = (w), .seed = 5 }
H_TEST(generate, cached_transformer) { check_cached("transformer heads 2", (tmm_model_config)ARCH(TMM_ARCH_TRANSFORMER, 23, 2, 0), 3, three_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_swa) { check_cached("swa window 5", (tmm_model_config)ARCH(TMM_ARCH_SWA, 23, 2, 5), 3, three_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_transformer_short_prompts) { check_cached("transformer n 100, bucket 32", (tmm_model_config)ARCH(TMM_ARCH_TRANSFORMER, 100, 1, 0), 2, short_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_linear) { check_cached("linear heads 3", (tmm_model_config)ARCH(TMM_ARCH_LINEAR, 23, 3, 0), 3, three_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_linear_short_prompts) { check_cached("linear n 70, bucket 64", (tmm_model_config)ARCH(TMM_ARCH_LINEAR, 70, 2, 0), 2, mixed_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_swa_short_prompts) { check_cached("swa n 70 window 6, bucket 64", (tmm_model_config)ARCH(TMM_ARCH_SWA, 70, 3, 6), 2, mixed_lengths, TMM_TOEPLITZ_AUTO); }
/* Hyena: the long conv's cache (its inputs), the short conv's windows and
 * the filter of the full n; short prompts prefilled by models of context 32
 * and 64 that take the full context's positions (the filter depends on n);
 * d = 9 stages its unaligned part views */
#define HYENA(n, d) { .arch = TMM_ARCH_HYENA, .vocab = 29, .d_model = (d), .n_ctx = (n), .n_layers = 2, \
                      .expansion = 2, .kernel = 1, .seed = 5 }
H_TEST(generate, cached_hyena) { check_cached("hyena", (tmm_model_config)HYENA(23, 12), 3, three_lengths, TMM_TOEPLITZ_DIRECT); }
H_TEST(generate, cached_hyena_fft_unaligned) { check_cached("hyena d 9, fft", (tmm_model_config)HYENA(23, 9), 3, three_lengths, TMM_TOEPLITZ_FFT); }
H_TEST(generate, cached_hyena_short_prompts) { check_cached("hyena n 100, bucket 32", (tmm_model_config)HYENA(100, 12), 2, short_lengths, TMM_TOEPLITZ_DIRECT); }
H_TEST(generate, cached_hyena_long)
{
    static const uint32_t lengths[] = { 590 };
    check_cached("hyena n 600", (tmm_model_config)HYENA(600, 12), 1, lengths, TMM_TOEPLITZ_AUTO);
}
H_TEST(generate, cached_hyena_short_prompts_fft) { check_cached("hyena n 70, bucket 64, fft", (tmm_model_config)HYENA(70, 9), 2, mixed_lengths, TMM_TOEPLITZ_FFT); }
/* Mamba 2: the SSD state and the conv window per layer, set by the prefill
 * (of the model itself, n 23; or of a shorter model, context 32 or 64, two
 * SSD chunks of 32) and carried by the steps; sequences at different
 * positions in one batch, prompts of 1 to 3 tokens (shorter than the conv's
 * window) */
#define M2(n, h, st) { .arch = TMM_ARCH_MAMBA2, .vocab = 29, .d_model = 12, .n_ctx = (n), .n_layers = 2, \
                       .heads = (h), .state = (st), .expansion = 2, .kernel = 1, .seed = 5 }
static const uint32_t m2_tiny_lengths[] = { 1, 3, 2 };
H_TEST(generate, cached_mamba2) { check_cached("mamba2 heads 3 N 5", (tmm_model_config)M2(23, 3, 5), 3, three_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_mamba2_tiny_prompts) { check_cached("mamba2 heads 2 N 4, 1-3 tokens", (tmm_model_config)M2(23, 2, 4), 3, m2_tiny_lengths, TMM_TOEPLITZ_AUTO); }
H_TEST(generate, cached_mamba2_short_prompts) { check_cached("mamba2 n 70, bucket 64", (tmm_model_config)M2(70, 1, 7), 2, mixed_lengths, TMM_TOEPLITZ_AUTO); }
/* d = 7: the in-projection's xbc and dtr blocks start at byte offsets that
 * are not multiples of 16, so the steps take the matmul instead of the row kernel */
H_TEST(generate, cached_mamba2_odd_width)
{
    tmm_model_config c = M2(23, 2, 3);
    c.d_model = 7;
    check_cached("mamba2 d 7 heads 2 N 3", c, 3, three_lengths, TMM_TOEPLITZ_AUTO);
}
H_TEST(generate, cached_mamba2_bucket32) { check_cached("mamba2 n 100, bucket 32", (tmm_model_config)M2(100, 4, 3), 2, short_lengths, TMM_TOEPLITZ_AUTO); }
/* several chunks of the step kernel */
H_TEST(generate, cached_long)
{
    static const uint32_t lengths[] = { 590 };
    check_cached("flat n 600", (tmm_model_config)CFG(600, 0, 1, false), 1, lengths, TMM_TOEPLITZ_AUTO);
}

/* Continuous batching (src/serve): slots that restart (tmm_gen_restart, then
 * fed token by token) or take a whole prompt in one pass
 * (tmm_gen_prefill_slot) while the others go on decoding give every
 * sequence the logits of the double reference over it alone. Events: at
 * step `at` slot `slot` begins sequence `seq` with `prompt` tokens in one
 * pass (0: a restart). `distilled`: a TMM whose Toeplitz vectors are, past
 * an exact head of 4 lags, one geometric mode each, decoded through those
 * realizations (running states, restarted by zeroing). */
typedef struct slot_event {
    uint32_t at, slot, seq, prompt;
} slot_event;

/* Makes every Toeplitz vector of f's weights one mode past a head of
 * `head` lags, w[head + j] = r 0.6^j, and *set those realizations. */
static void geometric_tails(h_checkpoint *f, uint32_t head, tmm_distilled *set)
{
    const tmm_param_table *t = &f->table;
    const uint32_t n = t->config.n_ctx;
    *set = (tmm_distilled){ .head = head, .t = calloc(t->count, sizeof *set->t) };
    cr_assert_not_null(set->t);
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        if (p->kind != TMM_PARAM_TOEPLITZ_W)
            continue;
        const uint32_t vectors = (uint32_t)(p->numel / n);
        tmm_distilled_tensor *dt = &set->t[set->count++];
        *dt = (tmm_distilled_tensor){ .param = (int)i, .modes = 1, .data = h_floats((size_t)vectors * 4) };
        for (uint32_t v = 0; v < vectors; v++) {
            float *w = f->params + p->offset + (uint64_t)v * n;
            const float r = 0.3f * w[head - 1];
            for (uint32_t j = 0; head + j < n; j++)
                w[head + j] = r * powf(0.6f, (float)j);
            dt->data[v * 4 + 0] = 0.6f, dt->data[v * 4 + 1] = 0, dt->data[v * 4 + 2] = r, dt->data[v * 4 + 3] = 0;
        }
    }
}

static void check_slots(const char *name, tmm_model_config c, bool distilled)
{
    static const slot_event ev[] = {
        { 0, 0, 0, 0 }, { 0, 1, 1, 3 }, { 0, 2, 2, 0 }, { 3, 2, 3, 6 }, { 5, 1, 2, 0 }, { 6, 0, 1, 9 },
    };
    enum { S = 4, B = 3, STEPS = 11 };
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "copy-symbols", 7);
    tmm_distilled set = { 0 };
    if (distilled)
        geometric_tails(&f, 4, &set);
    const uint32_t n = c.n_ctx, V = c.vocab;
    uint32_t *tok = malloc((size_t)S * n * sizeof *tok);
    int32_t *tgt = malloc((size_t)S * n * sizeof *tgt);
    for (uint32_t i = 0; i < S * n; i++)
        tok[i] = (uint32_t)(tmm_rng_bits(91, i) % V), tgt[i] = -100;
    double *pd = malloc(f.table.arena_floats * sizeof *pd), *ref = malloc((size_t)S * n * V * sizeof *ref);
    for (uint64_t i = 0; i < f.table.arena_floats; i++)
        pd[i] = f.params[i];
    ref_model_run(&f.table, pd, S, tok, tgt, ref, NULL);

    tmm_generator *g;
    H_OK(tmm_gen_create(h_dev, &f.table, f.params, TMM_TOKENIZER_COPY, B, TMM_TOEPLITZ_AUTO,
                        distilled ? &set : NULL, &g));
    cr_assert_eq(tmm_generator_get_info(g)->distilled, distilled);
    float *logits = h_floats((size_t)n * V);
    uint32_t seq[B] = { 0 }, checked = 0;
    bool active[B] = { false };
    double worst = 0;
    for (uint32_t step = 0; step < STEPS; step++) {
        bool restart[B] = { false };
        for (uint32_t b = 0; b < B; b++)
            restart[b] = !active[b] && tmm_generator_position(g, b) > 0; /* idle: kept at position 0 */
        for (size_t e = 0; e < sizeof ev / sizeof ev[0]; e++) {
            if (ev[e].at != step)
                continue;
            const uint32_t b = ev[e].slot, *s = tok + (size_t)ev[e].seq * n;
            seq[b] = ev[e].seq, active[b] = true, restart[b] = ev[e].prompt == 0;
            if (!ev[e].prompt)
                continue;
            H_OK(tmm_gen_prefill_slot(g, b, s, ev[e].prompt, 0, logits));
            cr_assert_eq(tmm_generator_position(g, b), ev[e].prompt);
            for (uint32_t t = 0; t < ev[e].prompt; t++, checked++)
                worst = fmax(worst, row_error(logits + (size_t)t * V, ref + ((size_t)seq[b] * n + t) * V, V));
        }
        H_OK(tmm_gen_restart(g, restart));
        uint32_t tokens[B], at[B];
        for (uint32_t b = 0; b < B; b++) {
            at[b] = tmm_generator_position(g, b);
            tokens[b] = active[b] ? tok[(size_t)seq[b] * n + at[b]] : 0;
        }
        H_OK(tmm_generator_step(g, tokens, logits));
        for (uint32_t b = 0; b < B; b++) {
            if (!active[b])
                continue;
            worst = fmax(worst, row_error(logits + (size_t)b * V, ref + ((size_t)seq[b] * n + at[b]) * V, V));
            checked++;
            active[b] = at[b] + 1 < n;
        }
    }
    printf("%-22s slots: %u rows vs reference %.2e\n", name, checked, worst);
    cr_assert(worst < 2e-5, "%s: a slot's logits differ from its sequence's alone", name);
    tmm_generator_destroy(g);
    tmm_distilled_free(&set);
    free(tok), free(tgt), free(pd), free(ref), free(logits);
    h_checkpoint_drop(&f);
}

H_TEST(generate, slots_every_row)
{
    for (int a = 0; a < TMM_ARCH_COUNT; a++)
        check_slots(tmm_arch_name((tmm_arch)a), h_tiny_row((tmm_arch)a), false);
}
H_TEST(generate, slots_distilled)
{
    check_slots("distilled, heads 2, 2 taps, expanded", (tmm_model_config)CFG(23, 2, 2, true), true);
}

H_TEST(generate, greedy_is_deterministic_and_sampling_reproducible)
{
    tmm_model_config c = CFG(32, 2, 1, false);
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "copy-symbols", 7);
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, f.path, 1, TMM_TOEPLITZ_AUTO, &g));
    const uint32_t prompt[] = { 3, 1, 4, 1, 5 }, len = 5;
    const uint32_t *pp = prompt;
    tmm_sampler greedy = TMM_SAMPLER_DEFAULT, hot = TMM_SAMPLER_DEFAULT;
    greedy.greedy = true;
    hot.seed = 11, hot.top_k = 10, hot.top_p = 0.95f, hot.temperature = 1.5f;
    uint32_t out[4][20];
    const tmm_sampler *which[4] = { &greedy, &greedy, &hot, &hot };
    float logits[29];
    for (int run = 0; run < 4; run++) {
        H_OK(tmm_generator_prefill(g, &pp, &len, logits));
        for (uint32_t i = 0; i < 20; i++) {
            H_OK(tmm_sample(which[run], logits, c.vocab, i, &out[run][i]));
            H_OK(tmm_generator_step(g, &out[run][i], logits));
        }
    }
    cr_assert(memcmp(out[0], out[1], sizeof out[0]) == 0, "greedy differs between runs");
    cr_assert(memcmp(out[2], out[3], sizeof out[2]) == 0, "seeded sampling differs between runs");
    cr_assert(memcmp(out[0], out[2], sizeof out[0]) != 0, "sampling at temperature 1.5 gave the greedy tokens");
    tmm_generator_destroy(g);
    h_checkpoint_drop(&f);
}

Test(sample, rules)
{
    const float logits[4] = { 0.0f, logf(3.0f), -1.0f, logf(3.0f) };
    tmm_sampler s = TMM_SAMPLER_DEFAULT;
    uint32_t tok, count[4] = { 0 };
    s.greedy = true;
    H_OK(tmm_sample(&s, logits, 4, 0, &tok));
    cr_assert_eq(tok, 1, "greedy takes the lowest of equal maxima");
    s.greedy = false;
    s.top_k = 1;
    H_OK(tmm_sample(&s, logits, 4, 0, &tok));
    cr_assert_eq(tok, 1);
    /* top-k 2 leaves tokens 1 and 3 (equal), top-p 0.3 leaves only token 1 */
    s.top_k = 2;
    for (uint64_t i = 0; i < 4000; i++) {
        H_OK(tmm_sample(&s, logits, 4, i, &tok));
        count[tok]++;
    }
    cr_assert(count[0] == 0 && count[2] == 0 && count[1] > 1800 && count[3] > 1800, "%u %u %u %u", count[0],
              count[1], count[2], count[3]);
    s.top_k = 0, s.top_p = 0.3f;
    for (uint64_t i = 0; i < 100; i++) {
        H_OK(tmm_sample(&s, logits, 4, i, &tok));
        cr_assert_eq(tok, 1);
    }
    /* the full distribution: p(0) = 1 / (1 + 3 + e^-1 + 3) */
    s.top_p = 1.0f;
    memset(count, 0, sizeof count);
    for (uint64_t i = 0; i < 20000; i++) {
        H_OK(tmm_sample(&s, logits, 4, i, &tok));
        count[tok]++;
    }
    double p0 = 1.0 / (7.0 + exp(-1.0));
    cr_assert(fabs(count[0] / 20000.0 - p0) < 0.01, "token 0: %u of 20000, expected %.3f", count[0], p0);
    s.temperature = -1.0f;
    cr_assert_eq(tmm_sample(&s, logits, 4, 0, &tok), TMM_ERR_INVALID_ARGUMENT);
    s.temperature = 1.0f, s.top_p = 0.0f;
    cr_assert_eq(tmm_sample(&s, logits, 4, 0, &tok), TMM_ERR_INVALID_ARGUMENT);
}

Test(tokenizer, bytes_and_copy_symbols)
{
    uint32_t *t, count;
    char buf[16];
    H_OK(tmm_model_tokenizer_encode(TMM_TOKENIZER_BYTES, 257, "h\xc3\xa9!", 4, &t, &count));
    cr_assert(count == 4 && t[0] == 'h' && t[1] == 0xc3 && t[3] == '!');
    cr_assert_eq(tmm_model_tokenizer_decode(TMM_TOKENIZER_BYTES, 257, 0xc3, buf, sizeof buf), 1);
    cr_assert_eq((unsigned char)buf[0], 0xc3);
    cr_assert_eq(tmm_model_tokenizer_decode(TMM_TOKENIZER_BYTES, 257, 256, buf, sizeof buf), 0, "EOT prints nothing");
    free(t);

    H_OK(tmm_model_tokenizer_encode(TMM_TOKENIZER_COPY, 16, "0f A\n3", 6, &t, &count));
    cr_assert(count == 4 && t[0] == 0 && t[1] == 15 && t[2] == 10 && t[3] == 3);
    free(t);
    cr_assert_eq(tmm_model_tokenizer_decode(TMM_TOKENIZER_COPY, 16, 11, buf, sizeof buf), 1);
    cr_assert_str_eq(buf, "b");
    cr_assert_eq(tmm_model_tokenizer_encode(TMM_TOKENIZER_COPY, 16, "0g", 2, &t, &count), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "'g'"), "%s", tmm_last_error());

    H_OK(tmm_model_tokenizer_encode(TMM_TOKENIZER_COPY, 100, "12 0 99", 7, &t, &count));
    cr_assert(count == 3 && t[0] == 12 && t[1] == 0 && t[2] == 99);
    free(t);
    cr_assert_eq(tmm_model_tokenizer_encode(TMM_TOKENIZER_COPY, 100, "100", 3, &t, &count), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_model_tokenizer_encode(TMM_TOKENIZER_COPY, 100, "1x", 2, &t, &count), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_model_tokenizer_decode(TMM_TOKENIZER_COPY, 100, 42, buf, sizeof buf), 3);
    cr_assert_str_eq(buf, "42 ");

    tmm_model_tokenizer k;
    cr_assert_eq(tmm_model_tokenizer_pick("bpe", 257, &k), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_model_tokenizer_pick("bytes", 16, &k), TMM_ERR_INVALID_ARGUMENT);
    H_OK(tmm_model_tokenizer_pick(NULL, 257, &k));
    cr_assert_eq(k, TMM_TOKENIZER_BYTES);
}

H_TEST(generate, errors)
{
    tmm_model_config c = CFG(8, 0, 1, false);
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "copy-symbols", 7);
    tmm_generator *g;
    cr_assert_eq(tmm_generator_load(h_dev, "/nonexistent/run", 1, TMM_TOEPLITZ_AUTO, &g), TMM_ERR_IO);
    cr_assert_null(g);
    H_OK(tmm_generator_load(h_dev, f.path, 1, TMM_TOEPLITZ_AUTO, &g));
    uint32_t tok = 1, len = 9;
    const uint32_t *pp = &tok;
    cr_assert_eq(tmm_generator_step(g, &tok, NULL), TMM_ERR_INVALID_ARGUMENT, "step before prefill");
    cr_assert_eq(tmm_generator_prefill(g, &pp, &len, NULL), TMM_ERR_INVALID_ARGUMENT, "prompt longer than n");
    len = 0;
    cr_assert_eq(tmm_generator_prefill(g, &pp, &len, NULL), TMM_ERR_INVALID_ARGUMENT, "empty prompt");
    len = 1;
    H_OK(tmm_generator_prefill(g, &pp, &len, NULL));
    tok = 29;
    cr_assert_eq(tmm_generator_step(g, &tok, NULL), TMM_ERR_INVALID_ARGUMENT, "token outside the vocabulary");
    cr_assert_eq(tmm_generator_position(g, 0), 1);
    /* one slot's prefill: its slot, 1 to n tokens, logits from a position of the prompt */
    const uint32_t nine[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    cr_assert_eq(tmm_gen_prefill_slot(g, 1, nine, 3, 0, NULL), TMM_ERR_INVALID_ARGUMENT, "slot 1 of 1");
    cr_assert_eq(tmm_gen_prefill_slot(g, 0, nine, 9, 0, NULL), TMM_ERR_INVALID_ARGUMENT, "longer than n");
    cr_assert(strstr(tmm_last_error(), "context"), "%s", tmm_last_error());
    cr_assert_eq(tmm_gen_prefill_slot(g, 0, nine, 0, 0, NULL), TMM_ERR_INVALID_ARGUMENT, "empty");
    cr_assert_eq(tmm_gen_prefill_slot(g, 0, nine, 3, 3, NULL), TMM_ERR_INVALID_ARGUMENT, "logits past the prompt");
    cr_assert_eq(tmm_generator_position(g, 0), 1, "a refused prefill leaves the slot alone");
    H_OK(tmm_gen_prefill_slot(g, 0, nine, 8, 7, NULL));
    cr_assert_eq(tmm_generator_position(g, 0), 8);
    cr_assert_eq(tmm_generator_step(g, nine, NULL), TMM_ERR_INVALID_ARGUMENT, "a prompt of the whole context: full");
    tmm_generator_destroy(g);
    h_checkpoint_drop(&f);
}
