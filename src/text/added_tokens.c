/* Added tokens in text, as Hugging Face's AddedVocabulary finds them: the
 * tokens with normalized false are looked for in the text as given, those
 * with normalized true (by their normalized content) in each normalized piece
 * between. Leftmost-longest, non-overlapping; a special token is skipped
 * unless special tokens are recognised, one with single_word unless no word
 * character touches it; lstrip and rstrip take the whitespace on that side
 * into the token. docs/tokenizer.md, "Encoding". */
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

void tmm_tok_added_free(tok_added_set *set)
{
    free(set->id), free(set->off), free(set->len), free(set->text);
    *set = (tok_added_set){ 0 };
}

typedef struct entry {
    uint32_t id, len;
    uint64_t off;
    const char *text;
} entry;

static int by_first_byte_longest(const void *x, const void *y)
{
    const entry *a = x, *b = y;
    unsigned fa = (unsigned char)a->text[0], fb = (unsigned char)b->text[0];
    if (fa != fb)
        return fa < fb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* One set from the added tokens whose TOK_NORMALIZED flag is normalized. */
static tmm_status build(tmm_tokenizer *t, bool normalized, tok_added_set *set)
{
    tmm_bytes text = { 0 };
    entry *e = calloc(t->n_added ? t->n_added : 1, sizeof *e);
    tok_scratch scratch = { 0 };
    tmm_status s = e ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the added tokens");
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_added && s == TMM_OK; i++) {
        uint32_t id = t->added[i];
        if (((t->flags[id] & TOK_NORMALIZED) != 0) != normalized)
            continue;
        const char *c = t->data + t->offset[id];
        size_t len = tmm_tok_len(t, id);
        if (normalized)
            s = tmm_tok_normalize(t, &scratch, c, len, &c, &len);
        if (s == TMM_OK && len > 0) { /* a content the normalizer empties matches nothing */
            e[n] = (entry){ id, (uint32_t)len, text.length, NULL };
            s = tmm_bytes_append(&text, c, len);
            n++;
        }
    }
    tmm_tok_scratch_free(&scratch);
    set->n = n;
    set->id = malloc((n ? n : 1) * sizeof *set->id);
    set->off = malloc((n ? n : 1) * sizeof *set->off);
    set->len = malloc((n ? n : 1) * sizeof *set->len);
    set->text = text.data;
    if (s == TMM_OK && (!set->id || !set->off || !set->len))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for the added tokens");
    if (s == TMM_OK) {
        for (uint32_t i = 0; i < n; i++)
            e[i].text = text.data + e[i].off;
        qsort(e, n, sizeof *e, by_first_byte_longest);
        for (uint32_t i = 0; i < n; i++)
            set->id[i] = e[i].id, set->off[i] = e[i].off, set->len[i] = e[i].len;
        for (uint32_t b = 0, k = 0; b <= 256; b++) {
            while (k < n && (unsigned char)e[k].text[0] < b)
                k++;
            set->first[b] = b == 256 ? n : k;
        }
    }
    free(e);
    return s;
}

tmm_status tmm_tok_added_build(tmm_tokenizer *t)
{
    tmm_tok_added_free(&t->raw_set);
    tmm_tok_added_free(&t->norm_set);
    TMM_TRY(build(t, false, &t->raw_set));
    TMM_TRY(build(t, true, &t->norm_set));
    bool single_word = false;
    for (uint32_t i = 0; i < t->n_added; i++)
        single_word |= (t->flags[t->added[i]] & TOK_SINGLE_WORD) != 0;
    if (single_word && !t->word_re) /* Rust's \w: Alphabetic, marks, decimal digits, connectors, Join_Control */
        TMM_TRY(tmm_tok_compile("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]", false, &t->word_re));
    return TMM_OK;
}

/* The longest entry of set at s[i..n), or UINT32_MAX. */
static uint32_t longest_at(const tok_added_set *set, const char *s, size_t i, size_t n)
{
    unsigned char b = (unsigned char)s[i];
    for (uint32_t k = set->first[b]; k < set->first[b + 1]; k++)
        if (set->len[k] <= n - i && memcmp(s + i, set->text + set->off[k], set->len[k]) == 0)
            return k;
    return UINT32_MAX;
}

static bool is_word_at(const tmm_tokenizer *t, const char *s, size_t n, size_t at)
{
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    bool word = md && pcre2_match(t->word_re, (PCRE2_SPTR)s, n, at, PCRE2_ANCHORED, md, NULL) > 0;
    pcre2_match_data_free(md);
    return word;
}

/* Is the character before byte i (after the one at i) a word character? */
static bool word_before(const tmm_tokenizer *t, const char *s, size_t n, size_t i)
{
    if (i == 0)
        return false;
    size_t j = i - 1;
    while (j > 0 && i - j < 4 && ((unsigned char)s[j] & 0xC0) == 0x80)
        j--;
    uint32_t cp;
    if (tmm_tok_utf8_get(s + j, n - j, &cp) != i - j)
        j = i - 1; /* not one character: an invalid byte */
    return is_word_at(t, s, n, j);
}

/* White_Space characters ending at i: where they start (Rust's \s*$ on s[..i]) */
static size_t spaces_before(const char *s, size_t n, size_t i)
{
    while (i > 0) {
        size_t j = i - 1;
        while (j > 0 && i - j < 4 && ((unsigned char)s[j] & 0xC0) == 0x80)
            j--;
        uint32_t cp;
        if (tmm_tok_utf8_get(s + j, n - j, &cp) != i - j || !tmm_tok_is_space(cp))
            break;
        i = j;
    }
    return i;
}

static size_t spaces_after(const char *s, size_t n, size_t i)
{
    while (i < n) {
        uint32_t cp;
        size_t len = tmm_tok_utf8_get(s + i, n - i, &cp);
        if (!tmm_tok_is_space(cp))
            break;
        i += len;
    }
    return i;
}

bool tmm_tok_added_next(const tmm_tokenizer *t, const tok_added_set *set, const char *s, size_t n, bool special,
                        size_t done, size_t *pos, size_t *start, size_t *stop, uint32_t *id)
{
    if (!set->n)
        return false;
    for (size_t i = *pos; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        if (set->first[b] == set->first[b + 1])
            continue;
        uint32_t k = longest_at(set, s, i, n);
        if (k == UINT32_MAX)
            continue;
        size_t a = i, z = i + set->len[k];
        uint8_t f = t->flags[set->id[k]];
        /* the match is taken either way: the search goes on after it */
        i = z - 1;
        if ((f & TOK_SPECIAL) && !special)
            continue;
        if ((f & TOK_SINGLE_WORD) && (word_before(t, s, n, a) || (z < n && is_word_at(t, s, n, z))))
            continue;
        *pos = z;
        if (f & TOK_LSTRIP) {
            size_t ns = spaces_before(s, n, a);
            a = ns > done ? ns : done;
        }
        if (f & TOK_RSTRIP)
            z = spaces_after(s, n, z);
        *start = a, *stop = z, *id = set->id[k];
        return true;
    }
    *pos = n;
    return false;
}
