/* tokenizer.json's "normalizer": null, Prepend, Replace, NFC, or a Sequence
 * of these (nested Sequences flattened). */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_json.h"

#define SUPPORTED "null, Prepend, Replace, NFC, or a Sequence of them"

static tmm_status read_one(const tok_parser *p, const cJSON *o, tmm_tokenizer *t, int depth)
{
    TMM_TRY(tok_json_object(p, o, "the normalizer"));
    const char *type = tok_json_type(o);
    if (type && strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers"), *item;
        if (!cJSON_IsArray(list) || depth > 4)
            return tok_json_fail(p, "the Sequence normalizer needs 'normalizers', a list (nested at most 4 deep)");
        cJSON_ArrayForEach(item, list)
            TMM_TRY(read_one(p, item, t, depth + 1));
        return TMM_OK;
    }
    if (!type || (strcmp(type, "Prepend") != 0 && strcmp(type, "Replace") != 0 && strcmp(type, "NFC") != 0))
        return tok_json_unsupported(p, "normalizer", o, SUPPORTED);
    if (t->n_norms == TMM_TOK_MAX_NORMS)
        return tok_json_fail(p, "more than %u normalizers", TMM_TOK_MAX_NORMS);
    tok_norm *nm = &t->norms[t->n_norms++];
    *nm = (tok_norm){ 0 };
    if (strcmp(type, "NFC") == 0) {
        nm->kind = TOK_NORM_NFC;
        return TMM_OK;
    }
    if (strcmp(type, "Prepend") == 0) {
        nm->kind = TOK_NORM_PREPEND;
        return tok_json_string(p, o, "prepend", "the Prepend normalizer", &nm->content);
    }
    nm->kind = TOK_NORM_REPLACE;
    TMM_TRY(tok_json_pattern(p, cJSON_GetObjectItemCaseSensitive(o, "pattern"), "the Replace normalizer's pattern",
                             &nm->pat));
    return tok_json_string(p, o, "content", "the Replace normalizer", &nm->content);
}

tmm_status tok_json_read_normalizer(const tok_parser *p, const cJSON *o, tmm_tokenizer *t)
{
    return tok_json_null(o) ? TMM_OK : read_one(p, o, t, 0);
}

static cJSON *write_one(const tok_norm *nm)
{
    cJSON *o = cJSON_CreateObject();
    if (nm->kind == TOK_NORM_NFC) {
        cJSON_AddStringToObject(o, "type", "NFC");
    } else if (nm->kind == TOK_NORM_PREPEND) {
        cJSON_AddStringToObject(o, "type", "Prepend");
        cJSON_AddStringToObject(o, "prepend", nm->content);
    } else {
        cJSON_AddStringToObject(o, "type", "Replace");
        cJSON_AddItemToObject(o, "pattern", tok_json_pattern_write(&nm->pat));
        cJSON_AddStringToObject(o, "content", nm->content);
    }
    return o;
}

cJSON *tok_json_write_normalizer(const tmm_tokenizer *t)
{
    if (t->n_norms == 0)
        return cJSON_CreateNull();
    if (t->n_norms == 1)
        return write_one(&t->norms[0]);
    cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "type", "Sequence");
    for (uint32_t i = 0; i < t->n_norms; i++)
        cJSON_AddItemToArray(list, write_one(&t->norms[i]));
    cJSON_AddItemToObject(o, "normalizers", list);
    return o;
}
