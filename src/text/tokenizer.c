/* The tokenizer object: the byte tokenizer, loading (tokenizer.json or a
 * .tiktoken file), the tables every tokenizer builds once it is made, its
 * fingerprint, and the template of special tokens. Encoding is encode.c,
 * decoding decoder.c. docs/tokenizer.md. */
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/limits.h"
#include "status.h"
#include "text/tokenizer_json.h"

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
    t->eot = t->unk_id = TMM_TOK_NONE;
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
    free(tok->rank_keys), free(tok->rank_vals), free(tok->word_slots), free(tok->cross_keys);
    tmm_tok_parts_free(tok);
    free(tok->piece_offset), free(tok->piece_data);
    free(tok->added);
    tmm_tok_added_free(&tok->raw_set);
    tmm_tok_added_free(&tok->norm_set);
    pcre2_code_free(tok->word_re);
    free(tok);
}

tmm_status tmm_tok_set_byte_level(tmm_tokenizer *t, const char *pattern)
{
    t->byte_level = true;
    t->n_steps = 0;
    if (pattern) {
        t->steps[t->n_steps] = (tok_step){ .kind = TOK_STEP_SPLIT };
        if (!(t->steps[t->n_steps].pat.text = malloc(strlen(pattern) + 1)))
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a pattern");
        strcpy(t->steps[t->n_steps].pat.text, pattern);
        TMM_TRY(tmm_tok_compile(pattern, false, &t->steps[t->n_steps++].pat.re));
    }
    t->steps[t->n_steps] = (tok_step){ .kind = TOK_STEP_BYTE_LEVEL, .use_regex = !pattern, .trim_offsets = true };
    if (!pattern)
        TMM_TRY(tmm_tok_compile(TMM_TOK_GPT2_PATTERN, false, &t->steps[t->n_steps].pat.re));
    t->n_steps++;
    t->post[0] = (tok_post){ .kind = TOK_POST_BYTE_LEVEL, .add_prefix_space = true, .use_regex = true };
    t->n_post = 1;
    t->decoders[0] = (tok_dec){ .kind = TOK_DEC_BYTE_LEVEL, .add_prefix_space = true, .trim_offsets = true,
                                .use_regex = true };
    t->n_decoders = 1;
    return TMM_OK;
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
    tmm_status s = tmm_tok_set_byte_level(t, NULL);
    t->n_post = 0;
    if (s == TMM_OK)
        s = tmm_tok_finish(t);
    if (s != TMM_OK) {
        tmm_tokenizer_free(t);
        return s;
    }
    *out = t;
    return TMM_OK;
}

/* tokenizer.json starts with '{'; anything else is read as a .tiktoken file. */
static bool is_json(const char *text, size_t n)
{
    size_t i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    if (n - i >= 3 && memcmp(text + i, "\xEF\xBB\xBF", 3) == 0)
        return true;
    return i == n || text[i] == '{' || text[i] == '[' || text[i] == '"';
}

tmm_status tmm_tokenizer_load_as(const char *path, const char *encoding, tmm_tokenizer **out)
{
    *out = NULL;
    if (strcmp(path, "bytes") == 0 && !encoding)
        return tmm_tokenizer_bytes(out);
    void *text;
    size_t n;
    TMM_TRY(tmm_read_file(path, "tokenizer", TMM_LIMIT_TOKENIZER, &text, &n));
    tmm_status s;
    if (!encoding && is_json(text, n))
        s = tmm_tokenizer_parse(text, n, path, out);
    else
        s = tmm_tok_tiktoken_parse(text, n, path, encoding ? encoding : tmm_tok_tiktoken_name(path), true, out);
    free(text);
    return s;
}

tmm_status tmm_tokenizer_load(const char *name_or_path, tmm_tokenizer **out)
{
    return tmm_tokenizer_load_as(name_or_path, NULL, out);
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
    if (tok->piece_offset) {
        *bytes = tok->piece_data + tok->piece_offset[id];
        return (size_t)(tok->piece_offset[id + 1] - tok->piece_offset[id]);
    }
    *bytes = tok->data + tok->offset[id];
    return tmm_tok_len(tok, id);
}

bool tmm_tokenizer_has_template(const tmm_tokenizer *tok) { return tok->has_template; }

tmm_status tmm_tokenizer_add_special(const tmm_tokenizer *tok, tmm_tokens *ids, size_t first)
{
    if (!tok->has_template)
        return TMM_OK;
    const tok_template *tp = &tok->template;
    size_t n = ids->count - first;
    uint32_t *seq = malloc((n ? n : 1) * sizeof *seq);
    if (!seq)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %zu token ids", n);
    if (n)
        memcpy(seq, ids->ids + first, n * sizeof *seq);
    ids->count = first;
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < tp->n_single && s == TMM_OK; i++) {
        const tok_template_piece *pc = &tp->single[i];
        if (pc->sequence)
            for (size_t k = 0; k < n && s == TMM_OK; k++)
                s = tmm_tokens_push(ids, seq[k]);
        else
            for (uint32_t k = 0; k < tp->specials[pc->special].n && s == TMM_OK; k++)
                s = tmm_tokens_push(ids, tp->specials[pc->special].ids[k]);
    }
    free(seq);
    return s;
}

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
        if (id == TMM_TOK_NONE || (tmm_tok_len(tok, id) == n && memcmp(tok->data + tok->offset[id], bytes, n) == 0))
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

static uint64_t more_str(uint64_t h, const char *s) { return tmm_fnv1a64_more(h, s ? s : "", s ? strlen(s) + 1 : 1); }

/* What a tokenizer maps. Parts that tmm's first tokenizers (byte-level, no
 * normalizer, ...) did not have are hashed only when present, so their
 * fingerprints, which shards record, stay as they were. */
static void fingerprint(tmm_tokenizer *t)
{
    uint64_t h = TMM_FNV1A64_BASIS;
    const char *kind = tmm_tokenizer_kind(t);
    h = tmm_fnv1a64_more(h, kind, strlen(kind) + 1);
    h = tmm_fnv1a64_more(h, &t->vocab, sizeof t->vocab);
    for (uint32_t id = 0; id < t->vocab; id++) {
        uint64_t len = tmm_tok_len(t, id);
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
        uint8_t f[4] = { st->kind == TOK_STEP_BYTE_LEVEL, st->pat.literal, st->add_prefix_space, st->use_regex };
        h = tmm_fnv1a64_more(h, f, sizeof f);
        if (st->pat.text)
            h = tmm_fnv1a64_more(h, st->pat.text, strlen(st->pat.text) + 1);
        if (st->kind == TOK_STEP_METASPACE) {
            uint8_t g[2] = { (uint8_t)st->prepend_scheme, st->split };
            h = more_str(tmm_fnv1a64_more(h, "metaspace", 10), st->replacement);
            h = tmm_fnv1a64_more(h, g, sizeof g);
        }
    }
    if (!t->byte_level && !t->bytes)
        h = tmm_fnv1a64_more(h, "char-level", 11);
    if (t->byte_fallback || t->fuse_unk || t->unk_token) {
        uint8_t g[2] = { t->byte_fallback, t->fuse_unk };
        h = more_str(tmm_fnv1a64_more(tmm_fnv1a64_more(h, "model", 6), g, sizeof g), t->unk_token);
    }
    for (uint32_t i = 0; i < t->n_norms; i++) {
        const tok_norm *nm = &t->norms[i];
        uint8_t g[2] = { (uint8_t)nm->kind, nm->pat.literal };
        h = tmm_fnv1a64_more(tmm_fnv1a64_more(h, "normalizer", 11), g, sizeof g);
        h = more_str(more_str(h, nm->pat.text), nm->content);
    }
    if (t->has_template) {
        const tok_template *tp = &t->template;
        h = tmm_fnv1a64_more(h, "template", 9);
        for (uint32_t i = 0; i < tp->n_single; i++) {
            const tok_template_piece *pc = &tp->single[i];
            h = tmm_fnv1a64_more(h, &pc->sequence, 1);
            if (!pc->sequence)
                h = tmm_fnv1a64_more(h, tp->specials[pc->special].ids,
                                     tp->specials[pc->special].n * sizeof *tp->specials[pc->special].ids);
        }
    }
    if (!t->byte_level && !t->bytes)
        for (uint32_t i = 0; i < t->n_decoders; i++) {
            const tok_dec *d = &t->decoders[i];
            uint32_t g[5] = { (uint32_t)d->kind, d->pat.literal, d->start, d->stop, (uint32_t)d->prepend_scheme };
            h = tmm_fnv1a64_more(tmm_fnv1a64_more(h, "decoder", 8), g, sizeof g);
            h = more_str(more_str(more_str(more_str(h, d->pat.text), d->content), d->strip), d->replacement);
        }
    t->fingerprint = h;
}

/* The end-of-text token: the first of these added tokens that is there, else
 * the first special added token. */
static void find_eot(tmm_tokenizer *t)
{
    static const char *const names[] = { EOT_TEXT, "<|end_of_text|>", "</s>" };
    t->eot = TMM_TOK_NONE;
    for (size_t k = 0; k < 3 && t->eot == TMM_TOK_NONE; k++)
        for (uint32_t i = 0; i < t->n_added && t->eot == TMM_TOK_NONE; i++) {
            uint32_t id = t->added[i];
            if (tmm_tok_len(t, id) == strlen(names[k]) && memcmp(t->data + t->offset[id], names[k], strlen(names[k])) == 0)
                t->eot = id;
        }
    for (uint32_t i = 0; i < t->n_added && t->eot == TMM_TOK_NONE; i++)
        if (t->flags[t->added[i]] & TOK_SPECIAL)
            t->eot = t->added[i];
}

static tmm_status build_ranks(tmm_tokenizer *t)
{
    uint64_t cap = table_size(t->n_merges);
    t->rank_keys = malloc(cap * sizeof *t->rank_keys);
    t->rank_vals = malloc(cap * sizeof *t->rank_vals);
    if (!t->rank_keys || !t->rank_vals)
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
    return TMM_OK;
}

/* bytes -> id of the model's tokens */
static tmm_status build_words(tmm_tokenizer *t)
{
    uint64_t words = 0;
    for (uint32_t id = 0; id < t->vocab; id++)
        words += (t->flags[id] & TOK_IN_VOCAB) != 0;
    uint64_t wcap = table_size(words);
    t->word_slots = malloc(wcap * sizeof *t->word_slots);
    if (!t->word_slots)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the tokenizer's tables");
    t->word_mask = wcap - 1;
    memset(t->word_slots, 0xFF, wcap * sizeof *t->word_slots);
    for (uint32_t id = 0; id < t->vocab; id++) {
        if (!(t->flags[id] & TOK_IN_VOCAB))
            continue;
        size_t n = tmm_tok_len(t, id);
        uint64_t i = tmm_tok_hash(t->data + t->offset[id], n) & t->word_mask;
        while (t->word_slots[i] != TMM_TOK_NONE) {
            uint32_t o = t->word_slots[i];
            if (tmm_tok_len(t, o) == n && memcmp(t->data + t->offset[o], t->data + t->offset[id], n) == 0)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tokens %u and %u are the same bytes", o, id);
            i = (i + 1) & t->word_mask;
        }
        t->word_slots[i] = id;
    }
    return TMM_OK;
}

tmm_status tmm_tok_finish(tmm_tokenizer *t)
{
    TMM_TRY(build_ranks(t));
    TMM_TRY(build_words(t));
    t->all_bytes = t->byte_level || t->bytes;
    for (uint32_t b = 0; b < 256; b++) {
        char one = (char)b, hex[7];
        t->byte_id[b] = t->byte_level || t->bytes ? tmm_tok_word_id(t, &one, 1) : TMM_TOK_NONE;
        t->all_bytes &= t->byte_id[b] != TMM_TOK_NONE;
        static const char digits[] = "0123456789ABCDEF";
        memcpy(hex, "<0x", 3);
        hex[3] = digits[b >> 4], hex[4] = digits[b & 15], hex[5] = '>', hex[6] = '\0';
        t->fallback_id[b] = tmm_tok_word_id(t, hex, 6);
    }
    t->unk_id = t->unk_token ? tmm_tok_word_id(t, t->unk_token, strlen(t->unk_token)) : TMM_TOK_NONE;
    TMM_TRY(tmm_tok_build_cross(t));
    TMM_TRY(tmm_tok_added_build(t));
    TMM_TRY(tmm_tok_decoder_pieces(t));
    find_eot(t);
    fingerprint(t);
    return TMM_OK;
}
