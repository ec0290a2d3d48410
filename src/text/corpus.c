/* Corpus files as documents (corpus.h). */
#include "text/corpus.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#include "files.h"
#include "io/json.h"
#include "status.h"

typedef struct reader {
    tmm_corpus_fn fn;
    tmm_corpus_progress_fn progress;
    void *user;
    uint64_t done, total;
    char *buf;
    size_t cap;
} reader;

static bool space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* A place to cut text [0, n) so that no pre-token spans it: just after a
 * '\n' between two ASCII non-space characters; 0 when there is none. */
static size_t cut_point(const char *p, size_t n)
{
    for (size_t i = n - 1; i >= 2; i--)
        if (p[i - 1] == '\n' && (unsigned char)p[i] < 0x80 && !space((unsigned char)p[i]) &&
            (unsigned char)p[i - 2] < 0x80 && !space((unsigned char)p[i - 2]))
            return i;
    return 0;
}

uint64_t tmm_gz_limit(const char *path)
{
    struct stat st;
    const uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    const uint64_t limit = size > UINT64_MAX / TMM_GZ_MAX_RATIO ? UINT64_MAX : size * TMM_GZ_MAX_RATIO;
    return limit < TMM_GZ_MIN_LIMIT ? TMM_GZ_MIN_LIMIT : limit;
}

/* After gzread returned got: TMM_OK while got > 0 or at a clean end; else the error, naming path. */
static tmm_status gz_check(gzFile gz, int got, const char *path)
{
    if (got > 0)
        return TMM_OK;
    int err = Z_OK;
    const char *msg = gzerror(gz, &err);
    if (got == 0 && (err == Z_OK || err == Z_STREAM_END))
        return TMM_OK;
    return tmm_fail(TMM_ERR_IO, "%s: corrupt gzip data, truncated or damaged (%s)", path,
                    msg && *msg ? msg : "read error");
}

static tmm_status gz_too_large(const char *path, uint64_t limit)
{
    return tmm_fail(TMM_ERR_IO, "%s inflates to more than %llu MiB, %d times its compressed size: refused as a "
                    "likely decompression bomb (decompress it yourself if it is meant)", path,
                    (unsigned long long)(limit >> 20), TMM_GZ_MAX_RATIO);
}

/* Only spaces, tabs and CRs. */
static bool blank(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

tmm_status tmm_jsonl_line(const char *path, uint64_t line, const char *s, size_t len, tmm_jsonl_kind *kind,
                          char **text, size_t *text_len)
{
    *kind = TMM_JSONL_BLANK;
    *text = NULL;
    *text_len = 0;
    if (len > TMM_CORPUS_MAX_LINE)
        return tmm_corpus_long_line(path, line);
    if (len && s[len - 1] == '\r')
        len--;
    if (blank(s, len))
        return TMM_OK;
    const char *parse_end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(s, len, &parse_end, 0);
    if (!obj) {
        size_t col = parse_end && parse_end >= s && parse_end <= s + len ? (size_t)(parse_end - s) + 1 : 1;
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: invalid JSON (column %zu)", path,
                        (unsigned long long)line, col);
    }
    size_t used = parse_end && parse_end >= s && parse_end <= s + len ? (size_t)(parse_end - s) : len;
    bool trailing = !blank(s + used, len - used);
    cJSON *field = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, "text") : NULL;
    tmm_status st = TMM_OK;
    if (trailing)
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: text after the JSON value (column %zu)", path,
                      (unsigned long long)line, used + 1);
    else if (tmm_json_has_nul_escape(s, used))
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: holds the escape \\u0000 (a NUL character), which "
                      "the text task does not support: remove it from the data", path, (unsigned long long)line);
    else if (!cJSON_IsObject(obj))
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: not a JSON object (a JSONL corpus has one object with a "
                      "\"text\" string per line)", path, (unsigned long long)line);
    else if (tmm_json_duplicate_key(obj))
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: the key '%s' appears twice", path,
                      (unsigned long long)line, tmm_json_duplicate_key(obj));
    else if (!field)
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: no \"text\" field", path, (unsigned long long)line);
    else if (!cJSON_IsString(field) || !field->valuestring)
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: the \"text\" field is not a string", path,
                      (unsigned long long)line);
    else if (field->valuestring[0] == 0)
        *kind = TMM_JSONL_EMPTY;
    else {
        /* take the string from cJSON (its default allocator is malloc) */
        *kind = TMM_JSONL_TEXT;
        *text = field->valuestring;
        *text_len = strlen(*text);
        field->valuestring = NULL;
    }
    cJSON_Delete(obj);
    return st;
}

tmm_status tmm_corpus_long_line(const char *path, uint64_t line)
{
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: a line longer than %u MiB", path, (unsigned long long)line,
                    TMM_CORPUS_MAX_LINE >> 20);
}

bool tmm_corpus_is_jsonl(const char *path)
{
    size_t n = strlen(path);
    if (n >= 3 && strcasecmp(path + n - 3, ".gz") == 0)
        n -= 3;
    return n >= 6 && strncasecmp(path + n - 6, ".jsonl", 6) == 0;
}

struct tmm_corpus_file {
    gzFile gz;
    const char *path;
    uint64_t limit, total;
};

tmm_status tmm_corpus_file_open(const char *path, tmm_corpus_file **out)
{
    *out = NULL;
    TMM_TRY(tmm_check_regular_file(path, "corpus file"));
    tmm_corpus_file *f = calloc(1, sizeof *f);
    if (!f)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (!(f->gz = gzopen(path, "rb"))) {
        free(f);
        return tmm_fail(TMM_ERR_IO, "%s: cannot open", path);
    }
    gzbuffer(f->gz, 1u << 18);
    f->path = path;
    /* a plain file reads through too (gzdirect): at most its own size, and any size is its own */
    f->limit = gzdirect(f->gz) ? UINT64_MAX : tmm_gz_limit(path);
    *out = f;
    return TMM_OK;
}

tmm_status tmm_corpus_file_read(tmm_corpus_file *f, char *buf, size_t cap, size_t *got)
{
    *got = 0;
    int n = gzread(f->gz, buf, (unsigned)(cap < (1u << 30) ? cap : 1u << 30));
    TMM_TRY(gz_check(f->gz, n, f->path));
    if ((f->total += (uint64_t)n) > f->limit)
        return gz_too_large(f->path, f->limit);
    *got = (size_t)n;
    return TMM_OK;
}

uint64_t tmm_corpus_file_limit(const tmm_corpus_file *f) { return f->limit; }

void tmm_corpus_file_close(tmm_corpus_file *f)
{
    if (f)
        gzclose(f->gz);
    free(f);
}

static void report(reader *r, tmm_corpus_file *f, uint64_t base)
{
    if (r->progress)
        r->progress(base + (uint64_t)gzoffset(f->gz), r->total, r->user);
}

/* Room in r->buf for have + one chunk: the buffer grows as a file needs it
 * (to TMM_CORPUS_MAX_LINE + 17 chunks at most, which the readers keep to). */
static tmm_status room(reader *r, size_t have)
{
    if (have + TMM_CORPUS_CHUNK <= r->cap)
        return TMM_OK;
    size_t cap = r->cap ? 2 * r->cap : 2 * (size_t)TMM_CORPUS_CHUNK;
    if (cap < have + TMM_CORPUS_CHUNK)
        cap = have + TMM_CORPUS_CHUNK;
    char *bigger = realloc(r->buf, cap);
    if (!bigger)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a read buffer of %zu MiB", cap >> 20);
    r->buf = bigger;
    r->cap = cap;
    return TMM_OK;
}

/* The next chunk of the file after the `have` bytes held, and the progress line. */
static tmm_status fill(reader *r, tmm_corpus_file *f, uint64_t base, size_t *have, size_t *got)
{
    TMM_TRY(room(r, *have));
    TMM_TRY(tmm_corpus_file_read(f, r->buf + *have, TMM_CORPUS_CHUNK, got));
    *have += *got;
    report(r, f, base);
    return TMM_OK;
}

static tmm_status read_plain(reader *r, tmm_corpus_file *f, uint64_t base)
{
    size_t have = 0, cap = 17 * (size_t)TMM_CORPUS_CHUNK;
    for (;;) {
        size_t got;
        TMM_TRY(fill(r, f, base, &have, &got));
        if (got == 0)
            return have ? r->fn(r->buf, have, r->user) : TMM_OK;
        if (have < TMM_CORPUS_CHUNK)
            continue;
        size_t cut = cut_point(r->buf, have);
        if (!cut && have + TMM_CORPUS_CHUNK <= cap)
            continue;
        if (!cut || have - cut + TMM_CORPUS_CHUNK > cap)
            cut = have;
        TMM_TRY(r->fn(r->buf, cut, r->user));
        memmove(r->buf, r->buf + cut, have - cut);
        have -= cut;
    }
}

static tmm_status json_line(reader *r, const char *path, uint64_t line, const char *p, size_t n)
{
    tmm_jsonl_kind kind;
    char *text;
    size_t len;
    TMM_TRY(tmm_jsonl_line(path, line, p, n, &kind, &text, &len));
    tmm_status s = kind == TMM_JSONL_TEXT ? r->fn(text, len, r->user) : TMM_OK;
    free(text);
    return s;
}

static tmm_status read_jsonl(reader *r, tmm_corpus_file *f, const char *path, uint64_t base)
{
    size_t have = 0;
    uint64_t line = 1;
    for (;;) {
        size_t got;
        TMM_TRY(fill(r, f, base, &have, &got));
        size_t start = 0;
        for (const char *nl; (nl = memchr(r->buf + start, '\n', have - start)) != NULL; line++) {
            TMM_TRY(json_line(r, path, line, r->buf + start, (size_t)(nl - r->buf) - start));
            start = (size_t)(nl - r->buf) + 1;
        }
        memmove(r->buf, r->buf + start, have - start);
        have -= start;
        if (got == 0)
            return json_line(r, path, line, r->buf, have);
        if (have > TMM_CORPUS_MAX_LINE)
            return tmm_corpus_long_line(path, line);
    }
}

static tmm_status read_file(reader *r, const char *path)
{
    tmm_corpus_file *f;
    TMM_TRY(tmm_corpus_file_open(path, &f));
    uint64_t base = r->done;
    tmm_status s = tmm_corpus_is_jsonl(path) ? read_jsonl(r, f, path, base) : read_plain(r, f, base);
    struct stat st;
    r->done = base + (stat(path, &st) == 0 ? (uint64_t)st.st_size : 0);
    tmm_corpus_file_close(f);
    return s;
}

/* The walk's two passes over the same files (tmm_walk_files): their sizes, then their text. */
static tmm_status add_size(const char *path, void *user)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tmm_fail(TMM_ERR_IO, "%s: no such file or directory", path);
    ((reader *)user)->total += (uint64_t)st.st_size;
    return TMM_OK;
}

static tmm_status read_one(const char *path, void *user) { return read_file(user, path); }

tmm_status tmm_corpus_read(const char *const *paths, size_t count, tmm_corpus_fn fn, tmm_corpus_progress_fn progress,
                           void *user)
{
    reader r = { .fn = fn, .progress = progress, .user = user };
    for (size_t i = 0; i < count; i++)
        TMM_TRY(tmm_walk_files(paths[i], add_size, &r));
    tmm_status s = TMM_OK;
    for (size_t i = 0; i < count && s == TMM_OK; i++)
        s = tmm_walk_files(paths[i], read_one, &r);
    free(r.buf);
    return s;
}
