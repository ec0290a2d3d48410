/* Corpus files as documents (corpus.h). */
#include "text/corpus.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
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

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

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

tmm_status tmm_gz_check(void *gz, int got, const char *path)
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

tmm_status tmm_gz_too_large(const char *path, uint64_t limit)
{
    return tmm_fail(TMM_ERR_IO, "%s inflates to more than %llu MiB, %d times its compressed size: refused as a "
                    "likely decompression bomb (decompress it yourself if it is meant)", path,
                    (unsigned long long)(limit >> 20), TMM_GZ_MAX_RATIO);
}

static void report(reader *r, gzFile f, uint64_t base)
{
    if (r->progress)
        r->progress(base + (uint64_t)gzoffset(f), r->total, r->user);
}

static tmm_status read_plain(reader *r, gzFile f, const char *path, uint64_t base, uint64_t limit)
{
    size_t have = 0, cap = 17 * (size_t)TMM_CORPUS_CHUNK;
    uint64_t total = 0;
    for (;;) {
        int got = gzread(f, r->buf + have, TMM_CORPUS_CHUNK);
        TMM_TRY(tmm_gz_check(f, got, path));
        if ((total += (uint64_t)got) > limit)
            return tmm_gz_too_large(path, limit);
        have += (size_t)got;
        report(r, f, base);
        if (got == 0) {
            tmm_status s = have ? r->fn(r->buf, have, r->user) : TMM_OK;
            report(r, f, base);
            return s;
        }
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
    size_t i = 0;
    while (i < n && space((unsigned char)p[i]))
        i++;
    if (i == n)
        return TMM_OK;
    cJSON *doc = cJSON_ParseWithLength(p, n);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(doc, "text");
    tmm_status s = TMM_OK;
    if (!cJSON_IsObject(doc))
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: not a JSON object (a JSONL corpus has one object with a "
                     "\"text\" string per line)", path, (unsigned long long)line);
    else if (tmm_json_duplicate_key(doc))
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: the key '%s' appears twice", path, (unsigned long long)line,
                     tmm_json_duplicate_key(doc));
    else if (!cJSON_IsString(text))
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: no \"text\" string", path, (unsigned long long)line);
    else
        s = r->fn(text->valuestring, strlen(text->valuestring), r->user);
    cJSON_Delete(doc);
    return s;
}

static tmm_status read_jsonl(reader *r, gzFile f, const char *path, uint64_t base, uint64_t limit)
{
    size_t have = 0;
    uint64_t line = 1, total = 0;
    for (;;) {
        int got = gzread(f, r->buf + have, TMM_CORPUS_CHUNK);
        TMM_TRY(tmm_gz_check(f, got, path));
        if ((total += (uint64_t)got) > limit)
            return tmm_gz_too_large(path, limit);
        have += (size_t)got;
        report(r, f, base);
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
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%llu: a line longer than %u MiB", path,
                            (unsigned long long)line, TMM_CORPUS_MAX_LINE >> 20);
    }
}

static tmm_status read_file(reader *r, const char *path)
{
    TMM_TRY(tmm_check_regular_file(path, "corpus file"));
    gzFile f = gzopen(path, "rb");
    if (!f)
        return tmm_fail(TMM_ERR_IO, "%s: cannot open", path);
    gzbuffer(f, 1u << 18);
    uint64_t base = r->done;
    bool jsonl = ends_with(path, ".jsonl") || ends_with(path, ".jsonl.gz");
    /* a plain file reads through too (gzdirect): at most its own size, and any size is its own */
    const uint64_t limit = gzdirect(f) ? UINT64_MAX : tmm_gz_limit(path);
    tmm_status s = jsonl ? read_jsonl(r, f, path, base, limit) : read_plain(r, f, path, base, limit);
    struct stat st;
    r->done = base + (stat(path, &st) == 0 ? (uint64_t)st.st_size : 0);
    gzclose(f);
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
    r.cap = (size_t)TMM_CORPUS_MAX_LINE + 17 * (size_t)TMM_CORPUS_CHUNK;
    r.buf = malloc(r.cap);
    if (!r.buf)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory for a read buffer of %zu MiB", r.cap >> 20);
    tmm_status s = TMM_OK;
    for (size_t i = 0; i < count && s == TMM_OK; i++)
        s = tmm_walk_files(paths[i], read_one, &r);
    free(r.buf);
    return s;
}
