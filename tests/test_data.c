/* Training data (src/train/data.h): determinism, the copy layout, text windows
 * and documents, JSONL, splits and the unigram entropy. CPU only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_rows.h"
#include "harness.h"
#include "train/data.h"

#define IGN TMM_TARGET_IGNORE

/* ---- fixtures -------------------------------------------------------------- */

static char *tmp_path(const char *name)
{
    static char buf[8][256];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "/tmp/tmm-data-%d-%s", (int)getpid(), name);
    return p;
}

static const char *write_bytes(const char *name, const void *data, size_t size)
{
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, size, f), size);
    fclose(f);
    return path;
}

static const char *write_text(const char *name, const char *text)
{
    return write_bytes(name, text, strlen(text));
}

/* Letters from a fixed LCG: every window of 30+ bytes is unique in practice. */
static char *letters(size_t size, uint32_t seed)
{
    char *s = malloc(size + 1);
    cr_assert(s);
    for (size_t i = 0; i < size; i++) {
        seed = seed * 1664525u + 1013904223u;
        s[i] = (char)('a' + (seed >> 24) % 26);
    }
    s[size] = 0;
    return s;
}

static tmm_data *make_copy(uint64_t seed, uint32_t n, uint32_t alphabet)
{
    tmm_data_config c;
    tmm_data_config_init(&c);
    c.seed = seed;
    c.n = n;
    c.copy_alphabet = alphabet;
    tmm_data *d;
    H_OK(tmm_data_create(&c, &d));
    return d;
}

static tmm_status try_text(const char *const *paths, uint32_t count, tmm_text_mode mode, double val, uint32_t n,
                           uint64_t seed, tmm_data **d)
{
    tmm_data_config c;
    tmm_data_config_init(&c);
    c.task = TMM_DATA_TEXT;
    c.text_paths = paths;
    c.text_path_count = count;
    c.text_mode = mode;
    c.val_fraction = val;
    c.n = n;
    c.seed = seed;
    return tmm_data_create(&c, d);
}

static tmm_data *make_text(const char *const *paths, uint32_t count, tmm_text_mode mode, double val, uint32_t n,
                           uint64_t seed)
{
    tmm_data *d;
    H_OK(try_text(paths, count, mode, val, n, seed, &d));
    return d;
}


/* ---- copy ------------------------------------------------------------------- */

Test(data, copy_determinism)
{
    const uint32_t B = 8, n = 64;
    tmm_data *d1 = make_copy(7, n, 16), *d1b = make_copy(7, n, 16), *d2 = make_copy(8, n, 16);
    rows a = get(d1, TMM_SPLIT_TRAIN, 3, B, n), b = get(d1b, TMM_SPLIT_TRAIN, 3, B, n);
    rows c = get(d2, TMM_SPLIT_TRAIN, 3, B, n), e = get(d1, TMM_SPLIT_TRAIN, 4, B, n);
    cr_assert(same_rows(a, b, (size_t)B * n), "same seed, same batch");
    cr_assert(!same_rows(a, c, (size_t)B * n), "another seed, another batch");
    cr_assert(!same_rows(a, e, (size_t)B * n), "another index, another batch");
    /* a fixed value: the same bytes on every machine (counter-based RNG) */
    rows again = get(d1, TMM_SPLIT_TRAIN, 3, B, n);
    cr_assert(same_rows(a, again, (size_t)B * n));
    /* batch (i, B) is rows [iB, iB + B) at any batch size */
    rows big = get(d1, TMM_SPLIT_TRAIN, 1, 2 * B, n);
    rows lo = get(d1, TMM_SPLIT_TRAIN, 2, B, n), hi = get(d1, TMM_SPLIT_TRAIN, 3, B, n);
    cr_assert(!memcmp(big.tok, lo.tok, (size_t)B * n * 4) && !memcmp(big.tok + B * n, hi.tok, (size_t)B * n * 4));
    drop(a), drop(b), drop(c), drop(e), drop(again), drop(big), drop(lo), drop(hi);
    tmm_data_destroy(d1), tmm_data_destroy(d1b), tmm_data_destroy(d2);
}

static void check_copy_row(const uint32_t *tok, const int32_t *tgt, uint32_t n, uint32_t alphabet)
{
    uint32_t h = n / 2, scored = 0;
    for (uint32_t t = 0; t < n; t++)
        cr_assert_lt(tok[t], alphabet);
    for (uint32_t i = 0; i < h; i++)
        cr_assert_eq(tok[h + i], tok[i], "second copy at %u", i);
    for (uint32_t t = 0; t < n; t++) {
        if (t >= h - 1 && t <= 2 * h - 2) {
            cr_assert_eq(tgt[t], (int32_t)tok[t + 1], "scored target at %u", t);
            cr_assert_eq(tgt[t], (int32_t)tok[t + 1 - h], "it is the copied symbol");
            scored++;
        } else {
            cr_assert_eq(tgt[t], IGN, "position %u must not be scored", t);
        }
    }
    cr_assert_eq(scored, h);
}

Test(data, copy_layout)
{
    for (uint32_t n = 2; n <= 41; n++) {
        for (uint32_t alphabet = 2; alphabet <= 64; alphabet *= 4) {
            tmm_data *d = make_copy(1, n, alphabet);
            cr_assert_eq(tmm_data_vocab(d), alphabet);
            cr_assert_eq(tmm_data_val_rows(d), 0);
            rows r = get(d, TMM_SPLIT_TRAIN, 0, 4, n);
            for (uint32_t b = 0; b < 4; b++)
                check_copy_row(r.tok + b * n, r.tgt + b * n, n, alphabet);
            drop(r);
            r = get(d, TMM_SPLIT_VAL, 5, 4, n);
            for (uint32_t b = 0; b < 4; b++)
                check_copy_row(r.tok + b * n, r.tgt + b * n, n, alphabet);
            drop(r);
            tmm_data_destroy(d);
        }
    }
    /* exact: n = 6, h = 3 -> positions 2, 3, 4 scored */
    tmm_data *d = make_copy(3, 6, 16);
    rows r = get(d, TMM_SPLIT_TRAIN, 0, 1, 6);
    int32_t want[6] = { IGN, IGN, (int32_t)r.tok[0], (int32_t)r.tok[1], (int32_t)r.tok[2], IGN };
    cr_assert(!memcmp(r.tgt, want, sizeof want));
    drop(r);
    tmm_data_destroy(d);
    /* odd n = 7: the extra symbol at position 6 is random, not copied, never scored */
    d = make_copy(3, 7, 16);
    r = get(d, TMM_SPLIT_TRAIN, 0, 64, 7);
    uint32_t hist[16] = { 0 };
    for (uint32_t b = 0; b < 64; b++) {
        cr_assert_eq(r.tgt[b * 7 + 5], IGN);
        cr_assert_eq(r.tgt[b * 7 + 6], IGN);
        hist[r.tok[b * 7 + 6]]++;
    }
    uint32_t distinct = 0;
    for (int i = 0; i < 16; i++)
        distinct += hist[i] > 0;
    cr_assert_gt(distinct, 4);
    drop(r);
    /* all symbols occur */
    r = get(d, TMM_SPLIT_TRAIN, 1, 256, 7);
    memset(hist, 0, sizeof hist);
    for (uint32_t i = 0; i < 256 * 7; i++)
        hist[r.tok[i]]++;
    for (int i = 0; i < 16; i++)
        cr_assert_gt(hist[i], 40);
    drop(r);
    cr_assert_str_not_empty(tmm_data_describe(d));
    cr_assert_float_eq(tmm_data_unigram_entropy(d), log(16.0), 1e-12);
    tmm_data_destroy(d);
}

Test(data, copy_validation_fixed_and_disjoint)
{
    const uint32_t n = 32, B = 64, h = n / 2;
    tmm_data *d1 = make_copy(1, n, 16), *d2 = make_copy(2, n, 16);
    /* the held-out set does not depend on the training seed */
    rows v1 = get(d1, TMM_SPLIT_VAL, 0, B, n), v2 = get(d2, TMM_SPLIT_VAL, 0, B, n);
    cr_assert(same_rows(v1, v2, (size_t)B * n));
    rows v1b = get(d1, TMM_SPLIT_VAL, 0, B, n);
    cr_assert(same_rows(v1, v1b, (size_t)B * n), "fixed");
    /* no held-out row occurs in the first training rows of either seed (16^16 sequences) */
    for (uint64_t i = 0; i < 16; i++) {
        for (int s = 0; s < 2; s++) {
            rows t = get(s ? d2 : d1, TMM_SPLIT_TRAIN, i, B, n);
            for (uint32_t a = 0; a < B; a++)
                for (uint32_t b = 0; b < B; b++)
                    cr_assert(memcmp(t.tok + a * n, v1.tok + b * n, h * 4), "training row equals a held-out row");
            drop(t);
        }
    }
    drop(v1), drop(v2), drop(v1b);
    tmm_data_destroy(d1), tmm_data_destroy(d2);
}

Test(data, copy_bad_config)
{
    tmm_data_config c;
    tmm_data_config_init(&c);
    tmm_data *d = NULL;
    c.n = 1;
    cr_assert_eq(tmm_data_create(&c, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "n >= 2"), "%s", tmm_last_error());
    c.n = 8;
    c.copy_alphabet = 1;
    cr_assert_eq(tmm_data_create(&c, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "alphabet"), "%s", tmm_last_error());
    c.copy_alphabet = 16;
    H_OK(tmm_data_create(&c, &d));
    uint32_t tok[8];
    cr_assert_eq(tmm_data_batch(d, TMM_SPLIT_TRAIN, 0, 0, 8, tok, NULL), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_data_batch(d, TMM_SPLIT_TRAIN, 0, 1, 1, tok, NULL), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_data_batch(d, TMM_SPLIT_TRAIN, UINT64_MAX, 2, 4, tok, NULL), TMM_ERR_INVALID_ARGUMENT);
    H_OK(tmm_data_batch(d, TMM_SPLIT_TRAIN, 0, 1, 8, tok, NULL)); /* targets optional */
    tmm_data_destroy(d);
}

/* ---- text windows ----------------------------------------------------------- */

/* Position of the n + 1 tokens w in the stream s[0..len), or -1. */
static long find_window(const uint32_t *s, size_t len, const uint32_t *w, uint32_t n1)
{
    for (size_t i = 0; i + n1 <= len; i++)
        if (!memcmp(s + i, w, n1 * sizeof *w))
            return (long)i;
    return -1;
}

Test(data, text_windows_match_corpus)
{
    const uint32_t n = 32, B = 16;
    char *t1 = letters(2000, 1), *t2 = letters(1000, 2);
    const char *paths[2] = { write_text("w1.txt", t1), write_text("w2.txt", t2) };
    /* stream: file 1, EOT, file 2, EOT */
    size_t N = 3002;
    uint32_t *stream = malloc(N * sizeof *stream);
    for (size_t i = 0; i < 2000; i++)
        stream[i] = (unsigned char)t1[i];
    stream[2000] = TMM_TEXT_EOT;
    for (size_t i = 0; i < 1000; i++)
        stream[2001 + i] = (unsigned char)t2[i];
    stream[3001] = TMM_TEXT_EOT;
    tmm_data *d = make_text(paths, 2, TMM_TEXT_WINDOWS, 0.1, n, 5);
    cr_assert_eq(tmm_data_vocab(d), TMM_TEXT_VOCAB);
    const tmm_data_info *in = tmm_data_get_info(d);
    size_t V = 301, T = N - V; /* ceil(0.1 * 3002) */
    cr_assert_eq(in->train_tokens, T);
    cr_assert_eq(in->val_tokens, V);
    cr_assert_eq(in->train_docs, 2);
    cr_assert_eq(in->val_docs, 0);

    uint32_t w[33];
    int crossed_eot = 0, distinct = 0;
    long first = -2;
    for (uint64_t i = 0; i < 20; i++) {
        rows r = get(d, TMM_SPLIT_TRAIN, i, B, n);
        for (uint32_t b = 0; b < B; b++) {
            memcpy(w, r.tok + b * n, n * 4);
            w[n] = (uint32_t)r.tgt[b * n + n - 1];
            for (uint32_t t = 0; t + 1 < n; t++)
                cr_assert_eq(r.tgt[b * n + t], (int32_t)r.tok[b * n + t + 1]);
            long at = find_window(stream, N, w, n + 1);
            cr_assert_geq(at, 0, "window not in the corpus");
            cr_assert_leq((size_t)at + n + 1, T, "training window reaches into the validation split");
            crossed_eot += at <= 2000 && at + n >= 2000;
            distinct += at != first;
            first = at;
        }
        drop(r);
    }
    cr_assert_gt(distinct, 300);
    cr_assert_gt(crossed_eot, 0, "windows span the document boundary");

    /* validation: consecutive windows from T, stride n, W = (V - 1) / n of them */
    uint64_t W = (V - 1) / n;
    cr_assert_eq(tmm_data_val_rows(d), W);
    rows v = get(d, TMM_SPLIT_VAL, 0, (uint32_t)W + 1, n);
    for (uint32_t j = 0; j <= W; j++) {
        size_t at = T + (j % W) * n;
        for (uint32_t t = 0; t < n; t++) {
            cr_assert_eq(v.tok[j * n + t], stream[at + t]);
            cr_assert_eq(v.tgt[j * n + t], (int32_t)stream[at + t + 1]);
        }
    }
    drop(v);

    /* determinism and seeds */
    tmm_data *d2 = make_text(paths, 2, TMM_TEXT_WINDOWS, 0.1, n, 5), *d3 = make_text(paths, 2, TMM_TEXT_WINDOWS, 0.1, n, 6);
    rows a = get(d, TMM_SPLIT_TRAIN, 9, B, n), b = get(d2, TMM_SPLIT_TRAIN, 9, B, n), c = get(d3, TMM_SPLIT_TRAIN, 9, B, n);
    cr_assert(same_rows(a, b, (size_t)B * n));
    cr_assert(!same_rows(a, c, (size_t)B * n));
    rows va = get(d, TMM_SPLIT_VAL, 0, 4, n), vc = get(d3, TMM_SPLIT_VAL, 0, 4, n);
    cr_assert(same_rows(va, vc, 4 * n), "validation does not depend on the seed");
    drop(a), drop(b), drop(c), drop(va), drop(vc);
    cr_assert(strstr(tmm_data_describe(d), "windows"), "%s", tmm_data_describe(d));

    /* another n per call: still inside the splits */
    rows o = get(d, TMM_SPLIT_TRAIN, 0, 4, 100);
    drop(o);
    uint32_t big[400];
    cr_assert_eq(tmm_data_batch(d, TMM_SPLIT_VAL, 0, 1, 301, big, NULL), TMM_ERR_INVALID_ARGUMENT);

    tmm_data_destroy(d), tmm_data_destroy(d2), tmm_data_destroy(d3);
    free(stream), free(t1), free(t2);
    unlink(paths[0]), unlink(paths[1]);
}

Test(data, text_window_split_sizes)
{
    char *t = letters(1000, 3);
    const char *paths[1] = { write_text("ws.txt", t) };
    tmm_data *d = make_text(paths, 1, TMM_TEXT_WINDOWS, 0.05, 16, 1);
    cr_assert_eq(tmm_data_get_info(d)->train_tokens, 950);   /* N = 1001, V = ceil(50.05) = 51 */
    cr_assert_eq(tmm_data_get_info(d)->val_tokens, 51);
    cr_assert_eq(tmm_data_val_rows(d), 50 / 16);
    tmm_data_destroy(d);
    d = make_text(paths, 1, TMM_TEXT_WINDOWS, 0.01, 16, 1);  /* ceil(10.01) = 11 < n + 1 = 17 */
    cr_assert_eq(tmm_data_get_info(d)->val_tokens, 17);
    cr_assert_eq(tmm_data_val_rows(d), 1);
    tmm_data_destroy(d);
    d = make_text(paths, 1, TMM_TEXT_WINDOWS, 0.0, 16, 1);
    cr_assert_eq(tmm_data_get_info(d)->train_tokens, 1001);
    cr_assert_eq(tmm_data_val_rows(d), 0);
    uint32_t tok[16];
    cr_assert_eq(tmm_data_batch(d, TMM_SPLIT_VAL, 0, 1, 16, tok, NULL), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "no validation"), "%s", tmm_last_error());
    tmm_data_destroy(d);
    free(t);
    unlink(paths[0]);
}

Test(data, text_errors)
{
    tmm_data *d = NULL;
    const char *missing[1] = { tmp_path("does-not-exist.txt") };
    cr_assert_eq(try_text(missing, 1, TMM_TEXT_WINDOWS, 0.05, 8, 1, &d), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), missing[0]), "%s", tmm_last_error());

    const char *empty[1] = { write_text("empty.txt", "") };
    cr_assert_eq(try_text(empty, 1, TMM_TEXT_WINDOWS, 0.05, 8, 1, &d), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "empty"), "%s", tmm_last_error());
    const char *blank[1] = { write_text("blank.txt", "\n  \n\t\r\n") };
    cr_assert_eq(try_text(blank, 1, TMM_TEXT_DOCUMENTS, 0.05, 8, 1, &d), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "no documents"), "%s", tmm_last_error());

    /* window mode: shorter than n + 1 tokens */
    const char *small[1] = { write_text("small.txt", "0123456789") }; /* 11 tokens with the EOT */
    cr_assert_eq(try_text(small, 1, TMM_TEXT_WINDOWS, 0.0, 11, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "11 tokens"), "%s", tmm_last_error());
    H_OK(try_text(small, 1, TMM_TEXT_WINDOWS, 0.0, 10, 1, &d));
    rows r = get(d, TMM_SPLIT_TRAIN, 0, 3, 10);
    for (uint32_t b = 0; b < 3; b++) {
        for (uint32_t t = 0; t < 10; t++)
            cr_assert_eq(r.tok[b * 10 + t], (uint32_t)('0' + t));
        cr_assert_eq(r.tgt[b * 10 + 9], (int32_t)TMM_TEXT_EOT);
    }
    drop(r);
    tmm_data_destroy(d);
    /* with validation, each split needs n + 1 */
    cr_assert_eq(try_text(small, 1, TMM_TEXT_WINDOWS, 0.05, 5, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "validation"), "%s", tmm_last_error());
    H_OK(try_text(small, 1, TMM_TEXT_WINDOWS, 0.05, 4, 1, &d));
    cr_assert_eq(tmm_data_get_info(d)->val_tokens, 5);
    tmm_data_destroy(d);

    /* bad configs */
    cr_assert_eq(try_text(small, 1, TMM_TEXT_WINDOWS, 1.0, 4, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(try_text(small, 1, TMM_TEXT_WINDOWS, -0.1, 4, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(try_text(small, 0, TMM_TEXT_WINDOWS, 0.1, 4, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(try_text(small, 1, TMM_TEXT_WINDOWS, 0.1, 0, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_null(d);
    unlink(empty[0]), unlink(blank[0]), unlink(small[0]);
}

/* ---- text documents ----------------------------------------------------------- */

/* The row a document of `len` bytes gives (data.h), checked exactly. */
static void check_doc_row(const uint32_t *tok, const int32_t *tgt, uint32_t n, const char *doc)
{
    size_t L = strlen(doc);
    for (uint32_t t = 0; t < n; t++) {
        uint32_t want = t < L ? (unsigned char)doc[t] : TMM_TEXT_EOT;
        cr_assert_eq(tok[t], want, "token %u of \"%s\"", t, doc);
        int32_t wt = t < L ? (t + 1 < L ? (unsigned char)doc[t + 1] : (int32_t)TMM_TEXT_EOT) : IGN;
        cr_assert_eq(tgt[t], wt, "target %u of \"%s\"", t, doc);
    }
}

/* Which of docs[] the row holds (by its first bytes); -1 if none. */
static int which_doc(const uint32_t *tok, uint32_t n, const char *const *docs, int count)
{
    for (int k = 0; k < count; k++) {
        size_t L = strlen(docs[k]);
        bool ok = true;
        for (uint32_t t = 0; t < n && ok; t++)
            ok = tok[t] == (t < L ? (unsigned char)docs[k][t] : TMM_TEXT_EOT);
        if (ok)
            return k;
    }
    return -1;
}

Test(data, documents_layout_and_epochs)
{
    const char *paths[1] = { write_text("docs.txt", "hello\nworld\n\n\n  \t\nab\r\n\r\nxyz\n\nq") };
    const char *docs[4] = { "hello\nworld", "ab", "xyz", "q" };
    const uint32_t n = 8;
    tmm_data *d = make_text(paths, 1, TMM_TEXT_DOCUMENTS, 0.0, n, 3);
    const tmm_data_info *in = tmm_data_get_info(d);
    cr_assert_eq(in->train_docs, 4);
    cr_assert_eq(in->val_docs, 0);
    cr_assert_eq(in->truncated_docs, 1);
    cr_assert_eq(in->train_tokens, 11 + 2 + 3 + 1 + 4);
    cr_assert_eq(tmm_data_val_rows(d), 0);
    /* every epoch of 4 rows holds each document once */
    rows r = get(d, TMM_SPLIT_TRAIN, 0, 40, n);
    int orders_differ = 0;
    for (int e = 0; e < 10; e++) {
        int seen[4] = { 0 };
        for (int b = 0; b < 4; b++) {
            int row = e * 4 + b;
            int k = which_doc(r.tok + row * n, n, docs, 4);
            cr_assert_geq(k, 0, "row %d is no document", row);
            seen[k]++;
            check_doc_row(r.tok + row * n, r.tgt + row * n, n, docs[k]);
            if (e > 0 && memcmp(r.tok + row * n, r.tok + b * n, n * 4))
                orders_differ = 1;
        }
        for (int k = 0; k < 4; k++)
            cr_assert_eq(seen[k], 1, "epoch %d: document %d seen %d times", e, k, seen[k]);
    }
    cr_assert(orders_differ, "each epoch has its own order");
    /* the exact rows of the short documents */
    int k_ab = -1;
    for (int b = 0; b < 4; b++)
        if (which_doc(r.tok + b * n, n, docs, 4) == 1)
            k_ab = b;
    const uint32_t E = TMM_TEXT_EOT;
    uint32_t want_tok[8] = { 'a', 'b', E, E, E, E, E, E };
    int32_t want_tgt[8] = { 'b', (int32_t)E, IGN, IGN, IGN, IGN, IGN, IGN };
    cr_assert(!memcmp(r.tok + k_ab * n, want_tok, sizeof want_tok));
    cr_assert(!memcmp(r.tgt + k_ab * n, want_tgt, sizeof want_tgt));
    drop(r);
    /* determinism; a document of exactly n bytes: EOT scored at n - 1, none padded */
    rows a = get(d, TMM_SPLIT_TRAIN, 7, 5, n), b = get(d, TMM_SPLIT_TRAIN, 7, 5, n);
    cr_assert(same_rows(a, b, 5 * n));
    drop(a), drop(b);
    rows s = get(d, TMM_SPLIT_TRAIN, 0, 4, 3);
    for (int row = 0; row < 4; row++)
        if (s.tok[row * 3] == 'x')
            cr_assert(s.tgt[row * 3] == 'y' && s.tgt[row * 3 + 1] == 'z' && s.tgt[row * 3 + 2] == (int32_t)E);
    drop(s);
    cr_assert(strstr(tmm_data_describe(d), "documents"), "%s", tmm_data_describe(d));
    tmm_data_destroy(d);
    unlink(paths[0]);
}

Test(data, jsonl_documents)
{
    const char *text = "{\"text\": \"a\\\"b\\n\", \"id\": 1}\n"
                       "\n"
                       "  {\"text\": \"\"}  \r\n"
                       "{\"meta\": {\"x\": [1, 2]}, \"text\": \"caf\\u00e9 \\ud83d\\ude00\"}\r\n"
                       "{\"text\": \"raw \xff\xfe bytes\"}";
    const char *docs[3] = { "a\"b\n", "caf\xc3\xa9 \xf0\x9f\x98\x80", "raw \xff\xfe bytes" };
    const char *paths[1] = { write_text("good.JSONL", text) };
    const uint32_t n = 24;
    tmm_data *d = make_text(paths, 1, TMM_TEXT_DOCUMENTS, 0.0, n, 1);
    const tmm_data_info *in = tmm_data_get_info(d);
    cr_assert_eq(in->train_docs, 3);
    cr_assert_eq(in->skipped_docs, 1);
    rows r = get(d, TMM_SPLIT_TRAIN, 0, 3, n);
    int seen[3] = { 0 };
    for (int b = 0; b < 3; b++) {
        int k = which_doc(r.tok + b * n, n, docs, 3);
        cr_assert_geq(k, 0, "row %d", b);
        seen[k]++;
        check_doc_row(r.tok + b * n, r.tgt + b * n, n, docs[k]);
    }
    cr_assert(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    drop(r);
    tmm_data_destroy(d);

    /* window mode: the JSONL documents joined by EOT */
    d = make_text(paths, 1, TMM_TEXT_WINDOWS, 0.0, 8, 1);
    cr_assert_eq(tmm_data_get_info(d)->train_tokens, strlen(docs[0]) + strlen(docs[1]) + strlen(docs[2]) + 3);
    tmm_data_destroy(d);

    /* the format flag selects JSONL whatever the name */
    const char *txt[1] = { write_text("jsonl-as.txt", "{\"text\": \"one\"}\n{\"text\": \"two\"}\n") };
    tmm_data_config c;
    tmm_data_config_init(&c);
    c.task = TMM_DATA_TEXT;
    c.text_paths = txt;
    c.text_path_count = 1;
    c.text_mode = TMM_TEXT_DOCUMENTS;
    c.text_format = TMM_TEXT_JSONL;
    c.val_fraction = 0;
    c.n = 4;
    H_OK(tmm_data_create(&c, &d));
    cr_assert_eq(tmm_data_get_info(d)->train_docs, 2);
    tmm_data_destroy(d);
    c.text_format = TMM_TEXT_PLAIN; /* now one paragraph of two lines */
    H_OK(tmm_data_create(&c, &d));
    cr_assert_eq(tmm_data_get_info(d)->train_docs, 1);
    tmm_data_destroy(d);

    /* bad lines name the file and the line */
    struct {
        const char *text, *msg;
    } bad[] = {
        { "{\"text\": \"ok\"}\n\n{\"id\": 1}\n", ":3: no \"text\" field" },
        { "{\"text\": \"ok\"}\nnot json\n", ":2: invalid JSON" },
        { "{\"text\": 5}\n", ":1: the \"text\" field is not a string" },
        { "[\"text\"]\n", ":1: not a JSON object" },
        { "{\"text\": \"a\"} {\"text\": \"b\"}\n", ":1: text after the JSON value" },
        { "{\"text\": \"unterminated}\n{\"text\": \"b\"}\n", ":1: invalid JSON" },
        { "\n\n{\"text\": \"\"}\n", "no documents" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p[1] = { write_text("bad.jsonl", bad[i].text) };
        tmm_data *x = NULL;
        tmm_status st = try_text(p, 1, TMM_TEXT_DOCUMENTS, 0.0, 8, 1, &x);
        cr_assert_neq(st, TMM_OK, "case %zu accepted", i);
        cr_assert_null(x);
        char want[300];
        snprintf(want, sizeof want, "%s", bad[i].msg);
        cr_assert(strstr(tmm_last_error(), want), "case %zu: %s", i, tmm_last_error());
        cr_assert(strstr(tmm_last_error(), "bad.jsonl"), "case %zu: %s", i, tmm_last_error());
        unlink(p[0]);
    }
    unlink(paths[0]), unlink(txt[0]);
}

/* The document a row holds: its tokens up to the first EOT. */
static void row_doc(const uint32_t *tok, uint32_t n, char *out)
{
    uint32_t t = 0;
    for (; t < n && tok[t] != TMM_TEXT_EOT; t++)
        out[t] = (char)tok[t];
    out[t] = 0;
}

Test(data, document_split)
{
    /* 400 distinct documents, each twice; the split is by content */
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < 400; i++)
            len += (size_t)snprintf(text + len, cap - len, "document %d\nline two of %d\n\n", i, i);
    const char *paths[1] = { write_text("split.txt", text) };
    const uint32_t n = 40;
    tmm_data *d = make_text(paths, 1, TMM_TEXT_DOCUMENTS, 0.1, n, 1);
    const tmm_data_info *in = tmm_data_get_info(d);
    cr_assert_eq(in->train_docs + in->val_docs, 800);
    cr_assert_eq(in->val_docs % 2, 0, "duplicates go to the same side");
    cr_assert(in->val_docs >= 2 * 20 && in->val_docs <= 2 * 70, "%llu validation documents",
              (unsigned long long)in->val_docs);
    cr_assert_eq(tmm_data_val_rows(d), in->val_docs);
    uint32_t V = (uint32_t)in->val_docs, D = (uint32_t)in->train_docs;
    rows v = get(d, TMM_SPLIT_VAL, 0, V, n), t = get(d, TMM_SPLIT_TRAIN, 0, D, n);
    char **vd = calloc(V, sizeof *vd);
    for (uint32_t i = 0; i < V; i++) {
        vd[i] = malloc(n + 1);
        row_doc(v.tok + i * n, n, vd[i]);
    }
    char buf[64];
    for (uint32_t i = 0; i < D; i++) {
        row_doc(t.tok + i * n, n, buf);
        for (uint32_t k = 0; k < V; k++)
            cr_assert_str_neq(buf, vd[k], "training document also in validation");
    }
    /* validation rows are in corpus order and wrap around */
    rows v2 = get(d, TMM_SPLIT_VAL, 1, V, n);
    cr_assert(same_rows(v, v2, (size_t)V * n));
    /* the same split for another seed, another training order */
    tmm_data *d2 = make_text(paths, 1, TMM_TEXT_DOCUMENTS, 0.1, n, 2);
    rows v3 = get(d2, TMM_SPLIT_VAL, 0, V, n), t3 = get(d2, TMM_SPLIT_TRAIN, 0, D, n);
    cr_assert_eq(tmm_data_get_info(d2)->val_docs, V);
    cr_assert(same_rows(v, v3, (size_t)V * n));
    cr_assert(!same_rows(t, t3, (size_t)D * n));
    for (uint32_t i = 0; i < V; i++)
        free(vd[i]);
    free(vd);
    drop(v), drop(t), drop(v2), drop(v3), drop(t3);
    tmm_data_destroy(d), tmm_data_destroy(d2);
    free(text);
    unlink(paths[0]);

    /* small corpora: two documents give one of each; one (or two equal) is an error */
    const char *two[1] = { write_text("two.txt", "first\n\nsecond\n") };
    d = make_text(two, 1, TMM_TEXT_DOCUMENTS, 0.05, 8, 1);
    cr_assert_eq(tmm_data_get_info(d)->train_docs, 1);
    cr_assert_eq(tmm_data_get_info(d)->val_docs, 1);
    tmm_data_destroy(d);
    d = make_text(two, 1, TMM_TEXT_DOCUMENTS, 0.99, 8, 1);
    cr_assert_eq(tmm_data_get_info(d)->train_docs, 1);
    cr_assert_eq(tmm_data_get_info(d)->val_docs, 1);
    tmm_data_destroy(d);
    const char *one[1] = { write_text("one.txt", "only\n") };
    d = NULL;
    cr_assert_eq(try_text(one, 1, TMM_TEXT_DOCUMENTS, 0.05, 8, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "two"), "%s", tmm_last_error());
    const char *same[1] = { write_text("same.txt", "x\n\nx\n") };
    cr_assert_eq(try_text(same, 1, TMM_TEXT_DOCUMENTS, 0.05, 8, 1, &d), TMM_ERR_INVALID_ARGUMENT);
    H_OK(try_text(one, 1, TMM_TEXT_DOCUMENTS, 0.0, 8, 1, &d));
    uint32_t tok[8];
    cr_assert_eq(tmm_data_batch(d, TMM_SPLIT_VAL, 0, 1, 8, tok, NULL), TMM_ERR_INVALID_ARGUMENT);
    tmm_data_destroy(d);
    /* multiple files: documents of both */
    const char *both[2] = { two[0], one[0] };
    d = make_text(both, 2, TMM_TEXT_DOCUMENTS, 0.0, 8, 1);
    cr_assert_eq(tmm_data_get_info(d)->train_docs, 3);
    tmm_data_destroy(d);
    unlink(two[0]), unlink(one[0]), unlink(same[0]);
}

/* ---- entropy ---------------------------------------------------------------- */

static double entropy_counts(const double *c, int count)
{
    double total = 0, h = 0;
    for (int i = 0; i < count; i++)
        total += c[i];
    for (int i = 0; i < count; i++)
        if (c[i] > 0)
            h -= c[i] / total * log(c[i] / total);
    return h;
}

Test(data, unigram_entropy)
{
    /* windows: "aab" + EOT -> a 2, b 1, EOT 1 */
    const char *w[1] = { write_text("ent.txt", "aab") };
    tmm_data *d = make_text(w, 1, TMM_TEXT_WINDOWS, 0.0, 2, 1);
    double want = -(0.5 * log(0.5) + 2 * 0.25 * log(0.25));
    cr_assert_float_eq(tmm_data_unigram_entropy(d), want, 1e-12);
    tmm_data_destroy(d);
    /* only the training split counts: "aaaaaaaaaabbbbbbbbbb" + EOT, 21 tokens, n = 4, last 5 are validation */
    const char *w2[1] = { write_text("ent2.txt", "aaaaaaaaaabbbbbbbbbb") };
    d = make_text(w2, 1, TMM_TEXT_WINDOWS, 0.2, 4, 1); /* V = ceil(4.2) = 5, training: 10 a, 6 b */
    cr_assert_eq(tmm_data_get_info(d)->train_tokens, 16);
    double c2[2] = { 10, 6 };
    cr_assert_float_eq(tmm_data_unigram_entropy(d), entropy_counts(c2, 2), 1e-12);
    tmm_data_destroy(d);

    /* documents: the scored targets. n = 2: "ab" -> b, EOT; "abcd" -> b, c (truncated) */
    const char *p[1] = { write_text("ent-docs.txt", "ab\n\nabcd\n") };
    d = make_text(p, 1, TMM_TEXT_DOCUMENTS, 0.0, 2, 1);
    cr_assert_float_eq(tmm_data_unigram_entropy(d), want, 1e-12);
    tmm_data_destroy(d);

    /* and it is the entropy of the targets that one epoch actually scores */
    char *text = malloc(1 << 15);
    size_t len = 0;
    char *lt = letters(3000, 9);
    for (int i = 0; i < 100; i++) {
        int l = 1 + (i * 37) % 29;
        memcpy(text + len, lt + i * 30, (size_t)l);
        len += (size_t)l;
        text[len++] = '\n';
        text[len++] = '\n';
    }
    text[len] = 0;
    const char *q[1] = { write_text("ent-epoch.txt", text) };
    const uint32_t n = 16;
    d = make_text(q, 1, TMM_TEXT_DOCUMENTS, 0.1, n, 4);
    uint32_t D = (uint32_t)tmm_data_get_info(d)->train_docs;
    rows r = get(d, TMM_SPLIT_TRAIN, 0, D, n);
    double counts[TMM_TEXT_VOCAB] = { 0 };
    for (size_t i = 0; i < (size_t)D * n; i++)
        if (r.tgt[i] >= 0)
            counts[r.tgt[i]]++;
    cr_assert_float_eq(tmm_data_unigram_entropy(d), entropy_counts(counts, TMM_TEXT_VOCAB), 1e-12);
    drop(r);
    tmm_data_destroy(d);
    free(text), free(lt);
    unlink(w[0]), unlink(w2[0]), unlink(p[0]), unlink(q[0]);
}
