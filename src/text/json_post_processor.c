/* tokenizer.json's "post_processor": null, ByteLevel (no change to ids),
 * TemplateProcessing, or a Sequence of them with at most one template. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_json.h"

#define SUPPORTED "null, ByteLevel, TemplateProcessing, or a Sequence of them"
#define MAX_PIECES 64
#define MAX_SPECIALS 64
#define MAX_SPECIAL_IDS 64

static tmm_status special_tokens(const tok_parser *p, const cJSON *o, tok_template *tp)
{
    TMM_TRY(tok_json_object(p, o, "TemplateProcessing's special_tokens"));
    int n = cJSON_GetArraySize(o);
    if (n > MAX_SPECIALS)
        return tok_json_fail(p, "TemplateProcessing has more than %d special_tokens", MAX_SPECIALS);
    tp->specials = calloc(n ? (size_t)n : 1, sizeof *tp->specials);
    if (!tp->specials)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, o)
    {
        tok_template_special *sp = &tp->specials[tp->n_specials++];
        if (!(sp->name = strdup(e->string)))
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        TMM_TRY(tok_json_object(p, e, "a special token of TemplateProcessing"));
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(e, "ids"), *toks = cJSON_GetObjectItemCaseSensitive(e, "tokens");
        int k = cJSON_GetArraySize(ids);
        if (!cJSON_IsArray(ids) || !cJSON_IsArray(toks) || k != cJSON_GetArraySize(toks) || k > MAX_SPECIAL_IDS)
            return tok_json_fail(p, "TemplateProcessing's special token '%.80s' needs 'ids' and 'tokens', two lists "
                                 "of the same length (at most %d)", e->string, MAX_SPECIAL_IDS);
        sp->ids = calloc(k ? (size_t)k : 1, sizeof *sp->ids);
        sp->tokens = calloc(k ? (size_t)k : 1, sizeof *sp->tokens);
        if (!sp->ids || !sp->tokens)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        const cJSON *id = ids->child, *tok = toks->child;
        for (; id; id = id->next, tok = tok->next, sp->n++) {
            if (!cJSON_IsString(tok))
                return tok_json_fail(p, "TemplateProcessing's special token '%.80s' has a token that is not a string",
                                     e->string);
            if (!cJSON_IsNumber(id) || !(id->valuedouble >= 0) || id->valuedouble >= TMM_TOK_MAX_VOCAB ||
                id->valuedouble != (double)(uint32_t)id->valuedouble)
                return tok_json_fail(p, "TemplateProcessing's special token '%.80s' has an id that is not a whole "
                                     "number from 0 to %u", e->string, TMM_TOK_MAX_VOCAB - 1);
            sp->ids[sp->n] = (uint32_t)id->valuedouble;
            if (!(sp->tokens[sp->n] = strdup(tok->valuestring)))
                return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
        }
    }
    return TMM_OK;
}

static tmm_status pieces(const tok_parser *p, const cJSON *list, const char *name, tok_template *tp,
                         tok_template_piece **out, uint32_t *count)
{
    int n = cJSON_GetArraySize(list);
    if (!cJSON_IsArray(list) || n > MAX_PIECES)
        return tok_json_fail(p, "TemplateProcessing's '%s' must be a list of at most %d pieces", name, MAX_PIECES);
    *out = calloc(n ? (size_t)n : 1, sizeof **out);
    if (!*out)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, list)
    {
        tok_template_piece *pc = &(*out)[(*count)++];
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "Sequence"), *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *body = seq ? seq : sp;
        if (!cJSON_IsObject(e) || cJSON_GetArraySize(e) != 1 || !cJSON_IsObject(body))
            return tok_json_fail(p, "a piece of TemplateProcessing's '%s' must be {\"Sequence\": {...}} or "
                                 "{\"SpecialToken\": {...}}", name);
        TMM_TRY(tok_json_object(p, body, "a template piece"));
        TMM_TRY(tok_json_uint(p, body, "type_id", "a template piece", UINT32_MAX, 0, &pc->type_id));
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(body, "id");
        if (!cJSON_IsString(id))
            return tok_json_fail(p, "a piece of TemplateProcessing's '%s' has no id (a string)", name);
        if (seq) {
            bool a = strcmp(id->valuestring, "A") == 0, b = strcmp(id->valuestring, "B") == 0;
            if (!a && !b)
                return tok_json_fail(p, "a Sequence piece of TemplateProcessing names '%.20s' (A or B)", id->valuestring);
            if (b && strcmp(name, "single") == 0)
                return tok_json_fail(p, "TemplateProcessing's 'single' names sequence B");
            pc->sequence = a ? 1 : 2;
            continue;
        }
        uint32_t k = 0;
        while (k < tp->n_specials && strcmp(tp->specials[k].name, id->valuestring) != 0)
            k++;
        if (k == tp->n_specials)
            return tok_json_fail(p, "TemplateProcessing's '%s' names '%.80s', which is not in its special_tokens",
                                 name, id->valuestring);
        pc->special = k;
    }
    return TMM_OK;
}

static tmm_status template(const tok_parser *p, const cJSON *o, tmm_tokenizer *t)
{
    if (t->has_template)
        return tok_json_fail(p, "more than one TemplateProcessing is not supported");
    t->has_template = true;
    tok_template *tp = &t->template;
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    TMM_TRY(tok_json_null(specials) ? TMM_OK : special_tokens(p, specials, tp));
    TMM_TRY(pieces(p, cJSON_GetObjectItemCaseSensitive(o, "single"), "single", tp, &tp->single, &tp->n_single));
    return pieces(p, cJSON_GetObjectItemCaseSensitive(o, "pair"), "pair", tp, &tp->pair, &tp->n_pair);
}

static tmm_status one(const tok_parser *p, const cJSON *o, tmm_tokenizer *t, bool in_sequence)
{
    TMM_TRY(tok_json_object(p, o, "the post_processor"));
    const char *type = tok_json_type(o);
    if (type && strcmp(type, "Sequence") == 0 && !in_sequence) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "processors"), *item;
        if (!cJSON_IsArray(list))
            return tok_json_fail(p, "the Sequence post_processor needs 'processors', a list");
        cJSON_ArrayForEach(item, list)
            TMM_TRY(one(p, item, t, true));
        return TMM_OK;
    }
    bool bl = type && strcmp(type, "ByteLevel") == 0, tmpl = type && strcmp(type, "TemplateProcessing") == 0;
    if (!bl && !tmpl)
        return tok_json_unsupported(p, "post_processor", o, SUPPORTED);
    if (t->n_post == TMM_TOK_MAX_POST)
        return tok_json_fail(p, "more than %u post-processors", TMM_TOK_MAX_POST);
    tok_post *pp = &t->post[t->n_post++];
    *pp = (tok_post){ .kind = bl ? TOK_POST_BYTE_LEVEL : TOK_POST_TEMPLATE };
    if (tmpl)
        return template(p, o, t);
    TMM_TRY(tok_json_bool(p, o, "add_prefix_space", true, &pp->add_prefix_space));
    TMM_TRY(tok_json_bool(p, o, "trim_offsets", true, &pp->trim_offsets));
    return tok_json_bool(p, o, "use_regex", true, &pp->use_regex);
}

tmm_status tok_json_read_post_processor(const tok_parser *p, const cJSON *o, tmm_tokenizer *t)
{
    return tok_json_null(o) ? TMM_OK : one(p, o, t, false);
}

static cJSON *write_pieces(const tok_template *tp, const tok_template_piece *pc, uint32_t n)
{
    cJSON *list = cJSON_CreateArray();
    for (uint32_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject(), *body = cJSON_CreateObject();
        cJSON_AddStringToObject(body, "id", pc[i].sequence ? (pc[i].sequence == 1 ? "A" : "B")
                                                           : tp->specials[pc[i].special].name);
        cJSON_AddNumberToObject(body, "type_id", pc[i].type_id);
        cJSON_AddItemToObject(o, pc[i].sequence ? "Sequence" : "SpecialToken", body);
        cJSON_AddItemToArray(list, o);
    }
    return list;
}

static cJSON *write_one(const tmm_tokenizer *t, const tok_post *pp)
{
    if (pp->kind == TOK_POST_BYTE_LEVEL)
        return tok_json_byte_level(pp->add_prefix_space, pp->trim_offsets, pp->use_regex);
    const tok_template *tp = &t->template;
    cJSON *o = cJSON_CreateObject(), *specials = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "TemplateProcessing");
    cJSON_AddItemToObject(o, "single", write_pieces(tp, tp->single, tp->n_single));
    cJSON_AddItemToObject(o, "pair", write_pieces(tp, tp->pair, tp->n_pair));
    for (uint32_t i = 0; i < tp->n_specials; i++) {
        const tok_template_special *sp = &tp->specials[i];
        cJSON *e = cJSON_CreateObject(), *ids = cJSON_CreateArray();
        cJSON_AddStringToObject(e, "id", sp->name);
        for (uint32_t k = 0; k < sp->n; k++)
            cJSON_AddItemToArray(ids, cJSON_CreateNumber(sp->ids[k]));
        cJSON_AddItemToObject(e, "ids", ids);
        cJSON_AddItemToObject(e, "tokens", cJSON_CreateStringArray((const char *const *)sp->tokens, (int)sp->n));
        cJSON_AddItemToObject(specials, sp->name, e);
    }
    cJSON_AddItemToObject(o, "special_tokens", specials);
    return o;
}

cJSON *tok_json_write_post_processor(const tmm_tokenizer *t)
{
    if (t->n_post == 0)
        return cJSON_CreateNull();
    if (t->n_post == 1)
        return write_one(t, &t->post[0]);
    cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "type", "Sequence");
    for (uint32_t i = 0; i < t->n_post; i++)
        cJSON_AddItemToArray(list, write_one(t, &t->post[i]));
    cJSON_AddItemToObject(o, "processors", list);
    return o;
}
