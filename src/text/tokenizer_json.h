/* Reading and writing the parts of a Hugging Face tokenizer.json (inside
 * src/text; docs/tokenizer.md, "tokenizer.json"). Each part's reader checks
 * every field and names what it does not support in one line; its writer
 * gives the JSON that reads back to the same. */
#ifndef TMM_TEXT_TOKENIZER_JSON_H
#define TMM_TEXT_TOKENIZER_JSON_H

#include <cjson/cJSON.h>

#include "status.h"
#include "text/tokenizer_impl.h"

typedef struct tok_parser {
    const char *origin;
    tmm_tok_map map;
    /* vocab keys (the file's strings) -> id */
    const char **keys;
    uint32_t *key_ids;
    uint64_t key_mask;
    const char **id_key; /* per id: its vocab key or NULL */
} tok_parser;

/* "ORIGIN: message" */
tmm_status tok_json_fail(const tok_parser *p, const char *fmt, ...) TMM_PRINTF(2, 3);
const char *tok_json_type(const cJSON *o);
bool tok_json_null(const cJSON *v);
/* o must be an object without a key twice. */
tmm_status tok_json_object(const tok_parser *p, const cJSON *o, const char *what);
/* An optional boolean member: absent or null gives def. */
tmm_status tok_json_bool(const tok_parser *p, const cJSON *o, const char *key, bool def, bool *out);
/* A string member, copied (malloc'ed); absent or null is an error naming what. */
tmm_status tok_json_string(const tok_parser *p, const cJSON *o, const char *key, const char *what, char **out);
/* A string member of exactly one character, into out (UTF-8, NUL-terminated). */
tmm_status tok_json_char(const tok_parser *p, const cJSON *o, const char *key, const char *what, char out[5]);
/* A whole number member from 0 to max; absent gives def. */
tmm_status tok_json_uint(const tok_parser *p, const cJSON *o, const char *key, const char *what, uint32_t max,
                         uint32_t def, uint32_t *out);
/* "WHAT 'TYPE' is not supported (tmm supports SUPPORTED)" */
tmm_status tok_json_unsupported(const tok_parser *p, const char *what, const cJSON *o, const char *supported);
/* {"Regex": ...} or {"String": ...}, non-empty, the regex compiled. */
tmm_status tok_json_pattern(const tok_parser *p, const cJSON *o, const char *what, tok_pattern *out);
cJSON *tok_json_pattern_write(const tok_pattern *pat);
/* Metaspace's "prepend_scheme" (with the older "add_prefix_space"). */
tmm_status tok_json_prepend_scheme(const tok_parser *p, const cJSON *o, const char *what, int *out);
const char *tok_json_prepend_name(int scheme);
cJSON *tok_json_byte_level(bool prefix, bool trim, bool regex);

/* The parts, into t (whose vocabulary is not read yet: ids are checked by
 * tmm_tok_finish), and back. The pre-tokenizer sets t->byte_level. */
tmm_status tok_json_read_normalizer(const tok_parser *p, const cJSON *o, tmm_tokenizer *t);
tmm_status tok_json_read_pre_tokenizer(const tok_parser *p, const cJSON *o, tmm_tokenizer *t);
tmm_status tok_json_read_post_processor(const tok_parser *p, const cJSON *o, tmm_tokenizer *t);
tmm_status tok_json_read_decoder(const tok_parser *p, const cJSON *o, tmm_tokenizer *t);
cJSON *tok_json_write_normalizer(const tmm_tokenizer *t);
cJSON *tok_json_write_pre_tokenizer(const tmm_tokenizer *t);
cJSON *tok_json_write_post_processor(const tmm_tokenizer *t);
cJSON *tok_json_write_decoder(const tmm_tokenizer *t);

/* Frees what the parts hold (patterns, strings, the template). */
void tmm_tok_parts_free(tmm_tokenizer *t);

#endif
