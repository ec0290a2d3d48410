/* The MQAR task (mqar.h; docs/data.md, "The MQAR task"). */
#include "train/mqar.h"

#include <stdio.h>
#include <stdlib.h>

#include "model/rng.h"
#include "status.h"
#include "train/data.h"

void tmm_mqar_config_init(tmm_mqar_config *c)
{
    c->pairs = TMM_MQAR_DEFAULT_PAIRS;
    c->queries = 0;
    c->keys = TMM_MQAR_DEFAULT_KEYS;
    c->values = TMM_MQAR_DEFAULT_VALUES;
}

uint32_t tmm_mqar_queries(const tmm_mqar_config *c) { return c->queries ? c->queries : c->pairs; }

uint32_t tmm_mqar_vocab(const tmm_mqar_config *c) { return 1 + c->keys + c->values; }

tmm_status tmm_mqar_check(const tmm_mqar_config *c, uint32_t n)
{
    const uint32_t max = TMM_MQAR_MAX_SYMBOLS;
    if (c->keys < 1 || c->keys > max)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mqar: %u keys (task.keys, --keys); it must be 1 .. %u", c->keys,
                        max);
    if (c->values < 2 || c->values > max)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mqar: %u values (task.values, --values); it must be 2 .. %u",
                        c->values, max);
    if (c->pairs < 1 || c->pairs > c->keys)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mqar: %u pairs (task.pairs, --pairs) with %u keys (task.keys, "
                        "--keys): the keys of a row are distinct, so pairs must be 1 .. keys", c->pairs, c->keys);
    if (c->queries > c->pairs)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mqar: %u queries (task.queries, --queries) of %u pairs "
                        "(task.pairs, --pairs): a row queries each key at most once (0: every pair)", c->queries,
                        c->pairs);
    const uint64_t need = 2 * (uint64_t)c->pairs + 2 * (uint64_t)tmm_mqar_queries(c);
    if (need > n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mqar: %u pairs and %u queries need rows of n >= %llu tokens (two "
                        "per pair, two per query), but n (model.n_ctx, --n-ctx) is %u: raise --n-ctx or lower "
                        "--pairs or --queries", c->pairs, tmm_mqar_queries(c), (unsigned long long)need, n);
    return TMM_OK;
}

void tmm_mqar_describe(const tmm_mqar_config *c, uint32_t n, uint64_t seed, char *buf, size_t size)
{
    const uint32_t q = tmm_mqar_queries(c);
    snprintf(buf, size,
             "mqar: n %u = %u key-value pairs, then %u queries (key, value)%s; %u keys, %u values, %u scored per "
             "row (chance 1/%u); vocab %u; seed %llu; held-out set fixed for every seed",
             n, c->pairs, q, 2 * (c->pairs + q) < n ? ", then filler 0" : "", c->keys, c->values, q, c->values,
             tmm_mqar_vocab(c), (unsigned long long)seed);
}

/* One row: perm holds 0 .. keys-1 in order on entry and on return; order
 * has room for `pairs` entries, value and swapped too. */
static void mqar_row(const tmm_mqar_config *c, uint64_t k, uint32_t n, uint32_t *perm, uint32_t *order,
                     uint32_t *value, uint32_t *swapped, uint32_t *tok, int32_t *tgt)
{
    const uint32_t P = c->pairs, Q = tmm_mqar_queries(c), K = c->keys;
    /* the keys: a partial Fisher-Yates shuffle of the key symbols, undone below */
    for (uint32_t i = 0; i < P; i++) {
        uint32_t r = i + (uint32_t)(tmm_rng_bits(k, i) % (K - i));
        uint32_t t = perm[i];
        perm[i] = perm[r], perm[r] = t;
        swapped[i] = r;
        value[i] = 1 + K + (uint32_t)(tmm_rng_bits(k, (uint64_t)P + i) % c->values);
        tok[2 * i] = 1 + perm[i];
        tok[2 * i + 1] = value[i];
    }
    /* the queries: the first Q pairs of a shuffle of the pairs */
    for (uint32_t i = 0; i < P; i++)
        order[i] = i;
    for (uint32_t q = 0; q < Q; q++) {
        uint32_t r = q + (uint32_t)(tmm_rng_bits(k, 2 * (uint64_t)P + q) % (P - q));
        uint32_t t = order[q];
        order[q] = order[r], order[r] = t;
        tok[2 * P + 2 * q] = 1 + perm[order[q]];
        tok[2 * P + 2 * q + 1] = value[order[q]];
    }
    for (uint32_t t = 2 * (P + Q); t < n; t++)
        tok[t] = TMM_MQAR_FILLER;
    if (tgt) {
        for (uint32_t t = 0; t < n; t++)
            tgt[t] = TMM_TARGET_IGNORE;
        for (uint32_t q = 0; q < Q; q++)
            tgt[2 * P + 2 * q] = (int32_t)value[order[q]];
    }
    for (uint32_t i = P; i-- > 0;) {
        uint32_t t = perm[i];
        perm[i] = perm[swapped[i]], perm[swapped[i]] = t;
    }
}

tmm_status tmm_mqar_rows(const tmm_mqar_config *c, uint64_t stream, uint64_t j0, uint32_t batch, uint32_t n,
                         uint32_t *tokens, int32_t *targets)
{
    TMM_TRY(tmm_mqar_check(c, n));
    uint32_t *perm = malloc((size_t)c->keys * sizeof *perm), *scratch = malloc((size_t)c->pairs * 3 * sizeof *scratch);
    if (!perm || !scratch) {
        free(perm), free(scratch);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    for (uint32_t i = 0; i < c->keys; i++)
        perm[i] = i;
    for (uint32_t r = 0; r < batch; r++)
        mqar_row(c, tmm_rng_bits(stream, j0 + r), n, perm, scratch, scratch + c->pairs, scratch + 2 * c->pairs,
                 tokens + (size_t)r * n, targets ? targets + (size_t)r * n : NULL);
    free(perm), free(scratch);
    return TMM_OK;
}
