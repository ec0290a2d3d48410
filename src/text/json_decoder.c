/* tokenizer.json's "decoder": ByteLevel for a byte-level tokenizer; for the
 * others null, Replace, ByteFallback, Fuse, Strip, Metaspace, or a Sequence
 * of these. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_json.h"

#define SUPPORTED "ByteLevel for byte-level BPE; null, Replace, ByteFallback, Fuse, Strip, Metaspace or a Sequence " \
                  "of them for the others"

static tmm_status one(const tok_parser *p, const cJSON *o, tmm_tokenizer *t)
{
    TMM_TRY(tok_json_object(p, o, "the decoder"));
    const char *type = tok_json_type(o);
    static const char *const names[] = { "ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace" };
    int kind = 0;
    while (kind < 6 && !(type && strcmp(type, names[kind]) == 0))
        kind++;
    if (kind == 6)
        return tok_json_unsupported(p, "decoder", o, SUPPORTED);
    if (t->n_decoders == TMM_TOK_MAX_DECODERS)
        return tok_json_fail(p, "more than %u decoders", TMM_TOK_MAX_DECODERS);
    tok_dec *d = &t->decoders[t->n_decoders++];
    *d = (tok_dec){ .kind = kind };
    switch (kind) {
    case TOK_DEC_BYTE_LEVEL:
        TMM_TRY(tok_json_bool(p, o, "add_prefix_space", true, &d->add_prefix_space));
        TMM_TRY(tok_json_bool(p, o, "trim_offsets", true, &d->trim_offsets));
        return tok_json_bool(p, o, "use_regex", true, &d->use_regex);
    case TOK_DEC_REPLACE:
        TMM_TRY(tok_json_pattern(p, cJSON_GetObjectItemCaseSensitive(o, "pattern"), "the Replace decoder's pattern",
                                 &d->pat));
        return tok_json_string(p, o, "content", "the Replace decoder", &d->content);
    case TOK_DEC_STRIP:
        TMM_TRY(tok_json_char(p, o, "content", "the Strip decoder", d->strip));
        TMM_TRY(tok_json_uint(p, o, "start", "the Strip decoder", 1u << 20, 0, &d->start));
        return tok_json_uint(p, o, "stop", "the Strip decoder", 1u << 20, 0, &d->stop);
    case TOK_DEC_METASPACE:
        TMM_TRY(tok_json_char(p, o, "replacement", "the Metaspace decoder", d->replacement));
        TMM_TRY(tok_json_prepend_scheme(p, o, "the Metaspace decoder", &d->prepend_scheme));
        return tok_json_bool(p, o, "split", true, &d->split);
    default: /* ByteFallback, Fuse */
        return TMM_OK;
    }
}

tmm_status tok_json_read_decoder(const tok_parser *p, const cJSON *o, tmm_tokenizer *t)
{
    t->n_decoders = 0;
    if (!tok_json_null(o)) {
        TMM_TRY(tok_json_object(p, o, "decoder"));
        const char *type = tok_json_type(o);
        if (type && strcmp(type, "Sequence") == 0) {
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "decoders"), *item;
            if (!cJSON_IsArray(list))
                return tok_json_fail(p, "the Sequence decoder needs 'decoders', a list");
            t->decoder_sequence = true;
            cJSON_ArrayForEach(item, list)
                TMM_TRY(one(p, item, t));
        } else {
            TMM_TRY(one(p, o, t));
        }
    }
    bool byte_level_decoder = false;
    for (uint32_t i = 0; i < t->n_decoders; i++)
        byte_level_decoder |= t->decoders[i].kind == TOK_DEC_BYTE_LEVEL;
    if (t->byte_level && (t->n_decoders != 1 || !byte_level_decoder))
        return tok_json_fail(p, "a byte-level BPE (ByteLevel pre-tokenizer) needs the ByteLevel decoder alone");
    if (!t->byte_level && byte_level_decoder)
        return tok_json_fail(p, "the ByteLevel decoder needs the ByteLevel pre-tokenizer (last in its Sequence)");
    return TMM_OK;
}

static cJSON *write_one(const tok_dec *d)
{
    static const char *const names[] = { "ByteLevel", "Replace", "ByteFallback", "Fuse", "Strip", "Metaspace" };
    if (d->kind == TOK_DEC_BYTE_LEVEL)
        return tok_json_byte_level(d->add_prefix_space, d->trim_offsets, d->use_regex);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", names[d->kind]);
    if (d->kind == TOK_DEC_REPLACE) {
        cJSON_AddItemToObject(o, "pattern", tok_json_pattern_write(&d->pat));
        cJSON_AddStringToObject(o, "content", d->content);
    } else if (d->kind == TOK_DEC_STRIP) {
        cJSON_AddStringToObject(o, "content", d->strip);
        cJSON_AddNumberToObject(o, "start", d->start);
        cJSON_AddNumberToObject(o, "stop", d->stop);
    } else if (d->kind == TOK_DEC_METASPACE) {
        cJSON_AddStringToObject(o, "replacement", d->replacement);
        cJSON_AddStringToObject(o, "prepend_scheme", tok_json_prepend_name(d->prepend_scheme));
        cJSON_AddBoolToObject(o, "split", d->split);
    }
    return o;
}

cJSON *tok_json_write_decoder(const tmm_tokenizer *t)
{
    if (t->n_decoders == 0)
        return cJSON_CreateNull();
    if (t->n_decoders == 1 && !t->decoder_sequence)
        return write_one(&t->decoders[0]);
    cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "type", "Sequence");
    for (uint32_t i = 0; i < t->n_decoders; i++)
        cJSON_AddItemToArray(list, write_one(&t->decoders[i]));
    cJSON_AddItemToObject(o, "decoders", list);
    return o;
}
