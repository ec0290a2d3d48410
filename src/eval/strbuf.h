/* A growable NUL-terminated string of the eval library: appends never fail
 * one by one; a failed allocation sets `failed` and later appends do
 * nothing, so a caller checks once at the end. */
#ifndef TMM_EVAL_STRBUF_H
#define TMM_EVAL_STRBUF_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool failed;
} sbuf;

static inline void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->failed = true;
            return;
        }
        b->s = t, b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static inline void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

#endif
