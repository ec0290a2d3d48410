/* The word cache: pre-tokenized words (up to WORD_MAX bytes) and their ids,
 * in an open-addressing table over one arena. When the table is half full or
 * the arena full, it starts again empty: bounded memory (about 10 MiB), no
 * eviction bookkeeping, and text repeats its common words soon enough. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

#define SLOTS (1u << 17)
#define ARENA (8u << 20)
#define WORD_MAX 256u

struct cache_slot {
    uint64_t hash;
    uint32_t offset; /* in arena: the word's bytes, then (aligned) its ids */
    uint16_t length, count;
};

tmm_tok_cache *tmm_tok_cache_new(void)
{
    tmm_tok_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->slots = calloc(SLOTS, sizeof *c->slots);
    c->arena = malloc(ARENA);
    if (!c->slots || !c->arena) {
        tmm_tok_cache_free(c);
        return NULL;
    }
    c->n_slots = SLOTS;
    c->arena_cap = ARENA;
    c->arena_used = 1; /* offset 0 marks an empty slot */
    return c;
}

void tmm_tok_cache_free(tmm_tok_cache *c)
{
    if (!c)
        return;
    tmm_tok_scratch_free(&c->scratch);
    pcre2_match_data_free(c->match);
    free(c->slots), free(c->arena);
    free(c);
}

void tmm_tok_cache_disable_words(tmm_tok_cache *c) { c->disabled = true; }

static void clear(tmm_tok_cache *c)
{
    memset(c->slots, 0, c->n_slots * sizeof *c->slots);
    c->used = 0;
    c->arena_used = 1;
}

bool tmm_tok_cache_get(tmm_tok_cache *c, const tmm_tokenizer *tok, const char *word, size_t n, const uint32_t **ids,
                       uint32_t *count)
{
    if (c->disabled || n > WORD_MAX)
        return false;
    if (c->owner != tok || c->owner_fingerprint != tok->fingerprint) {
        clear(c);
        c->owner = tok, c->owner_fingerprint = tok->fingerprint;
    }
    uint64_t h = tmm_tok_hash(word, n);
    for (size_t i = h & (c->n_slots - 1);; i = (i + 1) & (c->n_slots - 1)) {
        const struct cache_slot *s = &c->slots[i];
        if (!s->offset)
            return false;
        if (s->hash == h && s->length == n && memcmp(c->arena + s->offset, word, n) == 0) {
            *ids = (const uint32_t *)(const void *)(c->arena + ((s->offset + n + 3) & ~(size_t)3));
            *count = s->count;
            return true;
        }
    }
}

void tmm_tok_cache_put(tmm_tok_cache *c, const char *word, size_t n, const uint32_t *ids, uint32_t count)
{
    if (c->disabled || n > WORD_MAX || count > n)
        return;
    size_t need = n + 4 + (size_t)count * sizeof *ids;
    if (2 * (c->used + 1) > c->n_slots || c->arena_used + need > c->arena_cap)
        clear(c);
    uint64_t h = tmm_tok_hash(word, n);
    size_t i = h & (c->n_slots - 1);
    while (c->slots[i].offset)
        i = (i + 1) & (c->n_slots - 1);
    size_t off = c->arena_used, ids_off = (off + n + 3) & ~(size_t)3;
    memcpy(c->arena + off, word, n);
    if (count)
        memcpy(c->arena + ids_off, ids, (size_t)count * sizeof *ids);
    c->arena_used = ids_off + (size_t)count * sizeof *ids;
    c->slots[i] = (struct cache_slot){ h, (uint32_t)off, (uint16_t)n, (uint16_t)count };
    c->used++;
}
