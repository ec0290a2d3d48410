/* The checks every part of a tokenizer.json reader shares (tokenizer_json.h). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "text/tokenizer_json.h"

#define MAX_PATTERN 65536u

tmm_status tok_json_fail(const tok_parser *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s", p->origin, msg);
}

const char *tok_json_type(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

bool tok_json_null(const cJSON *v) { return !v || cJSON_IsNull(v); }

tmm_status tok_json_object(const tok_parser *p, const cJSON *o, const char *what)
{
    if (!cJSON_IsObject(o))
        return tok_json_fail(p, "%s must be an object", what);
    const char *dup = tmm_json_duplicate_key(o);
    if (dup)
        return tok_json_fail(p, "%s has the key '%.80s' twice", what, dup);
    return TMM_OK;
}

tmm_status tok_json_bool(const tok_parser *p, const cJSON *o, const char *key, bool def, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (tok_json_null(v)) {
        *out = def;
        return TMM_OK;
    }
    if (!cJSON_IsBool(v))
        return tok_json_fail(p, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return TMM_OK;
}

tmm_status tok_json_string(const tok_parser *p, const cJSON *o, const char *key, const char *what, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        return tok_json_fail(p, "%s needs '%s', a string", what, key);
    if (strlen(v->valuestring) > MAX_PATTERN)
        return tok_json_fail(p, "%s's '%s' is longer than 64 KiB", what, key);
    *out = strdup(v->valuestring);
    return *out ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
}

tmm_status tok_json_char(const tok_parser *p, const cJSON *o, const char *key, const char *what, char out[5])
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    uint32_t cp;
    size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    if (n == 0 || n > 4 || tmm_tok_utf8_get(v->valuestring, n, &cp) != n || cp == UINT32_MAX)
        return tok_json_fail(p, "%s's '%s' must be one character", what, key);
    memcpy(out, v->valuestring, n + 1);
    return TMM_OK;
}

tmm_status tok_json_uint(const tok_parser *p, const cJSON *o, const char *key, const char *what, uint32_t max,
                         uint32_t def, uint32_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (tok_json_null(v)) {
        *out = def;
        return TMM_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > max || v->valuedouble != floor(v->valuedouble))
        return tok_json_fail(p, "%s's '%s' must be a whole number from 0 to %u", what, key, max);
    *out = (uint32_t)v->valuedouble;
    return TMM_OK;
}

tmm_status tok_json_unsupported(const tok_parser *p, const char *what, const cJSON *o, const char *supported)
{
    const char *t = tok_json_type(o);
    return tok_json_fail(p, "%s '%.80s' is not supported (tmm supports %s)", what, t ? t : "without a type", supported);
}

tmm_status tok_json_pattern(const tok_parser *p, const cJSON *o, const char *what, tok_pattern *out)
{
    *out = (tok_pattern){ 0 };
    TMM_TRY(tok_json_object(p, o, what));
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(o, "Regex"), *lit = cJSON_GetObjectItemCaseSensitive(o, "String");
    if ((re != NULL) == (lit != NULL) || !cJSON_IsString(re ? re : lit))
        return tok_json_fail(p, "%s must be {\"Regex\": \"...\"} or {\"String\": \"...\"}", what);
    const char *text = (re ? re : lit)->valuestring;
    if (!*text || strlen(text) > MAX_PATTERN)
        return tok_json_fail(p, "%s is empty or longer than 64 KiB", what);
    out->literal = lit != NULL;
    if (!(out->text = strdup(text)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a pattern");
    return out->literal ? TMM_OK : tmm_tok_compile(text, false, &out->re);
}

cJSON *tok_json_pattern_write(const tok_pattern *pat)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, pat->literal ? "String" : "Regex", pat->text);
    return o;
}

static const char *const schemes[] = { "always", "first", "never" };

tmm_status tok_json_prepend_scheme(const tok_parser *p, const cJSON *o, const char *what, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "prepend_scheme");
    *out = TOK_PREPEND_ALWAYS;
    if (!tok_json_null(v)) {
        int k = 0;
        while (k < 3 && !(cJSON_IsString(v) && strcmp(v->valuestring, schemes[k]) == 0))
            k++;
        if (k == 3)
            return tok_json_fail(p, "%s's prepend_scheme must be \"always\", \"first\" or \"never\"", what);
        *out = k;
    }
    bool prefix = true;
    TMM_TRY(tok_json_bool(p, o, "add_prefix_space", true, &prefix));
    if (!prefix) { /* the older spelling of never (Hugging Face refuses it beside another scheme) */
        if (!tok_json_null(v) && *out != TOK_PREPEND_NEVER)
            return tok_json_fail(p, "%s: add_prefix_space false does not match prepend_scheme \"%s\"", what,
                                 schemes[*out]);
        *out = TOK_PREPEND_NEVER;
    }
    return TMM_OK;
}

const char *tok_json_prepend_name(int scheme) { return schemes[scheme]; }

cJSON *tok_json_byte_level(bool prefix, bool trim, bool regex)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", prefix);
    cJSON_AddBoolToObject(o, "trim_offsets", trim);
    cJSON_AddBoolToObject(o, "use_regex", regex);
    return o;
}

void tmm_tok_parts_free(tmm_tokenizer *t)
{
    for (uint32_t i = 0; i < t->n_norms; i++) {
        tmm_tok_pattern_free(&t->norms[i].pat);
        free(t->norms[i].content);
    }
    for (uint32_t i = 0; i < t->n_steps; i++)
        tmm_tok_pattern_free(&t->steps[i].pat);
    for (uint32_t i = 0; i < t->n_decoders; i++) {
        tmm_tok_pattern_free(&t->decoders[i].pat);
        free(t->decoders[i].content);
    }
    tok_template *tp = &t->template;
    for (uint32_t i = 0; i < tp->n_specials; i++) {
        for (uint32_t k = 0; k < tp->specials[i].n; k++)
            free(tp->specials[i].tokens[k]);
        free(tp->specials[i].name), free(tp->specials[i].ids), free(tp->specials[i].tokens);
    }
    free(tp->single), free(tp->pair), free(tp->specials);
    *tp = (tok_template){ 0 };
    t->n_norms = t->n_steps = t->n_decoders = t->n_post = 0;
    t->has_template = false;
    free(t->unk_token);
    t->unk_token = NULL;
}
