/* A small JSON writer for the server's responses: every string written is
 * valid UTF-8 JSON whatever bytes it is given (an invalid byte becomes
 * U+FFFD, control characters and NUL are escaped), which cJSON's C strings
 * cannot promise for generated text. */
#ifndef TMM_SERVE_JW_H
#define TMM_SERVE_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h" /* tmm_bytes */

#define SERVE_JW_DEPTH 16

typedef struct serve_jw {
    tmm_bytes out;
    unsigned depth;
    bool first[SERVE_JW_DEPTH];
    bool after_key;
    bool failed; /* out of memory: out is incomplete */
} serve_jw;

void jw_obj(serve_jw *w);
void jw_end(serve_jw *w); /* closes an object */
void jw_arr(serve_jw *w);
void jw_end_arr(serve_jw *w);
void jw_key(serve_jw *w, const char *key);
void jw_key_n(serve_jw *w, const char *key, size_t n); /* any bytes, as jw_str */
void jw_str(serve_jw *w, const char *s, size_t n);
void jw_cstr(serve_jw *w, const char *s); /* NULL: null */
void jw_int(serve_jw *w, int64_t v);
void jw_num(serve_jw *w, double v);       /* not finite: null */
void jw_bool(serve_jw *w, bool v);
void jw_null(serve_jw *w);
/* Raw text appended as it is (an SSE line's "data: " and blank line). */
void jw_raw(serve_jw *w, const char *s);
/* The bytes as a JSON string's contents (no quotes), U+FFFD for invalid UTF-8. */
void jw_escaped(serve_jw *w, const char *s, size_t n);
/* Takes the text (NUL-terminated, malloc'ed; NULL after a failure) and resets w. */
char *jw_take(serve_jw *w, size_t *length);
void jw_free(serve_jw *w);

#endif
