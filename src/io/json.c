#include "io/json.h"

#include <stdlib.h>
#include <string.h>

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *tmm_json_duplicate_key(const cJSON *obj)
{
    size_t n = 0;
    for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next)
        n += c->string != NULL;
    if (n < 2)
        return NULL;
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) /* no memory to check: say nothing is duplicated rather than fail the caller's parse here */
        return NULL;
    size_t m = 0;
    for (const cJSON *c = obj->child; c; c = c->next)
        if (c->string)
            keys[m++] = c->string;
    qsort(keys, m, sizeof *keys, by_string);
    const char *dup = NULL;
    for (size_t i = 1; i < m && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0)
            dup = keys[i];
    free(keys);
    return dup;
}

bool tmm_json_has_nul_escape(const char *s, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] != '\\')
            continue;
        if (s[i + 1] == 'u' && i + 5 < len && memcmp(s + i + 2, "0000", 4) == 0)
            return true;
        i++; /* the escaped character */
    }
    return false;
}
