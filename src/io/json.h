/* Small helpers over cJSON shared by the file readers. */
#ifndef TMM_IO_JSON_H
#define TMM_IO_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* The first key (in sorted order) that occurs twice among obj's members, or
 * NULL; O(m log m) for m members, so a hostile file cannot make it slow. A
 * duplicate key makes a document mean two things: readers refuse it. */
const char *tmm_json_duplicate_key(const cJSON *obj);
/* Whether a JSON text holds the escape \u0000 (a NUL character: C strings,
 * and so cJSON's, end there, so the string would be cut silently), read
 * escape by escape so "\\u0000" is not one. Readers refuse it. */
bool tmm_json_has_nul_escape(const char *s, size_t len);

#endif
