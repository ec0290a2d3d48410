/* Small helpers over cJSON shared by the file readers. */
#ifndef TMM_IO_JSON_H
#define TMM_IO_JSON_H

#include <cjson/cJSON.h>

/* The first key (in sorted order) that occurs twice among obj's members, or
 * NULL; O(m log m) for m members, so a hostile file cannot make it slow. A
 * duplicate key makes a document mean two things: readers refuse it. */
const char *tmm_json_duplicate_key(const cJSON *obj);

#endif
