/* Sampling the next token from logits (include/tmm/generate.h). */
#include <math.h>
#include <stdlib.h>

#include "model/rng.h"
#include "tmm/generate.h"
#include "status.h"

tmm_status tmm_sampler_check(const tmm_sampler *s)
{
    if (!(s->temperature >= 0.0f) || isinf(s->temperature))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the temperature must be a number >= 0 (0 means greedy)");
    if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "top-p must be in (0, 1] (1 turns it off)");
    return TMM_OK;
}

static uint32_t argmax(const float *logits, uint32_t vocab)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best])
            best = i;
    return best;
}

typedef struct cand {
    double p;
    uint32_t token;
} cand;

/* Most likely first; equal probabilities by token, so the order is total. */
static int by_probability(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? 1 : -1;
    return x->token < y->token ? -1 : x->token > y->token;
}

tmm_status tmm_sample(const tmm_sampler *s, const float *logits, uint32_t vocab, uint64_t draw, uint32_t *token)
{
    TMM_TRY(tmm_sampler_check(s));
    if (vocab == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "sampling from an empty vocabulary");
    for (uint32_t i = 0; i < vocab; i++)
        if (!isfinite(logits[i]))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logit %u is %g: the model's outputs are not finite", i,
                            (double)logits[i]);
    if (s->greedy || s->temperature == 0.0f || s->top_k == 1) {
        *token = argmax(logits, vocab);
        return TMM_OK;
    }
    cand *c = malloc(vocab * sizeof *c);
    if (!c)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    const double top = logits[argmax(logits, vocab)];
    for (uint32_t i = 0; i < vocab; i++)
        c[i] = (cand){ exp(((double)logits[i] - top) / s->temperature), i };
    qsort(c, vocab, sizeof *c, by_probability);
    uint32_t keep = s->top_k && s->top_k < vocab ? s->top_k : vocab;
    double total = 0;
    for (uint32_t i = 0; i < keep; i++)
        total += c[i].p;
    if (s->top_p < 1.0f) {
        double mass = 0;
        for (uint32_t i = 0; i < keep; i++) {
            mass += c[i].p;
            if (mass >= s->top_p * total) {
                keep = i + 1;
                total = mass;
                break;
            }
        }
    }
    double u = tmm_rng_uniform(tmm_rng_key(s->seed, "sample"), draw) * total;
    uint32_t pick = c[keep - 1].token;
    for (uint32_t i = 0; i < keep; i++) {
        if (u < c[i].p) {
            pick = c[i].token;
            break;
        }
        u -= c[i].p;
    }
    free(c);
    *token = pick;
    return TMM_OK;
}
