/* Committing generated text past stop sequences and UTF-8 characters (serve_text.h). */
#include "serve/serve_text.h"

#include <stdlib.h>
#include <string.h>

/* How many continuation bytes lead byte c announces (0 for ASCII and for
 * bytes that cannot start a character). */
static size_t utf8_follow(unsigned char c)
{
    if (c >= 0xC2 && c <= 0xDF)
        return 1;
    if (c >= 0xE0 && c <= 0xEF)
        return 2;
    if (c >= 0xF0 && c <= 0xF4)
        return 3;
    return 0;
}

size_t serve_utf8_whole(const char *s, size_t n)
{
    /* a character still open at the end began within its last 3 bytes */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xC0) == 0x80)
            continue; /* a continuation byte: look further back */
        const size_t follow = utf8_follow(c);
        return follow >= back ? n - back : n; /* open: hold it back; else complete (or invalid: let it go) */
    }
    return n;
}

/* The first position at or after `from` where a stop sequence begins, or SIZE_MAX. */
static size_t find_stop(const serve_text *t, const serve_stops *stops, size_t from)
{
    size_t best = SIZE_MAX;
    for (unsigned i = 0; i < stops->count; i++) {
        const size_t m = stops->len[i];
        if (m == 0 || m > t->all.length - from)
            continue;
        for (size_t p = from; p + m <= t->all.length && p < best; p++)
            if (memcmp(t->all.data + p, stops->s[i], m) == 0) {
                best = p;
                break;
            }
    }
    return best;
}

/* The length of the longest proper suffix of all[from, len) that begins some stop sequence. */
static size_t stop_prefix_tail(const serve_text *t, const serve_stops *stops, size_t from)
{
    const size_t n = t->all.length - from;
    size_t hold = 0;
    for (unsigned i = 0; i < stops->count; i++) {
        const size_t m = stops->len[i];
        if (m == 0)
            continue;
        for (size_t k = (m - 1 < n ? m - 1 : n); k > hold; k--)
            if (memcmp(t->all.data + t->all.length - k, stops->s[i], k) == 0) {
                hold = k;
                break;
            }
    }
    return hold;
}

tmm_status serve_text_append(serve_text *t, const serve_stops *stops, const char *bytes, size_t length)
{
    if (t->stopped)
        return TMM_OK;
    TMM_TRY(tmm_bytes_append(&t->all, bytes, length));
    /* a stop sequence lies wholly after `committed`: nothing committed began one */
    const size_t at = find_stop(t, stops, t->committed);
    if (at != SIZE_MAX) {
        t->all.length = at;
        t->committed = at;
        t->stopped = true;
        return TMM_OK;
    }
    size_t safe = t->all.length - stop_prefix_tail(t, stops, t->committed);
    safe = t->committed + serve_utf8_whole(t->all.data + t->committed, safe - t->committed);
    t->committed = safe;
    return TMM_OK;
}

void serve_text_finish(serve_text *t) { t->committed = t->all.length; }

void serve_text_free(serve_text *t)
{
    free(t->all.data);
    memset(t, 0, sizeof *t);
}

void serve_stops_free(serve_stops *s)
{
    for (unsigned i = 0; i < s->count; i++)
        free(s->s[i]);
    memset(s, 0, sizeof *s);
}
