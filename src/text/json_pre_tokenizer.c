/* tokenizer.json's "pre_tokenizer": null, ByteLevel, Metaspace, a Split
 * (Isolated), or a Sequence of Splits that may end in ByteLevel or Metaspace.
 * Ending in ByteLevel makes the tokenizer byte-level. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_json.h"

#define SUPPORTED "null, ByteLevel, Metaspace, Split (Isolated), or a Sequence of Splits ending in any of them"

static tmm_status byte_level(const tok_parser *p, const cJSON *o, tok_step *st)
{
    st->kind = TOK_STEP_BYTE_LEVEL;
    /* the Rust library's defaults (tokenizers' ByteLevel::default) */
    TMM_TRY(tok_json_bool(p, o, "add_prefix_space", true, &st->add_prefix_space));
    TMM_TRY(tok_json_bool(p, o, "trim_offsets", true, &st->trim_offsets));
    TMM_TRY(tok_json_bool(p, o, "use_regex", true, &st->use_regex));
    return st->use_regex ? tmm_tok_compile(TMM_TOK_GPT2_PATTERN, false, &st->pat.re) : TMM_OK;
}

static tmm_status metaspace(const tok_parser *p, const cJSON *o, tok_step *st)
{
    st->kind = TOK_STEP_METASPACE;
    TMM_TRY(tok_json_char(p, o, "replacement", "the Metaspace pre-tokenizer", st->replacement));
    TMM_TRY(tok_json_prepend_scheme(p, o, "the Metaspace pre-tokenizer", &st->prepend_scheme));
    return tok_json_bool(p, o, "split", true, &st->split);
}

static tmm_status split(const tok_parser *p, const cJSON *o, tok_step *st)
{
    st->kind = TOK_STEP_SPLIT;
    const cJSON *behavior = cJSON_GetObjectItemCaseSensitive(o, "behavior");
    bool invert = false;
    if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0)
        return tok_json_fail(p, "Split behavior '%.40s' is not supported (tmm supports Isolated)",
                             cJSON_IsString(behavior) ? behavior->valuestring : "(missing)");
    TMM_TRY(tok_json_bool(p, o, "invert", false, &invert));
    if (invert)
        return tok_json_fail(p, "Split with invert true is not supported");
    return tok_json_pattern(p, cJSON_GetObjectItemCaseSensitive(o, "pattern"), "Split's pattern", &st->pat);
}

static tmm_status step(const tok_parser *p, const cJSON *o, tmm_tokenizer *t, bool last)
{
    TMM_TRY(tok_json_object(p, o, "the pre-tokenizer"));
    const char *type = tok_json_type(o);
    tok_step *st = &t->steps[t->n_steps++];
    *st = (tok_step){ 0 };
    if (type && strcmp(type, "Split") == 0)
        return split(p, o, st);
    if (type && strcmp(type, "ByteLevel") == 0 && last)
        return byte_level(p, o, st);
    if (type && strcmp(type, "Metaspace") == 0 && last)
        return metaspace(p, o, st);
    if (type && (strcmp(type, "ByteLevel") == 0 || strcmp(type, "Metaspace") == 0))
        return tok_json_fail(p, "a %s pre-tokenizer before other steps is not supported (it must come last)", type);
    return tok_json_unsupported(p, "pre_tokenizer", o, SUPPORTED);
}

tmm_status tok_json_read_pre_tokenizer(const tok_parser *p, const cJSON *o, tmm_tokenizer *t)
{
    t->n_steps = 0;
    if (!tok_json_null(o)) {
        TMM_TRY(tok_json_object(p, o, "pre_tokenizer"));
        const char *type = tok_json_type(o);
        if (type && strcmp(type, "Sequence") == 0) {
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers"), *item;
            int n = cJSON_GetArraySize(list);
            if (!cJSON_IsArray(list) || n < 1 || n > (int)TMM_TOK_MAX_STEPS)
                return tok_json_fail(p, "the Sequence pre-tokenizer needs 1 to %u pretokenizers", TMM_TOK_MAX_STEPS);
            cJSON_ArrayForEach(item, list)
                TMM_TRY(step(p, item, t, (int)t->n_steps + 1 == n));
        } else {
            TMM_TRY(step(p, o, t, true));
        }
    }
    t->byte_level = t->n_steps && t->steps[t->n_steps - 1].kind == TOK_STEP_BYTE_LEVEL;
    return TMM_OK;
}

static cJSON *write_step(const tok_step *st)
{
    if (st->kind == TOK_STEP_BYTE_LEVEL)
        return tok_json_byte_level(st->add_prefix_space, st->trim_offsets, st->use_regex);
    cJSON *o = cJSON_CreateObject();
    if (st->kind == TOK_STEP_METASPACE) {
        cJSON_AddStringToObject(o, "type", "Metaspace");
        cJSON_AddStringToObject(o, "replacement", st->replacement);
        cJSON_AddStringToObject(o, "prepend_scheme", tok_json_prepend_name(st->prepend_scheme));
        cJSON_AddBoolToObject(o, "split", st->split);
        return o;
    }
    cJSON_AddStringToObject(o, "type", "Split");
    cJSON_AddItemToObject(o, "pattern", tok_json_pattern_write(&st->pat));
    cJSON_AddStringToObject(o, "behavior", "Isolated");
    cJSON_AddBoolToObject(o, "invert", false);
    return o;
}

cJSON *tok_json_write_pre_tokenizer(const tmm_tokenizer *t)
{
    if (t->n_steps == 0)
        return cJSON_CreateNull();
    if (t->n_steps == 1)
        return write_step(&t->steps[0]);
    cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "type", "Sequence");
    cJSON_AddItemToObject(o, "pretokenizers", list);
    for (uint32_t i = 0; i < t->n_steps; i++)
        cJSON_AddItemToArray(list, write_step(&t->steps[i]));
    return o;
}
