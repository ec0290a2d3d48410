/* Token shards (src/train/shards.h, manifest.h) and training data read from
 * them (data.h): round trips at both token widths, every check of the reader,
 * and window and document rows against hand-computed ones. CPU only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "files.h"
#include "model/checkpoint.h"
#include "model/rng.h"
#include "text/tokenizer.h"
#include "train/data.h"
#include "train/manifest.h"
#include "train/shards.h"

#define H_OK(call)                                                                              \
    do {                                                                                        \
        tmm_status h_s_ = (call);                                                               \
        cr_assert_eq(h_s_, TMM_OK, "%s: %s", #call, tmm_last_error());                          \
    } while (0)
#define IGN TMM_TARGET_IGNORE
#define EOT 256u

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/tmm-shards-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    H_OK(tmm_make_dirs(dir));
}

static void remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Writes DIR with the bytes tokenizer: each split's documents (C strings) in
 * one shard, and the manifest. */
static void prepare_bytes(const char *const *train, int n_train, const char *const *val, int n_val)
{
    tmm_tokenizer *tok;
    H_OK(tmm_tokenizer_bytes(&tok));
    char path[300];
    snprintf(path, sizeof path, "%s/%s", dir, TMM_SHARD_TOKENIZER);
    H_OK(tmm_tokenizer_save(tok, path));
    tmm_manifest m = { .fingerprint = tmm_tokenizer_fingerprint(tok), .vocab = 257, .eot = EOT,
                       .val_fraction = 0.5, .documents = (uint64_t)(n_train + n_val) };
    strcpy(m.tokenizer_kind, "bytes");
    tmm_manifest_shard entries[2];
    const char *const *docs[2] = { train, val };
    int counts[2] = { n_train, n_val };
    for (int k = 0; k < 2; k++) {
        if (!counts[k])
            continue;
        tmm_shard_header h = { .fingerprint = m.fingerprint, .vocab = 257, .eot = EOT, .split = (uint32_t)k };
        tmm_shard_writer *w;
        H_OK(tmm_shard_writer_open(dir, &h, &w));
        for (int i = 0; i < counts[k]; i++) {
            uint32_t ids[64];
            size_t len = strlen(docs[k][i]);
            for (size_t j = 0; j < len; j++)
                ids[j] = (unsigned char)docs[k][i][j];
            H_OK(tmm_shard_writer_document(w, ids, len));
        }
        H_OK(tmm_shard_writer_close(w, &h));
        tmm_manifest_shard *e = &entries[m.count++];
        tmm_shard_name((tmm_shard_split)k, 0, e->file, sizeof e->file);
        e->split = (uint32_t)k;
        e->tokens = h.tokens;
        e->documents = h.documents;
        e->checksum = h.checksum;
    }
    m.shards = entries;
    H_OK(tmm_manifest_write(dir, &m));
    tmm_tokenizer_free(tok);
}

static const char *const train_docs[] = { "abc", "de" };
static const char *const val_docs[] = { "xyzw" };

static char *shard_path(const char *name)
{
    static char p[300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void patch(const char *name, long offset, const void *bytes, size_t n)
{
    FILE *f = fopen(shard_path(name), "r+b");
    cr_assert(f);
    fseek(f, offset, SEEK_SET);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static tmm_status open_dir(tmm_shard_set **set)
{
    const char *paths[] = { dir };
    return tmm_shards_open(paths, 1, true, set);
}

Test(shards, round_trip_u16)
{
    make_dir();
    prepare_bytes(train_docs, 2, val_docs, 1);
    struct stat st;
    cr_assert_eq(stat(shard_path("train_000000.bin"), &st), 0);
    cr_assert_eq(st.st_size, 1024 + 7 * 2, "abc EOT de EOT: 7 uint16 tokens after the header");
    tmm_shard_set *set;
    H_OK(open_dir(&set));
    cr_assert_eq(tmm_shards_vocab(set), 257);
    cr_assert_eq(tmm_shards_eot(set), EOT);
    cr_assert_eq(tmm_shards_tokens(set, TMM_SHARD_TRAIN), 7);
    cr_assert_eq(tmm_shards_tokens(set, TMM_SHARD_VAL), 5);
    cr_assert_eq(tmm_shards_documents(set, TMM_SHARD_TRAIN), 2);
    uint32_t got[7];
    tmm_shards_read(set, TMM_SHARD_TRAIN, 0, 7, got);
    const uint32_t want[7] = { 'a', 'b', 'c', EOT, 'd', 'e', EOT };
    cr_assert_arr_eq(got, want, sizeof want);
    uint64_t start, len;
    tmm_shards_document(set, TMM_SHARD_TRAIN, 1, &start, &len);
    cr_assert(start == 4 && len == 2, "document 1 is \"de\" at 4, got %llu+%llu", (unsigned long long)start,
              (unsigned long long)len);
    cr_assert_eq(tmm_shards_train_counts(set)['a'], 1);
    cr_assert_eq(tmm_shards_train_counts(set)[EOT], 2);
    tmm_shards_close(set);
    /* an llm.c-compatible header: magic, version 1, count as the first three int32 */
    FILE *f = fopen(shard_path("train_000000.bin"), "rb");
    int32_t head[3];
    cr_assert_eq(fread(head, 4, 3, f), 3);
    fclose(f);
    cr_assert(head[0] == 20240520 && head[1] == 1 && head[2] == 7);
    remove_dir();
}

Test(shards, round_trip_u32_header)
{
    make_dir();
    tmm_shard_header h = { .fingerprint = 0x0123456789abcdefull, .vocab = 70000, .eot = 69999, .split = 1,
                           .index = 3 };
    tmm_shard_writer *w;
    H_OK(tmm_shard_writer_open(dir, &h, &w));
    const uint32_t ids[] = { 0, 65536, 69998 };
    H_OK(tmm_shard_writer_document(w, ids, 3));
    cr_assert_eq(tmm_shard_writer_document(w, (const uint32_t[]){ 70000 }, 1), TMM_ERR_INVALID_ARGUMENT,
                 "a token past the vocabulary is refused");
    H_OK(tmm_shard_writer_close(w, &h));
    void *data;
    size_t size;
    H_OK(tmm_read_file(shard_path("val_000003.bin"), "shard", 1 << 20, &data, &size));
    cr_assert_eq(size, 1024 + 4 * 4, "three tokens and EOT, uint32");
    tmm_shard_header back;
    H_OK(tmm_shard_header_decode(data, size, "val_000003.bin", &back));
    cr_assert(back.version == 2 && back.tokens == 4 && back.fingerprint == h.fingerprint && back.vocab == 70000 &&
              back.eot == 69999 && back.documents == 1 && back.split == 1 && back.index == 3);
    const uint8_t *t = (const uint8_t *)data + 1024;
    cr_assert_eq(t[4] | t[5] << 8 | t[6] << 16, 65536);
    cr_assert_eq(back.checksum, tmm_fnv1a64(t, 16));
    free(data);
    remove_dir();
}

/* Opening fails with a message that contains `want`. */
static void expect_open_fails(const char *want)
{
    tmm_shard_set *set = NULL;
    cr_assert_neq(open_dir(&set), TMM_OK, "expected a failure mentioning '%s'", want);
    cr_assert_null(set);
    cr_assert(strstr(tmm_last_error(), want), "'%s' not in: %s", want, tmm_last_error());
}

Test(shards, corrupt_and_truncated)
{
    make_dir();
    prepare_bytes(train_docs, 2, val_docs, 1);
    patch("train_000000.bin", 1024 + 2, "z", 1); /* 'b' -> 'z' */
    expect_open_fails("corrupt");

    prepare_bytes(train_docs, 2, val_docs, 1);
    cr_assert_eq(truncate(shard_path("train_000000.bin"), 1024 + 5), 0);
    expect_open_fails("truncated");
    cr_assert_eq(truncate(shard_path("train_000000.bin"), 100), 0);
    expect_open_fails("shorter than its 1024-byte header");

    prepare_bytes(train_docs, 2, val_docs, 1);
    patch("train_000000.bin", 0, "\x01\x02\x03\x04", 4);
    expect_open_fails("not a token shard");

    prepare_bytes(train_docs, 2, val_docs, 1);
    patch("train_000000.bin", 4, "\x07", 1);
    expect_open_fails("version 7");

    prepare_bytes(train_docs, 2, val_docs, 1);
    patch("train_000000.bin", 4 * 4, "\xff", 1); /* the fingerprint's low byte */
    expect_open_fails("another tokenizer");

    prepare_bytes(train_docs, 2, val_docs, 1);
    patch("train_000000.bin", 4 * 200, "\x01", 1);
    expect_open_fails("reserved header word 200");

    prepare_bytes(train_docs, 2, val_docs, 1);
    remove(shard_path(TMM_SHARD_MANIFEST));
    cr_assert(!tmm_shards_detect(dir), "a directory without a manifest is not shards");
    expect_open_fails("no manifest.json");
    remove_dir();
}

Test(shards, manifest_checks)
{
    make_dir();
    prepare_bytes(train_docs, 2, val_docs, 1);
    void *data;
    size_t size;
    H_OK(tmm_read_file(shard_path(TMM_SHARD_MANIFEST), "manifest", 1 << 20, &data, &size));
    char *bad = strstr((char *)data, "train_000000.bin");
    cr_assert(bad);
    memcpy(bad, "../../etc/passw", 15);
    H_OK(tmm_write_file_atomic(shard_path(TMM_SHARD_MANIFEST), data, size));
    expect_open_fails("expected \"train_000000.bin\"");
    free(data);
    remove_dir();
}

/* ---- training data from shards ------------------------------------------------- */

static tmm_data *shard_data(tmm_text_mode mode, uint32_t n, double val_fraction)
{
    tmm_data_config c;
    tmm_data_config_init(&c);
    const char *paths[] = { dir };
    c.task = TMM_DATA_TEXT;
    c.seed = 5;
    c.n = n;
    c.text_paths = paths;
    c.text_path_count = 1;
    c.text_mode = mode;
    c.val_fraction = val_fraction;
    tmm_data *d;
    H_OK(tmm_data_create(&c, &d));
    return d;
}

Test(shards, windows_rows)
{
    make_dir();
    prepare_bytes(train_docs, 2, val_docs, 1);
    tmm_data *d = shard_data(TMM_TEXT_WINDOWS, 2, 0.05);
    cr_assert_eq(tmm_data_vocab(d), 257);
    cr_assert_eq(tmm_data_get_info(d)->train_tokens, 7);
    cr_assert_eq(tmm_data_val_rows(d), 2, "5 validation tokens: windows at 0 and 2");
    const uint32_t stream[7] = { 'a', 'b', 'c', EOT, 'd', 'e', EOT };
    uint32_t tok[6];
    int32_t tgt[6];
    H_OK(tmm_data_batch(d, TMM_SPLIT_TRAIN, 1, 3, 2, tok, tgt));
    uint64_t key = tmm_rng_key(5, "shards/train/windows");
    for (uint32_t r = 0; r < 3; r++) {
        uint64_t s = tmm_rng_bits(key, 3 + r) % (7 - 2);
        for (uint32_t t = 0; t < 2; t++) {
            cr_assert_eq(tok[r * 2 + t], stream[s + t]);
            cr_assert_eq(tgt[r * 2 + t], (int32_t)stream[s + t + 1]);
        }
    }
    /* validation: consecutive windows x y | z w, then again */
    H_OK(tmm_data_batch(d, TMM_SPLIT_VAL, 0, 3, 2, tok, tgt));
    const uint32_t vt[6] = { 'x', 'y', 'z', 'w', 'x', 'y' };
    const int32_t vg[6] = { 'y', 'z', 'w', EOT, 'y', 'z' };
    cr_assert_arr_eq(tok, vt, sizeof vt);
    cr_assert_arr_eq(tgt, vg, sizeof vg);
    tmm_data_destroy(d);
    remove_dir();
}

Test(shards, document_rows)
{
    make_dir();
    prepare_bytes(train_docs, 2, val_docs, 1);
    tmm_data *d = shard_data(TMM_TEXT_DOCUMENTS, 3, 0.05);
    /* one epoch of two rows holds both documents once */
    uint32_t tok[6];
    int32_t tgt[6];
    H_OK(tmm_data_batch(d, TMM_SPLIT_TRAIN, 0, 2, 3, tok, tgt));
    const uint32_t abc_t[3] = { 'a', 'b', 'c' }, de_t[3] = { 'd', 'e', EOT };
    const int32_t abc_g[3] = { 'b', 'c', EOT }, de_g[3] = { 'e', EOT, IGN };
    int first_abc = tok[0] == 'a';
    cr_assert_arr_eq(tok + (first_abc ? 0 : 3), abc_t, sizeof abc_t);
    cr_assert_arr_eq(tgt + (first_abc ? 0 : 3), abc_g, sizeof abc_g);
    cr_assert_arr_eq(tok + (first_abc ? 3 : 0), de_t, sizeof de_t);
    cr_assert_arr_eq(tgt + (first_abc ? 3 : 0), de_g, sizeof de_g);
    /* "xyzw" truncated to n + 1 = 4 tokens: all 3 targets scored, no EOT */
    H_OK(tmm_data_batch(d, TMM_SPLIT_VAL, 0, 1, 3, tok, tgt));
    const uint32_t vt[3] = { 'x', 'y', 'z' };
    const int32_t vg[3] = { 'y', 'z', 'w' };
    cr_assert_arr_eq(tok, vt, sizeof vt);
    cr_assert_arr_eq(tgt, vg, sizeof vg);
    /* the same batch again: a pure function of its index */
    uint32_t again[6];
    H_OK(tmm_data_batch(d, TMM_SPLIT_TRAIN, 0, 2, 3, again, NULL));
    H_OK(tmm_data_batch(d, TMM_SPLIT_TRAIN, 0, 2, 3, tok, NULL));
    cr_assert_arr_eq(again, tok, sizeof tok);
    tmm_data_destroy(d);
    remove_dir();
}

Test(shards, no_validation_split)
{
    make_dir();
    prepare_bytes(train_docs, 2, NULL, 0);
    tmm_data_config c;
    tmm_data_config_init(&c);
    const char *paths[] = { dir };
    c.task = TMM_DATA_TEXT;
    c.n = 2;
    c.text_paths = paths;
    c.text_path_count = 1;
    tmm_data *d = NULL;
    cr_assert_neq(tmm_data_create(&c, &d), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "no validation split"), "%s", tmm_last_error());
    c.val_fraction = 0;
    H_OK(tmm_data_create(&c, &d));
    tmm_data_destroy(d);
    remove_dir();
}

/* ---- the run's tokenizer in generation (src/gen/tokenizer.c) ---------------------- */

#include "gen/generator.h"

Test(shards, run_tokenizer_for_generation)
{
    make_dir();
    char run[300], ck[340], path[400];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(ck, sizeof ck, "%s/checkpoints/step-000001", run);
    H_OK(tmm_make_dirs(ck));
    snprintf(path, sizeof path, "%s/model.safetensors", ck);
    H_OK(tmm_write_file_atomic(path, "", 0)); /* the layout is what locates the run */
    tmm_tokenizer *bytes;
    H_OK(tmm_tokenizer_bytes(&bytes));
    snprintf(path, sizeof path, "%s/tokenizer.json", run);
    H_OK(tmm_tokenizer_save(bytes, path));
    char fp[20];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)tmm_tokenizer_fingerprint(bytes));
    tmm_tokenizer_free(bytes);

    tmm_model_tokenizer kind;
    H_OK(tmm_model_tokenizer_pick("tokenizer.json", 257, &kind));
    cr_assert_eq(kind, TMM_TOKENIZER_RUN);
    tmm_tokenizer *tok = NULL;
    cr_assert_neq(tmm_checkpoint_tokenizer(ck, "0000000000000000", 257, &tok), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "not the tokenizer the model was trained with"), "%s", tmm_last_error());
    cr_assert_neq(tmm_checkpoint_tokenizer(ck, fp, 200, &tok), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "more than the model's vocabulary of 200"), "%s", tmm_last_error());
    H_OK(tmm_checkpoint_tokenizer(ck, fp, 257, &tok));

    uint32_t *ids, count;
    H_OK(tmm_tokenizer_encode_prompt(tok, "h\xc3\xa9", 3, &ids, &count));
    cr_assert(count == 3 && ids[0] == 'h' && ids[1] == 0xc3 && ids[2] == 0xa9);
    char buf[8];
    cr_assert_eq(tmm_tokenizer_decode_token(tok, 0xc3, buf, sizeof buf), 1);
    cr_assert_eq((unsigned char)buf[0], 0xc3);
    cr_assert_eq(tmm_tokenizer_decode_token(tok, EOT, buf, sizeof buf), 0, "end-of-text prints nothing");
    free(ids);
    H_OK(tmm_tokenizer_encode_prompt(tok, "", 0, &ids, &count));
    cr_assert(ids && count == 0, "an empty prompt has room for the end-of-text the caller adds");
    free(ids);
    cr_assert_neq(tmm_model_tokenizer_encode(TMM_TOKENIZER_RUN, 257, "x", 1, &ids, &count), TMM_OK,
                  "without the run's tokenizer, text is refused");
    tmm_tokenizer_free(tok);
    remove_dir();
}
