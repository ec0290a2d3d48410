/* The BPE model on one pre-tokenized word, as Hugging Face's (BPE::merge_word
 * and Word::merge_all): the first symbols are the word's bytes (byte-level)
 * or characters; one the vocabulary lacks becomes its "<0xHH>" byte tokens
 * (byte_fallback), else unk_token (consecutive ones fused with fuse_unk),
 * else nothing. Then the pair of lowest rank is merged until no pair has one,
 * the leftmost first among equal ranks. Symbols are a linked list and
 * candidate pairs sit in a binary heap ordered by (rank, position), checked
 * when popped: O(n log n) for a word of n symbols. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

typedef struct tok_heap_entry {
    uint32_t rank, pos, result;
} tok_heap_entry;

void tmm_tok_scratch_free(tok_scratch *s)
{
    free(s->id), free(s->prev), free(s->next), free(s->heap);
    free(s->norm[0].data), free(s->norm[1].data), free(s->meta.data);
    *s = (tok_scratch){ 0 };
}

static tmm_status reserve(tok_scratch *s, size_t n)
{
    if (n <= s->capacity)
        return TMM_OK;
    size_t cap = s->capacity ? s->capacity : 64;
    while (cap < n)
        cap *= 2;
    free(s->id), free(s->prev), free(s->next), free(s->heap);
    s->id = malloc(cap * sizeof *s->id);
    s->prev = malloc(cap * sizeof *s->prev);
    s->next = malloc(cap * sizeof *s->next);
    s->heap = malloc(cap * sizeof *s->heap);
    s->capacity = cap;
    if (!s->id || !s->prev || !s->next || !s->heap) {
        free(s->id), free(s->prev), free(s->next), free(s->heap);
        s->id = s->prev = s->next = NULL, s->heap = NULL, s->capacity = 0;
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a word of %zu symbols", n / 4);
    }
    return TMM_OK;
}

static bool before(const tok_heap_entry *a, const tok_heap_entry *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(tok_heap_entry *h, size_t *n, tok_heap_entry e)
{
    size_t i = (*n)++;
    while (i > 0 && before(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static tok_heap_entry heap_pop(tok_heap_entry *h, size_t *n)
{
    tok_heap_entry top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && before(&h[c + 1], &h[c]))
            c++;
        if (!before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n)
        h[i] = last;
    return top;
}

#define END UINT32_MAX

/* The heap holds at most one live entry per adjacent pair, plus stale ones:
 * each merge removes a pair and adds at most two, so 2n entries bound it for
 * n symbols. */
static void consider(const tmm_tokenizer *t, tok_scratch *s, size_t *h, uint32_t pos)
{
    uint32_t nx = s->next[pos];
    if (nx == END)
        return;
    uint32_t r = tmm_tok_rank(t, s->id[pos], s->id[nx]);
    if (r != TMM_TOK_NONE)
        heap_push(s->heap, h, (tok_heap_entry){ r, pos, t->merge_result[r] });
}

/* The symbols of one unit (a byte or a character) the vocabulary lacks:
 * "<0xHH>" tokens of its bytes, or unk_token (pending in *unk, fused or
 * flushed as Hugging Face does), or none. */
typedef struct symbols {
    uint32_t *id;
    uint32_t n;
    bool unk; /* an unk pending */
} symbols;

static tmm_status unknown(const tmm_tokenizer *t, symbols *sy, const char *bytes, size_t len)
{
    if (t->byte_fallback) {
        size_t i = 0;
        while (i < len && t->fallback_id[(unsigned char)bytes[i]] != TMM_TOK_NONE)
            i++;
        if (i == len) { /* like Hugging Face, a pending unk stays pending */
            for (i = 0; i < len; i++)
                sy->id[sy->n++] = t->fallback_id[(unsigned char)bytes[i]];
            return TMM_OK;
        }
    }
    if (!t->unk_token)
        return TMM_OK;
    if (t->unk_id == TMM_TOK_NONE)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the text needs unk_token '%.80s', which is not in the vocabulary",
                        t->unk_token);
    if (sy->unk && !t->fuse_unk)
        sy->id[sy->n++] = t->unk_id;
    sy->unk = true;
    return TMM_OK;
}

static tmm_status first_symbols(const tmm_tokenizer *t, tok_scratch *s, const char *w, size_t n, uint32_t *count)
{
    symbols sy = { s->id, 0, false };
    for (size_t i = 0; i < n;) {
        uint32_t id, cp;
        size_t len = 1;
        if (t->byte_level) {
            id = t->byte_id[(unsigned char)w[i]];
        } else {
            len = tmm_tok_utf8_get(w + i, n - i, &cp);
            id = tmm_tok_word_id(t, w + i, len);
        }
        if (id != TMM_TOK_NONE) {
            if (sy.unk)
                sy.id[sy.n++] = t->unk_id, sy.unk = false;
            sy.id[sy.n++] = id;
        } else if (t->byte_level) { /* the model sees the byte's character */
            tmm_tok_map m;
            char ch[4];
            tmm_tok_byte_map(&m);
            TMM_TRY(unknown(t, &sy, ch, tmm_tok_utf8_put(m.byte_char[(unsigned char)w[i]], ch)));
        } else {
            TMM_TRY(unknown(t, &sy, w + i, len));
        }
        i += len;
    }
    if (sy.unk)
        sy.id[sy.n++] = t->unk_id;
    *count = sy.n;
    return TMM_OK;
}

tmm_status tmm_tok_bpe_word(const tmm_tokenizer *t, tok_scratch *s, const char *word, size_t n, tmm_tokens *out)
{
    if (n == 0)
        return TMM_OK;
    if (n == 1 && t->all_bytes)
        return tmm_tokens_push(out, t->byte_id[(unsigned char)word[0]]);
    if (t->ignore_merges) {
        uint32_t id = tmm_tok_word_id(t, word, n);
        if (id != TMM_TOK_NONE)
            return tmm_tokens_push(out, id);
    }
    if (n > UINT32_MAX / 8)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a pre-tokenized word of %zu bytes is too long", n);
    /* at most 2 symbols per byte (a byte-level fallback), and 2 heap entries per symbol */
    TMM_TRY(reserve(s, 4 * n));
    uint32_t m = 0;
    if (t->all_bytes) {
        for (uint32_t i = 0; i < n; i++)
            s->id[i] = t->byte_id[(unsigned char)word[i]];
        m = (uint32_t)n;
    } else {
        TMM_TRY(first_symbols(t, s, word, n, &m));
    }
    if (m == 0)
        return TMM_OK;
    for (uint32_t i = 0; i < m; i++) {
        s->prev[i] = i ? i - 1 : END;
        s->next[i] = i + 1 < m ? i + 1 : END;
    }
    size_t h = 0;
    for (uint32_t i = 0; i + 1 < m; i++)
        consider(t, s, &h, i);
    while (h) {
        tok_heap_entry e = heap_pop(s->heap, &h);
        uint32_t nx = s->next[e.pos];
        /* stale unless the pair there still merges into the same token (Hugging Face's check) */
        if (s->id[e.pos] == END || nx == END)
            continue;
        uint32_t r = tmm_tok_rank(t, s->id[e.pos], s->id[nx]);
        if (r == TMM_TOK_NONE || t->merge_result[r] != e.result)
            continue;
        s->id[e.pos] = e.result;
        s->id[nx] = END; /* dead */
        s->next[e.pos] = s->next[nx];
        if (s->next[nx] != END)
            s->prev[s->next[nx]] = e.pos;
        if (s->prev[e.pos] != END)
            consider(t, s, &h, s->prev[e.pos]);
        consider(t, s, &h, e.pos);
    }
    for (uint32_t i = 0; i != END; i = s->next[i])
        TMM_TRY(tmm_tokens_push(out, s->id[i]));
    return TMM_OK;
}

/* ---- where a char-level word can be cut ------------------------------------- */

/* A token's first or last character (an invalid byte: 0x110000 + the byte). */
static uint32_t edge_char(const tmm_tokenizer *t, uint32_t id, bool last)
{
    const char *p = t->data + t->offset[id];
    size_t n = tmm_tok_len(t, id), i = 0, at = 0;
    uint32_t cp = 0;
    while (i < n) {
        size_t len = tmm_tok_utf8_get(p + i, n - i, &cp);
        at = i;
        if (!last)
            break;
        i += len;
    }
    return cp == UINT32_MAX ? 0x110000u + (unsigned char)p[at] : cp;
}

static uint64_t cross_hash(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) >> 19; }

tmm_status tmm_tok_build_cross(tmm_tokenizer *t)
{
    free(t->cross_keys);
    t->cross_keys = NULL;
    t->split_words = !t->byte_level && !t->bytes && !t->ignore_merges;
    if (!t->split_words)
        return TMM_OK;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)t->n_merges + 2)
        cap *= 2;
    t->cross_keys = malloc(cap * sizeof *t->cross_keys);
    if (!t->cross_keys)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the tokenizer's tables");
    memset(t->cross_keys, 0xFF, cap * sizeof *t->cross_keys);
    t->cross_mask = cap - 1;
    for (uint32_t r = 0; r < t->n_merges; r++) {
        uint32_t a = t->merge_pair[r][0], b = t->merge_pair[r][1];
        if (tmm_tok_len(t, a) == 0 || tmm_tok_len(t, b) == 0)
            continue;
        uint64_t key = (uint64_t)edge_char(t, a, true) << 21 | edge_char(t, b, false);
        uint64_t i = cross_hash(key) & t->cross_mask;
        while (t->cross_keys[i] != UINT64_MAX && t->cross_keys[i] != key)
            i = (i + 1) & t->cross_mask;
        t->cross_keys[i] = key;
    }
    return TMM_OK;
}

bool tmm_tok_crosses(const tmm_tokenizer *t, uint32_t a, uint32_t b)
{
    uint64_t key = (uint64_t)a << 21 | b;
    for (uint64_t i = cross_hash(key) & t->cross_mask;; i = (i + 1) & t->cross_mask) {
        if (t->cross_keys[i] == UINT64_MAX)
            return false;
        if (t->cross_keys[i] == key)
            return true;
    }
}
