/* OpenAI's tiktoken encodings: a .tiktoken file (one "BASE64 RANK" line per
 * token) with the encoding's pattern and special tokens, which tmm knows
 * (tiktoken's openai_public.py). tiktoken encodes a piece of the pattern as
 * its token when it is one, else merges the adjacent pair whose concatenation
 * has the lowest rank until none is a token. That is a Hugging Face BPE with
 * ignore_merges whose merge for a token t is the last merge of that very
 * process on t's bytes (when it ends in t; ranked by t's rank): within any
 * piece, the symbols that end up covering t's span went through the same
 * merges as t alone, so every merge tiktoken makes is such a pair. tmm
 * derives those merges here; `tmm tokenizer convert` writes them out.
 * docs/tokenizer.md, "tiktoken". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "text/tokenizer_impl.h"

#define MAX_TOKEN 256u            /* bytes of one token (tiktoken's own files: 128 at most) */
#define WORK_BUDGET (1ull << 27) /* sum of the squared token lengths (o200k_base: 1.3e7) */

typedef struct special {
    const char *text;
    uint32_t id;
} special;

typedef struct encoding {
    const char *name;
    uint32_t n_ranks; /* in its file */
    const char *pattern;
    special specials[6];
} encoding;

/* The patterns as tiktoken's (openai_public.py) in their non-possessive
 * spelling, which means the same and is also valid in Oniguruma, so that the
 * converted tokenizer.json means the same to Hugging Face. */
#define R50K_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define CL100K_PATTERN                                                                                           \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"
#define O200K_PATTERN                                                                                            \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const encoding encodings[] = {
    { "r50k_base", 50256, R50K_PATTERN, { { "<|endoftext|>", 50256 } } },
    { "p50k_base", 50280, R50K_PATTERN, { { "<|endoftext|>", 50256 } } },
    { "cl100k_base", 100256, CL100K_PATTERN,
      { { "<|endoftext|>", 100257 }, { "<|fim_prefix|>", 100258 }, { "<|fim_middle|>", 100259 },
        { "<|fim_suffix|>", 100260 }, { "<|endofprompt|>", 100276 } } },
    { "o200k_base", 199998, O200K_PATTERN, { { "<|endoftext|>", 199999 }, { "<|endofprompt|>", 200018 } } },
};
#define N_ENCODINGS (sizeof encodings / sizeof *encodings)
#define KNOWN "r50k_base, p50k_base, cl100k_base or o200k_base"

const char *tmm_tok_tiktoken_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < N_ENCODINGS; i++) {
        size_t n = strlen(encodings[i].name);
        if (strncmp(base, encodings[i].name, n) == 0 && (base[n] == '\0' || base[n] == '.'))
            return encodings[i].name;
    }
    return NULL;
}

static int b64(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
         : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with its padding into out (room for 3 * n / 4); -1 if not. */
static long unbase64(const char *s, size_t n, char *out)
{
    if (n == 0 || n % 4)
        return -1;
    size_t pad = s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = i + (size_t)j >= n - pad ? 0 : b64((unsigned char)s[i + (size_t)j]);
            if (v[j] < 0)
                return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[k++] = (char)(w >> 16), out[k++] = (char)(w >> 8), out[k++] = (char)w;
    }
    return (long)(k - pad);
}

/* ---- the ranks -------------------------------------------------------------- */

typedef struct ranks {
    uint32_t n, max_rank;
    uint32_t *rank; /* per line */
    uint64_t *off;  /* of each line's bytes in data */
    uint32_t *len;
    char *data;
    uint32_t *slots; /* bytes -> line, open addressing */
    uint64_t mask;
    uint32_t *by_rank; /* rank -> line, or UINT32_MAX */
} ranks;

static void ranks_free(ranks *r)
{
    free(r->rank), free(r->off), free(r->len), free(r->data), free(r->slots), free(r->by_rank);
}

static uint32_t find(const ranks *r, const char *b, size_t n)
{
    for (uint64_t i = tmm_tok_hash(b, n) & r->mask;; i = (i + 1) & r->mask) {
        uint32_t k = r->slots[i];
        if (k == UINT32_MAX || (r->len[k] == n && memcmp(r->data + r->off[k], b, n) == 0))
            return k;
    }
}

static tmm_status parse_lines(const char *text, size_t n, const char *origin, ranks *r)
{
    uint32_t lines = 0;
    for (size_t i = 0; i < n; i++)
        lines += text[i] == '\n';
    lines++;
    if (lines > TMM_TOK_MAX_VOCAB)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: more than %u lines: not a .tiktoken file tmm reads", origin,
                        TMM_TOK_MAX_VOCAB);
    r->rank = malloc((size_t)lines * sizeof *r->rank);
    r->off = malloc((size_t)lines * sizeof *r->off);
    r->len = malloc((size_t)lines * sizeof *r->len);
    r->data = malloc(n ? n : 1);
    if (!r->rank || !r->off || !r->len || !r->data)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %u ranks", lines);
    uint64_t used = 0;
    uint32_t line = 0;
    for (size_t i = 0; i < n;) {
        line++;
        size_t end = i;
        while (end < n && text[end] != '\n')
            end++;
        size_t e = end > i && text[end - 1] == '\r' ? end - 1 : end;
        const char *sp = memchr(text + i, ' ', e - i);
        if (e == i) { /* an empty line, as tiktoken skips */
            i = end + 1;
            continue;
        }
        long k = sp && sp > text + i && (size_t)(sp - text - (long)i) <= 4 * ((MAX_TOKEN + 2) / 3)
                     ? unbase64(text + i, (size_t)(sp - text) - i, r->data + used)
                     : -1;
        if (k <= 0 || k > (long)MAX_TOKEN)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%u: not \"BASE64 RANK\" (a token of 1 to %u bytes in "
                            "base64, a space, its rank)", origin, line, MAX_TOKEN);
        uint64_t v = 0;
        const char *q = sp + 1;
        while (q < text + e && *q >= '0' && *q <= '9' && v < TMM_TOK_MAX_VOCAB)
            v = v * 10 + (uint64_t)(*q++ - '0');
        if (q == sp + 1 || q != text + e || v >= TMM_TOK_MAX_VOCAB)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%u: the rank is not a whole number from 0 to %u", origin,
                            line, TMM_TOK_MAX_VOCAB - 1);
        r->rank[r->n] = (uint32_t)v;
        r->off[r->n] = used;
        r->len[r->n] = (uint32_t)k;
        used += (uint64_t)k;
        if (v > r->max_rank || r->n == 0)
            r->max_rank = (uint32_t)v;
        r->n++;
        i = end + 1;
    }
    return TMM_OK;
}

static tmm_status index_ranks(const char *origin, ranks *r)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)r->n)
        cap *= 2;
    r->slots = malloc(cap * sizeof *r->slots);
    r->by_rank = malloc(((size_t)r->max_rank + 1) * sizeof *r->by_rank);
    if (!r->slots || !r->by_rank)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %u ranks", r->n);
    memset(r->slots, 0xFF, cap * sizeof *r->slots);
    memset(r->by_rank, 0xFF, ((size_t)r->max_rank + 1) * sizeof *r->by_rank);
    r->mask = cap - 1;
    for (uint32_t k = 0; k < r->n; k++) {
        const char *b = r->data + r->off[k];
        uint64_t i = tmm_tok_hash(b, r->len[k]) & r->mask;
        while (r->slots[i] != UINT32_MAX) {
            uint32_t o = r->slots[i];
            if (r->len[o] == r->len[k] && memcmp(r->data + r->off[o], b, r->len[k]) == 0)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: ranks %u and %u are the same token", origin,
                                r->rank[o], r->rank[k]);
            i = (i + 1) & r->mask;
        }
        r->slots[i] = k;
        if (r->by_rank[r->rank[k]] != UINT32_MAX)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: rank %u is given twice", origin, r->rank[k]);
        r->by_rank[r->rank[k]] = k;
    }
    for (unsigned b = 0; b < 256; b++) {
        char c = (char)b;
        if (find(r, &c, 1) == UINT32_MAX)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: no rank for the byte 0x%02X (tiktoken needs all 256)",
                            origin, b);
    }
    return TMM_OK;
}

/* ---- merges ------------------------------------------------------------------ */

/* tiktoken's merging of one token's bytes (b, n): if it ends in the whole
 * token, the ranks of the last pair merged. */
static bool last_merge(const ranks *r, const char *b, uint32_t n, uint32_t *left, uint32_t *right)
{
    uint32_t start[MAX_TOKEN + 1], pair[MAX_TOKEN]; /* parts start[i] .. start[i + 1]; pair: rank of i + (i + 1) */
    uint32_t m = n;
    for (uint32_t i = 0; i <= n; i++)
        start[i] = i;
    for (uint32_t i = 0; i + 1 < m; i++) {
        uint32_t k = find(r, b + start[i], start[i + 2] - start[i]);
        pair[i] = k == UINT32_MAX ? UINT32_MAX : r->rank[k];
    }
    while (m > 1) {
        uint32_t best = UINT32_MAX, at = 0;
        for (uint32_t i = 0; i + 1 < m; i++)
            if (pair[i] < best)
                best = pair[i], at = i;
        if (best == UINT32_MAX)
            return false;
        if (m == 2) {
            *left = r->rank[find(r, b, start[1])];
            *right = r->rank[find(r, b + start[1], n - start[1])];
            return true;
        }
        memmove(start + at + 1, start + at + 2, (m - at - 1) * sizeof *start);
        memmove(pair + at, pair + at + 1, (m - at - 2) * sizeof *pair);
        m--;
        for (uint32_t i = at ? at - 1 : 0; i <= at && i + 1 < m; i++) {
            uint32_t k = find(r, b + start[i], start[i + 2] - start[i]);
            pair[i] = k == UINT32_MAX ? UINT32_MAX : r->rank[k];
        }
    }
    return false;
}

static tmm_status derive_merges(const char *origin, const ranks *r, tmm_tokenizer *t)
{
    uint64_t work = 0;
    for (uint32_t k = 0; k < r->n; k++)
        work += (uint64_t)r->len[k] * r->len[k];
    if (work > WORK_BUDGET)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: its tokens are too many and too long for tmm to derive "
                        "merges from (sum of squared lengths %llu, at most %llu)", origin, (unsigned long long)work,
                        (unsigned long long)WORK_BUDGET);
    t->merge_pair = malloc((size_t)(r->n ? r->n : 1) * sizeof *t->merge_pair);
    t->merge_result = malloc((size_t)(r->n ? r->n : 1) * sizeof *t->merge_result);
    if (!t->merge_pair || !t->merge_result)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %u merges", r->n);
    for (uint32_t rank = 0; rank <= r->max_rank; rank++) {
        uint32_t k = r->by_rank[rank], a, b;
        if (k == UINT32_MAX || r->len[k] < 2 || !last_merge(r, r->data + r->off[k], r->len[k], &a, &b))
            continue;
        t->merge_pair[t->n_merges][0] = a, t->merge_pair[t->n_merges][1] = b;
        t->merge_result[t->n_merges++] = rank;
    }
    return TMM_OK;
}

/* ---- the tokenizer ------------------------------------------------------------ */

static tmm_status build(const char *origin, const ranks *r, const encoding *enc, tmm_tokenizer **out)
{
    uint32_t n_special = 0, vocab = r->max_rank + 1;
    while (n_special < 6 && enc->specials[n_special].text) {
        const special *sp = &enc->specials[n_special++];
        if (sp->id <= r->max_rank && r->by_rank[sp->id] != UINT32_MAX)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: rank %u is %s's special token %s", origin, sp->id,
                            enc->name, sp->text);
        if (sp->id + 1 > vocab)
            vocab = sp->id + 1;
    }
    tmm_tokenizer *t;
    TMM_TRY(tmm_tok_alloc(vocab, &t));
    *out = t;
    uint64_t total = 0;
    for (uint32_t k = 0; k < r->n; k++)
        total += r->len[k];
    for (uint32_t i = 0; i < n_special; i++)
        total += strlen(enc->specials[i].text);
    t->data = malloc(total ? total : 1);
    t->added = malloc((n_special ? n_special : 1) * sizeof *t->added);
    if (!t->data || !t->added)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a vocabulary of %u", vocab);
    uint64_t off = 0;
    for (uint32_t id = 0; id < vocab; id++) {
        t->offset[id] = off;
        uint32_t k = id <= r->max_rank ? r->by_rank[id] : UINT32_MAX;
        if (k != UINT32_MAX) {
            memcpy(t->data + off, r->data + r->off[k], r->len[k]);
            off += r->len[k];
            t->flags[id] = TOK_PRESENT | TOK_IN_VOCAB;
        }
        for (uint32_t i = 0; i < n_special; i++)
            if (enc->specials[i].id == id) {
                size_t len = strlen(enc->specials[i].text);
                memcpy(t->data + off, enc->specials[i].text, len);
                off += len;
                t->flags[id] = TOK_PRESENT | TOK_ADDED | TOK_SPECIAL;
                t->added[t->n_added++] = id;
            }
    }
    t->offset[vocab] = off;
    TMM_TRY(derive_merges(origin, r, t));
    TMM_TRY(tmm_tok_set_byte_level(t, enc->pattern));
    t->ignore_merges = true;
    return tmm_tok_finish(t);
}

tmm_status tmm_tok_tiktoken_parse(const char *text, size_t n, const char *origin, const char *name, bool exact,
                                  tmm_tokenizer **out)
{
    *out = NULL;
    const encoding *enc = NULL;
    for (size_t i = 0; name && i < N_ENCODINGS; i++)
        if (strcmp(name, encodings[i].name) == 0)
            enc = &encodings[i];
    if (name && !enc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unknown tiktoken encoding '%.40s' (tmm knows " KNOWN ")", name);
    ranks r = { 0 };
    tmm_tokenizer *t = NULL;
    tmm_status s = parse_lines(text, n, origin, &r);
    for (size_t i = 0; s == TMM_OK && !enc && i < N_ENCODINGS; i++)
        if (encodings[i].n_ranks == r.n)
            enc = &encodings[i];
    if (s == TMM_OK && !enc)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: neither a tokenizer.json nor a .tiktoken file of an encoding tmm "
                     "knows by its name or its %u ranks (" KNOWN ")", origin, r.n);
    if (s == TMM_OK && exact && r.n != enc->n_ranks)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u ranks, but %s has %u", origin, r.n, enc->name, enc->n_ranks);
    if (s == TMM_OK && r.n == 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: no ranks", origin);
    if (s == TMM_OK)
        s = index_ranks(origin, &r);
    if (s == TMM_OK)
        s = build(origin, &r, enc, &t);
    ranks_free(&r);
    if (s != TMM_OK) {
        tmm_tokenizer_free(t);
        return s;
    }
    *out = t;
    return TMM_OK;
}
