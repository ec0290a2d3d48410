/* The text a sequence returns as it is generated (docs/serve.md "Stop
 * sequences"): the bytes of its tokens, released ("committed") only once no
 * stop sequence can begin in them and they end on a whole UTF-8 character,
 * so that a stream never shows text that a stop sequence later takes back
 * and never splits a character between two events. */
#ifndef TMM_SERVE_TEXT_H
#define TMM_SERVE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "status.h"
#include "text/tokenizer.h" /* tmm_bytes */

#define SERVE_MAX_STOP 4       /* stop sequences a request may give (OpenAI's limit) */
#define SERVE_MAX_STOP_BYTES 256

typedef struct serve_stops {
    char *s[SERVE_MAX_STOP + 1]; /* + the chat template's own */
    size_t len[SERVE_MAX_STOP + 1];
    unsigned count;
} serve_stops;

typedef struct serve_text {
    tmm_bytes all;        /* every byte generated */
    size_t committed;     /* all[0, committed) is released */
    bool stopped;         /* a stop sequence was found: all is cut before it */
} serve_text;

/* Appends one token's bytes. Afterwards all[0, committed) may be released;
 * *stopped when a stop sequence appeared (the text then ends before it and
 * everything left is committed). */
tmm_status serve_text_append(serve_text *t, const serve_stops *stops, const char *bytes, size_t length);
/* The sequence ended otherwise: everything is committed. */
void serve_text_finish(serve_text *t);
void serve_text_free(serve_text *t);
void serve_stops_free(serve_stops *s);

/* The length of the longest prefix of s[0, n) that does not end inside a
 * UTF-8 character that the bytes after it could still complete. */
size_t serve_utf8_whole(const char *s, size_t n);

#endif
