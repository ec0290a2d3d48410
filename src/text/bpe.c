/* BPE of one pre-tokenized word: the symbols start as the word's bytes and
 * the pair of lowest rank is merged until no pair has one, the leftmost first
 * among equal ranks (Hugging Face's order). Symbols are a linked list over
 * the byte positions and candidate pairs sit in a binary heap ordered by
 * (rank, position), checked when popped: O(n log n) for a word of n bytes. */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

typedef struct tok_heap_entry {
    uint32_t rank, pos, left, right;
} tok_heap_entry;

void tmm_tok_scratch_free(tok_scratch *s)
{
    free(s->id), free(s->prev), free(s->next), free(s->heap);
    *s = (tok_scratch){ 0 };
}

static tmm_status reserve(tok_scratch *s, size_t n)
{
    if (n <= s->capacity)
        return TMM_OK;
    size_t cap = s->capacity ? s->capacity : 64;
    while (cap < n)
        cap *= 2;
    tmm_tok_scratch_free(s);
    s->id = malloc(cap * sizeof *s->id);
    s->prev = malloc(cap * sizeof *s->prev);
    s->next = malloc(cap * sizeof *s->next);
    s->heap = malloc(cap * sizeof *s->heap);
    if (!s->id || !s->prev || !s->next || !s->heap) {
        tmm_tok_scratch_free(s);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a word of %zu bytes", n);
    }
    s->capacity = cap;
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
 * each merge removes a pair and adds at most two, so n entries suffice for n
 * symbols only when stale entries are popped first; 2n bounds it always. */
static void consider(const tmm_tokenizer *t, tok_scratch *s, size_t *h, uint32_t pos)
{
    uint32_t nx = s->next[pos];
    if (nx == END)
        return;
    uint32_t r = tmm_tok_rank(t, s->id[pos], s->id[nx]);
    if (r != TMM_TOK_NONE)
        heap_push(s->heap, h, (tok_heap_entry){ r, pos, s->id[pos], s->id[nx] });
}

tmm_status tmm_tok_bpe_word(const tmm_tokenizer *t, tok_scratch *s, const char *word, size_t n, tmm_tokens *out)
{
    if (n == 1)
        return tmm_tokens_push(out, t->byte_id[(unsigned char)word[0]]);
    if (t->ignore_merges) {
        uint32_t id = tmm_tok_word_id(t, word, n);
        if (id != TMM_TOK_NONE)
            return tmm_tokens_push(out, id);
    }
    if (n > UINT32_MAX / 4)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a pre-tokenized word of %zu bytes is too long", n);
    TMM_TRY(reserve(s, 2 * n));
    for (uint32_t i = 0; i < n; i++) {
        s->id[i] = t->byte_id[(unsigned char)word[i]];
        s->prev[i] = i ? i - 1 : END;
        s->next[i] = i + 1 < n ? i + 1 : END;
    }
    size_t h = 0;
    for (uint32_t i = 0; i + 1 < n; i++)
        consider(t, s, &h, i);
    while (h) {
        tok_heap_entry e = heap_pop(s->heap, &h);
        uint32_t nx = s->next[e.pos];
        /* stale: the left symbol was merged away or changed, or its right neighbour did */
        if (s->id[e.pos] != e.left || nx == END || s->id[nx] != e.right)
            continue;
        s->id[e.pos] = t->merge_result[e.rank];
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
