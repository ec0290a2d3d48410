/* The tokenizer object: the byte tokenizer, the tables every tokenizer
 * builds once it is made, encoding (added tokens, pre-tokenization, BPE with
 * the word cache) and decoding. docs/tokenizer.md. */
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/limits.h"
#include "status.h"
#include "text/tokenizer_impl.h"

#define EOT_TEXT "<|endoftext|>"

tmm_status tmm_tokens_push(tmm_tokens *t, uint32_t id)
{
    if (t->count == t->capacity) {
        size_t cap = t->capacity ? 2 * t->capacity : 256;
        uint32_t *ids = realloc(t->ids, cap * sizeof *ids);
        if (!ids)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %zu token ids", cap);
        t->ids = ids, t->capacity = cap;
    }
    t->ids[t->count++] = id;
    return TMM_OK;
}

tmm_status tmm_bytes_append(tmm_bytes *b, const void *data, size_t length)
{
    if (length > b->capacity - b->length) {
        size_t cap = b->capacity ? b->capacity : 256;
        while (cap - b->length < length)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %zu bytes of text", cap);
        b->data = p, b->capacity = cap;
    }
    if (length)
        memcpy(b->data + b->length, data, length);
    b->length += length;
    return TMM_OK;
}

tmm_status tmm_tok_alloc(uint32_t vocab, tmm_tokenizer **out)
{
    *out = NULL;
    tmm_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a tokenizer");
    t->vocab = vocab;
    t->offset = calloc((size_t)vocab + 1, sizeof *t->offset);
    t->flags = calloc(vocab ? vocab : 1, 1);
    t->eot = TMM_TOK_NONE;
    if (!t->offset || !t->flags) {
        tmm_tokenizer_free(t);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a vocabulary of %u", vocab);
    }
    *out = t;
    return TMM_OK;
}

void tmm_tokenizer_free(tmm_tokenizer *tok)
{
    if (!tok)
        return;
    free(tok->offset), free(tok->data), free(tok->flags);
    free(tok->merge_pair), free(tok->merge_result);
    free(tok->rank_keys), free(tok->rank_vals), free(tok->word_slots);
    free(tok->unk_token);
    for (uint32_t i = 0; i < tok->n_steps; i++) {
        free(tok->steps[i].pattern);
        pcre2_code_free(tok->steps[i].re);
    }
    free(tok->added), free(tok->added_sorted);
    free(tok);
}

tmm_status tmm_tokenizer_bytes(tmm_tokenizer **out)
{
    tmm_tokenizer *t;
    TMM_TRY(tmm_tok_alloc(TMM_TOK_BYTES_VOCAB, &t));
    t->bytes = true;
    size_t n = 256 + sizeof EOT_TEXT - 1;
    t->data = malloc(n);
    t->added = malloc(sizeof *t->added);
    if (!t->data || !t->added) {
        tmm_tokenizer_free(t);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the byte tokenizer");
    }
    for (uint32_t b = 0; b < 256; b++) {
        t->data[b] = (char)b;
        t->offset[b + 1] = b + 1;
        t->flags[b] = TOK_PRESENT | TOK_IN_VOCAB;
    }
    memcpy(t->data + 256, EOT_TEXT, sizeof EOT_TEXT - 1);
    t->offset[257] = n;
    t->flags[256] = TOK_PRESENT | TOK_ADDED | TOK_SPECIAL | TOK_IN_VOCAB;
    t->added[0] = 256;
    t->n_added = 1;
    t->steps[0] = (tok_step){ .byte_level = true, .use_regex = true, .trim_offsets = true };
    t->n_steps = 1;
    t->dec_add_prefix_space = t->dec_trim_offsets = t->dec_use_regex = true;
    tmm_status s = tmm_tok_finish(t);
    if (s != TMM_OK) {
        tmm_tokenizer_free(t);
        return s;
    }
    *out = t;
    return TMM_OK;
}

tmm_status tmm_tokenizer_load(const char *name_or_path, tmm_tokenizer **out)
{
    *out = NULL;
    if (strcmp(name_or_path, "bytes") == 0)
        return tmm_tokenizer_bytes(out);
    void *text;
    size_t n;
    TMM_TRY(tmm_read_file(name_or_path, "tokenizer.json", TMM_LIMIT_TOKENIZER, &text, &n));
    tmm_status s = tmm_tokenizer_parse(text, n, name_or_path, out);
    free(text);
    return s;
}

uint32_t tmm_tokenizer_vocab(const tmm_tokenizer *tok) { return tok->vocab; }
uint32_t tmm_tokenizer_eot(const tmm_tokenizer *tok) { return tok->eot; }
const char *tmm_tokenizer_kind(const tmm_tokenizer *tok) { return tok->bytes ? "bytes" : "bpe"; }
uint64_t tmm_tokenizer_fingerprint(const tmm_tokenizer *tok) { return tok->fingerprint; }

size_t tmm_tokenizer_token_bytes(const tmm_tokenizer *tok, uint32_t id, const char **bytes)
{
    if (id >= tok->vocab || !(tok->flags[id] & TOK_PRESENT)) {
        *bytes = "";
        return 0;
    }
    *bytes = tok->data + tok->offset[id];
    return (size_t)(tok->offset[id + 1] - tok->offset[id]);
}

static size_t token_len(const tmm_tokenizer *tok, uint32_t id) { return (size_t)(tok->offset[id + 1] - tok->offset[id]); }

uint64_t tmm_tok_hash(const void *data, size_t n)
{
    uint64_t h = tmm_fnv1a64(data, n);
    return h ^ (h >> 29);
}

static uint64_t pair_hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 17; }

uint32_t tmm_tok_rank(const tmm_tokenizer *tok, uint32_t left, uint32_t right)
{
    if (!tok->n_merges)
        return TMM_TOK_NONE;
    uint64_t key = (uint64_t)left << 32 | right;
    for (uint64_t i = pair_hash(key) & tok->rank_mask;; i = (i + 1) & tok->rank_mask) {
        if (tok->rank_vals[i] == TMM_TOK_NONE)
            return TMM_TOK_NONE;
        if (tok->rank_keys[i] == key)
            return tok->rank_vals[i];
    }
}

uint32_t tmm_tok_word_id(const tmm_tokenizer *tok, const char *bytes, size_t n)
{
    for (uint64_t i = tmm_tok_hash(bytes, n) & tok->word_mask;; i = (i + 1) & tok->word_mask) {
        uint32_t id = tok->word_slots[i];
        if (id == TMM_TOK_NONE || (token_len(tok, id) == n && memcmp(tok->data + tok->offset[id], bytes, n) == 0))
            return id;
    }
}

static uint64_t table_size(uint64_t n)
{
    uint64_t c = 16;
    while (c < 2 * n)
        c *= 2;
    return c;
}

typedef struct added_key {
    uint32_t first, len, id;
} added_key;

static int by_first_byte_longest(const void *x, const void *y)
{
    const added_key *a = x, *b = y;
    if (a->first != b->first)
        return a->first < b->first ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void fingerprint(tmm_tokenizer *t)
{
    uint64_t h = TMM_FNV1A64_BASIS;
    const char *kind = tmm_tokenizer_kind(t);
    h = tmm_fnv1a64_more(h, kind, strlen(kind) + 1);
    h = tmm_fnv1a64_more(h, &t->vocab, sizeof t->vocab);
    for (uint32_t id = 0; id < t->vocab; id++) {
        uint64_t len = token_len(t, id);
        h = tmm_fnv1a64_more(h, &t->flags[id], 1);
        h = tmm_fnv1a64_more(h, &len, sizeof len);
        h = tmm_fnv1a64_more(h, t->data + t->offset[id], len);
    }
    h = tmm_fnv1a64_more(h, &t->n_merges, sizeof t->n_merges);
    if (t->n_merges)
        h = tmm_fnv1a64_more(h, t->merge_pair, (size_t)t->n_merges * sizeof *t->merge_pair);
    uint8_t im = t->ignore_merges;
    h = tmm_fnv1a64_more(h, &im, 1);
    for (uint32_t i = 0; i < t->n_steps; i++) {
        const tok_step *st = &t->steps[i];
        uint8_t f[4] = { st->byte_level, st->literal, st->add_prefix_space, st->use_regex };
        h = tmm_fnv1a64_more(h, f, sizeof f);
        if (st->pattern)
            h = tmm_fnv1a64_more(h, st->pattern, strlen(st->pattern) + 1);
    }
    t->fingerprint = h;
}

tmm_status tmm_tok_finish(tmm_tokenizer *t)
{
    for (uint32_t b = 0; b < 256; b++)
        t->byte_id[b] = TMM_TOK_NONE;
    for (uint32_t id = 0; id < t->vocab; id++)
        if ((t->flags[id] & (TOK_PRESENT | TOK_ADDED)) == TOK_PRESENT && token_len(t, id) == 1)
            t->byte_id[(unsigned char)t->data[t->offset[id]]] = id;
    for (uint32_t b = 0; b < 256; b++)
        if (t->byte_id[b] == TMM_TOK_NONE)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the vocabulary has no token for byte 0x%02X: a byte-level BPE "
                            "needs all 256 bytes so that any text can be encoded", b);
    /* ranks */
    uint64_t cap = table_size(t->n_merges);
    t->rank_keys = malloc(cap * sizeof *t->rank_keys);
    t->rank_vals = malloc(cap * sizeof *t->rank_vals);
    uint64_t words = 0;
    for (uint32_t id = 0; id < t->vocab; id++)
        words += (t->flags[id] & (TOK_PRESENT | TOK_ADDED)) == TOK_PRESENT;
    uint64_t wcap = table_size(words);
    t->word_slots = malloc(wcap * sizeof *t->word_slots);
    t->added_sorted = malloc((t->n_added ? t->n_added : 1) * sizeof *t->added_sorted);
    if (!t->rank_keys || !t->rank_vals || !t->word_slots || !t->added_sorted)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the tokenizer's tables");
    t->rank_mask = cap - 1;
    memset(t->rank_vals, 0xFF, cap * sizeof *t->rank_vals);
    for (uint32_t r = 0; r < t->n_merges; r++) {
        uint64_t key = (uint64_t)t->merge_pair[r][0] << 32 | t->merge_pair[r][1];
        uint64_t i = pair_hash(key) & t->rank_mask;
        while (t->rank_vals[i] != TMM_TOK_NONE && t->rank_keys[i] != key)
            i = (i + 1) & t->rank_mask;
        if (t->rank_vals[i] != TMM_TOK_NONE)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "merge %u repeats merge %u (ids %u and %u)", r,
                            t->rank_vals[i], t->merge_pair[r][0], t->merge_pair[r][1]);
        t->rank_keys[i] = key, t->rank_vals[i] = r;
    }
    t->word_mask = wcap - 1;
    memset(t->word_slots, 0xFF, wcap * sizeof *t->word_slots);
    for (uint32_t id = 0; id < t->vocab; id++) {
        if ((t->flags[id] & (TOK_PRESENT | TOK_ADDED)) != TOK_PRESENT)
            continue;
        size_t n = token_len(t, id);
        uint64_t i = tmm_tok_hash(t->data + t->offset[id], n) & t->word_mask;
        while (t->word_slots[i] != TMM_TOK_NONE) {
            uint32_t o = t->word_slots[i];
            if (token_len(t, o) == n && memcmp(t->data + t->offset[o], t->data + t->offset[id], n) == 0)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tokens %u and %u are the same bytes", o, id);
            i = (i + 1) & t->word_mask;
        }
        t->word_slots[i] = id;
    }
    /* added tokens: by first byte, longest first (leftmost-longest matching) */
    added_key *keys = malloc((t->n_added ? t->n_added : 1) * sizeof *keys);
    if (!keys)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the tokenizer's tables");
    for (uint32_t i = 0; i < t->n_added; i++) {
        uint32_t id = t->added[i];
        keys[i] = (added_key){ (unsigned char)t->data[t->offset[id]], (uint32_t)token_len(t, id), id };
    }
    qsort(keys, t->n_added, sizeof *keys, by_first_byte_longest);
    for (uint32_t i = 0; i < t->n_added; i++)
        t->added_sorted[i] = keys[i].id;
    free(keys);
    for (uint32_t b = 0, k = 0; b <= 256; b++) {
        while (k < t->n_added && (unsigned char)t->data[t->offset[t->added_sorted[k]]] < b)
            k++;
        t->added_first[b] = b == 256 ? t->n_added : k;
    }
    t->eot = TMM_TOK_NONE;
    for (uint32_t i = 0; i < t->n_added && t->eot == TMM_TOK_NONE; i++) {
        uint32_t id = t->added[i];
        if (token_len(t, id) == sizeof EOT_TEXT - 1 && memcmp(t->data + t->offset[id], EOT_TEXT, token_len(t, id)) == 0)
            t->eot = id;
    }
    for (uint32_t i = 0; i < t->n_added && t->eot == TMM_TOK_NONE; i++)
        if (t->flags[t->added[i]] & TOK_SPECIAL)
            t->eot = t->added[i];
    for (uint32_t i = 0; i < t->n_steps; i++) {
        tok_step *st = &t->steps[i];
        if (!st->re && (st->pattern || (st->byte_level && st->use_regex)))
            TMM_TRY(tmm_tok_compile(st->pattern ? st->pattern : TMM_TOK_GPT2_PATTERN, st->literal, &st->re));
    }
    fingerprint(t);
    return TMM_OK;
}

/* ---- encoding ------------------------------------------------------------ */

typedef struct encoder {
    const tmm_tokenizer *tok;
    tmm_tok_cache *cache;
    tok_scratch *scratch;
    pcre2_match_data *match;
    tmm_tokens *out;
} encoder;

static tmm_status emit_word(encoder *e, const char *w, size_t n)
{
    if (n == 0)
        return TMM_OK;
    const uint32_t *ids;
    uint32_t count;
    if (e->cache && tmm_tok_cache_get(e->cache, e->tok, w, n, &ids, &count)) {
        for (uint32_t i = 0; i < count; i++)
            TMM_TRY(tmm_tokens_push(e->out, ids[i]));
        return TMM_OK;
    }
    size_t first = e->out->count;
    TMM_TRY(tmm_tok_bpe_word(e->tok, e->scratch, w, n, e->out));
    if (e->cache)
        tmm_tok_cache_put(e->cache, w, n, e->out->ids + first, (uint32_t)(e->out->count - first));
    return TMM_OK;
}

static tmm_status run_steps(encoder *e, uint32_t step, const char *p, size_t n);

/* Split (Isolated): the matches and the runs between them are the pieces.
 * Invalid UTF-8 matches nothing (PCRE2_MATCH_INVALID_UTF), so it ends up in
 * the runs between matches: docs/tokenizer.md, "Invalid UTF-8". */
static tmm_status split(encoder *e, const pcre2_code *re, uint32_t next, const char *p, size_t n)
{
    size_t pos = 0, gap = 0;
    while (pos < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)p, n, pos, 0, e->match, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "pre-tokenization failed at byte %zu of a piece of %zu: %s", pos,
                            n, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->match);
        size_t s = ov[0], end = ov[1];
        if (end == s) { /* an empty match is no piece: look again one character on */
            pos = s + 1;
            while (pos < n && ((unsigned char)p[pos] & 0xC0) == 0x80)
                pos++;
            continue;
        }
        if (s > gap)
            TMM_TRY(run_steps(e, next, p + gap, s - gap));
        TMM_TRY(run_steps(e, next, p + s, end - s));
        pos = gap = end;
    }
    return gap < n ? run_steps(e, next, p + gap, n - gap) : TMM_OK;
}

static tmm_status run_steps(encoder *e, uint32_t step, const char *p, size_t n)
{
    const tmm_tokenizer *t = e->tok;
    if (n == 0)
        return TMM_OK;
    if (step == t->n_steps)
        return emit_word(e, p, n);
    const tok_step *st = &t->steps[step];
    if (!st->byte_level)
        return split(e, st->re, step + 1, p, n);
    if (st->add_prefix_space && p[0] != ' ') {
        char *q = malloc(n + 1);
        if (!q)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a piece of %zu bytes", n + 1);
        q[0] = ' ';
        memcpy(q + 1, p, n);
        tmm_status s = st->use_regex ? split(e, st->re, step + 1, q, n + 1) : run_steps(e, step + 1, q, n + 1);
        free(q);
        return s;
    }
    return st->use_regex ? split(e, st->re, step + 1, p, n) : run_steps(e, step + 1, p, n);
}

static tmm_status encode_segment(encoder *e, const char *p, size_t n)
{
    if (e->tok->bytes) {
        for (size_t i = 0; i < n; i++)
            TMM_TRY(tmm_tokens_push(e->out, (unsigned char)p[i]));
        return TMM_OK;
    }
    return run_steps(e, 0, p, n);
}

/* The added token that starts at p (the longest), or TMM_TOK_NONE. */
static uint32_t added_at(const tmm_tokenizer *t, const char *p, size_t left, bool special)
{
    unsigned char b = (unsigned char)*p;
    for (uint32_t k = t->added_first[b]; k < t->added_first[b + 1]; k++) {
        uint32_t id = t->added_sorted[k];
        size_t len = token_len(t, id);
        if ((special || !(t->flags[id] & TOK_SPECIAL)) && len <= left && memcmp(p, t->data + t->offset[id], len) == 0)
            return id;
    }
    return TMM_TOK_NONE;
}

static tmm_status encode_all(encoder *e, const char *text, size_t length, bool special)
{
    const tmm_tokenizer *t = e->tok;
    size_t seg = 0;
    for (size_t i = 0; i < length && t->n_added; i++) {
        unsigned char b = (unsigned char)text[i];
        if (t->added_first[b] == t->added_first[b + 1])
            continue;
        uint32_t id = added_at(t, text + i, length - i, special);
        if (id == TMM_TOK_NONE)
            continue;
        TMM_TRY(encode_segment(e, text + seg, i - seg));
        TMM_TRY(tmm_tokens_push(e->out, id));
        i += token_len(t, id) - 1;
        seg = i + 1;
    }
    return encode_segment(e, text + seg, length - seg);
}

tmm_status tmm_tokenizer_encode(const tmm_tokenizer *tok, tmm_tok_cache *cache, const char *text, size_t length,
                                bool special, tmm_tokens *out)
{
    encoder e = { .tok = tok, .cache = cache, .out = out };
    tok_scratch local = { 0 };
    e.scratch = cache ? &cache->scratch : &local;
    bool own_match = !cache || !cache->match;
    e.match = own_match ? pcre2_match_data_create(1, NULL) : cache->match;
    if (!e.match)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for regex match data");
    if (cache && own_match)
        cache->match = e.match, own_match = false;
    size_t before = out->count;
    tmm_status s = encode_all(&e, text, length, special);
    if (s != TMM_OK)
        out->count = before;
    if (own_match)
        pcre2_match_data_free(e.match);
    tmm_tok_scratch_free(&local);
    return s;
}

tmm_status tmm_tokenizer_decode(const tmm_tokenizer *tok, const uint32_t *ids, size_t count, bool special,
                                tmm_bytes *out)
{
    size_t before = out->length;
    for (size_t i = 0; i < count; i++) {
        uint32_t id = ids[i];
        if (id >= tok->vocab) {
            out->length = before;
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "token id %u (at %zu) is not in the vocabulary of %u", id, i,
                            tok->vocab);
        }
        if ((tok->flags[id] & TOK_SPECIAL) && !special)
            continue;
        tmm_status s = tmm_bytes_append(out, tok->data + tok->offset[id], token_len(tok, id));
        if (s != TMM_OK) {
            out->length = before;
            return s;
        }
    }
    return TMM_OK;
}
