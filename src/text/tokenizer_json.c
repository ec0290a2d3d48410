/* Hugging Face tokenizer.json: the BPE tokenizers tmm reads and writes
 * (docs/tokenizer.md, "tokenizer.json"): the model, its vocabulary and
 * merges, the added tokens, and the parts (json_*.c). Never trusts the file:
 * every field is checked, every id is in range and given once, every merge
 * names tokens of the vocabulary, and anything tmm would not encode exactly as
 * Hugging Face does is refused with one line naming it. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/json.h"
#include "text/tokenizer_json.h"

#define MAX_ADDED 65536u

typedef tok_parser parser;

static tmm_status get_id(const parser *p, const cJSON *v, const char *what, const char *name, uint32_t *id)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble >= TMM_TOK_MAX_VOCAB ||
        v->valuedouble != floor(v->valuedouble))
        return tok_json_fail(p, "%s '%.80s' has id %s; ids are whole numbers from 0 to %u", what, name,
                             cJSON_IsNumber(v) ? "out of range" : "that is not a number", TMM_TOK_MAX_VOCAB - 1);
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

/* ---- added tokens and the model's options ------------------------------------ */

typedef struct added_in {
    uint32_t id;
    const char *content;
    uint8_t flags; /* TOK_SPECIAL, TOK_NORMALIZED, TOK_LSTRIP, TOK_RSTRIP, TOK_SINGLE_WORD */
} added_in;

static tmm_status parse_one_added(const parser *p, const cJSON *item, added_in *x)
{
    TMM_TRY(tok_json_object(p, item, "an added token"));
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(item, "content");
    if (!cJSON_IsString(content) || !*content->valuestring)
        return tok_json_fail(p, "an added token has no content (a non-empty string)");
    x->content = content->valuestring;
    bool special, normalized, single_word, lstrip, rstrip;
    TMM_TRY(get_id(p, cJSON_GetObjectItemCaseSensitive(item, "id"), "added token", x->content, &x->id));
    TMM_TRY(tok_json_bool(p, item, "special", false, &special));
    TMM_TRY(tok_json_bool(p, item, "normalized", !special, &normalized)); /* Hugging Face's default */
    TMM_TRY(tok_json_bool(p, item, "single_word", false, &single_word));
    TMM_TRY(tok_json_bool(p, item, "lstrip", false, &lstrip));
    TMM_TRY(tok_json_bool(p, item, "rstrip", false, &rstrip));
    x->flags = (uint8_t)((special ? TOK_SPECIAL : 0) | (normalized ? TOK_NORMALIZED : 0) |
                         (single_word ? TOK_SINGLE_WORD : 0) | (lstrip ? TOK_LSTRIP : 0) | (rstrip ? TOK_RSTRIP : 0));
    return TMM_OK;
}

static tmm_status parse_added(const parser *p, const cJSON *list, added_in **out, uint32_t *count)
{
    *out = NULL, *count = 0;
    if (tok_json_null(list))
        return TMM_OK;
    if (!cJSON_IsArray(list))
        return tok_json_fail(p, "added_tokens must be an array");
    int n = cJSON_GetArraySize(list);
    if (n > (int)MAX_ADDED)
        return tok_json_fail(p, "more than %u added_tokens", MAX_ADDED);
    added_in *a = calloc(n ? (size_t)n : 1, sizeof *a);
    if (!a)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for %d added tokens", n);
    tmm_status s = TMM_OK;
    const cJSON *item;
    uint32_t k = 0;
    cJSON_ArrayForEach(item, list)
    {
        added_in *x = &a[k++];
        if ((s = parse_one_added(p, item, x)) != TMM_OK)
            break;
        for (uint32_t j = 0; j + 1 < k && s == TMM_OK; j++)
            if (a[j].id == x->id || strcmp(a[j].content, x->content) == 0)
                s = tok_json_fail(p, "added tokens '%.80s' and '%.80s' share %s", a[j].content, x->content,
                                  a[j].id == x->id ? "an id" : "their content");
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

static tmm_status parse_model(const parser *p, const cJSON *m, tmm_tokenizer *t)
{
    TMM_TRY(tok_json_object(p, m, "model"));
    const char *type = tok_json_type(m);
    if (!type)
        return tok_json_fail(p, "model has no type (tmm reads \"BPE\")");
    if (strcmp(type, "BPE") != 0)
        return tok_json_fail(p, "model type '%.40s' is not supported: tmm reads BPE tokenizers only", type);
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (!tok_json_null(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
        return tok_json_fail(p, "BPE dropout is not supported (set it to null)");
    const char *empty_only[] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (size_t i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, empty_only[i]);
        if (!tok_json_null(v) && !(cJSON_IsString(v) && !*v->valuestring))
            return tok_json_fail(p, "%s is not supported (set it to null)", empty_only[i]);
    }
    TMM_TRY(tok_json_bool(p, m, "byte_fallback", false, &t->byte_fallback));
    TMM_TRY(tok_json_bool(p, m, "fuse_unk", false, &t->fuse_unk));
    TMM_TRY(tok_json_bool(p, m, "ignore_merges", false, &t->ignore_merges));
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    if (!tok_json_null(unk)) {
        if (!cJSON_IsString(unk))
            return tok_json_fail(p, "unk_token must be a string or null");
        if (!(t->unk_token = strdup(unk->valuestring)))
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    return TMM_OK;
}

/* Everything but the vocabulary, merges and added tokens, into t. */
static tmm_status parse_parts(const parser *p, const cJSON *root, tmm_tokenizer *t)
{
    TMM_TRY(tok_json_object(p, root, "the tokenizer"));
    const char *null_only[] = { "truncation", "padding" };
    for (size_t i = 0; i < 2; i++)
        if (!tok_json_null(cJSON_GetObjectItemCaseSensitive(root, null_only[i])))
            return tok_json_fail(p, "%s is not supported (set it to null)", null_only[i]);
    TMM_TRY(parse_model(p, cJSON_GetObjectItemCaseSensitive(root, "model"), t));
    TMM_TRY(tok_json_read_normalizer(p, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), t));
    TMM_TRY(tok_json_read_pre_tokenizer(p, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), t));
    TMM_TRY(tok_json_read_post_processor(p, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), t));
    return tok_json_read_decoder(p, cJSON_GetObjectItemCaseSensitive(root, "decoder"), t);
}

/* The parts parse_parts read, from a scratch tokenizer into the real one. */
static void move_parts(tmm_tokenizer *to, tmm_tokenizer *from)
{
    to->byte_level = from->byte_level;
    to->ignore_merges = from->ignore_merges, to->byte_fallback = from->byte_fallback, to->fuse_unk = from->fuse_unk;
    to->unk_token = from->unk_token;
    to->n_norms = from->n_norms, to->n_steps = from->n_steps, to->n_post = from->n_post;
    to->n_decoders = from->n_decoders, to->decoder_sequence = from->decoder_sequence;
    memcpy(to->norms, from->norms, sizeof to->norms);
    memcpy(to->steps, from->steps, sizeof to->steps);
    memcpy(to->post, from->post, sizeof to->post);
    memcpy(to->decoders, from->decoders, sizeof to->decoders);
    to->template = from->template, to->has_template = from->has_template;
    from->unk_token = NULL;
    from->n_norms = from->n_steps = from->n_post = from->n_decoders = 0;
    from->template = (tok_template){ 0 }, from->has_template = false;
}

/* The vocabulary and the added tokens: ids, bytes, flags. */
static tmm_status build_ids(parser *p, const cJSON *vocab, const added_in *added, uint32_t n_added, bool byte_level,
                            tmm_tokenizer **out)
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
            return tok_json_fail(p, "the vocabulary gives id %u to both '%.80s' and '%.80s'", id, p->id_key[id],
                                 e->string);
        p->id_key[id] = e->string;
        key_put(p, e->string, id);
    }
    for (uint32_t i = 0; i < n_added; i++) {
        const added_in *a = &added[i];
        uint32_t at = key_find(p, a->content, strlen(a->content));
        if ((p->id_key[a->id] && strcmp(p->id_key[a->id], a->content) != 0) || (at != TMM_TOK_NONE && at != a->id))
            return tok_json_fail(p, "added token '%.80s' has id %u but the vocabulary gives %s", a->content, a->id,
                                 at != TMM_TOK_NONE && at != a->id ? "it another id" : "that id to another token");
        t->flags[a->id] = (uint8_t)(TOK_PRESENT | TOK_ADDED | a->flags | (p->id_key[a->id] ? TOK_IN_VOCAB : 0));
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
            if (!byte_level) {
                len = strlen(p->id_key[id]);
                memcpy(t->data + off, p->id_key[id], len);
            } else if (!key_bytes(&p->map, p->id_key[id], t->data + off, &len)) {
                s = tok_json_fail(p, "vocabulary token '%.80s' (id %u) has characters that stand for no byte "
                                  "(bytes_to_unicode): not a byte-level BPE vocabulary, as its ByteLevel "
                                  "pre-tokenizer says", p->id_key[id], id);
            }
            if (s == TMM_OK && len == 0)
                s = tok_json_fail(p, "vocabulary token %u is empty", id);
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
            return tok_json_fail(p, "merge %u '%.80s' is not two tokens separated by one space", r, s);
        memcpy(buf, s, (size_t)(sp - s));
        buf[sp - s] = '\0';
        *a = buf, *b = sp + 1;
        return TMM_OK;
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
        *a = m->child->valuestring, *b = m->child->next->valuestring;
        return TMM_OK;
    }
    return tok_json_fail(p, "merge %u is neither \"a b\" nor [\"a\", \"b\"]", r);
}

static tmm_status build_merges(const parser *p, const cJSON *merges, tmm_tokenizer *t)
{
    if (tok_json_null(merges)) /* a model without merges (Hugging Face's default) */
        return TMM_OK;
    if (!cJSON_IsArray(merges))
        return tok_json_fail(p, "model.merges must be an array");
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
            s = tok_json_fail(p, "merge %u names '%.80s', which is not in the vocabulary", r,
                              ia == TMM_TOK_NONE ? a : b);
            break;
        }
        size_t la = strlen(a), lb = strlen(b);
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb);
        uint32_t ir = key_find(p, joined, la + lb);
        if (ir == TMM_TOK_NONE)
            s = tok_json_fail(p, "merge %u ('%.80s' + '%.80s') makes a token that is not in the vocabulary", r, a, b);
        t->merge_pair[r][0] = ia, t->merge_pair[r][1] = ib;
        t->merge_result[r] = ir;
    }
    free(buf), free(joined);
    return s;
}

static tmm_status check_template(const parser *p, const tmm_tokenizer *t)
{
    for (uint32_t i = 0; i < t->template.n_specials; i++)
        for (uint32_t k = 0; k < t->template.specials[i].n; k++)
            if (t->template.specials[i].ids[k] >= t->vocab)
                return tok_json_fail(p, "TemplateProcessing's special token '%.80s' has id %u, past the vocabulary "
                                     "of %u", t->template.specials[i].name, t->template.specials[i].ids[k], t->vocab);
    return TMM_OK;
}

/* A merge-less BPE of the 256 bytes at their own ids and <|endoftext|> at
 * 256, without prefix spaces or anything else, encodes as the byte tokenizer:
 * it is one. */
static bool is_bytes(const tmm_tokenizer *t)
{
    if (t->vocab != TMM_TOK_BYTES_VOCAB || !t->byte_level || t->n_merges || t->n_added != 1 || t->added[0] != 256 ||
        (t->flags[256] & ~TOK_IN_VOCAB) != (TOK_PRESENT | TOK_ADDED | TOK_SPECIAL) || t->ignore_merges || t->n_norms || t->has_template)
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
        s = parse_parts(&p, root, scratch);
    if (s == TMM_OK)
        s = tok_json_object(&p, vocab, "model.vocab");
    if (s == TMM_OK)
        s = parse_added(&p, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), &added, &n_added);
    if (s == TMM_OK)
        s = build_ids(&p, vocab, added, n_added, scratch->byte_level, &t);
    if (s == TMM_OK) {
        move_parts(t, scratch);
        s = check_template(&p, t);
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

/* The vocabulary string of a token (bytes_to_unicode of a byte-level one's
 * bytes), malloc'ed. */
static char *token_key(const tmm_tokenizer *t, const tmm_tok_map *m, uint32_t id)
{
    size_t n = tmm_tok_len(t, id);
    const char *bytes = t->data + t->offset[id];
    bool raw = (t->flags[id] & TOK_ADDED) || !t->byte_level;
    char *s = malloc(raw ? n + 1 : 2 * n + 1);
    if (!s)
        return NULL;
    size_t k = 0;
    if (raw) {
        memcpy(s, bytes, n);
        k = n;
    } else {
        for (size_t i = 0; i < n; i++)
            k += tmm_tok_utf8_put(m->byte_char[(unsigned char)bytes[i]], s + k);
    }
    s[k] = '\0';
    return s;
}

static cJSON *added_json(const tmm_tokenizer *t, const tmm_tok_map *m, uint32_t id)
{
    char *content = token_key(t, m, id);
    cJSON *a = content ? cJSON_CreateObject() : NULL;
    uint8_t f = t->flags[id];
    if (a) {
        cJSON_AddNumberToObject(a, "id", id);
        cJSON_AddStringToObject(a, "content", content);
        cJSON_AddBoolToObject(a, "single_word", (f & TOK_SINGLE_WORD) != 0);
        cJSON_AddBoolToObject(a, "lstrip", (f & TOK_LSTRIP) != 0);
        cJSON_AddBoolToObject(a, "rstrip", (f & TOK_RSTRIP) != 0);
        cJSON_AddBoolToObject(a, "normalized", (f & TOK_NORMALIZED) != 0);
        cJSON_AddBoolToObject(a, "special", (f & TOK_SPECIAL) != 0);
    }
    free(content);
    return a;
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
        cJSON *a = added_json(t, &m, t->added[i]);
        ok = a && cJSON_AddItemToArray(added, a);
    }
    cJSON_AddItemToObject(root, "normalizer", tok_json_write_normalizer(t));
    cJSON_AddItemToObject(root, "pre_tokenizer", tok_json_write_pre_tokenizer(t));
    cJSON_AddItemToObject(root, "post_processor", tok_json_write_post_processor(t));
    cJSON_AddItemToObject(root, "decoder", tok_json_write_decoder(t));
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
    cJSON_AddBoolToObject(model, "byte_fallback", t->byte_fallback);
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
