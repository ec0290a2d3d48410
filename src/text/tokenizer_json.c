/* Hugging Face tokenizer.json: the byte-level BPE subset tmm reads and
 * writes (docs/tokenizer.md, "tokenizer.json"). Never trusts the file: every
 * field is checked, every id is in range and given once, every merge names
 * tokens of the vocabulary, and anything tmm would not encode exactly as
 * Hugging Face does is refused with one line naming it. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/json.h"
#include "status.h"
#include "text/tokenizer_impl.h"

#define MAX_PATTERN 65536u
#define MAX_ADDED 65536u

typedef struct parser {
    const char *origin;
    tmm_tok_map map;
    /* vocab keys (the file's strings) -> id */
    const char **keys;
    uint32_t *key_ids;
    uint64_t key_mask;
    const char **id_key; /* per id: its vocab key or NULL */
} parser;

static tmm_status bad(const parser *p, const char *fmt, const char *a, const char *b)
{
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s%s%s", p->origin, a, fmt, b ? b : "");
}

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

/* An optional boolean member: absent or null gives def. */
static tmm_status get_bool(const parser *p, const cJSON *o, const char *key, bool def, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return TMM_OK;
    }
    if (!cJSON_IsBool(v))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: '%s' must be true or false", p->origin, key);
    *out = cJSON_IsTrue(v);
    return TMM_OK;
}

static tmm_status check_object(const parser *p, const cJSON *o, const char *what)
{
    if (!cJSON_IsObject(o))
        return bad(p, " must be an object", what, NULL);
    const char *dup = tmm_json_duplicate_key(o);
    if (dup)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s has the key '%s' twice", p->origin, what, dup);
    return TMM_OK;
}

static bool is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

static tmm_status get_id(const parser *p, const cJSON *v, const char *what, const char *name, uint32_t *id)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble >= TMM_TOK_MAX_VOCAB ||
        v->valuedouble != floor(v->valuedouble))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s '%.80s' has id %s; ids are whole numbers from 0 to %u",
                        p->origin, what, name, cJSON_IsNumber(v) ? "out of range" : "that is not a number",
                        TMM_TOK_MAX_VOCAB - 1);
    *id = (uint32_t)v->valuedouble;
    return TMM_OK;
}

/* ---- byte-level strings ------------------------------------------------- */

/* The bytes a vocabulary string stands for (each character one byte through
 * bytes_to_unicode) into out (room for strlen(s)); false if a character
 * stands for no byte. */
static bool key_bytes(const tmm_tok_map *m, const char *s, char *out, size_t *n)
{
    size_t k = 0;
    for (const unsigned char *q = (const unsigned char *)s; *q;) {
        uint32_t cp;
        if (q[0] < 0x80) {
            cp = q[0], q += 1;
        } else if ((q[0] & 0xE0) == 0xC0 && (q[1] & 0xC0) == 0x80) {
            cp = (uint32_t)(q[0] & 0x1F) << 6 | (q[1] & 0x3F), q += 2;
        } else {
            return false;
        }
        if (cp >= TMM_TOK_MAP_CHARS || m->char_byte[cp] < 0)
            return false;
        out[k++] = (char)m->char_byte[cp];
    }
    *n = k;
    return true;
}

/* ---- the key table ------------------------------------------------------ */

static uint32_t key_find(const parser *p, const char *s, size_t n)
{
    for (uint64_t i = tmm_tok_hash(s, n) & p->key_mask;; i = (i + 1) & p->key_mask) {
        if (!p->keys[i])
            return TMM_TOK_NONE;
        if (strlen(p->keys[i]) == n && memcmp(p->keys[i], s, n) == 0)
            return p->key_ids[i];
    }
}

static void key_put(parser *p, const char *s, uint32_t id)
{
    uint64_t i = tmm_tok_hash(s, strlen(s)) & p->key_mask;
    while (p->keys[i])
        i = (i + 1) & p->key_mask;
    p->keys[i] = s, p->key_ids[i] = id;
}

/* ---- parts --------------------------------------------------------------- */

static tmm_status parse_byte_level(const parser *p, const cJSON *o, tok_step *st)
{
    TMM_TRY(check_object(p, o, "the ByteLevel pre-tokenizer"));
    st->byte_level = true;
    /* the Rust library's defaults (tokenizers' ByteLevel::default) */
    TMM_TRY(get_bool(p, o, "add_prefix_space", true, &st->add_prefix_space));
    TMM_TRY(get_bool(p, o, "trim_offsets", true, &st->trim_offsets));
    return get_bool(p, o, "use_regex", true, &st->use_regex);
}

static tmm_status parse_split(const parser *p, const cJSON *o, tok_step *st)
{
    TMM_TRY(check_object(p, o, "the Split pre-tokenizer"));
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(o, "behavior");
    bool invert = false;
    TMM_TRY(check_object(p, pat, "Split's pattern"));
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex"), *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
    if ((re != NULL) == (lit != NULL) || !cJSON_IsString(re ? re : lit))
        return bad(p, "pattern must be {\"Regex\": \"...\"} or {\"String\": \"...\"}", "Split's ", NULL);
    const char *text = (re ? re : lit)->valuestring;
    if (!*text || strlen(text) > MAX_PATTERN)
        return bad(p, "pattern is empty or longer than 64 KiB", "Split's ", NULL);
    if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0)
        return bad(p, "Split behavior '", cJSON_IsString(behavior) ? behavior->valuestring : "(missing)",
                   "' is not supported (tmm supports Isolated)");
    TMM_TRY(get_bool(p, o, "invert", false, &invert));
    if (invert)
        return bad(p, "Split with invert true is not supported", "", NULL);
    st->literal = lit != NULL;
    st->pattern = strdup(text);
    return st->pattern ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a pattern");
}

static tmm_status unsupported(const parser *p, const char *what, const cJSON *o, const char *supported)
{
    const char *t = type_of(o);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s '%s' is not supported (tmm supports %s)", p->origin, what,
                    t ? t : "without a type", supported);
}

static tmm_status parse_pre_tokenizer(const parser *p, const cJSON *o, tmm_tokenizer *t)
{
    const char *supported = "ByteLevel, or a Sequence of Split (Isolated) steps and then ByteLevel";
    if (is_null(o))
        return bad(p, "a byte-level BPE needs a pre_tokenizer: ", supported, NULL);
    TMM_TRY(check_object(p, o, "pre_tokenizer"));
    const char *type = type_of(o);
    if (type && strcmp(type, "ByteLevel") == 0) {
        t->n_steps = 1;
        return parse_byte_level(p, o, &t->steps[0]);
    }
    if (!type || strcmp(type, "Sequence") != 0)
        return unsupported(p, "pre_tokenizer", o, supported);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
    int n = cJSON_GetArraySize(list);
    if (!cJSON_IsArray(list) || n < 1 || n > (int)TMM_TOK_MAX_STEPS)
        return bad(p, "the Sequence pre-tokenizer needs 1 to 8 pretokenizers", "", NULL);
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        TMM_TRY(check_object(p, item, "a pre-tokenizer of the Sequence"));
        const char *it = type_of(item);
        tok_step *st = &t->steps[t->n_steps++];
        bool last = t->n_steps == (uint32_t)n;
        if (it && strcmp(it, "Split") == 0 && !last)
            TMM_TRY(parse_split(p, item, st));
        else if (it && strcmp(it, "ByteLevel") == 0 && last)
            TMM_TRY(parse_byte_level(p, item, st));
        else
            return unsupported(p, "pre_tokenizer step", item, supported);
    }
    return TMM_OK;
}

static tmm_status parse_byte_level_flags(const parser *p, const cJSON *o, const char *what, bool *prefix, bool *trim,
                                         bool *regex)
{
    TMM_TRY(check_object(p, o, what));
    TMM_TRY(get_bool(p, o, "add_prefix_space", true, prefix));
    TMM_TRY(get_bool(p, o, "trim_offsets", true, trim));
    return get_bool(p, o, "use_regex", true, regex);
}

/* The added tokens: checked, their contents into data (after the vocabulary's). */
typedef struct added_in {
    uint32_t id;
    const char *content;
    bool special, normalized;
} added_in;

static tmm_status parse_added(const parser *p, const cJSON *list, added_in **out, uint32_t *count)
{
    *out = NULL, *count = 0;
    if (is_null(list))
        return TMM_OK;
    if (!cJSON_IsArray(list))
        return bad(p, "added_tokens must be an array", "", NULL);
    int n = cJSON_GetArraySize(list);
    if (n > (int)MAX_ADDED)
        return bad(p, "more than 65536 added_tokens", "", NULL);
    added_in *a = calloc(n ? (size_t)n : 1, sizeof *a);
    if (!a)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %d added tokens", n);
    tmm_status s = TMM_OK;
    const cJSON *item;
    uint32_t k = 0;
    cJSON_ArrayForEach(item, list)
    {
        if ((s = check_object(p, item, "an added token")) != TMM_OK)
            break;
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
        if (!cJSON_IsString(content) || !*content->valuestring) {
            s = bad(p, "an added token has no content (a non-empty string)", "", NULL);
            break;
        }
        added_in *x = &a[k++];
        x->content = content->valuestring;
        bool single_word = false, lstrip = false, rstrip = false;
        if ((s = get_id(p, cJSON_GetObjectItemCaseSensitive(item, "id"), "added token", x->content, &x->id)) != TMM_OK ||
            (s = get_bool(p, item, "special", false, &x->special)) != TMM_OK ||
            (s = get_bool(p, item, "normalized", false, &x->normalized)) != TMM_OK ||
            (s = get_bool(p, item, "single_word", false, &single_word)) != TMM_OK ||
            (s = get_bool(p, item, "lstrip", false, &lstrip)) != TMM_OK ||
            (s = get_bool(p, item, "rstrip", false, &rstrip)) != TMM_OK)
            break;
        if (single_word || lstrip || rstrip) {
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: added token '%.80s' has single_word, lstrip or rstrip set: not "
                         "supported (tmm matches added tokens exactly)", p->origin, x->content);
            break;
        }
        for (uint32_t j = 0; j + 1 < k && s == TMM_OK; j++)
            if (a[j].id == x->id || strcmp(a[j].content, x->content) == 0)
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: added tokens '%.80s' and '%.80s' share %s", p->origin,
                             a[j].content, x->content, a[j].id == x->id ? "an id" : "their content");
        if (s != TMM_OK)
            break;
    }
    if (s != TMM_OK) {
        free(a);
        return s;
    }
    *out = a, *count = k;
    return TMM_OK;
}

static tmm_status parse_model_flags(const parser *p, const cJSON *m, tmm_tokenizer *t)
{
    const char *type = type_of(m);
    if (!type)
        return bad(p, "model has no type (tmm reads \"BPE\")", "", NULL);
    if (strcmp(type, "BPE") != 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: model type '%s' is not supported: tmm reads byte-level BPE "
                        "tokenizers only", p->origin, type);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (!is_null(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return bad(p, "BPE dropout is not supported (set it to null)", "", NULL);
    const char *empty_only[] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, empty_only[i]);
        if (!is_null(v) && !(cJSON_IsString(v) && !*v->valuestring))
            return bad(p, " is not supported in a byte-level BPE (set it to null)", empty_only[i], NULL);
    }
    bool byte_fallback = false;
    TMM_TRY(get_bool(p, m, "byte_fallback", false, &byte_fallback));
    if (byte_fallback)
        return bad(p, "byte_fallback is for SentencePiece-style BPE, not byte-level BPE: not supported", "", NULL);
    TMM_TRY(get_bool(p, m, "fuse_unk", false, &t->fuse_unk));
    TMM_TRY(get_bool(p, m, "ignore_merges", false, &t->ignore_merges));
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    if (!is_null(unk)) {
        if (!cJSON_IsString(unk))
            return bad(p, "unk_token must be a string or null", "", NULL);
        if (!(t->unk_token = strdup(unk->valuestring)))
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    return TMM_OK;
}

static tmm_status check_top(const parser *p, const cJSON *root, tmm_tokenizer *t)
{
    TMM_TRY(check_object(p, root, "the tokenizer"));
    const char *null_only[] = { "truncation", "padding" };
    for (size_t i = 0; i < 2; i++)
        if (!is_null(cJSON_GetObjectItemCaseSensitive(root, null_only[i])))
            return bad(p, " is not supported (set it to null)", null_only[i], NULL);
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (!is_null(norm))
        return unsupported(p, "normalizer", norm, "null");
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (!is_null(post)) {
        const char *type = type_of(post);
        if (!type || strcmp(type, "ByteLevel") != 0)
            return unsupported(p, "post_processor", post, "null or ByteLevel");
        t->post_byte_level = true;
        TMM_TRY(parse_byte_level_flags(p, post, "post_processor", &t->post_add_prefix_space, &t->post_trim_offsets,
                                       &t->post_use_regex));
    }
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    const char *dtype = is_null(dec) ? NULL : type_of(dec);
    if (!dtype || strcmp(dtype, "ByteLevel") != 0)
        return is_null(dec) ? bad(p, "a byte-level BPE needs the ByteLevel decoder (decoder is null)", "", NULL)
                            : unsupported(p, "decoder", dec, "ByteLevel");
    TMM_TRY(parse_byte_level_flags(p, dec, "decoder", &t->dec_add_prefix_space, &t->dec_trim_offsets,
                                   &t->dec_use_regex));
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "model");
    TMM_TRY(check_object(p, m, "model"));
    return parse_model_flags(p, m, t);
}

/* The vocabulary and the added tokens: ids, bytes, flags. */
static tmm_status build_ids(parser *p, const cJSON *vocab, const added_in *added, uint32_t n_added, tmm_tokenizer **out)
{
    int n = cJSON_GetArraySize(vocab);
    uint64_t size = 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        uint32_t id = 0;
        TMM_TRY(get_id(p, e, "vocabulary token", e->string, &id));
        if (id + 1ull > size)
            size = id + 1ull;
    }
    for (uint32_t i = 0; i < n_added; i++)
        if (added[i].id + 1ull > size)
            size = added[i].id + 1ull;
    tmm_tokenizer *t;
    TMM_TRY(tmm_tok_alloc((uint32_t)size, &t));
    *out = t;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n + 2)
        cap *= 2;
    p->keys = calloc(cap, sizeof *p->keys);
    p->key_ids = malloc(cap * sizeof *p->key_ids);
    p->id_key = calloc(size, sizeof *p->id_key);
    uint64_t total = 0;
    cJSON_ArrayForEach(e, vocab)
        total += strlen(e->string);
    for (uint32_t i = 0; i < n_added; i++)
        total += strlen(added[i].content);
    t->data = malloc(total ? total : 1);
    t->added = malloc((n_added ? n_added : 1) * sizeof *t->added);
    if (!p->keys || !p->key_ids || !p->id_key || !t->data || !t->added)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a vocabulary of %u", t->vocab);
    p->key_mask = cap - 1;
    cJSON_ArrayForEach(e, vocab)
    {
        uint32_t id = (uint32_t)e->valuedouble;
        if (p->id_key[id])
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the vocabulary gives id %u to both '%.80s' and '%.80s'",
                            p->origin, id, p->id_key[id], e->string);
        p->id_key[id] = e->string;
        key_put(p, e->string, id);
    }
    for (uint32_t i = 0; i < n_added; i++) {
        const added_in *a = &added[i];
        uint32_t at = key_find(p, a->content, strlen(a->content));
        if ((p->id_key[a->id] && strcmp(p->id_key[a->id], a->content) != 0) || (at != TMM_TOK_NONE && at != a->id))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: added token '%.80s' has id %u but the vocabulary gives "
                            "%s", p->origin, a->content, a->id,
                            at != TMM_TOK_NONE && at != a->id ? "it another id" : "that id to another token");
        t->flags[a->id] = (uint8_t)(TOK_PRESENT | TOK_ADDED | (a->special ? TOK_SPECIAL : 0) |
                                    (a->normalized ? TOK_NORMALIZED : 0) | (p->id_key[a->id] ? TOK_IN_VOCAB : 0));
        t->added[i] = a->id;
    }
    t->n_added = n_added;
    /* bytes, in id order */
    uint64_t off = 0;
    const char **content = calloc(size, sizeof *content);
    if (!content)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a vocabulary of %u", t->vocab);
    for (uint32_t i = 0; i < n_added; i++)
        content[added[i].id] = added[i].content;
    tmm_status s = TMM_OK;
    for (uint32_t id = 0; id < t->vocab && s == TMM_OK; id++) {
        t->offset[id] = off;
        size_t len = 0;
        if (content[id]) {
            len = strlen(content[id]);
            memcpy(t->data + off, content[id], len);
        } else if (p->id_key[id]) {
            if (!key_bytes(&p->map, p->id_key[id], t->data + off, &len))
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: vocabulary token '%.80s' (id %u) has characters that stand "
                             "for no byte (bytes_to_unicode): not a byte-level BPE vocabulary", p->origin,
                             p->id_key[id], id);
            else if (len == 0)
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: vocabulary token %u is empty", p->origin, id);
            t->flags[id] = TOK_PRESENT | TOK_IN_VOCAB;
        }
        off += len;
    }
    t->offset[t->vocab] = off;
    free(content);
    return s;
}

static tmm_status merge_parts(const parser *p, const cJSON *m, uint32_t r, const char **a, const char **b, char *buf,
                              size_t cap)
{
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' ') || (size_t)(sp - s) >= cap)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: merge %u '%.80s' is not two tokens separated by one space",
                            p->origin, r, s);
        memcpy(buf, s, (size_t)(sp - s));
        buf[sp - s] = '\0';
        *a = buf, *b = sp + 1;
        return TMM_OK;
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
        *a = m->child->valuestring, *b = m->child->next->valuestring;
        return TMM_OK;
    }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: merge %u is neither \"a b\" nor [\"a\", \"b\"]", p->origin, r);
}

static tmm_status build_merges(const parser *p, const cJSON *merges, tmm_tokenizer *t)
{
    if (!cJSON_IsArray(merges))
        return bad(p, "model.merges must be an array", "", NULL);
    int n = cJSON_GetArraySize(merges);
    t->n_merges = (uint32_t)n;
    t->merge_pair = malloc((n ? (size_t)n : 1) * sizeof *t->merge_pair);
    t->merge_result = malloc((n ? (size_t)n : 1) * sizeof *t->merge_result);
    size_t longest = 0;
    for (uint32_t id = 0; id < t->vocab; id++)
        if (p->id_key[id] && strlen(p->id_key[id]) > longest)
            longest = strlen(p->id_key[id]);
    size_t cap = 2 * longest + 2;
    char *buf = malloc(cap), *joined = malloc(cap);
    tmm_status s = !t->merge_pair || !t->merge_result || !buf || !joined
                       ? tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %d merges", n)
                       : TMM_OK;
    const cJSON *m = merges->child;
    for (uint32_t r = 0; m && s == TMM_OK; r++, m = m->next) {
        const char *a = NULL, *b = NULL;
        if ((s = merge_parts(p, m, r, &a, &b, buf, cap)) != TMM_OK)
            break;
        uint32_t ia = key_find(p, a, strlen(a)), ib = key_find(p, b, strlen(b));
        if (ia == TMM_TOK_NONE || ib == TMM_TOK_NONE) {
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: merge %u names '%.80s', which is not in the vocabulary",
                         p->origin, r, ia == TMM_TOK_NONE ? a : b);
            break;
        }
        size_t la = strlen(a), lb = strlen(b);
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb);
        uint32_t ir = key_find(p, joined, la + lb);
        if (ir == TMM_TOK_NONE || (t->flags[ia] & TOK_ADDED) || (t->flags[ib] & TOK_ADDED) || (t->flags[ir] & TOK_ADDED))
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: merge %u ('%.80s' + '%.80s') %s", p->origin, r, a, b,
                         ir == TMM_TOK_NONE ? "makes a token that is not in the vocabulary"
                                            : "involves an added token");
        t->merge_pair[r][0] = ia, t->merge_pair[r][1] = ib;
        t->merge_result[r] = ir;
    }
    free(buf), free(joined);
    return s;
}

/* A merge-less BPE of the 256 bytes at their own ids and <|endoftext|> at
 * 256, without prefix spaces, encodes as the byte tokenizer: it is one. */
static bool is_bytes(const tmm_tokenizer *t)
{
    if (t->vocab != TMM_TOK_BYTES_VOCAB || t->n_merges || t->n_added != 1 || t->added[0] != 256 ||
        !(t->flags[256] & TOK_SPECIAL) || t->ignore_merges)
        return false;
    for (uint32_t b = 0; b < 256; b++)
        if (t->offset[b + 1] - t->offset[b] != 1 || (unsigned char)t->data[t->offset[b]] != b)
            return false;
    for (uint32_t i = 0; i < t->n_steps; i++)
        if (t->steps[i].add_prefix_space)
            return false;
    return t->offset[257] - t->offset[256] == 13 && memcmp(t->data + t->offset[256], "<|endoftext|>", 13) == 0;
}

tmm_status tmm_tokenizer_parse(const char *json, size_t length, const char *origin, tmm_tokenizer **out)
{
    *out = NULL;
    parser p = { .origin = origin };
    tmm_tok_byte_map(&p.map);
    cJSON *root = cJSON_ParseWithLength(json, length);
    if (!root)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: not valid JSON (tokenizer.json is a JSON object)", origin);
    tmm_tokenizer *t = NULL, *scratch = calloc(1, sizeof *scratch);
    added_in *added = NULL;
    uint32_t n_added = 0;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    tmm_status s = scratch ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    if (s == TMM_OK)
        s = check_top(&p, root, scratch);
    if (s == TMM_OK)
        s = check_object(&p, vocab, "model.vocab");
    if (s == TMM_OK)
        s = parse_added(&p, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), &added, &n_added);
    if (s == TMM_OK)
        s = build_ids(&p, vocab, added, n_added, &t);
    if (s == TMM_OK) { /* the fields check_top read, moved over */
        tmm_tokenizer keep = *t;
        *t = *scratch;
        t->vocab = keep.vocab, t->offset = keep.offset, t->data = keep.data, t->flags = keep.flags;
        t->added = keep.added, t->n_added = keep.n_added, t->eot = keep.eot;
        memset(scratch, 0, sizeof *scratch);
        s = parse_pre_tokenizer(&p, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), t);
    }
    if (s == TMM_OK)
        s = build_merges(&p, cJSON_GetObjectItemCaseSensitive(model, "merges"), t);
    if (s == TMM_OK)
        s = tmm_tok_finish(t);
    if (s == TMM_OK && is_bytes(t)) {
        tmm_tokenizer_free(t);
        t = NULL;
        s = tmm_tokenizer_bytes(&t);
    }
    if (s != TMM_OK && s != TMM_ERR_OUT_OF_HOST_MEMORY && strncmp(tmm_last_error(), origin, strlen(origin)) != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tmm_last_error());
        s = tmm_fail(s, "%s: %s", origin, msg);
    }
    tmm_tokenizer_free(scratch);
    free(added), free(p.keys), free(p.key_ids), free(p.id_key);
    cJSON_Delete(root);
    if (s != TMM_OK) {
        tmm_tokenizer_free(t);
        return s;
    }
    *out = t;
    return TMM_OK;
}

/* ---- writing ------------------------------------------------------------- */

/* The vocabulary string of a token's bytes (bytes_to_unicode), malloc'ed. */
static char *key_of(const tmm_tok_map *m, const char *bytes, size_t n)
{
    char *s = malloc(2 * n + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += tmm_tok_utf8_put(m->byte_char[(unsigned char)bytes[i]], s + k);
    s[k] = '\0';
    return s;
}

static char *token_key(const tmm_tokenizer *t, const tmm_tok_map *m, uint32_t id)
{
    size_t n = (size_t)(t->offset[id + 1] - t->offset[id]);
    if (t->flags[id] & TOK_ADDED) {
        char *s = malloc(n + 1);
        if (s) {
            memcpy(s, t->data + t->offset[id], n);
            s[n] = '\0';
        }
        return s;
    }
    return key_of(m, t->data + t->offset[id], n);
}

static cJSON *byte_level(bool prefix, bool trim, bool regex)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", prefix);
    cJSON_AddBoolToObject(o, "trim_offsets", trim);
    cJSON_AddBoolToObject(o, "use_regex", regex);
    return o;
}

static cJSON *pre_tokenizer_json(const tmm_tokenizer *t)
{
    if (t->n_steps == 1) {
        const tok_step *st = &t->steps[0];
        return byte_level(st->add_prefix_space, st->trim_offsets, st->use_regex);
    }
    cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "type", "Sequence");
    cJSON_AddItemToObject(o, "pretokenizers", list);
    for (uint32_t i = 0; i < t->n_steps; i++) {
        const tok_step *st = &t->steps[i];
        if (st->byte_level) {
            cJSON_AddItemToArray(list, byte_level(st->add_prefix_space, st->trim_offsets, st->use_regex));
            continue;
        }
        cJSON *split = cJSON_CreateObject(), *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(split, "type", "Split");
        cJSON_AddStringToObject(pat, st->literal ? "String" : "Regex", st->pattern);
        cJSON_AddItemToObject(split, "pattern", pat);
        cJSON_AddStringToObject(split, "behavior", "Isolated");
        cJSON_AddBoolToObject(split, "invert", false);
        cJSON_AddItemToArray(list, split);
    }
    return o;
}

static cJSON *to_json(const tmm_tokenizer *t)
{
    tmm_tok_map m;
    tmm_tok_byte_map(&m);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    bool ok = root && added;
    for (uint32_t i = 0; i < t->n_added && ok; i++) {
        uint32_t id = t->added[i];
        char *content = token_key(t, &m, id);
        cJSON *a = cJSON_CreateObject();
        ok = content && a;
        cJSON_AddNumberToObject(a, "id", id);
        cJSON_AddStringToObject(a, "content", content ? content : "");
        cJSON_AddBoolToObject(a, "single_word", false);
        cJSON_AddBoolToObject(a, "lstrip", false);
        cJSON_AddBoolToObject(a, "rstrip", false);
        cJSON_AddBoolToObject(a, "normalized", (t->flags[id] & TOK_NORMALIZED) != 0);
        cJSON_AddBoolToObject(a, "special", (t->flags[id] & TOK_SPECIAL) != 0);
        cJSON_AddItemToArray(added, a);
        free(content);
    }
    cJSON_AddNullToObject(root, "normalizer");
    cJSON_AddItemToObject(root, "pre_tokenizer", pre_tokenizer_json(t));
    if (t->post_byte_level)
        cJSON_AddItemToObject(root, "post_processor",
                              byte_level(t->post_add_prefix_space, t->post_trim_offsets, t->post_use_regex));
    else
        cJSON_AddNullToObject(root, "post_processor");
    cJSON_AddItemToObject(root, "decoder", byte_level(t->dec_add_prefix_space, t->dec_trim_offsets, t->dec_use_regex));
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    if (t->unk_token)
        cJSON_AddStringToObject(model, "unk_token", t->unk_token);
    else
        cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", t->fuse_unk);
    cJSON_AddBoolToObject(model, "byte_fallback", false);
    cJSON_AddBoolToObject(model, "ignore_merges", t->ignore_merges);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    ok = ok && model && vocab && merges;
    for (uint32_t id = 0; id < t->vocab && ok; id++) {
        if (!(t->flags[id] & TOK_IN_VOCAB))
            continue;
        char *key = token_key(t, &m, id);
        ok = key && cJSON_AddNumberToObject(vocab, key, id);
        free(key);
    }
    for (uint32_t r = 0; r < t->n_merges && ok; r++) {
        char *a = token_key(t, &m, t->merge_pair[r][0]), *b = token_key(t, &m, t->merge_pair[r][1]);
        const char *pair[2] = { a, b };
        cJSON *arr = a && b ? cJSON_CreateStringArray(pair, 2) : NULL;
        ok = arr && cJSON_AddItemToArray(merges, arr);
        free(a), free(b);
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

tmm_status tmm_tokenizer_to_json(const tmm_tokenizer *tok, char **json, size_t *length)
{
    cJSON *root = to_json(tok);
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory writing tokenizer.json");
    *json = text;
    *length = strlen(text);
    return TMM_OK;
}

tmm_status tmm_tokenizer_save(const tmm_tokenizer *tok, const char *path)
{
    char *json = NULL;
    size_t n = 0;
    TMM_TRY(tmm_tokenizer_to_json(tok, &json, &n));
    tmm_status s = tmm_write_file_atomic(path, json, n);
    free(json);
    return s;
}
