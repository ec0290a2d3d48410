/* The responses' JSON writer (serve_jw.h). */
#include "serve/serve_jw.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(serve_jw *w, const char *s, size_t n)
{
    if (!w->failed && tmm_bytes_append(&w->out, s, n) != TMM_OK)
        w->failed = true;
}

static void puts_(serve_jw *w, const char *s) { put(w, s, strlen(s)); }

/* The comma before a value or key, unless it follows a key or opens its container. */
static void sep(serve_jw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0 && !w->first[w->depth - 1])
        put(w, ",", 1);
    if (w->depth > 0)
        w->first[w->depth - 1] = false;
}

static void open_(serve_jw *w, const char *c)
{
    sep(w);
    put(w, c, 1);
    if (w->depth < SERVE_JW_DEPTH)
        w->first[w->depth] = true;
    else
        w->failed = true;
    w->depth++;
}

static void close_(serve_jw *w, const char *c)
{
    if (w->depth > 0)
        w->depth--;
    put(w, c, 1);
}

void jw_obj(serve_jw *w) { open_(w, "{"); }
void jw_end(serve_jw *w) { close_(w, "}"); }
void jw_arr(serve_jw *w) { open_(w, "["); }
void jw_end_arr(serve_jw *w) { close_(w, "]"); }

void jw_key(serve_jw *w, const char *key) { jw_key_n(w, key, strlen(key)); }

void jw_key_n(serve_jw *w, const char *key, size_t n)
{
    sep(w);
    put(w, "\"", 1);
    jw_escaped(w, key, n);
    put(w, "\":", 2);
    w->after_key = true;
}

/* The length of the valid UTF-8 character at s[0, n), or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    const unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

void jw_escaped(serve_jw *w, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t run = 0; /* bytes of s[i - run, i) to copy as they are */
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        const char *esc = NULL;
        char buf[8];
        size_t len = 1;
        if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\r')
            esc = "\\r";
        else if (c == '\t')
            esc = "\\t";
        else if (c < 0x20 || c == 0x7F) {
            snprintf(buf, sizeof buf, "\\u%04x", c);
            esc = buf;
        } else if (c >= 0x80 && (len = utf8_char(s + i, n - i)) == 0) {
            esc = "\xEF\xBF\xBD"; /* U+FFFD for one invalid byte */
            len = 1;
        }
        if (esc) {
            put(w, str + i - run, run);
            run = 0;
            puts_(w, esc);
        } else {
            run += len;
        }
        i += len;
    }
    put(w, str + n - run, run);
}

void jw_str(serve_jw *w, const char *s, size_t n)
{
    sep(w);
    put(w, "\"", 1);
    jw_escaped(w, s, n);
    put(w, "\"", 1);
}

void jw_cstr(serve_jw *w, const char *s)
{
    if (s)
        jw_str(w, s, strlen(s));
    else
        jw_null(w);
}

void jw_int(serve_jw *w, int64_t v)
{
    char buf[32];
    sep(w);
    snprintf(buf, sizeof buf, "%" PRId64, v);
    puts_(w, buf);
}

void jw_num(serve_jw *w, double v)
{
    if (!isfinite(v)) {
        jw_null(w);
        return;
    }
    char buf[40];
    sep(w);
    snprintf(buf, sizeof buf, "%.9g", v);
    puts_(w, buf);
}

void jw_bool(serve_jw *w, bool v)
{
    sep(w);
    puts_(w, v ? "true" : "false");
}

void jw_null(serve_jw *w)
{
    sep(w);
    puts_(w, "null");
}

void jw_raw(serve_jw *w, const char *s) { puts_(w, s); }

char *jw_take(serve_jw *w, size_t *length)
{
    put(w, "", 1); /* the NUL */
    char *s = w->failed ? NULL : w->out.data;
    if (length)
        *length = s ? w->out.length - 1 : 0;
    if (!s)
        free(w->out.data);
    memset(w, 0, sizeof *w);
    return s;
}

void jw_free(serve_jw *w)
{
    free(w->out.data);
    memset(w, 0, sizeof *w);
}
