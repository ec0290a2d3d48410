/* tmm prepare: tokenizes a corpus into token shards (docs/formats.md "Token
 * shards", docs/data.md "Prepared shards").
 *
 * One reader thread reads the files in order (decompressing gzip data,
 * text/corpus.h) and cuts them into jobs (a plain file, or a run of JSONL lines); worker threads
 * encode the jobs' documents; this thread writes the jobs in order. The
 * output depends on the documents and their order only, never on the thread
 * count. A bounded ring of jobs bounds the memory. */
#define _XOPEN_SOURCE 700 /* sysconf, realpath */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "io/limits.h"
#include "model/rng.h"
#include "status.h"
#include "text/corpus.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/manifest.h"
#include "train/shards.h"

#define JOB_BYTES (4u << 20) /* JSONL lines per job, about */
#define MAX_THREADS 256u
#define MAX_INPUTS 10000000u

static void usage(void)
{
    printf("usage: tmm prepare --tokenizer tok.json|bytes --data FILE|DIR... --out DIR\n"
           "                   [--val-fraction F] [--shard-tokens N] [--threads N] [--force] [--quiet]\n\n"
           "Tokenizes a corpus into token shards that tmm train reads (--data DIR).\n"
           "Inputs: a text file is one document; a .jsonl file holds one document per\n"
           "line (a JSON object with a string \"text\" field); gzip data is decompressed\n"
           "first (name.jsonl.gz is JSONL); a directory is read recursively, in sorted\n"
           "order, skipping hidden names and symbolic links. Documents are written in\n"
           "input order, each followed by the tokenizer's end-of-text token. Document i\n"
           "(counting from 0 over the whole corpus) goes to validation when a hash of i\n"
           "is below the validation fraction (docs/data.md); if that leaves either split\n"
           "empty (a single file, or too few documents), the last document is cut instead:\n"
           "its first (1 - F) of tokens train, the rest validate. DIR receives train_NNNNNN.bin and\n"
           "val_NNNNNN.bin shards, tokenizer.json and manifest.json (written last).\n"
           "The output is the same for every thread count. Gzip data may inflate to at\n"
           "most 100 times its size (64 MiB whatever its size); a JSONL line may be at\n"
           "most 64 MiB long; a truncated or damaged stream is an error.\n\n"
           "  -t, --tokenizer T    a tokenizer.json, a .tiktoken file (saved as tokenizer.json), or\n"
           "                       \"bytes\" (docs/tokenizer.md)\n"
           "  -d, --data PATH      a text, .jsonl or .gz file, or a directory (repeat for more)\n"
           "  -o, --out DIR        the prepared directory (created)\n"
           "  --val-fraction F     held-out share of the documents, in [0, 1) (default 0.05)\n"
           "  --shard-tokens N     tokens per shard, at most (default 100000000; a longer\n"
           "                       document gets a shard of its own)\n"
           "  --threads N          encoding threads (default: the online cores)\n"
           "  --force              replace the shards and manifest of a prepared DIR\n"
           "  -q, --quiet          no progress on stderr\n");
}

/* ---- inputs ------------------------------------------------------------------- */

typedef struct inputs {
    char **paths;
    uint32_t count, cap;
} inputs;

static tmm_status add_input(inputs *in, const char *path)
{
    if (in->count == MAX_INPUTS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "more than %u input files", MAX_INPUTS);
    if (in->count == in->cap) {
        uint32_t cap = in->cap ? 2 * in->cap : 64;
        char **bigger = realloc(in->paths, cap * sizeof *bigger);
        if (!bigger)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        in->paths = bigger;
        in->cap = cap;
    }
    if (!(in->paths[in->count] = strdup(path)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    in->count++;
    return TMM_OK;
}

/* tmm_walk_files' callback: the same files, in the same order, as every corpus reader. */
static tmm_status add_walked(const char *path, void *user) { return add_input(user, path); }

/* A plain-text file: one document, so read whole (a .gz file at most
 * tmm_gz_limit bytes, corpus.h). */
static tmm_status read_whole(tmm_corpus_file *f, const char *path, char **data, size_t *size)
{
    const uint64_t file_limit = tmm_corpus_file_limit(f);
    const uint64_t limit = file_limit < TMM_LIMIT_TEXT ? file_limit : TMM_LIMIT_TEXT;
    size_t cap = 1u << 16, len = 0, got = 1;
    char *buf = malloc(cap);
    tmm_status s = buf ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    while (s == TMM_OK && got) {
        if (len == cap) { /* up to one byte past the limit, which the read then refuses */
            size_t more = cap * 2 < limit + 1 ? cap * 2 : (size_t)limit + 1;
            char *bigger = len <= limit ? realloc(buf, more) : NULL;
            if (!bigger) {
                s = len <= limit ? tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory reading %s", path)
                                 : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: a document larger than %llu MiB", path,
                                            (unsigned long long)(limit >> 20));
                break;
            }
            buf = bigger;
            cap = more;
        }
        s = tmm_corpus_file_read(f, buf + len, cap - len, &got);
        len += got;
    }
    if (s != TMM_OK) {
        free(buf);
        return s;
    }
    *data = buf;
    *size = len;
    return TMM_OK;
}

/* ---- jobs ---------------------------------------------------------------------- */

enum { JOB_EMPTY, JOB_READY, JOB_CLAIMED, JOB_DONE };

typedef struct job {
    int state;
    const char *path;
    char *data;              /* the bytes to encode (owned) */
    size_t size;
    bool jsonl;
    uint64_t first_line;
    /* results */
    tmm_tokens tokens;       /* every document's tokens, back to back */
    size_t *doc_len;
    size_t n_docs, cap_docs;
    uint64_t skipped, text_bytes;
    tmm_status status;       /* the producer's or the worker's */
    char error[512];
} job;

typedef struct prep {
    const tmm_tokenizer *tok;
    const inputs *in;
    job *ring;
    uint32_t ring_size;
    uint64_t next_in, next_claim, next_out;
    bool stop, inputs_done;
    pthread_mutex_t mu;
    pthread_cond_t changed;
} prep;

static void job_fail(job *j, tmm_status s)
{
    j->status = s;
    snprintf(j->error, sizeof j->error, "%s", tmm_last_error());
}

static tmm_status job_doc(job *j, const tmm_tokenizer *tok, tmm_tok_cache *cache, const char *text, size_t len)
{
    if (j->n_docs == j->cap_docs) {
        size_t cap = j->cap_docs ? 2 * j->cap_docs : 64;
        size_t *bigger = realloc(j->doc_len, cap * sizeof *bigger);
        if (!bigger)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        j->doc_len = bigger;
        j->cap_docs = cap;
    }
    size_t before = j->tokens.count;
    j->text_bytes += len;
    TMM_TRY(tmm_tokenizer_encode(tok, cache, text, len, false, &j->tokens));
    j->doc_len[j->n_docs++] = j->tokens.count - before;
    return TMM_OK;
}

static tmm_status encode_job(job *j, const tmm_tokenizer *tok, tmm_tok_cache *cache)
{
    if (!j->jsonl) {
        if (j->size == 0) {
            j->skipped++;
            return TMM_OK;
        }
        return job_doc(j, tok, cache, j->data, j->size);
    }
    uint64_t line = j->first_line;
    for (size_t pos = 0; pos < j->size; line++) {
        const char *nl = memchr(j->data + pos, '\n', j->size - pos);
        size_t end = nl ? (size_t)(nl - j->data) : j->size;
        tmm_jsonl_kind kind;
        char *text;
        size_t len;
        TMM_TRY(tmm_jsonl_line(j->path, line, j->data + pos, end - pos, &kind, &text, &len));
        pos = nl ? end + 1 : j->size;
        tmm_status s = TMM_OK;
        if (kind == TMM_JSONL_EMPTY)
            j->skipped++;
        else if (kind == TMM_JSONL_TEXT)
            s = job_doc(j, tok, cache, text, len);
        free(text);
        TMM_TRY(s);
    }
    return TMM_OK;
}

static void *worker(void *arg)
{
    prep *P = arg;
    tmm_tok_cache *cache = tmm_tok_cache_new();
    pthread_mutex_lock(&P->mu);
    for (;;) {
        job *j = NULL;
        while (!P->stop && !(P->next_claim < P->next_in) && !P->inputs_done)
            pthread_cond_wait(&P->changed, &P->mu);
        if (P->stop || !(P->next_claim < P->next_in))
            break;
        j = &P->ring[P->next_claim++ % P->ring_size];
        j->state = JOB_CLAIMED;
        pthread_mutex_unlock(&P->mu);
        if (j->status == TMM_OK) {
            tmm_status s = encode_job(j, P->tok, cache);
            if (s != TMM_OK)
                job_fail(j, s);
        }
        free(j->data);
        j->data = NULL;
        pthread_mutex_lock(&P->mu);
        j->state = JOB_DONE;
        pthread_cond_broadcast(&P->changed);
    }
    pthread_mutex_unlock(&P->mu);
    tmm_tok_cache_free(cache);
    return NULL;
}

/* Queues a job (waiting for a free slot); false when the run stopped, and
 * then the job's data is freed here. */
static bool push_job(prep *P, const job *proto)
{
    pthread_mutex_lock(&P->mu);
    while (!P->stop && P->next_in - P->next_out >= P->ring_size)
        pthread_cond_wait(&P->changed, &P->mu);
    bool ok = !P->stop;
    if (ok) {
        job *j = &P->ring[P->next_in % P->ring_size];
        *j = *proto;
        j->state = JOB_READY;
        P->next_in++;
        pthread_cond_broadcast(&P->changed);
    }
    pthread_mutex_unlock(&P->mu);
    if (!ok)
        free(proto->data);
    return ok;
}

/* A JSONL file, streamed: runs of whole lines of about JOB_BYTES, each a job
 * (so memory stays within the ring's jobs whatever the file's size). False
 * when the run stops (a failure here is queued as a failed job). */
static bool read_jsonl(prep *P, tmm_corpus_file *f, const char *path)
{
    uint64_t line = 1;
    size_t have = 0; /* bytes of a line that the last job left over, in carry */
    char *carry = NULL;
    tmm_status s = TMM_OK;
    for (;;) {
        size_t cap = have + JOB_BYTES, got = 0;
        job j = { .path = path, .jsonl = true, .first_line = line, .data = malloc(cap) };
        if (!j.data) {
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            break;
        }
        if (have)
            memcpy(j.data, carry, have);
        free(carry);
        carry = NULL;
        if ((s = tmm_corpus_file_read(f, j.data + have, cap - have, &got)) != TMM_OK) {
            free(j.data);
            break;
        }
        have += got;
        j.size = have; /* at the end, the last line with or without its LF */
        while (got && j.size && j.data[j.size - 1] != '\n')
            j.size--;
        if (got && !j.size) { /* no LF yet: one line that grows */
            if (have > TMM_CORPUS_MAX_LINE) {
                s = tmm_corpus_long_line(path, line);
                free(j.data);
                break;
            }
            carry = j.data;
            continue;
        }
        if ((have -= j.size) && !(carry = malloc(have))) {
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            free(j.data);
            break;
        }
        if (have)
            memcpy(carry, j.data + j.size, have);
        for (size_t k = 0; k < j.size; k++)
            line += j.data[k] == '\n';
        if (!j.size) {
            free(j.data);
            return true;
        }
        if (!push_job(P, &j))
            return false;
        if (!got)
            return true;
    }
    free(carry);
    job j = { .path = path, .jsonl = true };
    job_fail(&j, s);
    push_job(P, &j);
    return false;
}

static void *reader(void *arg)
{
    prep *P = arg;
    bool go = true;
    for (uint32_t i = 0; go && i < P->in->count; i++) {
        const char *path = P->in->paths[i];
        tmm_corpus_file *f;
        tmm_status s = tmm_corpus_file_open(path, &f);
        if (s == TMM_OK && tmm_corpus_is_jsonl(path)) {
            go = read_jsonl(P, f, path);
        } else {
            job j = { .path = path };
            if (s == TMM_OK)
                s = read_whole(f, path, &j.data, &j.size);
            if (s != TMM_OK)
                job_fail(&j, s);
            go = push_job(P, &j) && s == TMM_OK;
        }
        tmm_corpus_file_close(f);
    }
    pthread_mutex_lock(&P->mu);
    P->inputs_done = true;
    pthread_cond_broadcast(&P->changed);
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

/* ---- writing ------------------------------------------------------------------- */

typedef struct output {
    const char *dir;
    tmm_shard_header proto;
    uint64_t shard_tokens;
    double val_fraction;
    uint64_t split_key;
    tmm_shard_writer *w[2];
    uint32_t next_index[2];
    tmm_manifest m;
    uint32_t cap_shards;
    uint64_t tokens[2], docs[2], input_bytes, text_bytes;
    uint32_t *held;          /* the last document, written when the next comes or at the end */
    size_t held_count, held_cap;
    bool has_held, cut_last; /* cut_last: the end split the held document by tokens */
} output;

/* The split of corpus document i (docs/data.md "Prepared shards"). */
static tmm_shard_split split_of(const output *o, uint64_t i)
{
    double u = (double)(tmm_rng_bits(o->split_key, i) >> 11) * 0x1.0p-53;
    return u < o->val_fraction ? TMM_SHARD_VAL : TMM_SHARD_TRAIN;
}

static tmm_status close_shard(output *o, int k)
{
    tmm_shard_header h;
    tmm_shard_writer *w = o->w[k];
    o->w[k] = NULL;
    TMM_TRY(tmm_shard_writer_close(w, &h));
    if (o->m.count == o->cap_shards) {
        uint32_t cap = o->cap_shards ? 2 * o->cap_shards : 16;
        tmm_manifest_shard *bigger = realloc(o->m.shards, cap * sizeof *bigger);
        if (!bigger)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        o->m.shards = bigger;
        o->cap_shards = cap;
    }
    tmm_manifest_shard *e = &o->m.shards[o->m.count++];
    tmm_shard_name((tmm_shard_split)k, h.index, e->file, sizeof e->file);
    e->split = (uint32_t)k;
    e->tokens = h.tokens;
    e->documents = h.documents;
    e->checksum = h.checksum;
    return TMM_OK;
}

/* Writes a document to the shards of split k. */
static tmm_status write_to(output *o, int k, const uint32_t *ids, size_t count)
{
    if (o->w[k] && tmm_shard_writer_tokens(o->w[k]) && tmm_shard_writer_tokens(o->w[k]) + count + 1 > o->shard_tokens)
        TMM_TRY(close_shard(o, k));
    if (!o->w[k]) {
        if (o->next_index[k] >= TMM_SHARD_MAX_FILES)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "more than %u shards: raise --shard-tokens",
                            TMM_SHARD_MAX_FILES);
        tmm_shard_header h = o->proto;
        h.split = (uint32_t)k;
        h.index = o->next_index[k]++;
        TMM_TRY(tmm_shard_writer_open(o->dir, &h, &o->w[k]));
    }
    TMM_TRY(tmm_shard_writer_document(o->w[k], ids, count));
    o->tokens[k] += count + 1;
    o->docs[k]++;
    return TMM_OK;
}

/* Writes the held document, by the hash, and holds ids in its place. */
static tmm_status write_doc(output *o, const uint32_t *ids, size_t count)
{
    if (o->has_held)
        TMM_TRY(write_to(o, split_of(o, o->docs[0] + o->docs[1]), o->held, o->held_count));
    if (count > o->held_cap) {
        uint32_t *bigger = realloc(o->held, count * sizeof *bigger);
        if (!bigger)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        o->held = bigger;
        o->held_cap = count;
    }
    if (count)
        memcpy(o->held, ids, count * sizeof *ids);
    o->held_count = count;
    o->has_held = true;
    return TMM_OK;
}

/* The end: the held document goes where the hash puts it, unless that would
 * leave a split empty (one document, or too few for the fraction); then it
 * is cut by tokens: its first (1 - F), at least one token, are training, the
 * rest validation (docs/data.md "Prepared shards"). */
static tmm_status write_last(output *o)
{
    if (!o->has_held)
        return TMM_OK;
    const int k = split_of(o, o->docs[0] + o->docs[1]);
    const size_t n = o->held_count;
    if (o->docs[!k] > 0 || (k == TMM_SHARD_TRAIN && o->val_fraction == 0))
        return write_to(o, k, o->held, n);
    if (n < 2)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the corpus is too small to hold both training and validation "
                        "text (its last document has %zu token(s)): add text, or --val-fraction 0", n);
    size_t val = (size_t)((double)n * o->val_fraction);
    val = val < 1 ? 1 : val > n - 1 ? n - 1 : val;
    o->cut_last = true;
    TMM_TRY(write_to(o, TMM_SHARD_TRAIN, o->held, n - val));
    return write_to(o, TMM_SHARD_VAL, o->held + (n - val), val);
}

/* ---- the command ------------------------------------------------------------------ */

typedef struct options {
    const char *tokenizer, *out;
    inputs in;
    double val_fraction;
    unsigned long shard_tokens, threads;
    bool force, quiet;
} options;

/* Refuses a prepared DIR unless force, which removes its manifest (first, so
 * an interrupted run never leaves one naming new shards), shards and leftovers. */
static tmm_status clear_out(const char *dir, bool force)
{
    TMM_TRY(tmm_make_dirs(dir));
    tmm_dir_entry *names;
    uint32_t n;
    TMM_TRY(tmm_list_dir(dir, &names, &n));
    tmm_status s = TMM_OK;
    bool prepared = false;
    for (uint32_t i = 0; i < n; i++)
        prepared |= strcmp(names[i], TMM_SHARD_MANIFEST) == 0 || strncmp(names[i], "train_", 6) == 0 ||
                    strncmp(names[i], "val_", 4) == 0;
    if (prepared && !force)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s already holds prepared shards: use another --out, or --force "
                     "to replace them", dir);
    char path[TMM_PATH_MAX];
    if (s == TMM_OK && prepared && tmm_path_join(path, sizeof path, dir, TMM_SHARD_MANIFEST) == TMM_OK &&
        tmm_path_exists(path) && remove(path) != 0)
        s = tmm_fail(TMM_ERR_IO, "cannot remove %s", path);
    for (uint32_t i = 0; s == TMM_OK && prepared && i < n; i++)
        if ((strncmp(names[i], "train_", 6) == 0 || strncmp(names[i], "val_", 4) == 0) &&
            tmm_path_join(path, sizeof path, dir, names[i]) == TMM_OK && remove(path) != 0)
            s = tmm_fail(TMM_ERR_IO, "cannot remove %s", path);
    free(names);
    return s;
}

/* An input inside the output directory would be deleted (--force) or read
 * while shards are written beside it: refused before anything is touched. */
static tmm_status check_out_apart(const inputs *in, const char *out)
{
    char *o = realpath(out, NULL);
    if (!o)
        return TMM_OK; /* not there yet: it holds no input */
    const size_t len = strlen(o);
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; s == TMM_OK && i < in->count; i++) {
        char *p = realpath(in->paths[i], NULL);
        if (p && strncmp(p, o, len) == 0 && (p[len] == '/' || p[len] == '\0' || (len == 1 && o[0] == '/')))
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "--out %s holds the input %s: write the shards to a directory "
                         "outside the inputs", out, in->paths[i]);
        free(p);
    }
    free(o);
    return s;
}

static void progress(const options *o, const output *out, double t0, bool final, bool *shown)
{
    double s = (tmm_bench_now_ms() - t0) / 1000.0;
    uint64_t tokens = out->tokens[0] + out->tokens[1], docs = out->docs[0] + out->docs[1];
    double mb = (double)out->input_bytes / 1e6;
    if (!final) {
        *shown = !o->quiet;
        if (!o->quiet)
            fprintf(stderr, "\rprepare: %.1f MB, %llu documents, %llu tokens, %.2f MB/s   ", mb,
                    (unsigned long long)docs, (unsigned long long)tokens, s > 0 ? mb / s : 0.0);
        return;
    }
    if (*shown)
        fprintf(stderr, "\r%80s\r", "");
    printf("prepared %s: %llu documents (%llu train, %llu val; %llu empty skipped), %llu tokens (%llu train, %llu "
           "val) in %u + %u shards; %.1f MB read, %.3f bytes of text per token; %.1f s, %.2f MB/s with %lu thread(s)\n",
           o->out, (unsigned long long)docs, (unsigned long long)out->docs[0], (unsigned long long)out->docs[1],
           (unsigned long long)out->m.skipped, (unsigned long long)tokens, (unsigned long long)out->tokens[0],
           (unsigned long long)out->tokens[1], out->next_index[0], out->next_index[1], mb,
           tokens > docs ? (double)out->text_bytes / (double)(tokens - docs) : 0.0, s, s > 0 ? mb / s : 0.0, o->threads);
    if (out->cut_last)
        printf("prepare: the hash left a split empty, so the last document was cut by tokens: its first %.4g of "
               "tokens are training, the rest validation (docs/data.md)\n", 1 - o->val_fraction);
}

/* Writes the jobs in order as the workers finish them. */
static tmm_status write_jobs(prep *P, output *out, const options *o)
{
    tmm_status s = TMM_OK;
    double t0 = tmm_bench_now_ms(), last = t0;
    bool shown = false;
    for (;;) {
        pthread_mutex_lock(&P->mu);
        while (!(P->next_out < P->next_in && P->ring[P->next_out % P->ring_size].state == JOB_DONE) &&
               !(P->inputs_done && P->next_out == P->next_in))
            pthread_cond_wait(&P->changed, &P->mu);
        bool end = P->next_out == P->next_in;
        job *j = end ? NULL : &P->ring[P->next_out % P->ring_size];
        pthread_mutex_unlock(&P->mu);
        if (end)
            break;
        if (j->status != TMM_OK)
            s = tmm_fail(j->status, "%s", j->error);
        size_t at = 0;
        for (size_t d = 0; s == TMM_OK && d < j->n_docs; d++) {
            s = write_doc(out, j->tokens.ids + at, j->doc_len[d]);
            at += j->doc_len[d];
        }
        out->m.skipped += j->skipped;
        if (s == TMM_OK && !j->jsonl && j->n_docs == 0 && j->skipped == 0)
            s = tmm_fail(TMM_ERR_IO, "%s gave no document", j->path);
        out->input_bytes += j->size;
        out->text_bytes += j->text_bytes;
        free(j->tokens.ids), free(j->doc_len);
        memset(j, 0, sizeof *j);
        pthread_mutex_lock(&P->mu);
        P->next_out++;
        if (s != TMM_OK)
            P->stop = true;
        pthread_cond_broadcast(&P->changed);
        pthread_mutex_unlock(&P->mu);
        if (s != TMM_OK)
            break;
        if (tmm_bench_now_ms() - last > 1000) {
            progress(o, out, t0, false, &shown);
            last = tmm_bench_now_ms();
        }
    }
    if (s == TMM_OK)
        s = write_last(out);
    for (int k = 0; s == TMM_OK && k < 2; k++)
        if (out->w[k])
            s = close_shard(out, k);
    if (s == TMM_OK && out->docs[0] == 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the corpus gave %s training documents: add text",
                     out->docs[1] ? "only validation and no" : "no");
    if (s == TMM_OK) {
        out->m.documents = out->docs[0] + out->docs[1];
        out->m.input_bytes = out->input_bytes;
        s = tmm_manifest_write(out->dir, &out->m);
    }
    if (s == TMM_OK)
        progress(o, out, t0, true, &shown);
    return s;
}

static tmm_status run_prepare(options *o)
{
    tmm_tokenizer *tok = NULL;
    TMM_TRY(tmm_tokenizer_load(o->tokenizer, &tok));
    output out = { .dir = o->out, .shard_tokens = o->shard_tokens, .val_fraction = o->val_fraction,
                   .split_key = tmm_rng_key(0, "prepare/split") };
    out.proto = (tmm_shard_header){ .fingerprint = tmm_tokenizer_fingerprint(tok), .vocab = tmm_tokenizer_vocab(tok),
                                    .eot = tmm_tokenizer_eot(tok) };
    out.m = (tmm_manifest){ .fingerprint = out.proto.fingerprint, .vocab = out.proto.vocab, .eot = out.proto.eot,
                            .val_fraction = o->val_fraction };
    snprintf(out.m.tokenizer_kind, sizeof out.m.tokenizer_kind, "%s", tmm_tokenizer_kind(tok));
    tmm_status s = TMM_OK;
    if (out.proto.eot == UINT32_MAX)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tokenizer %s has no end-of-text token (\"<|endoftext|>\" or a "
                     "special added token): documents need one between them", o->tokenizer);
    char tok_path[TMM_PATH_MAX];
    if (s == TMM_OK)
        s = tmm_distinct_files((const char *const *)o->in.paths, o->in.count);
    if (s == TMM_OK)
        s = check_out_apart(&o->in, o->out);
    const bool created = !tmm_path_exists(o->out);
    if (s == TMM_OK)
        s = clear_out(o->out, o->force);
    const bool writing = s == TMM_OK; /* from here a failure removes the shards it wrote */
    if (s == TMM_OK)
        s = tmm_path_join(tok_path, sizeof tok_path, o->out, TMM_SHARD_TOKENIZER);
    const bool saved = s == TMM_OK && (s = tmm_tokenizer_save(tok, tok_path)) == TMM_OK;
    prep P = { .tok = tok, .in = &o->in, .ring_size = 2 * (uint32_t)o->threads + 2 };
    pthread_t threads[MAX_THREADS + 1];
    uint32_t started = 0;
    if (s == TMM_OK && !(P.ring = calloc(P.ring_size, sizeof *P.ring)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        pthread_mutex_init(&P.mu, NULL);
        pthread_cond_init(&P.changed, NULL);
        for (uint32_t i = 0; s == TMM_OK && i <= o->threads; i++) {
            if (pthread_create(&threads[i], NULL, i == 0 ? reader : worker, &P) != 0)
                s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "cannot start thread %u", i);
            else
                started++;
        }
        if (s == TMM_OK)
            s = write_jobs(&P, &out, o);
        pthread_mutex_lock(&P.mu);
        P.stop = true;
        pthread_cond_broadcast(&P.changed);
        pthread_mutex_unlock(&P.mu);
        for (uint32_t i = 0; i < started; i++)
            pthread_join(threads[i], NULL);
        for (uint32_t i = 0; i < P.ring_size; i++)
            free(P.ring[i].data), free(P.ring[i].tokens.ids), free(P.ring[i].doc_len);
        pthread_cond_destroy(&P.changed);
        pthread_mutex_destroy(&P.mu);
    }
    for (int k = 0; k < 2; k++)
        tmm_shard_writer_abort(out.w[k]);
    if (s != TMM_OK && writing) { /* nothing left for a later command to puzzle over: what this run made goes */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tmm_last_error());
        if (clear_out(o->out, true) != TMM_OK || (saved && remove(tok_path) != 0))
            fprintf(stderr, "tmm prepare: could not remove the partial output in %s: %s\n", o->out, tmm_last_error());
        else if (created)
            rmdir(o->out);
        s = tmm_fail(s, "%s", msg);
    }
    free(P.ring);
    free(out.held);
    tmm_manifest_free(&out.m);
    tmm_tokenizer_free(tok);
    return s;
}

enum { O_VAL = 256, O_SHARD, O_THREADS, O_FORCE };

static const struct option longopts[] = {
    { "tokenizer", required_argument, NULL, 't' }, { "data", required_argument, NULL, 'd' },
    { "out", required_argument, NULL, 'o' }, { "val-fraction", required_argument, NULL, O_VAL },
    { "shard-tokens", required_argument, NULL, O_SHARD }, { "threads", required_argument, NULL, O_THREADS },
    { "force", no_argument, NULL, O_FORCE }, { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 },
};

static void free_inputs(inputs *in)
{
    for (uint32_t i = 0; i < in->count; i++)
        free(in->paths[i]);
    free(in->paths);
}

int cmd_prepare(int argc, char **argv)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    options o = { .val_fraction = TMM_DATA_DEFAULT_VAL_FRACTION, .shard_tokens = TMM_SHARD_DEFAULT_TOKENS,
                  .threads = cores > 0 ? (unsigned long)cores : 1 };
    int rc = 0;
    tmm_status s = TMM_OK;
    cli_args args = { .longopts = longopts, .shortopts = "t:d:o:qh", .repeatable = (const int[]){ 'd', 0 } };
    for (int c; rc == 0 && (c = cli_getopt(&args, argc, argv)) != -1;) {
        char *end;
        switch (c) {
        case 't': o.tokenizer = optarg; break;
        case 'o': o.out = optarg; break;
        case 'd':
            if (!tmm_path_exists(optarg))
                s = tmm_fail(TMM_ERR_IO, "%s does not exist", optarg);
            else
                s = tmm_walk_files(optarg, add_walked, &o.in);
            rc = s == TMM_OK ? 0 : cli_error("reading --data", s);
            break;
        case O_VAL:
            o.val_fraction = strtod(optarg, &end);
            if (end == optarg || *end || !(o.val_fraction >= 0 && o.val_fraction < 1)) {
                cli_fail("--val-fraction expects a number in [0, 1), got '%s'\n", optarg);
                rc = 2;
            }
            break;
        case O_SHARD:
            rc = cli_parse_uint("--shard-tokens", optarg, TMM_SHARD_MAX_TOKENS, &o.shard_tokens) ? 0 : 2;
            if (rc == 0 && o.shard_tokens < 2) {
                cli_fail("--shard-tokens must be at least 2\n");
                rc = 2;
            }
            break;
        case O_THREADS:
            rc = cli_parse_uint("--threads", optarg, MAX_THREADS, &o.threads) && o.threads >= 1 ? 0 : 2;
            if (rc == 2 && o.threads == 0)
                cli_fail("--threads must be 1 .. %u\n", MAX_THREADS);
            break;
        case O_FORCE: o.force = true; break;
        case 'q': o.quiet = true; break;
        case 'h': usage(); free_inputs(&o.in); return 0;
        default: rc = 2; break;
        }
    }
    if (rc == 0 && optind < argc) {
        cli_fail("unexpected argument '%s'\n", argv[optind]);
        rc = 2;
    }
    if (rc == 0 && (!o.tokenizer || !o.out || o.in.count == 0)) {
        cli_fail("needs --tokenizer, --data (a file, or a directory holding files) and --out; see tmm prepare "
                 "--help\n");
        rc = 2;
    }
    if (o.threads > MAX_THREADS)
        o.threads = MAX_THREADS;
    if (rc == 0 && (s = run_prepare(&o)) != TMM_OK)
        rc = cli_error("cannot prepare the corpus", s);
    free_inputs(&o.in);
    return rc;
}
