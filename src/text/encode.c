/* Encoding, Hugging Face's pipeline (docs/tokenizer.md, "Encoding"): the
 * added tokens with normalized false are split off the text; each piece
 * between is normalized, the added tokens with normalized true are split off
 * it; each piece between goes through the pre-tokenizer's steps, and each of
 * their pieces through the BPE model (with the word cache). A piece remembers
 * whether it starts the text (Metaspace's prepend_scheme "first"). */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

typedef struct encoder {
    const tmm_tokenizer *tok;
    tmm_tok_cache *cache;
    tok_scratch *scratch;
    pcre2_match_data *match;
    tmm_tokens *out;
    bool special;
} encoder;

static tmm_status emit_part(encoder *e, const char *w, size_t n)
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
    if (e->cache) /* a word may have no ids (characters the model drops) */
        tmm_tok_cache_put(e->cache, w, n, e->out->ids ? e->out->ids + first : NULL, (uint32_t)(e->out->count - first));
    return TMM_OK;
}

/* A char-level word, cut where no merge can join its two sides (split_words): the parts encode
 * as the whole would, and short ones come from the word cache. */
static tmm_status emit_word(encoder *e, const char *w, size_t n)
{
    const tmm_tokenizer *t = e->tok;
    if (!t->split_words || n <= 1)
        return emit_part(e, w, n);
    size_t start = 0;
    uint32_t prev = UINT32_MAX; /* the last character, when the vocabulary has it */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = tmm_tok_utf8_get(w + i, n - i, &cp);
        bool known = cp != UINT32_MAX && tmm_tok_word_id(t, w + i, len) != TMM_TOK_NONE;
        if (known && prev != UINT32_MAX && !tmm_tok_crosses(t, prev, cp)) {
            TMM_TRY(emit_part(e, w + start, i - start));
            start = i;
        }
        prev = known ? cp : UINT32_MAX;
        i += len;
    }
    return emit_part(e, w + start, n - start);
}

static tmm_status run_steps(encoder *e, uint32_t step, const char *p, size_t n, bool at_start);

/* Split (Isolated): the matches and the runs between them are the pieces.
 * Invalid UTF-8 matches nothing (PCRE2_MATCH_INVALID_UTF), so it ends up in
 * the runs between matches: docs/tokenizer.md, "Invalid UTF-8". */
static tmm_status split(encoder *e, const pcre2_code *re, uint32_t next, const char *p, size_t n, bool at_start)
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
            TMM_TRY(run_steps(e, next, p + gap, s - gap, at_start && gap == 0));
        TMM_TRY(run_steps(e, next, p + s, end - s, at_start && s == 0));
        pos = gap = end;
    }
    return gap < n ? run_steps(e, next, p + gap, n - gap, at_start && gap == 0) : TMM_OK;
}

/* Metaspace: spaces become the replacement character, which is put first
 * (always, or for the text's first piece), then the piece is cut before each
 * one (split; the character goes with what follows it). */
static tmm_status metaspace(encoder *e, const tok_step *st, uint32_t next, const char *p, size_t n, bool at_start)
{
    const char *rep = st->replacement;
    size_t rl = strlen(rep);
    tmm_bytes *q = &e->scratch->meta;
    q->length = 0;
    bool starts = (n > 0 && p[0] == ' ') || (n >= rl && memcmp(p, rep, rl) == 0);
    if (!starts && (st->prepend_scheme == TOK_PREPEND_ALWAYS || (st->prepend_scheme == TOK_PREPEND_FIRST && at_start)))
        TMM_TRY(tmm_bytes_append(q, rep, rl));
    for (size_t i = 0, done = 0; i <= n; i++) {
        if (i == n || p[i] == ' ') {
            TMM_TRY(tmm_bytes_append(q, p + done, i - done));
            if (i < n)
                TMM_TRY(tmm_bytes_append(q, rep, rl));
            done = i + 1;
        }
    }
    /* the pieces point into q, which the next steps (the model) do not touch */
    const char *s = q->data;
    size_t m = q->length;
    if (!st->split)
        return run_steps(e, next, s, m, at_start);
    size_t start = 0;
    for (size_t i = 1; i + rl <= m; i++)
        if (memcmp(s + i, rep, rl) == 0) {
            TMM_TRY(run_steps(e, next, s + start, i - start, at_start && start == 0));
            start = i;
            i += rl - 1;
        }
    return run_steps(e, next, s + start, m - start, at_start && start == 0);
}

static tmm_status run_steps(encoder *e, uint32_t step, const char *p, size_t n, bool at_start)
{
    const tmm_tokenizer *t = e->tok;
    if (n == 0)
        return TMM_OK;
    if (step == t->n_steps)
        return emit_word(e, p, n);
    const tok_step *st = &t->steps[step];
    if (st->kind == TOK_STEP_SPLIT)
        return split(e, st->pat.re, step + 1, p, n, at_start);
    if (st->kind == TOK_STEP_METASPACE)
        return metaspace(e, st, step + 1, p, n, at_start);
    if (st->add_prefix_space && p[0] != ' ') {
        char *q = malloc(n + 1);
        if (!q)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a piece of %zu bytes", n + 1);
        q[0] = ' ';
        memcpy(q + 1, p, n);
        tmm_status s = st->use_regex ? split(e, st->pat.re, step + 1, q, n + 1, at_start)
                                     : run_steps(e, step + 1, q, n + 1, at_start);
        free(q);
        return s;
    }
    return st->use_regex ? split(e, st->pat.re, step + 1, p, n, at_start) : run_steps(e, step + 1, p, n, at_start);
}

/* The added tokens of set in p[0..n): the pieces between go to piece(). */
static tmm_status split_added(encoder *e, const tok_added_set *set, const char *p, size_t n, bool at_start,
                              tmm_status (*piece)(encoder *, const char *, size_t, bool))
{
    size_t pos = 0, done = 0, start, stop;
    uint32_t id;
    while (tmm_tok_added_next(e->tok, set, p, n, e->special, done, &pos, &start, &stop, &id)) {
        if (start > done)
            TMM_TRY(piece(e, p + done, start - done, at_start && done == 0));
        TMM_TRY(tmm_tokens_push(e->out, id));
        done = stop;
    }
    return done < n ? piece(e, p + done, n - done, at_start && done == 0) : TMM_OK;
}

static tmm_status pre_tokenize(encoder *e, const char *p, size_t n, bool at_start)
{
    return run_steps(e, 0, p, n, at_start);
}

static tmm_status normalize(encoder *e, const char *p, size_t n, bool at_start)
{
    const tmm_tokenizer *t = e->tok;
    if (n == 0)
        return TMM_OK;
    if (t->n_norms == 0 && t->norm_set.n == 0)
        return run_steps(e, 0, p, n, at_start);
    /* the normalized text stays in the scratch buffers until the next piece */
    const char *q;
    size_t m;
    TMM_TRY(tmm_tok_normalize(t, e->scratch, p, n, &q, &m));
    return split_added(e, &t->norm_set, q, m, at_start, pre_tokenize);
}

static tmm_status encode_all(encoder *e, const char *text, size_t length)
{
    const tmm_tokenizer *t = e->tok;
    if (t->bytes) {
        size_t pos = 0, done = 0, start, stop;
        uint32_t id;
        while (tmm_tok_added_next(t, &t->raw_set, text, length, e->special, done, &pos, &start, &stop, &id)) {
            for (size_t i = done; i < start; i++)
                TMM_TRY(tmm_tokens_push(e->out, (unsigned char)text[i]));
            TMM_TRY(tmm_tokens_push(e->out, id));
            done = stop;
        }
        for (size_t i = done; i < length; i++)
            TMM_TRY(tmm_tokens_push(e->out, (unsigned char)text[i]));
        return TMM_OK;
    }
    return split_added(e, &t->raw_set, text, length, true, normalize);
}

tmm_status tmm_tokenizer_encode(const tmm_tokenizer *tok, tmm_tok_cache *cache, const char *text, size_t length,
                                bool special, tmm_tokens *out)
{
    encoder e = { .tok = tok, .cache = cache, .out = out, .special = special };
    tok_scratch local = { 0 };
    e.scratch = cache ? &cache->scratch : &local;
    bool own_match = !cache || !cache->match;
    e.match = own_match ? pcre2_match_data_create(1, NULL) : cache->match;
    if (!e.match)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for regex match data");
    if (cache && own_match)
        cache->match = e.match, own_match = false;
    size_t before = out->count;
    tmm_status s = encode_all(&e, text, length);
    if (s != TMM_OK)
        out->count = before;
    if (own_match)
        pcre2_match_data_free(e.match);
    tmm_tok_scratch_free(&local);
    return s;
}
