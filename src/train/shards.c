/* Token shards: header, writer, and the checked, memory-mapped reader
 * (layout in shards.h and docs/formats.md "Token shards"). */
#define _POSIX_C_SOURCE 200809L /* fdopen, mkstemp's fd, mmap */
#include "train/shards.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "status.h"
#include "text/tokenizer.h"
#include "train/manifest.h"

/* ---- header ----------------------------------------------------------------- */

/* Word indices of the header (int32 words, little-endian). */
enum {
    W_MAGIC = 0, W_VERSION = 1, W_COUNT = 2, /* llm.c's */
    W_TAG = 3, W_FP_LO = 4, W_FP_HI = 5, W_VOCAB = 6, W_EOT = 7, W_DOCS_LO = 8, W_DOCS_HI = 9,
    W_SPLIT = 10, W_INDEX = 11, W_SUM_LO = 12, W_SUM_HI = 13, W_USED = 14
};

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t tmm_shard_width(uint32_t vocab)
{
    return vocab <= 65536u ? 2u : 4u;
}

void tmm_shard_name(tmm_shard_split split, uint32_t index, char *buf, size_t size)
{
    snprintf(buf, size, "%s_%06u.bin", split == TMM_SHARD_VAL ? "val" : "train", index);
}

void tmm_shard_header_encode(const tmm_shard_header *h, uint8_t out[TMM_SHARD_HEADER_BYTES])
{
    memset(out, 0, TMM_SHARD_HEADER_BYTES);
    const uint32_t w[W_USED] = {
        [W_MAGIC] = TMM_SHARD_MAGIC, [W_VERSION] = h->version, [W_COUNT] = (uint32_t)h->tokens,
        [W_TAG] = TMM_SHARD_TMM_TAG, [W_FP_LO] = (uint32_t)h->fingerprint, [W_FP_HI] = (uint32_t)(h->fingerprint >> 32),
        [W_VOCAB] = h->vocab, [W_EOT] = h->eot, [W_DOCS_LO] = (uint32_t)h->documents,
        [W_DOCS_HI] = (uint32_t)(h->documents >> 32), [W_SPLIT] = h->split, [W_INDEX] = h->index,
        [W_SUM_LO] = (uint32_t)h->checksum, [W_SUM_HI] = (uint32_t)(h->checksum >> 32),
    };
    for (int i = 0; i < W_USED; i++)
        put32(out + 4 * i, w[i]);
}

tmm_status tmm_shard_header_decode(const uint8_t *b, uint64_t file_size, const char *path, tmm_shard_header *h)
{
    memset(h, 0, sizeof *h);
    if (file_size < TMM_SHARD_HEADER_BYTES)
        return tmm_fail(TMM_ERR_IO, "shard %s is %llu bytes, shorter than its %u-byte header: truncated or not a "
                        "shard; run tmm prepare again", path, (unsigned long long)file_size, TMM_SHARD_HEADER_BYTES);
    if (get32(b + 4 * W_MAGIC) != TMM_SHARD_MAGIC)
        return tmm_fail(TMM_ERR_IO, "%s is not a token shard (magic %u, expected %u)", path, get32(b), TMM_SHARD_MAGIC);
    h->version = get32(b + 4 * W_VERSION);
    if (h->version != TMM_SHARD_VERSION_U16 && h->version != TMM_SHARD_VERSION_U32)
        return tmm_fail(TMM_ERR_IO, "shard %s has version %u; this tmm reads versions 1 (uint16 tokens) and 2 "
                        "(uint32)", path, h->version);
    if (get32(b + 4 * W_TAG) != TMM_SHARD_TMM_TAG)
        return tmm_fail(TMM_ERR_IO, "shard %s has no tmm fields (tokenizer, checksum): an llm.c shard? tmm trains "
                        "on shards written by tmm prepare", path);
    uint32_t count = get32(b + 4 * W_COUNT);
    if (count > TMM_SHARD_MAX_TOKENS)
        return tmm_fail(TMM_ERR_IO, "shard %s: token count %u is negative", path, count);
    h->tokens = count;
    h->fingerprint = get32(b + 4 * W_FP_LO) | (uint64_t)get32(b + 4 * W_FP_HI) << 32;
    h->vocab = get32(b + 4 * W_VOCAB);
    h->eot = get32(b + 4 * W_EOT);
    h->documents = get32(b + 4 * W_DOCS_LO) | (uint64_t)get32(b + 4 * W_DOCS_HI) << 32;
    h->split = get32(b + 4 * W_SPLIT);
    h->index = get32(b + 4 * W_INDEX);
    h->checksum = get32(b + 4 * W_SUM_LO) | (uint64_t)get32(b + 4 * W_SUM_HI) << 32;
    const uint32_t width = h->version == TMM_SHARD_VERSION_U16 ? 2 : 4;
    if (file_size != TMM_SHARD_HEADER_BYTES + h->tokens * width)
        return tmm_fail(TMM_ERR_IO, "shard %s is %llu bytes; its header says %llu tokens of %u bytes, so %llu: %s; "
                        "run tmm prepare again", path, (unsigned long long)file_size, (unsigned long long)h->tokens,
                        width, (unsigned long long)(TMM_SHARD_HEADER_BYTES + h->tokens * width),
                        file_size < TMM_SHARD_HEADER_BYTES + h->tokens * width ? "truncated" : "trailing bytes");
    if (h->vocab < 1 || width != tmm_shard_width(h->vocab))
        return tmm_fail(TMM_ERR_IO, "shard %s: vocabulary %u does not match its %u-byte tokens", path, h->vocab, width);
    if (h->eot >= h->vocab)
        return tmm_fail(TMM_ERR_IO, "shard %s: end-of-text id %u is outside its vocabulary of %u", path, h->eot,
                        h->vocab);
    if (h->split != TMM_SHARD_TRAIN && h->split != TMM_SHARD_VAL)
        return tmm_fail(TMM_ERR_IO, "shard %s: unknown split %u", path, h->split);
    if (h->documents > h->tokens)
        return tmm_fail(TMM_ERR_IO, "shard %s: %llu documents in %llu tokens", path,
                        (unsigned long long)h->documents, (unsigned long long)h->tokens);
    for (uint32_t i = W_USED; i < TMM_SHARD_HEADER_BYTES / 4; i++)
        if (get32(b + 4 * i))
            return tmm_fail(TMM_ERR_IO, "shard %s: reserved header word %u is not zero (a newer format?)", path, i);
    return TMM_OK;
}

/* ---- writer -------------------------------------------------------------------- */

struct tmm_shard_writer {
    FILE *f;
    char path[TMM_PATH_MAX], tmp[TMM_PATH_MAX + 16];
    tmm_shard_header h;
    uint32_t width;
    uint64_t hash;
    uint8_t buf[1 << 16];
    size_t used;
};

tmm_status tmm_shard_writer_open(const char *dir, const tmm_shard_header *h, tmm_shard_writer **out)
{
    *out = NULL;
    tmm_shard_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    char name[64];
    tmm_shard_name((tmm_shard_split)h->split, h->index, name, sizeof name);
    tmm_status s = tmm_path_join(w->path, sizeof w->path, dir, name);
    w->h = *h;
    w->h.tokens = w->h.documents = 0;
    w->width = tmm_shard_width(h->vocab);
    w->h.version = w->width == 2 ? TMM_SHARD_VERSION_U16 : TMM_SHARD_VERSION_U32;
    w->hash = TMM_FNV1A64_BASIS;
    uint8_t header[TMM_SHARD_HEADER_BYTES] = { 0 }; /* zeros until close: never a valid shard */
    if (s == TMM_OK) {
        snprintf(w->tmp, sizeof w->tmp, "%s.tmp-XXXXXX", w->path);
        int fd = mkstemp(w->tmp);
        w->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (fd >= 0 && !w->f)
            close(fd), remove(w->tmp);
        if (!w->f)
            s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", w->tmp, strerror(errno));
    }
    if (s == TMM_OK && fwrite(header, 1, sizeof header, w->f) != sizeof header)
        s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", w->tmp, strerror(errno));
    if (s != TMM_OK) {
        tmm_shard_writer_abort(w);
        return s;
    }
    *out = w;
    return TMM_OK;
}

static tmm_status flush_buf(tmm_shard_writer *w)
{
    w->hash = tmm_fnv1a64_more(w->hash, w->buf, w->used);
    if (fwrite(w->buf, 1, w->used, w->f) != w->used)
        return tmm_fail(TMM_ERR_IO, "cannot write %s: %s", w->tmp, strerror(errno));
    w->used = 0;
    return TMM_OK;
}

static tmm_status put_token(tmm_shard_writer *w, uint32_t id)
{
    if (w->used + 4 > sizeof w->buf)
        TMM_TRY(flush_buf(w));
    for (uint32_t i = 0; i < w->width; i++)
        w->buf[w->used++] = (uint8_t)(id >> (8 * i));
    return TMM_OK;
}

tmm_status tmm_shard_writer_document(tmm_shard_writer *w, const uint32_t *ids, size_t count)
{
    if (count + 1 > TMM_SHARD_MAX_TOKENS - w->h.tokens)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a document of %zu tokens does not fit a shard (at most %llu "
                        "tokens)", count, TMM_SHARD_MAX_TOKENS);
    for (size_t i = 0; i < count; i++) {
        if (ids[i] >= w->h.vocab || ids[i] == w->h.eot)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "token %u inside a document is %s", ids[i],
                            ids[i] == w->h.eot ? "the end-of-text id" : "outside the vocabulary");
        TMM_TRY(put_token(w, ids[i]));
    }
    TMM_TRY(put_token(w, w->h.eot));
    w->h.tokens += count + 1;
    w->h.documents++;
    return TMM_OK;
}

uint64_t tmm_shard_writer_tokens(const tmm_shard_writer *w)
{
    return w->h.tokens;
}

tmm_status tmm_shard_writer_close(tmm_shard_writer *w, tmm_shard_header *h)
{
    tmm_status s = flush_buf(w);
    w->h.checksum = w->hash;
    uint8_t header[TMM_SHARD_HEADER_BYTES];
    tmm_shard_header_encode(&w->h, header);
    if (s == TMM_OK && (fflush(w->f) != 0 || pwrite(fileno(w->f), header, sizeof header, 0) != (ssize_t)sizeof header ||
                        fsync(fileno(w->f)) != 0 || fchmod(fileno(w->f), 0644) != 0))
        s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", w->tmp, strerror(errno));
    if (fclose(w->f) != 0 && s == TMM_OK)
        s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", w->tmp, strerror(errno));
    w->f = NULL;
    if (s == TMM_OK && rename(w->tmp, w->path) != 0)
        s = tmm_fail(TMM_ERR_IO, "cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
    if (s == TMM_OK && h)
        *h = w->h;
    if (s != TMM_OK)
        remove(w->tmp);
    free(w);
    return s;
}

void tmm_shard_writer_abort(tmm_shard_writer *w)
{
    if (!w)
        return;
    if (w->f) {
        fclose(w->f);
        remove(w->tmp);
    }
    free(w);
}

/* ---- reader ---------------------------------------------------------------------- */

typedef struct shard {
    char path[TMM_PATH_MAX];
    tmm_shard_header h;
    const uint8_t *map; /* the whole file */
    size_t map_size;
    uint64_t base;      /* first token's offset in its split's stream */
} shard;

typedef struct split_set {
    shard **shards;     /* in stream order */
    uint32_t count;
    uint64_t tokens, documents;
    uint64_t *doc_start; /* with_docs: documents + 1 entries, the last = tokens */
} split_set;

struct tmm_shard_set {
    shard *all;
    uint32_t n_all, cap_all;
    split_set split[2];
    char tokenizer_path[TMM_PATH_MAX];
    uint64_t fingerprint;
    uint32_t vocab, eot;
    uint64_t *counts; /* training split */
};

static tmm_status map_shard(shard *sh)
{
    int fd = open(sh->path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return tmm_fail(TMM_ERR_IO, "cannot open shard %s: %s", sh->path, strerror(errno));
    struct stat st;
    tmm_status s = TMM_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        s = tmm_fail(TMM_ERR_IO, "shard %s is not a regular file", sh->path);
    else if ((uint64_t)st.st_size < TMM_SHARD_HEADER_BYTES)
        s = tmm_fail(TMM_ERR_IO, "shard %s is %llu bytes, shorter than its %u-byte header: truncated or not a "
                     "shard; run tmm prepare again", sh->path, (unsigned long long)st.st_size, TMM_SHARD_HEADER_BYTES);
    if (s == TMM_OK) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            s = tmm_fail(TMM_ERR_IO, "cannot map shard %s: %s", sh->path, strerror(errno));
        else
            sh->map = p, sh->map_size = (size_t)st.st_size;
    }
    close(fd);
    if (s == TMM_OK)
        s = tmm_shard_header_decode(sh->map, sh->map_size, sh->path, &sh->h);
    return s;
}

static uint32_t token_at(const shard *sh, uint64_t i)
{
    const uint8_t *p = sh->map + TMM_SHARD_HEADER_BYTES;
    if (sh->h.version == TMM_SHARD_VERSION_U16)
        return (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
    return get32(p + 4 * i);
}

/* The one pass over a shard: checksum, tokens, documents (and their starts,
 * the training counts). */
static tmm_status verify_shard(tmm_shard_set *set, shard *sh, split_set *sp, uint64_t *doc_k)
{
    const uint64_t bytes = sh->h.tokens * (sh->h.version == TMM_SHARD_VERSION_U16 ? 2 : 4);
    if (tmm_fnv1a64(sh->map + TMM_SHARD_HEADER_BYTES, (size_t)bytes) != sh->h.checksum)
        return tmm_fail(TMM_ERR_IO, "shard %s is corrupt: its tokens do not match the header's checksum; run tmm "
                        "prepare again", sh->path);
    uint64_t docs = 0, start = 0;
    uint64_t *counts = sh->h.split == TMM_SHARD_TRAIN ? set->counts : NULL;
    for (uint64_t i = 0; i < sh->h.tokens; i++) {
        uint32_t t = token_at(sh, i);
        if (t >= set->vocab)
            return tmm_fail(TMM_ERR_IO, "shard %s: token %llu is %u, outside the vocabulary of %u", sh->path,
                            (unsigned long long)i, t, set->vocab);
        if (counts)
            counts[t]++;
        if (t == set->eot) {
            if (sp->doc_start)
                sp->doc_start[(*doc_k)++] = sh->base + start;
            docs++;
            start = i + 1;
        }
    }
    if (docs != sh->h.documents || start != sh->h.tokens)
        return tmm_fail(TMM_ERR_IO, "shard %s: %llu end-of-text tokens%s, its header says %llu documents", sh->path,
                        (unsigned long long)docs, start != sh->h.tokens ? " and a last document without one" : "",
                        (unsigned long long)sh->h.documents);
    return TMM_OK;
}

static tmm_status add_shard(tmm_shard_set *set, const char *path, shard **out)
{
    if (set->n_all == TMM_SHARD_MAX_FILES)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "more than %u shards", TMM_SHARD_MAX_FILES);
    if (set->n_all == set->cap_all) {
        uint32_t cap = set->cap_all ? 2 * set->cap_all : 16;
        shard *bigger = realloc(set->all, cap * sizeof *bigger);
        if (!bigger)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        set->all = bigger;
        set->cap_all = cap;
    }
    shard *sh = &set->all[set->n_all++];
    memset(sh, 0, sizeof *sh);
    if (strlen(path) >= sizeof sh->path)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "shard path too long: %.80s...", path);
    strcpy(sh->path, path);
    TMM_TRY(map_shard(sh));
    *out = sh;
    return TMM_OK;
}

static tmm_status check_against_tokenizer(const tmm_shard_set *set, const shard *sh)
{
    if (sh->h.fingerprint != set->fingerprint)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "shard %s was written with another tokenizer (fingerprint "
                        "%016llx) than %s (%016llx): prepare it again with that tokenizer, or train on its own "
                        "directory", sh->path, (unsigned long long)sh->h.fingerprint, set->tokenizer_path,
                        (unsigned long long)set->fingerprint);
    if (sh->h.vocab != set->vocab || sh->h.eot != set->eot)
        return tmm_fail(TMM_ERR_IO, "shard %s: vocabulary %u and end-of-text %u, the tokenizer's are %u and %u",
                        sh->path, sh->h.vocab, sh->h.eot, set->vocab, set->eot);
    return TMM_OK;
}

/* The tokenizer of a directory: its tokenizer.json, loaded to compute the
 * fingerprint. The first one sets the set's; any other must equal it. */
static tmm_status take_tokenizer(tmm_shard_set *set, const char *dir)
{
    char path[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(path, sizeof path, dir, TMM_SHARD_TOKENIZER));
    tmm_tokenizer *tok;
    TMM_TRY(tmm_tokenizer_load(path, &tok));
    uint64_t fp = tmm_tokenizer_fingerprint(tok);
    uint32_t vocab = tmm_tokenizer_vocab(tok), eot = tmm_tokenizer_eot(tok);
    tmm_tokenizer_free(tok);
    if (set->tokenizer_path[0]) {
        if (fp != set->fingerprint)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s is another tokenizer than %s: shards of one run must share "
                            "one tokenizer", path, set->tokenizer_path);
        return TMM_OK;
    }
    if (eot == UINT32_MAX)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s has no end-of-text token", path);
    strcpy(set->tokenizer_path, path);
    set->fingerprint = fp;
    set->vocab = vocab;
    set->eot = eot;
    return TMM_OK;
}

static void dir_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

static tmm_status open_dir(tmm_shard_set *set, const char *dir)
{
    tmm_manifest m;
    TMM_TRY(tmm_manifest_read(dir, &m));
    tmm_status s = take_tokenizer(set, dir);
    if (s == TMM_OK && m.fingerprint != set->fingerprint)
        s = tmm_fail(TMM_ERR_IO, "%s/%s names tokenizer fingerprint %016llx, its tokenizer.json has %016llx: the "
                     "directory was changed after tmm prepare; prepare it again", dir, TMM_SHARD_MANIFEST,
                     (unsigned long long)m.fingerprint, (unsigned long long)set->fingerprint);
    for (uint32_t i = 0; s == TMM_OK && i < m.count; i++) {
        const tmm_manifest_shard *e = &m.shards[i];
        char path[TMM_PATH_MAX];
        shard *sh = NULL;
        s = tmm_path_join(path, sizeof path, dir, e->file);
        if (s == TMM_OK)
            s = add_shard(set, path, &sh);
        if (s == TMM_OK && (sh->h.split != e->split || sh->h.tokens != e->tokens ||
                            sh->h.documents != e->documents || sh->h.checksum != e->checksum))
            s = tmm_fail(TMM_ERR_IO, "shard %s does not match %s/%s (split, tokens, documents or checksum): the "
                         "directory was changed after tmm prepare; prepare it again", path, dir, TMM_SHARD_MANIFEST);
        if (s == TMM_OK)
            s = check_against_tokenizer(set, sh);
    }
    tmm_manifest_free(&m);
    return s;
}

bool tmm_shards_detect(const char *path)
{
    char p[TMM_PATH_MAX];
    if (tmm_is_dir(path))
        return tmm_path_join(p, sizeof p, path, TMM_SHARD_MANIFEST) == TMM_OK && tmm_path_exists(p);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) /* a FIFO must not block here */
        return false;
    FILE *f = fopen(path, "rb");
    uint8_t b[4] = { 0 };
    bool yes = f && fread(b, 1, 4, f) == 4 && get32(b) == TMM_SHARD_MAGIC;
    if (f)
        fclose(f);
    return yes;
}

static tmm_status build_splits(tmm_shard_set *set, bool with_docs)
{
    for (int k = 0; k < 2; k++) {
        split_set *sp = &set->split[k];
        sp->shards = malloc((set->n_all ? set->n_all : 1) * sizeof *sp->shards);
        if (!sp->shards)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t i = 0; i < set->n_all; i++)
            if (set->all[i].h.split == (uint32_t)k) {
                set->all[i].base = sp->tokens;
                sp->tokens += set->all[i].h.tokens;
                sp->documents += set->all[i].h.documents;
                sp->shards[sp->count++] = &set->all[i];
            }
        if (with_docs && !(sp->doc_start = malloc((size_t)(sp->documents + 1) * sizeof *sp->doc_start)))
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory indexing %llu documents",
                            (unsigned long long)sp->documents);
    }
    set->counts = calloc(set->vocab, sizeof *set->counts);
    if (!set->counts)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (int k = 0; k < 2; k++) {
        split_set *sp = &set->split[k];
        uint64_t doc_k = 0;
        for (uint32_t i = 0; i < sp->count; i++)
            TMM_TRY(verify_shard(set, sp->shards[i], sp, &doc_k));
        if (sp->doc_start)
            sp->doc_start[doc_k] = sp->tokens;
    }
    return TMM_OK;
}

tmm_status tmm_shards_open(const char *const *paths, uint32_t count, bool with_docs, tmm_shard_set **out)
{
    *out = NULL;
    tmm_shard_set *set = calloc(1, sizeof *set);
    if (!set)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = count ? TMM_OK : tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no shards given");
    for (uint32_t i = 0; s == TMM_OK && i < count; i++) {
        if (tmm_is_dir(paths[i])) {
            s = open_dir(set, paths[i]);
            continue;
        }
        char dir[TMM_PATH_MAX];
        shard *sh = NULL;
        dir_of(paths[i], dir, sizeof dir);
        s = take_tokenizer(set, dir);
        if (s == TMM_OK)
            s = add_shard(set, paths[i], &sh);
        if (s == TMM_OK)
            s = check_against_tokenizer(set, sh);
    }
    if (s == TMM_OK)
        s = build_splits(set, with_docs);
    if (s != TMM_OK) {
        tmm_shards_close(set);
        return s;
    }
    *out = set;
    return TMM_OK;
}

void tmm_shards_close(tmm_shard_set *set)
{
    if (!set)
        return;
    for (uint32_t i = 0; i < set->n_all; i++)
        if (set->all[i].map)
            munmap((void *)set->all[i].map, set->all[i].map_size);
    for (int k = 0; k < 2; k++)
        free(set->split[k].shards), free(set->split[k].doc_start);
    free(set->all);
    free(set->counts);
    free(set);
}

const char *tmm_shards_tokenizer_path(const tmm_shard_set *set) { return set->tokenizer_path; }
uint64_t tmm_shards_fingerprint(const tmm_shard_set *set) { return set->fingerprint; }
uint32_t tmm_shards_vocab(const tmm_shard_set *set) { return set->vocab; }
uint32_t tmm_shards_eot(const tmm_shard_set *set) { return set->eot; }
uint32_t tmm_shards_files(const tmm_shard_set *set, tmm_shard_split split) { return set->split[split].count; }
uint64_t tmm_shards_tokens(const tmm_shard_set *set, tmm_shard_split split) { return set->split[split].tokens; }
uint64_t tmm_shards_documents(const tmm_shard_set *set, tmm_shard_split split) { return set->split[split].documents; }
const uint64_t *tmm_shards_train_counts(const tmm_shard_set *set) { return set->counts; }

void tmm_shards_read(const tmm_shard_set *set, tmm_shard_split split, uint64_t start, uint32_t count, uint32_t *out)
{
    const split_set *sp = &set->split[split];
    /* the last shard whose base is <= start */
    uint32_t lo = 0, hi = sp->count - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (sp->shards[mid]->base <= start)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint32_t k = lo;
    uint64_t pos = start - sp->shards[k]->base;
    for (uint32_t i = 0; i < count; i++) {
        while (pos >= sp->shards[k]->h.tokens)
            pos -= sp->shards[k]->h.tokens, k++;
        out[i] = token_at(sp->shards[k], pos++);
    }
}

void tmm_shards_document(const tmm_shard_set *set, tmm_shard_split split, uint64_t d, uint64_t *start,
                         uint64_t *length)
{
    const split_set *sp = &set->split[split];
    *start = sp->doc_start[d];
    *length = sp->doc_start[d + 1] - sp->doc_start[d] - 1;
}
