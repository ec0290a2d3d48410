/* Training data: the copy task, MQAR (mqar.c) and byte-level text (layouts in docs/data.md). */
#include "train/data.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/limits.h"
#include "model/rng.h"
#include "status.h"
#include "text/corpus.h"
#include "train/shards.h"

typedef struct doc {
    uint64_t start; /* in the byte arena */
    uint64_t len;
} doc;

struct tmm_data {
    tmm_data_task task;
    uint64_t seed;
    uint32_t n;
    uint32_t alphabet;
    tmm_mqar_config mqar;
    tmm_text_mode mode;
    double val_fraction;
    tmm_data_info info;
    double entropy;
    char desc[512];

    uint64_t key_train, key_val; /* stream keys */

    /* text: every document's bytes, back to back, in corpus order */
    uint8_t *bytes;
    uint64_t nbytes;
    doc *docs;
    uint64_t ndocs;
    /* window mode: stream tokens N = nbytes + ndocs; training [0, T), validation [T, N) */
    uint64_t stream_len, train_len;
    /* document mode: indices into docs */
    uint64_t *train_idx, *val_idx;
    uint64_t n_train, n_val;

    /* prepared shards (docs/data.md "Prepared shards"): the token streams of
     * the splits (window mode) or their documents; eot is the tokenizer's */
    tmm_shard_set *shards;
    uint32_t eot;
};

/* ---- config ---------------------------------------------------------------- */

void tmm_data_config_init(tmm_data_config *config)
{
    memset(config, 0, sizeof *config);
    config->task = TMM_DATA_COPY;
    config->copy_alphabet = TMM_COPY_DEFAULT_ALPHABET;
    tmm_mqar_config_init(&config->mqar);
    config->text_mode = TMM_TEXT_WINDOWS;
    config->text_format = TMM_TEXT_AUTO;
    config->val_fraction = TMM_DATA_DEFAULT_VAL_FRACTION;
}

static tmm_status check_config(const tmm_data_config *c)
{
    if (c->task == TMM_DATA_COPY) {
        if (c->n < 2)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "copy task: context length n = %u; it needs n >= 2", c->n);
        if (c->copy_alphabet < 2 || c->copy_alphabet > TMM_COPY_MAX_ALPHABET)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "copy task: alphabet of %u symbols; it must be 2 .. %u",
                            c->copy_alphabet, TMM_COPY_MAX_ALPHABET);
        return TMM_OK;
    }
    if (c->task == TMM_DATA_MQAR)
        return tmm_mqar_check(&c->mqar, c->n);
    if (c->task != TMM_DATA_TEXT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unknown data task %d", (int)c->task);
    if (c->n < 1)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: context length n must be at least 1");
    if (!c->text_paths || c->text_path_count == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: no text files given");
    for (uint32_t i = 0; i < c->text_path_count; i++)
        if (!c->text_paths[i] || !c->text_paths[i][0])
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: file %u has no name", i);
    TMM_TRY(tmm_distinct_files(c->text_paths, c->text_path_count));
    if (c->text_mode != TMM_TEXT_WINDOWS && c->text_mode != TMM_TEXT_DOCUMENTS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: unknown sampling mode %d", (int)c->text_mode);
    if (c->text_format != TMM_TEXT_AUTO && c->text_format != TMM_TEXT_PLAIN && c->text_format != TMM_TEXT_JSONL)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: unknown file format %d", (int)c->text_format);
    if (!(c->val_fraction >= 0.0 && c->val_fraction < 1.0))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: validation fraction %g; it must be in [0, 1)",
                        c->val_fraction);
    return TMM_OK;
}

/* ---- loading text ------------------------------------------------------------ */

typedef struct loader {
    tmm_data *d;
    uint64_t bytes_cap, docs_cap;
} loader;

static tmm_status add_doc(loader *ld, const uint8_t *p, uint64_t len)
{
    tmm_data *d = ld->d;
    if (d->nbytes + len > ld->bytes_cap) {
        uint64_t cap = ld->bytes_cap ? ld->bytes_cap : 1u << 16;
        while (cap < d->nbytes + len)
            cap *= 2;
        if (cap > SIZE_MAX)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "text corpus too large for this machine");
        uint8_t *b = realloc(d->bytes, (size_t)cap);
        if (!b)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory loading the text (%llu bytes)",
                            (unsigned long long)cap);
        d->bytes = b;
        ld->bytes_cap = cap;
    }
    if (d->ndocs == ld->docs_cap) {
        uint64_t cap = ld->docs_cap ? ld->docs_cap * 2 : 1024;
        if (cap > SIZE_MAX / sizeof(doc))
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "too many documents for this machine");
        doc *nd = realloc(d->docs, (size_t)cap * sizeof(doc));
        if (!nd)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory loading the text documents");
        d->docs = nd;
        ld->docs_cap = cap;
    }
    if (len)
        memcpy(d->bytes + d->nbytes, p, (size_t)len);
    d->docs[d->ndocs].start = d->nbytes;
    d->docs[d->ndocs].len = len;
    d->ndocs++;
    d->nbytes += len;
    return TMM_OK;
}

static bool is_blank(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return false;
    return true;
}

/* Blank-line separated documents (document mode). */
static tmm_status load_paragraphs(loader *ld, const uint8_t *p, size_t size)
{
    size_t pos = 0, doc_start = 0, doc_end = 0;
    bool in_doc = false;
    while (pos < size) {
        const uint8_t *nl = memchr(p + pos, '\n', size - pos);
        size_t end = nl ? (size_t)(nl - p) : size;  /* line content is [pos, end) */
        size_t next = nl ? end + 1 : size;
        if (is_blank(p + pos, end - pos)) {
            if (in_doc)
                TMM_TRY(add_doc(ld, p + doc_start, doc_end - doc_start));
            in_doc = false;
        } else {
            if (!in_doc)
                doc_start = pos;
            in_doc = true;
            doc_end = (nl && end > pos && p[end - 1] == '\r') ? end - 1 : end;
        }
        pos = next;
    }
    if (in_doc)
        TMM_TRY(add_doc(ld, p + doc_start, doc_end - doc_start));
    return TMM_OK;
}

static tmm_status load_jsonl(loader *ld, const char *path, const uint8_t *p, size_t size)
{
    size_t pos = 0;
    uint64_t line = 0;
    while (pos < size) {
        line++;
        const uint8_t *nl = memchr(p + pos, '\n', size - pos);
        size_t end = nl ? (size_t)(nl - p) : size;
        tmm_jsonl_kind kind;
        char *text;
        size_t len;
        TMM_TRY(tmm_jsonl_line(path, line, (const char *)p + pos, end - pos, &kind, &text, &len));
        pos = nl ? end + 1 : size;
        tmm_status st = TMM_OK;
        if (kind == TMM_JSONL_EMPTY)
            ld->d->info.skipped_docs++;
        else if (kind == TMM_JSONL_TEXT)
            st = add_doc(ld, (const uint8_t *)text, len);
        free(text);
        TMM_TRY(st);
    }
    return TMM_OK;
}

static tmm_status load_file(loader *ld, const tmm_data_config *c, const char *path, uint64_t *file_bytes)
{
    void *data;
    size_t size;
    TMM_TRY(tmm_read_file(path, "text file", TMM_LIMIT_TEXT, &data, &size));
    *file_bytes += size;
    bool jsonl = c->text_format == TMM_TEXT_JSONL || (c->text_format == TMM_TEXT_AUTO && tmm_corpus_is_jsonl(path));
    uint64_t before = ld->d->ndocs;
    tmm_status st = TMM_OK;
    if (size == 0)
        st = tmm_fail(TMM_ERR_IO, "%s is empty", path);
    else if (size >= 2 && ((const unsigned char *)data)[0] == 0x1f && ((const unsigned char *)data)[1] == 0x8b)
        st = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s is gzip-compressed, and a text task trains on a file's bytes as "
                      "they are: decompress it, or make shards of it with tmm prepare (which reads .gz) and train "
                      "on those (--data DIR)", path);
    else if (jsonl)
        st = load_jsonl(ld, path, data, size);
    else if (c->text_mode == TMM_TEXT_DOCUMENTS)
        st = load_paragraphs(ld, data, size);
    else
        st = add_doc(ld, data, size);
    free(data);
    TMM_TRY(st);
    if (ld->d->ndocs == before)
        return tmm_fail(TMM_ERR_IO, "%s has no documents (%s)", path,
                        jsonl ? "only blank lines or empty \"text\" values" : "only blank lines");
    return TMM_OK;
}

/* ---- splits ---------------------------------------------------------------- */

/* The document's position in [0, 1) for the split: a hash of its bytes. */
static double doc_u(const tmm_data *d, const doc *dc)
{
    uint64_t h = tmm_fnv1a64(d->bytes + dc->start, (size_t)dc->len);
    return (double)(tmm_rng_bits(h, 0) >> 11) * 0x1.0p-53;
}

static tmm_status split_documents(tmm_data *d)
{
    double *u = malloc((size_t)d->ndocs * sizeof *u);
    bool *val = calloc((size_t)d->ndocs, sizeof *val);
    d->train_idx = malloc((size_t)d->ndocs * sizeof *d->train_idx);
    d->val_idx = malloc((size_t)d->ndocs * sizeof *d->val_idx);
    if (!u || !val || !d->train_idx || !d->val_idx) {
        free(u);
        free(val);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory splitting %llu documents",
                        (unsigned long long)d->ndocs);
    }
    uint64_t nval = 0;
    double umin = 2.0, umax = -1.0;
    for (uint64_t i = 0; i < d->ndocs; i++) {
        u[i] = doc_u(d, &d->docs[i]);
        val[i] = u[i] < d->val_fraction;
        nval += val[i];
        umin = u[i] < umin ? u[i] : umin;
        umax = u[i] > umax ? u[i] : umax;
    }
    /* Small corpora: make both sides non-empty when a validation split is asked for. */
    if (d->val_fraction > 0 && nval == 0)
        for (uint64_t i = 0; i < d->ndocs; i++)
            if (u[i] == umin)
                val[i] = true, nval++;
    if (nval == d->ndocs)
        for (uint64_t i = 0; i < d->ndocs; i++)
            if (u[i] == umax && umax != umin)
                val[i] = false, nval--;
    free(u);
    d->n_train = d->n_val = 0;
    for (uint64_t i = 0; i < d->ndocs; i++) {
        if (val[i])
            d->val_idx[d->n_val++] = i;
        else
            d->train_idx[d->n_train++] = i;
    }
    free(val);
    if (d->n_train == 0 || (d->val_fraction > 0 && d->n_val == 0))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT,
                        "text: %llu document(s) and fewer than two distinct ones: a training and a validation "
                        "split need two (add documents, use window mode, or set the validation fraction to 0)",
                        (unsigned long long)d->ndocs);
    return TMM_OK;
}

static tmm_status split_windows(tmm_data *d, uint64_t need)
{
    uint64_t N = d->nbytes + d->ndocs, V = 0;
    if (d->val_fraction > 0) {
        V = (uint64_t)ceil(d->val_fraction * (double)N);
        if (V < need)
            V = need;
    }
    if (N < V + need) {
        if (d->val_fraction > 0)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT,
                            "text: the corpus has %llu tokens (bytes plus one end-of-text per document); windows of "
                            "n + 1 = %llu need that many in the training split after the last %llu are held out "
                            "for validation: lower n, add text or lower the validation fraction",
                            (unsigned long long)N, (unsigned long long)need, (unsigned long long)V);
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT,
                        "text: the corpus has %llu tokens (bytes plus one end-of-text per document), fewer than "
                        "a window of n + 1 = %llu: lower n or add text",
                        (unsigned long long)N, (unsigned long long)need);
    }
    d->stream_len = N;
    d->train_len = N - V;
    return TMM_OK;
}

/* ---- entropy ------------------------------------------------------------------ */

static double entropy_of(const uint64_t *counts, uint32_t vocab)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < vocab; i++)
        total += counts[i];
    if (!total)
        return 0.0;
    double h = 0.0;
    for (uint32_t i = 0; i < vocab; i++)
        if (counts[i]) {
            double p = (double)counts[i] / (double)total;
            h -= p * log(p);
        }
    return h;
}

static double text_entropy(const tmm_data *d)
{
    uint64_t counts[TMM_TEXT_VOCAB] = { 0 };
    if (d->mode == TMM_TEXT_WINDOWS) {
        uint64_t T = d->train_len;
        for (uint64_t k = 0; k < d->ndocs; k++) {
            uint64_t ss = d->docs[k].start + k, len = d->docs[k].len;
            if (ss >= T)
                break;
            uint64_t nb = len < T - ss ? len : T - ss;
            const uint8_t *p = d->bytes + d->docs[k].start;
            for (uint64_t i = 0; i < nb; i++)
                counts[p[i]]++;
            if (ss + len < T)
                counts[TMM_TEXT_EOT]++;
        }
    } else {
        uint64_t n = d->n;
        for (uint64_t i = 0; i < d->n_train; i++) {
            const doc *dc = &d->docs[d->train_idx[i]];
            const uint8_t *p = d->bytes + dc->start;
            uint64_t m = dc->len < n + 1 ? dc->len : n + 1;
            for (uint64_t k = 1; k < m; k++)
                counts[p[k]]++;
            if (dc->len <= n)
                counts[TMM_TEXT_EOT]++;
        }
    }
    return entropy_of(counts, TMM_TEXT_VOCAB);
}

/* ---- create ------------------------------------------------------------------ */

static void describe(tmm_data *d, const tmm_data_config *c, uint64_t file_bytes)
{
    const tmm_data_info *in = &d->info;
    if (d->task == TMM_DATA_COPY) {
        uint32_t h = c->n / 2;
        snprintf(d->desc, sizeof d->desc,
                 "copy: n %u = %u random symbols (alphabet %u) twice%s, %u scored per row; vocab %u; seed %llu; "
                 "held-out set fixed for every seed",
                 c->n, h, d->alphabet, c->n % 2 ? " + 1 unscored" : "", h, d->alphabet,
                 (unsigned long long)d->seed);
        return;
    }
    if (d->task == TMM_DATA_MQAR) {
        tmm_mqar_describe(&d->mqar, c->n, d->seed, d->desc, sizeof d->desc);
        return;
    }
    char skipped[64] = "";
    if (in->skipped_docs)
        snprintf(skipped, sizeof skipped, ", %llu empty skipped", (unsigned long long)in->skipped_docs);
    if (d->mode == TMM_TEXT_WINDOWS) {
        snprintf(d->desc, sizeof d->desc,
                 "text (windows of n+1 = %u): %u file(s), %llu bytes, %llu document(s)%s; %llu tokens: %llu train, "
                 "%llu val (the last %.3g%%); vocab %u; seed %llu",
                 c->n + 1, c->text_path_count, (unsigned long long)file_bytes, (unsigned long long)d->ndocs,
                 skipped, (unsigned long long)d->stream_len, (unsigned long long)in->train_tokens,
                 (unsigned long long)in->val_tokens, 100.0 * (double)in->val_tokens / (double)d->stream_len,
                 in->vocab, (unsigned long long)d->seed);
    } else {
        snprintf(d->desc, sizeof d->desc,
                 "text (documents, one per row, n+1 = %u, EOT-padded): %u file(s), %llu bytes, %llu documents%s: "
                 "%llu train (%llu truncated), %llu val (%.3g%% by content hash); vocab %u; seed %llu",
                 c->n + 1, c->text_path_count, (unsigned long long)file_bytes, (unsigned long long)d->ndocs,
                 skipped, (unsigned long long)in->train_docs, (unsigned long long)in->truncated_docs,
                 (unsigned long long)in->val_docs, 100.0 * d->val_fraction, in->vocab,
                 (unsigned long long)d->seed);
    }
}

void tmm_data_destroy(tmm_data *data)
{
    if (!data)
        return;
    free(data->bytes);
    free(data->docs);
    free(data->train_idx);
    free(data->val_idx);
    tmm_shards_close(data->shards);
    free(data);
}

static tmm_status create_text(tmm_data *d, const tmm_data_config *c, uint64_t *file_bytes)
{
    loader ld = { d, 0, 0 };
    for (uint32_t i = 0; i < c->text_path_count; i++)
        TMM_TRY(load_file(&ld, c, c->text_paths[i], file_bytes));
    tmm_data_info *in = &d->info;
    if (d->mode == TMM_TEXT_WINDOWS) {
        TMM_TRY(split_windows(d, (uint64_t)c->n + 1));
        d->key_train = tmm_rng_key(d->seed, "text/train/windows");
        in->train_tokens = d->train_len;
        in->val_tokens = d->stream_len - d->train_len;
        for (uint64_t k = 0; k < d->ndocs; k++)
            if (d->docs[k].start + k < d->train_len)
                in->train_docs++;
            else
                in->val_docs++;
        in->val_rows = in->val_tokens ? (in->val_tokens - 1) / c->n : 0;
    } else {
        TMM_TRY(split_documents(d));
        d->key_train = tmm_rng_key(d->seed, "text/train/documents");
        in->train_docs = d->n_train;
        in->val_docs = d->n_val;
        for (uint64_t i = 0; i < d->n_train; i++) {
            uint64_t len = d->docs[d->train_idx[i]].len;
            in->train_tokens += len + 1;
            in->truncated_docs += len > (uint64_t)c->n + 1;
            in->truncated_bytes += len > (uint64_t)c->n + 1 ? len - ((uint64_t)c->n + 1) : 0;
        }
        for (uint64_t i = 0; i < d->n_val; i++)
            in->val_tokens += d->docs[d->val_idx[i]].len + 1;
        in->val_rows = d->n_val;
    }
    d->entropy = text_entropy(d);
    return TMM_OK;
}

/* ---- prepared shards ------------------------------------------------------------ */

static tmm_status shards_entropy(tmm_data *d)
{
    const uint32_t V = d->info.vocab;
    if (d->mode == TMM_TEXT_WINDOWS) {
        d->entropy = entropy_of(tmm_shards_train_counts(d->shards), V);
        return TMM_OK;
    }
    uint64_t *counts = calloc(V, sizeof *counts);
    uint32_t *row = malloc(((size_t)d->n + 1) * sizeof *row);
    tmm_status s = counts && row ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint64_t i = 0; s == TMM_OK && i < d->n_train; i++) {
        uint64_t start, len;
        tmm_shards_document(d->shards, TMM_SHARD_TRAIN, i, &start, &len);
        uint32_t m = len < (uint64_t)d->n + 1 ? (uint32_t)len : d->n + 1;
        tmm_shards_read(d->shards, TMM_SHARD_TRAIN, start, m, row);
        for (uint32_t k = 1; k < m; k++)
            counts[row[k]]++;
        if (len <= d->n)
            counts[d->eot]++;
    }
    if (s == TMM_OK)
        d->entropy = entropy_of(counts, V);
    free(counts);
    free(row);
    return s;
}

static tmm_status create_shards(tmm_data *d, const tmm_data_config *c)
{
    for (uint32_t i = 1; i < c->text_path_count; i++)
        if (!tmm_shards_detect(c->text_paths[i]) && !tmm_is_dir(c->text_paths[i]))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s is not prepared shards, %s is: train on one kind of data "
                            "(tmm prepare the text too)", c->text_paths[i], c->text_paths[0]);
    const bool docs = d->mode == TMM_TEXT_DOCUMENTS;
    TMM_TRY(tmm_shards_open(c->text_paths, c->text_path_count, docs, &d->shards));
    tmm_data_info *in = &d->info;
    const tmm_shard_set *set = d->shards;
    const uint64_t n = c->n;
    in->vocab = tmm_shards_vocab(set);
    d->eot = tmm_shards_eot(set);
    in->train_tokens = tmm_shards_tokens(set, TMM_SHARD_TRAIN);
    in->val_tokens = c->val_fraction > 0 ? tmm_shards_tokens(set, TMM_SHARD_VAL) : 0;
    in->train_docs = d->n_train = tmm_shards_documents(set, TMM_SHARD_TRAIN);
    in->val_docs = d->n_val = c->val_fraction > 0 ? tmm_shards_documents(set, TMM_SHARD_VAL) : 0;
    if (docs) {
        d->key_train = tmm_rng_key(d->seed, "shards/train/documents");
        in->val_rows = d->n_val;
        if (d->n_train == 0)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards hold no training document");
        for (uint64_t i = 0; i < d->n_train; i++) {
            uint64_t start, len;
            tmm_shards_document(set, TMM_SHARD_TRAIN, i, &start, &len);
            in->truncated_docs += len > n + 1;
            in->truncated_bytes += len > n + 1 ? len - (n + 1) : 0;
        }
    } else {
        d->key_train = tmm_rng_key(d->seed, "shards/train/windows");
        if (in->train_tokens < n + 1)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards hold %llu training tokens, fewer than a window of "
                            "n + 1 = %llu: lower n or prepare more text", (unsigned long long)in->train_tokens,
                            (unsigned long long)(n + 1));
        if (in->val_tokens && in->val_tokens < n + 1)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards hold %llu validation tokens, fewer than a window "
                            "of n + 1 = %llu: prepare with a larger --val-fraction, or train with --val-fraction 0 "
                            "--eval-every 0", (unsigned long long)in->val_tokens, (unsigned long long)(n + 1));
        in->val_rows = in->val_tokens ? (in->val_tokens - 1) / n : 0;
    }
    if (c->val_fraction > 0 && in->val_tokens == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards hold no validation split: prepare with --val-fraction "
                        "above 0, or train with --val-fraction 0 --eval-every 0");
    TMM_TRY(shards_entropy(d));
    snprintf(d->desc, sizeof d->desc,
             "shards (%s): %u train + %u val shard(s), %llu + %llu documents%s; %llu train tokens, %llu val; vocab "
             "%u (tokenizer %s); seed %llu",
             docs ? "documents, one per row, EOT-padded" : "windows of n+1 tokens",
             tmm_shards_files(set, TMM_SHARD_TRAIN), tmm_shards_files(set, TMM_SHARD_VAL),
             (unsigned long long)in->train_docs, (unsigned long long)in->val_docs,
             docs ? (in->truncated_docs ? " (some truncated to n+1)" : "") : "", (unsigned long long)in->train_tokens,
             (unsigned long long)in->val_tokens, in->vocab, tmm_shards_tokenizer_path(set),
             (unsigned long long)d->seed);
    return TMM_OK;
}

tmm_status tmm_data_create(const tmm_data_config *config, tmm_data **out)
{
    if (!config || !out)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_data_create: NULL argument");
    *out = NULL;
    TMM_TRY(check_config(config));
    tmm_data *d = calloc(1, sizeof *d);
    if (!d)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    d->task = config->task;
    d->seed = config->seed;
    d->n = config->n;
    d->mode = config->text_mode;
    d->val_fraction = config->val_fraction;
    d->info.task = config->task;
    uint64_t file_bytes = 0;
    if (config->task == TMM_DATA_COPY) {
        d->alphabet = config->copy_alphabet;
        d->info.vocab = d->alphabet;
        d->key_train = tmm_rng_key(d->seed, "copy/train");
        d->key_val = tmm_rng_key(TMM_DATA_VAL_SEED, "copy/val");
        d->entropy = log((double)d->alphabet);
    } else if (config->task == TMM_DATA_MQAR) {
        d->mqar = config->mqar;
        d->info.vocab = tmm_mqar_vocab(&d->mqar);
        d->key_train = tmm_rng_key(d->seed, "mqar/train");
        d->key_val = tmm_rng_key(TMM_DATA_VAL_SEED, "mqar/val");
        d->entropy = log((double)d->mqar.values);
    } else {
        d->info.vocab = TMM_TEXT_VOCAB;
        d->eot = TMM_TEXT_EOT;
        /* a directory is prepared shards (its manifest says why not) */
        const char *first = config->text_paths[0];
        tmm_status st = tmm_shards_detect(first) || tmm_is_dir(first) ? create_shards(d, config)
                                                                      : create_text(d, config, &file_bytes);
        if (st != TMM_OK) {
            tmm_data_destroy(d);
            return st;
        }
    }
    if (!d->shards)
        describe(d, config, file_bytes);
    *out = d;
    return TMM_OK;
}

/* ---- batches ---------------------------------------------------------------- */

static void copy_row(const tmm_data *d, uint64_t stream, uint64_t j, uint32_t n, uint32_t *tok, int32_t *tgt)
{
    uint32_t h = n / 2;
    uint64_t k = tmm_rng_bits(stream, j);
    for (uint32_t i = 0; i < h; i++) {
        uint32_t a = (uint32_t)(tmm_rng_bits(k, i) % d->alphabet);
        tok[i] = tok[h + i] = a;
    }
    if (n % 2)
        tok[2 * h] = (uint32_t)(tmm_rng_bits(k, h) % d->alphabet);
    if (tgt) {
        for (uint32_t t = 0; t < n; t++)
            tgt[t] = TMM_TARGET_IGNORE;
        for (uint32_t t = h - 1; t + 1 < 2 * h; t++)
            tgt[t] = (int32_t)tok[t + 1];
    }
}

/* Tokens [s, s + count) of the window-mode stream (s + count <= N). */
static void stream_read(const tmm_data *d, uint64_t s, uint32_t count, uint32_t *out)
{
    /* the last document whose stream start (start + index) is <= s */
    uint64_t lo = 0, hi = d->ndocs - 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (d->docs[mid].start + mid <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t k = lo, pos = s - (d->docs[k].start + k);
    for (uint32_t i = 0; i < count; i++) {
        if (pos < d->docs[k].len) {
            out[i] = d->bytes[d->docs[k].start + pos++];
        } else {
            out[i] = TMM_TEXT_EOT;
            k++;
            pos = 0;
        }
    }
}

/* The window of n + 1 tokens at stream offset start: inputs, then targets
 * (the same tokens one further; int32 and uint32 may alias). */
static void window_row(const tmm_data *d, uint64_t start, uint32_t n, uint32_t *tok, int32_t *tgt)
{
    stream_read(d, start, n, tok);
    if (tgt)
        stream_read(d, start + 1, n, (uint32_t *)tgt);
}

static void document_row(const tmm_data *d, uint64_t doc_index, uint32_t n, uint32_t *tok, int32_t *tgt)
{
    const doc *dc = &d->docs[doc_index];
    const uint8_t *p = d->bytes + dc->start;
    uint64_t L = dc->len;
    for (uint32_t t = 0; t < n; t++)
        tok[t] = t < L ? p[t] : TMM_TEXT_EOT;
    if (tgt)
        for (uint32_t t = 0; t < n; t++)
            tgt[t] = t < L ? (int32_t)(t + 1 < L ? p[t + 1] : TMM_TEXT_EOT) : TMM_TARGET_IGNORE;
}

/* A keyed bijection of [0, m): a 4-round Feistel network on the smallest
 * even number of bits that holds m, with cycle walking. */
static uint64_t permute(uint64_t key, uint64_t x, uint64_t m)
{
    if (m <= 1)
        return 0;
    unsigned bits = 2;
    while (bits < 64 && (m - 1) >> bits)
        bits += 2;
    unsigned half = bits / 2;
    uint64_t mask = half >= 64 ? ~0ull : (1ull << half) - 1;
    do {
        uint64_t l = x >> half, r = x & mask;
        for (uint64_t round = 0; round < 4; round++) {
            uint64_t f = tmm_rng_bits(key, (r << 2) | round) & mask;
            uint64_t nl = r;
            r = l ^ f;
            l = nl;
        }
        x = (l << half) | r;
    } while (x >= m);
    return x;
}

/* A row of a shard document: its first min(L, n + 1) tokens, EOT after. */
static void shard_document_row(const tmm_data *d, tmm_shard_split split, uint64_t di, uint32_t n, uint32_t *tok,
                               int32_t *tgt)
{
    uint64_t start, L;
    tmm_shards_document(d->shards, split, di, &start, &L);
    uint32_t m = L < n ? (uint32_t)L : n; /* tokens of the document among the inputs */
    tmm_shards_read(d->shards, split, start, m, tok);
    for (uint32_t t = m; t < n; t++)
        tok[t] = d->eot;
    if (!tgt)
        return;
    for (uint32_t t = 0; t + 1 < m; t++)
        tgt[t] = (int32_t)tok[t + 1];
    if (m > 0) {
        uint32_t last = d->eot; /* the token after position m - 1: the document's next, or its EOT */
        if (L > m)
            tmm_shards_read(d->shards, split, start + m, 1, &last);
        tgt[m - 1] = (int32_t)last;
    }
    for (uint32_t t = m; t < n; t++)
        tgt[t] = TMM_TARGET_IGNORE;
}

static tmm_status shard_batch(const tmm_data *d, bool val, uint64_t j0, uint32_t batch, uint32_t n,
                              uint32_t *tokens, int32_t *targets)
{
    const tmm_shard_split split = val ? TMM_SHARD_VAL : TMM_SHARD_TRAIN;
    if (val && d->info.val_tokens == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards' validation split is not used (validation fraction 0)");
    if (d->mode == TMM_TEXT_DOCUMENTS) {
        for (uint32_t r = 0; r < batch; r++) {
            uint64_t j = j0 + r, di;
            if (val) {
                di = j % d->n_val;
            } else {
                uint64_t D = d->n_train;
                di = permute(tmm_rng_bits(d->key_train, j / D), j % D, D);
            }
            shard_document_row(d, split, di, n, tokens + (size_t)r * n, targets ? targets + (size_t)r * n : NULL);
        }
        return TMM_OK;
    }
    uint64_t len = val ? d->info.val_tokens : d->info.train_tokens;
    if (len < (uint64_t)n + 1)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the shards' %s split has %llu tokens, fewer than n + 1 = %llu",
                        val ? "validation" : "training", (unsigned long long)len, (unsigned long long)n + 1);
    uint64_t W = (len - 1) / n;
    for (uint32_t r = 0; r < batch; r++) {
        uint64_t j = j0 + r;
        uint64_t start = val ? (j % W) * n : tmm_rng_bits(d->key_train, j) % (len - n);
        tmm_shards_read(d->shards, split, start, n, tokens + (size_t)r * n);
        if (targets)
            tmm_shards_read(d->shards, split, start + 1, n, (uint32_t *)(targets + (size_t)r * n));
    }
    return TMM_OK;
}

tmm_status tmm_data_batch(const tmm_data *data, tmm_data_split split, uint64_t index, uint32_t batch, uint32_t n,
                          uint32_t *tokens, int32_t *targets)
{
    if (!data || !tokens)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_data_batch: NULL argument");
    if (split != TMM_SPLIT_TRAIN && split != TMM_SPLIT_VAL)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_data_batch: unknown split %d", (int)split);
    if (batch == 0 || n == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_data_batch: batch %u x n %u is empty", batch, n);
    if (index > (UINT64_MAX - (batch - 1)) / batch)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_data_batch: batch index %llu is out of range",
                        (unsigned long long)index);
    uint64_t j0 = index * batch;
    bool val = split == TMM_SPLIT_VAL;

    if (data->task == TMM_DATA_COPY) {
        if (n < 2)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "copy task: n = %u; it needs n >= 2", n);
        uint64_t stream = val ? data->key_val : data->key_train;
        for (uint32_t r = 0; r < batch; r++)
            copy_row(data, stream, j0 + r, n, tokens + (size_t)r * n, targets ? targets + (size_t)r * n : NULL);
        return TMM_OK;
    }
    if (data->task == TMM_DATA_MQAR)
        return tmm_mqar_rows(&data->mqar, val ? data->key_val : data->key_train, j0, batch, n, tokens, targets);
    if (data->shards)
        return shard_batch(data, val, j0, batch, n, tokens, targets);

    if (data->mode == TMM_TEXT_WINDOWS) {
        uint64_t base = val ? data->train_len : 0;
        uint64_t len = val ? data->stream_len - data->train_len : data->train_len;
        if (val && len == 0)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: there is no validation split (validation fraction 0)");
        if (len < (uint64_t)n + 1)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT,
                            "text: the %s split has %llu tokens, fewer than n + 1 = %llu", val ? "validation" : "training",
                            (unsigned long long)len, (unsigned long long)n + 1);
        uint64_t W = (len - 1) / n;
        for (uint32_t r = 0; r < batch; r++) {
            uint64_t j = j0 + r;
            uint64_t start = val ? base + (j % W) * n : tmm_rng_bits(data->key_train, j) % (len - n);
            window_row(data, start, n, tokens + (size_t)r * n, targets ? targets + (size_t)r * n : NULL);
        }
        return TMM_OK;
    }

    if (val && data->n_val == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "text: there is no validation split (validation fraction 0)");
    for (uint32_t r = 0; r < batch; r++) {
        uint64_t j = j0 + r, di;
        if (val) {
            di = data->val_idx[j % data->n_val];
        } else {
            uint64_t D = data->n_train;
            uint64_t epoch_key = tmm_rng_bits(data->key_train, j / D);
            di = data->train_idx[permute(epoch_key, j % D, D)];
        }
        document_row(data, di, n, tokens + (size_t)r * n, targets ? targets + (size_t)r * n : NULL);
    }
    return TMM_OK;
}

/* ---- queries ------------------------------------------------------------------ */

const char *tmm_data_task_name(tmm_data_task task)
{
    return task == TMM_DATA_COPY ? "copy" : task == TMM_DATA_MQAR ? "mqar" : "text";
}

const char *tmm_data_accuracy_key(tmm_data_task task)
{
    return task == TMM_DATA_COPY ? "copy_acc" : task == TMM_DATA_MQAR ? "mqar_acc" : "val_accuracy";
}

uint32_t tmm_data_vocab(const tmm_data *data)
{
    return data->info.vocab;
}

uint64_t tmm_data_val_rows(const tmm_data *data)
{
    return data->info.val_rows;
}

double tmm_data_unigram_entropy(const tmm_data *data)
{
    return data->entropy;
}

const char *tmm_data_describe(const tmm_data *data)
{
    return data->desc;
}

const tmm_data_info *tmm_data_get_info(const tmm_data *data)
{
    return &data->info;
}

const char *tmm_data_tokenizer_path(const tmm_data *data)
{
    return data->shards ? tmm_shards_tokenizer_path(data->shards) : NULL;
}

uint64_t tmm_data_tokenizer_fingerprint(const tmm_data *data)
{
    return data->shards ? tmm_shards_fingerprint(data->shards) : 0;
}
