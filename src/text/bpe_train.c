/* Byte-level BPE training (bpe_train.h). Counting: words in an
 * open-addressing table, pruned to the bound. Merging: every adjacent pair's
 * count and the words it occurs in; a max-heap of (count, pair) whose stale
 * entries are skipped when popped; each merge rewrites only the words that
 * hold the pair and updates the counts of the pairs around each occurrence
 * (no recount). Ties: the pair with the smaller left id, then the smaller
 * right id. */
#include "text/bpe_train.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

/* ---- counting ------------------------------------------------------------ */

typedef struct wentry {
    char *word; /* NULL: empty slot */
    uint64_t count, hash;
    uint32_t len;
} wentry;

struct tmm_bpe_counter {
    wentry *slots;
    uint64_t cap, used, max_words, total;
    pcre2_code *re;
    pcre2_match_data *match;
};

tmm_status tmm_bpe_counter_new(uint64_t max_words, tmm_bpe_counter **out)
{
    *out = NULL;
    if (max_words < 1024)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "keep at least 1024 distinct words while counting (got %llu)",
                        (unsigned long long)max_words);
    tmm_bpe_counter *c = calloc(1, sizeof *c);
    if (!c)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    c->max_words = max_words;
    c->cap = 1u << 16;
    c->slots = calloc(c->cap, sizeof *c->slots);
    c->match = pcre2_match_data_create(1, NULL);
    tmm_status s = c->slots && c->match ? tmm_tok_compile(TMM_TOK_GPT2_PATTERN, false, &c->re)
                                        : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    if (s != TMM_OK) {
        tmm_bpe_counter_free(c);
        return s;
    }
    *out = c;
    return TMM_OK;
}

void tmm_bpe_counter_free(tmm_bpe_counter *c)
{
    if (!c)
        return;
    for (uint64_t i = 0; c->slots && i < c->cap; i++)
        free(c->slots[i].word);
    free(c->slots);
    pcre2_code_free(c->re);
    pcre2_match_data_free(c->match);
    free(c);
}

uint64_t tmm_bpe_counter_distinct(const tmm_bpe_counter *c) { return c->used; }
uint64_t tmm_bpe_counter_total(const tmm_bpe_counter *c) { return c->total; }

/* Moves the entries with count >= min into a table of cap slots (the others freed). */
static tmm_status rehash(tmm_bpe_counter *c, uint64_t cap, uint64_t min)
{
    wentry *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %llu words", (unsigned long long)cap / 2);
    uint64_t used = 0;
    for (uint64_t i = 0; i < c->cap; i++) {
        wentry *e = &c->slots[i];
        if (!e->word)
            continue;
        if (e->count < min) {
            free(e->word);
            continue;
        }
        uint64_t j = e->hash & (cap - 1);
        while (slots[j].word)
            j = (j + 1) & (cap - 1);
        slots[j] = *e;
        used++;
    }
    free(c->slots);
    c->slots = slots, c->cap = cap, c->used = used;
    return TMM_OK;
}

static tmm_status prune(tmm_bpe_counter *c)
{
    uint64_t min = 2;
    for (;;) {
        uint64_t keep = 0;
        for (uint64_t i = 0; i < c->cap; i++)
            keep += c->slots[i].word && c->slots[i].count >= min;
        if (keep <= c->max_words / 2)
            break;
        min *= 2;
    }
    return rehash(c, c->cap, min);
}

static tmm_status add_word(tmm_bpe_counter *c, const char *w, size_t n)
{
    c->total++;
    if (n > TMM_BPE_MAX_WORD)
        return TMM_OK;
    uint64_t h = tmm_tok_hash(w, n), i = h & (c->cap - 1);
    for (; c->slots[i].word; i = (i + 1) & (c->cap - 1))
        if (c->slots[i].hash == h && c->slots[i].len == n && memcmp(c->slots[i].word, w, n) == 0) {
            c->slots[i].count++;
            return TMM_OK;
        }
    char *copy = malloc(n);
    if (!copy)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a word");
    memcpy(copy, w, n);
    c->slots[i] = (wentry){ copy, 1, h, (uint32_t)n };
    c->used++;
    if (c->used > c->max_words)
        return prune(c);
    if (2 * c->used > c->cap)
        return rehash(c, 2 * c->cap, 0);
    return TMM_OK;
}

tmm_status tmm_bpe_count(tmm_bpe_counter *c, const char *text, size_t n)
{
    size_t pos = 0, gap = 0;
    while (pos < n) {
        int rc = pcre2_match(c->re, (PCRE2_SPTR)text, n, pos, 0, c->match, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "pre-tokenization failed (PCRE2 error %d)", rc);
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->match);
        if (ov[0] > gap) /* invalid UTF-8 between matches: a word of its own, as when encoding */
            TMM_TRY(add_word(c, text + gap, ov[0] - gap));
        TMM_TRY(add_word(c, text + ov[0], ov[1] - ov[0]));
        pos = gap = ov[1]; /* the GPT-2 pattern never matches empty */
    }
    return gap < n ? add_word(c, text + gap, n - gap) : TMM_OK;
}

/* ---- merging ------------------------------------------------------------- */

typedef struct pair {
    uint32_t a, b;
    int64_t count;
    uint32_t *where; /* words holding it (maybe no longer), no word twice in a row */
    uint32_t n_where, cap_where;
    uint32_t stamp; /* last merge that touched it, + 1 */
} pair;

typedef struct hentry {
    int64_t count;
    uint32_t a, b;
} hentry;

typedef struct trainer {
    uint32_t n_words;
    uint32_t *sym, *len;
    uint64_t *start, *wcount;
    uint32_t *wstamp;
    pair *pairs;
    uint32_t n_pairs, cap_pairs;
    uint32_t *slots; /* pair table: index into pairs or UINT32_MAX */
    uint64_t mask;
    hentry *heap;
    size_t n_heap, cap_heap;
    uint32_t *touched;
    uint32_t n_touched, cap_touched;
    bool oom;
} trainer;

static uint64_t pkey(uint32_t a, uint32_t b) { return ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull; }

static bool grow(void **p, uint32_t *cap, size_t elem, uint32_t need)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap : 4;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return false;
    *p = q, *cap = c;
    return true;
}

static bool grow_table(trainer *t)
{
    uint64_t cap = (t->mask + 1) * 2;
    uint32_t *slots = malloc(cap * sizeof *slots);
    if (!slots)
        return false;
    memset(slots, 0xFF, cap * sizeof *slots);
    for (uint32_t i = 0; i < t->n_pairs; i++) {
        uint64_t j = (pkey(t->pairs[i].a, t->pairs[i].b) >> 20) & (cap - 1);
        while (slots[j] != UINT32_MAX)
            j = (j + 1) & (cap - 1);
        slots[j] = i;
    }
    free(t->slots);
    t->slots = slots, t->mask = cap - 1;
    return true;
}

/* The pair (a, b), made if new; NULL when out of memory. */
static pair *get_pair(trainer *t, uint32_t a, uint32_t b)
{
    uint64_t j = (pkey(a, b) >> 20) & t->mask;
    for (; t->slots[j] != UINT32_MAX; j = (j + 1) & t->mask) {
        pair *p = &t->pairs[t->slots[j]];
        if (p->a == a && p->b == b)
            return p;
    }
    if (2 * ((uint64_t)t->n_pairs + 1) > t->mask + 1) {
        if (!grow_table(t))
            return NULL;
        return get_pair(t, a, b);
    }
    if (t->n_pairs == UINT32_MAX - 1 || !grow((void **)&t->pairs, &t->cap_pairs, sizeof *t->pairs, t->n_pairs + 1))
        return NULL;
    t->slots[j] = t->n_pairs;
    pair *p = &t->pairs[t->n_pairs++];
    *p = (pair){ .a = a, .b = b };
    return p;
}

static bool heap_before(const hentry *x, const hentry *y)
{
    if (x->count != y->count)
        return x->count > y->count;
    return x->a != y->a ? x->a < y->a : x->b < y->b;
}

static bool heap_push(trainer *t, hentry e)
{
    if (t->n_heap == t->cap_heap) {
        size_t cap = t->cap_heap ? 2 * t->cap_heap : 1024;
        hentry *h = realloc(t->heap, cap * sizeof *h);
        if (!h)
            return false;
        t->heap = h, t->cap_heap = cap;
    }
    size_t i = t->n_heap++;
    while (i > 0 && heap_before(&e, &t->heap[(i - 1) / 2])) {
        t->heap[i] = t->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    t->heap[i] = e;
    return true;
}

static hentry heap_pop(trainer *t)
{
    hentry top = t->heap[0], last = t->heap[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap_before(&t->heap[c + 1], &t->heap[c]))
            c++;
        if (!heap_before(&t->heap[c], &last))
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n)
        t->heap[i] = last;
    return top;
}

/* Adds delta occurrences of (a, b) in word w; stamp marks the merge. */
static void change(trainer *t, uint32_t a, uint32_t b, int64_t delta, uint32_t w, uint32_t stamp)
{
    pair *p = get_pair(t, a, b);
    if (!p) {
        t->oom = true;
        return;
    }
    p->count += delta;
    if (delta > 0 && (p->n_where == 0 || p->where[p->n_where - 1] != w)) {
        if (!grow((void **)&p->where, &p->cap_where, sizeof *p->where, p->n_where + 1)) {
            t->oom = true;
            return;
        }
        p->where[p->n_where++] = w;
    }
    if (p->stamp != stamp) {
        p->stamp = stamp;
        uint32_t idx = (uint32_t)(p - t->pairs);
        if (!grow((void **)&t->touched, &t->cap_touched, sizeof *t->touched, t->n_touched + 1)) {
            t->oom = true;
            return;
        }
        t->touched[t->n_touched++] = idx;
    }
}

/* Replaces each (a, b) in word w, left to right, by id. */
static void merge_word(trainer *t, uint32_t w, uint32_t a, uint32_t b, uint32_t id, uint32_t stamp)
{
    uint32_t *s = t->sym + t->start[w];
    uint32_t n = t->len[w];
    int64_t c = (int64_t)t->wcount[w];
    for (uint32_t i = 0; i + 1 < n; i++) {
        if (s[i] != a || s[i + 1] != b)
            continue;
        if (i > 0) {
            change(t, s[i - 1], a, -c, w, stamp);
            change(t, s[i - 1], id, c, w, stamp);
        }
        if (i + 2 < n) {
            change(t, b, s[i + 2], -c, w, stamp);
            change(t, id, s[i + 2], c, w, stamp);
        }
        s[i] = id;
        memmove(s + i + 1, s + i + 2, (size_t)(n - i - 2) * sizeof *s);
        n--;
    }
    t->len[w] = n;
}

static void trainer_free(trainer *t)
{
    for (uint32_t i = 0; i < t->n_pairs; i++)
        free(t->pairs[i].where);
    free(t->sym), free(t->len), free(t->start), free(t->wcount), free(t->wstamp);
    free(t->pairs), free(t->slots), free(t->heap), free(t->touched);
}

static tmm_status load_words(trainer *t, const tmm_bpe_counter *c)
{
    uint64_t total = 0;
    for (uint64_t i = 0; i < c->cap; i++)
        total += c->slots[i].word ? c->slots[i].len : 0;
    if (c->used >= UINT32_MAX)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "too many distinct words");
    t->n_words = (uint32_t)c->used;
    size_t nw = t->n_words ? t->n_words : 1;
    t->sym = malloc((total ? total : 1) * sizeof *t->sym);
    t->len = malloc(nw * sizeof *t->len);
    t->start = malloc(nw * sizeof *t->start);
    t->wcount = malloc(nw * sizeof *t->wcount);
    t->wstamp = calloc(nw, sizeof *t->wstamp);
    t->slots = malloc(1024 * sizeof *t->slots);
    if (!t->sym || !t->len || !t->start || !t->wcount || !t->wstamp || !t->slots)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %u words", t->n_words);
    memset(t->slots, 0xFF, 1024 * sizeof *t->slots);
    t->mask = 1023;
    uint64_t at = 0;
    uint32_t w = 0;
    for (uint64_t i = 0; i < c->cap; i++) {
        const wentry *e = &c->slots[i];
        if (!e->word)
            continue;
        t->start[w] = at, t->len[w] = e->len, t->wcount[w] = e->count;
        for (uint32_t k = 0; k < e->len; k++)
            t->sym[at + k] = (unsigned char)e->word[k];
        for (uint32_t k = 0; k + 1 < e->len; k++)
            change(t, t->sym[at + k], t->sym[at + k + 1], (int64_t)e->count, w, 1);
        at += e->len;
        w++;
    }
    for (uint32_t i = 0; i < t->n_pairs && !t->oom; i++)
        if (!heap_push(t, (hentry){ t->pairs[i].count, t->pairs[i].a, t->pairs[i].b }))
            t->oom = true;
    t->n_touched = 0;
    return t->oom ? tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory counting pairs") : TMM_OK;
}

/* The tokenizer of the bytes, <|endoftext|> and the merges. */
static tmm_status build(uint32_t n_merges, const uint32_t (*merges)[2], tmm_tokenizer **out)
{
    static const char eot[] = "<|endoftext|>";
    uint32_t vocab = 257 + n_merges;
    tmm_tokenizer *t;
    TMM_TRY(tmm_tok_alloc(vocab, &t));
    uint64_t *len = malloc((size_t)vocab * sizeof *len);
    t->merge_pair = malloc((n_merges ? n_merges : 1) * sizeof *t->merge_pair);
    t->merge_result = malloc((n_merges ? n_merges : 1) * sizeof *t->merge_result);
    t->added = malloc(sizeof *t->added);
    tmm_status s = len && t->merge_pair && t->merge_result && t->added
                       ? TMM_OK
                       : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the tokenizer");
    if (s == TMM_OK) {
        for (uint32_t i = 0; i < 256; i++)
            len[i] = 1;
        len[256] = sizeof eot - 1;
        uint64_t total = 256 + len[256];
        for (uint32_t r = 0; r < n_merges; r++)
            total += len[257 + r] = len[merges[r][0]] + len[merges[r][1]];
        t->data = malloc(total);
        if (!t->data)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the tokenizer");
    }
    if (s == TMM_OK) {
        uint64_t off = 0;
        for (uint32_t id = 0; id < vocab; id++) {
            t->offset[id] = off;
            if (id < 256)
                t->data[off] = (char)id;
            else if (id == 256)
                memcpy(t->data + off, eot, len[256]);
            else {
                const uint32_t *m = merges[id - 257];
                memcpy(t->data + off, t->data + t->offset[m[0]], len[m[0]]);
                memcpy(t->data + off + len[m[0]], t->data + t->offset[m[1]], len[m[1]]);
            }
            t->flags[id] = TOK_PRESENT | TOK_IN_VOCAB | (id == 256 ? TOK_ADDED | TOK_SPECIAL : 0);
            off += len[id];
        }
        t->offset[vocab] = off;
        t->added[0] = 256, t->n_added = 1;
        t->n_merges = n_merges;
        for (uint32_t r = 0; r < n_merges; r++) {
            t->merge_pair[r][0] = merges[r][0], t->merge_pair[r][1] = merges[r][1];
            t->merge_result[r] = 257 + r;
        }
        if ((s = tmm_tok_set_byte_level(t, NULL)) == TMM_OK)
            s = tmm_tok_finish(t);
    }
    free(len);
    if (s != TMM_OK) {
        tmm_tokenizer_free(t);
        return s;
    }
    *out = t;
    return TMM_OK;
}

tmm_status tmm_bpe_train(const tmm_bpe_counter *c, uint32_t vocab, tmm_bpe_progress_fn progress, void *user,
                         tmm_tokenizer **out)
{
    *out = NULL;
    if (vocab < 257 || vocab > TMM_TOK_MAX_VOCAB)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a byte-level BPE vocabulary is 257 (the bytes and <|endoftext|>) "
                        "to %u, got %u", TMM_TOK_MAX_VOCAB, vocab);
    uint32_t want = vocab - 257, done = 0;
    uint32_t (*merges)[2] = malloc((want ? want : 1) * sizeof *merges);
    trainer t = { 0 };
    tmm_status s = merges ? load_words(&t, c) : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    while (s == TMM_OK && done < want && t.n_heap) {
        hentry e = heap_pop(&t);
        pair *p = get_pair(&t, e.a, e.b);
        if (!p || p->count != e.count || e.count <= 0)
            continue; /* stale: a newer entry holds its count */
        uint32_t id = 257 + done, stamp = done + 2;
        merges[done][0] = e.a, merges[done][1] = e.b;
        uint32_t pi = (uint32_t)(p - t.pairs), n_where = p->n_where;
        uint32_t *where = p->where;
        p->where = NULL, p->n_where = p->cap_where = 0; /* change() may move t.pairs: keep the list apart */
        for (uint32_t k = 0; k < n_where && !t.oom; k++) {
            uint32_t w = where[k];
            if (t.wstamp[w] == stamp)
                continue;
            t.wstamp[w] = stamp;
            merge_word(&t, w, e.a, e.b, id, stamp);
        }
        free(where);
        t.pairs[pi].count = 0;
        for (uint32_t k = 0; k < t.n_touched && !t.oom; k++) {
            const pair *q = &t.pairs[t.touched[k]];
            if (q->count > 0 && !heap_push(&t, (hentry){ q->count, q->a, q->b }))
                t.oom = true;
        }
        t.n_touched = 0;
        if (t.oom)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory while merging");
        done++;
        if (progress && (done % (want / 256 + 1) == 0 || done == want))
            progress(done, want, user);
    }
    trainer_free(&t);
    if (s == TMM_OK)
        s = build(done, (const uint32_t(*)[2])merges, out);
    free(merges);
    return s;
}
