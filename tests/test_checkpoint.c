/* Checkpoints: bit-exact round trips of the model and the train state, keep
 * the last K, the "latest" pointer, refusal of corrupt, truncated, missing
 * and mismatched files, interrupted saves, and the PyTorch reference's reader. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "harness.h"
#include "model/checkpoint.h"

/* The arenas below hold NaN and infinities on purpose (bit-exact copies), so
 * loads accept them; refuses_nonfinite checks the default. */
#define ANY TMM_CHECKPOINT_ALLOW_NONFINITE

/* ---- helpers ---------------------------------------------------------------- */

static void make_run_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/tmm-ckpt-XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp failed");
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_rf(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static tmm_model_config small_config(uint32_t heads, uint32_t kernel, bool expanded, bool frozen)
{
    tmm_model_config c = { .vocab = 19, .d_model = 8, .n_ctx = 6, .n_layers = 2, .heads = heads,
                           .expansion = 2, .kernel = kernel, .expanded = expanded, .frozen = frozen,
                           .seed = 0x123456789abcdef0ull };
    return c;
}

static void put_bits(float *x, uint32_t bits) { memcpy(x, &bits, sizeof bits); }

/* An arena with random values inside the tensors, zero padding, and a few
 * values that only a bit-exact copy keeps (NaN payload, -0, denormal, inf). */
static float *random_arena(const tmm_param_table *t, uint64_t seed)
{
    float *a = calloc(t->arena_floats, sizeof *a);
    cr_assert_not_null(a);
    for (uint32_t i = 0; i < t->count; i++)
        h_rand(a + t->params[i].offset, t->params[i].numel, seed * 1000 + i, -2.0f, 2.0f);
    float *p = a + t->params[0].offset;
    put_bits(&p[0], 0x7fc12345u);
    put_bits(&p[1], 0x80000000u);
    put_bits(&p[2], 0x00000007u);
    p[3] = INFINITY;
    return a;
}

typedef struct fixture {
    char run[64];
    tmm_param_table table;
    float *params, *m, *v;
    tmm_train_state state;
} fixture;

static const tmm_st_meta extra[] = { { "tokenizer", "bytes" }, { "task", "copy" }, { "note", "a \"quoted\" \\ value" } };
static const tmm_st_meta opt_config[] = { { "lr", "0x1.0624dd2f1a9fcp-11" }, { "betas", "0.9,0.999" },
                                          { "schedule", "warmup-linear" } };

static void fixture_init(fixture *f, const tmm_model_config *c, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    make_run_dir(f->run, sizeof f->run);
    H_OK(tmm_param_table_build(c, &f->table));
    f->params = random_arena(&f->table, seed);
    f->m = random_arena(&f->table, seed + 1);
    f->v = random_arena(&f->table, seed + 2);
    f->state.m = f->m;
    f->state.v = f->v;
    f->state.n_words = 4;
    f->state.words[0] = 0;
    f->state.words[1] = UINT64_MAX;
    f->state.words[2] = 0x9e3779b97f4a7c15ull;
    f->state.words[3] = seed;
    f->state.blob = "{\"cursor\": 17, \"text\": \"line\\nbreak\"}";
    f->state.config = opt_config;
    f->state.n_config = 3;
}

static void fixture_fini(fixture *f)
{
    rm_rf(f->run);
    free(f->params);
    free(f->m);
    free(f->v);
    tmm_param_table_free(&f->table);
}

static void save(fixture *f, uint64_t step, uint32_t keep)
{
    f->state.step = step;
    H_OK(tmm_checkpoint_save(f->run, step, &f->table, f->params, &f->state, extra, 3, keep));
}

static void path_in(char *buf, size_t size, const char *run, uint64_t step, const char *file)
{
    snprintf(buf, size, "%s/checkpoints/step-%06llu/%s", run, (unsigned long long)step, file);
}

static void read_text(const char *path, char *buf, size_t size)
{
    void *data;
    size_t n;
    H_OK(tmm_read_file(path, "test file", UINT64_MAX, &data, &n));
    cr_assert_lt(n, size);
    memcpy(buf, data, n);
    buf[n] = '\0';
    free(data);
}

/* Replaces the first occurrence of from (same length as to) in the file. */
static void patch_file(const char *path, const char *from, const char *to)
{
    void *data;
    size_t n;
    H_OK(tmm_read_file(path, "test file", UINT64_MAX, &data, &n));
    char *p = NULL;
    for (size_t i = 0; i + strlen(from) <= n && !p; i++)
        if (memcmp((char *)data + i, from, strlen(from)) == 0)
            p = (char *)data + i;
    cr_assert_not_null(p, "'%s' not in %s", from, path);
    memcpy(p, to, strlen(to));
    H_OK(tmm_write_file_atomic(path, data, n));
    free(data);
}

static void flip_byte(const char *path, long from_end)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    fseek(f, -from_end, SEEK_END);
    int c = fgetc(f);
    fseek(f, -from_end, SEEK_END);
    fputc(c ^ 0x10, f);
    fclose(f);
}

static void truncate_file(const char *path, long by)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(truncate(path, st.st_size - by), 0);
}

static void expect_refused(const char *path, bool with_state, tmm_status status, const char *w1, const char *w2)
{
    tmm_checkpoint c;
    memset(&c, 0xab, sizeof c);
    tmm_status s = tmm_checkpoint_load(path, NULL, (with_state ? TMM_CHECKPOINT_STATE : 0) | ANY, &c);
    cr_assert_eq(s, status, "loading %s: %s (%s)", path, tmm_status_name(s), tmm_last_error());
    cr_assert_null(c.params);
    cr_assert_null(c.state.m);
    cr_assert(strstr(tmm_last_error(), w1), "message '%s' lacks '%s'", tmm_last_error(), w1);
    cr_assert(!w2 || strstr(tmm_last_error(), w2), "message '%s' lacks '%s'", tmm_last_error(), w2);
    tmm_checkpoint_free(&c);
}

static bool same_config(const tmm_model_config *a, const tmm_model_config *b)
{
    return tmm_checkpoint_config_diff(a, b) == NULL;
}

/* ---- round trips ------------------------------------------------------------ */

static void round_trip(const tmm_model_config *config)
{
    fixture f;
    fixture_init(&f, config, 5);
    save(&f, 7, TMM_CHECKPOINT_KEEP_DEFAULT);

    tmm_checkpoint c;
    H_OK(tmm_checkpoint_load(f.run, config, TMM_CHECKPOINT_STATE | ANY, &c));
    cr_assert(same_config(&c.table.config, config));
    cr_assert_eq(c.step, 7);
    cr_assert_eq(c.table.arena_floats, f.table.arena_floats);
    cr_assert(memcmp(c.params, f.params, f.table.arena_floats * sizeof(float)) == 0, "parameters differ");
    cr_assert(c.has_state);
    cr_assert_eq(c.state.step, 7);
    cr_assert(memcmp(c.state.m, f.m, f.table.arena_floats * sizeof(float)) == 0, "m differs");
    cr_assert(memcmp(c.state.v, f.v, f.table.arena_floats * sizeof(float)) == 0, "v differs");
    cr_assert_eq(c.state.n_words, 4);
    cr_assert(memcmp(c.state.words, f.state.words, 4 * sizeof(uint64_t)) == 0);
    cr_assert_str_eq(c.state.blob, f.state.blob);
    cr_assert_eq(c.state.n_config, 3);
    for (uint32_t i = 0; i < 3; i++) {
        cr_assert_str_eq(c.state.config[i].key, opt_config[i].key);
        cr_assert_str_eq(c.state.config[i].value, opt_config[i].value);
    }
    cr_assert_eq(c.n_meta, 3);
    cr_assert_str_eq(tmm_checkpoint_meta(&c, "tokenizer"), "bytes");
    cr_assert_str_eq(tmm_checkpoint_meta(&c, "task"), "copy");
    cr_assert_str_eq(tmm_checkpoint_meta(&c, "note"), extra[2].value);
    cr_assert_null(tmm_checkpoint_meta(&c, "vocab"));
    cr_assert(strstr(c.dir, "/checkpoints/step-000007"), "dir %s", c.dir);
    tmm_checkpoint_free(&c);
    cr_assert_null(c.params);

    /* the model alone, from the step directory and from the file */
    char step_dir[256], model[256];
    H_OK(tmm_checkpoint_step_dir(f.run, 7, step_dir, sizeof step_dir));
    path_in(model, sizeof model, f.run, 7, "model.safetensors");
    H_OK(tmm_checkpoint_load(step_dir, NULL, ANY, &c));
    cr_assert(!c.has_state && c.state.m == NULL);
    cr_assert(memcmp(c.params, f.params, f.table.arena_floats * sizeof(float)) == 0);
    tmm_checkpoint_free(&c);
    H_OK(tmm_checkpoint_load(model, config, ANY, &c));
    cr_assert(memcmp(c.params, f.params, f.table.arena_floats * sizeof(float)) == 0);
    cr_assert_str_eq(c.dir, step_dir);
    tmm_checkpoint_free(&c);
    fixture_fini(&f);
}

Test(checkpoint, round_trip_flat)
{
    tmm_model_config c = small_config(0, 1, false, false);
    round_trip(&c);
}

Test(checkpoint, round_trip_heads_kernel)
{
    tmm_model_config c = small_config(2, 3, false, false);
    round_trip(&c);
}

Test(checkpoint, round_trip_expanded)
{
    tmm_model_config c = small_config(0, 1, true, false);
    round_trip(&c);
    c = small_config(4, 1, true, false);
    round_trip(&c);
}

Test(checkpoint, round_trip_frozen)
{
    tmm_model_config c = small_config(2, 1, false, true);
    round_trip(&c);
}

Test(checkpoint, round_trip_torch_init)
{
    tmm_model_config c = small_config(2, 1, false, false), other = c;
    c.init = TMM_INIT_SCHEME_TORCH;
    round_trip(&c);
    cr_assert(!same_config(&c, &other), "init is part of the model config");
}

/* Every row of the architecture table, as the generic path builds it. */
Test(checkpoint, round_trip_every_row)
{
    for (int a = 0; a < TMM_ARCH_COUNT; a++) {
        const tmm_model_config c = h_tiny_row((tmm_arch)a);
        round_trip(&c);
    }
}

Test(checkpoint, model_only_and_export)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 9);
    /* a save without a train state cannot be resumed, but loads for inference */
    H_OK(tmm_checkpoint_save(f.run, 3, &f.table, f.params, NULL, NULL, 0, 3));
    tmm_checkpoint c;
    H_OK(tmm_checkpoint_load(f.run, NULL, ANY, &c));
    cr_assert_eq(c.step, 3);
    cr_assert_eq(c.n_meta, 0);
    tmm_checkpoint_free(&c);
    expect_refused(f.run, true, TMM_ERR_IO, "train_state.safetensors", "no training state");

    char path[128];
    snprintf(path, sizeof path, "%s/export.safetensors", f.run);
    H_OK(tmm_checkpoint_write_model(path, 11, &f.table, f.params, extra, 1));
    H_OK(tmm_checkpoint_load(path, &config, ANY, &c));
    cr_assert_eq(c.step, 11);
    cr_assert(memcmp(c.params, f.params, f.table.arena_floats * sizeof(float)) == 0);
    cr_assert_str_eq(c.dir, f.run);
    tmm_checkpoint_free(&c);

    /* bad arguments */
    const tmm_st_meta reserved[] = { { "vocab", "3" } };
    cr_assert_eq(tmm_checkpoint_save(f.run, 4, &f.table, f.params, NULL, reserved, 1, 3), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "reserved"));
    const tmm_st_meta twice[] = { { "task", "copy" }, { "task", "text" } };
    cr_assert_eq(tmm_checkpoint_save(f.run, 4, &f.table, f.params, NULL, twice, 2, 3), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "twice"));
    f.state.step = 5;
    cr_assert_eq(tmm_checkpoint_save(f.run, 4, &f.table, f.params, &f.state, NULL, 0, 3), TMM_ERR_INVALID_ARGUMENT);
    /* none of the failures moved "latest" */
    H_OK(tmm_checkpoint_load(f.run, NULL, ANY, &c));
    cr_assert_eq(c.step, 3);
    tmm_checkpoint_free(&c);
    fixture_fini(&f);
}

/* ---- keep-last-K and latest -------------------------------------------------- */

static bool step_exists(const char *run, uint64_t step)
{
    char p[256];
    snprintf(p, sizeof p, "%s/checkpoints/step-%06llu", run, (unsigned long long)step);
    struct stat st;
    return stat(p, &st) == 0;
}

static uint64_t latest_step(const char *run, bool with_state)
{
    tmm_checkpoint c;
    H_OK(tmm_checkpoint_load(run, NULL, (with_state ? TMM_CHECKPOINT_STATE : 0) | ANY, &c));
    uint64_t s = c.step;
    tmm_checkpoint_free(&c);
    return s;
}

Test(checkpoint, keep_last_k_and_latest)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 2);
    char latest[256], text[64];
    snprintf(latest, sizeof latest, "%s/checkpoints/latest", f.run);
    for (uint64_t step = 100; step <= 600; step += 100) {
        f.params[0] = (float)step; /* each checkpoint differs */
        save(&f, step, 3);
        read_text(latest, text, sizeof text);
        char want[32];
        snprintf(want, sizeof want, "step-%06llu\n", (unsigned long long)step);
        cr_assert_str_eq(text, want);
        cr_assert_eq(latest_step(f.run, true), step);
    }
    for (uint64_t step = 100; step <= 600; step += 100)
        cr_assert_eq(step_exists(f.run, step), step >= 400, "step %llu", (unsigned long long)step);

    /* steps above 1e6 order by number, not by name */
    save(&f, 1000000, 3);
    cr_assert(step_exists(f.run, 1000000) && step_exists(f.run, 600) && step_exists(f.run, 500));
    cr_assert(!step_exists(f.run, 400));
    cr_assert_eq(latest_step(f.run, false), 1000000);

    /* resumed from an earlier checkpoint: later ones are left alone */
    save(&f, 550, 2);
    cr_assert(step_exists(f.run, 550) && step_exists(f.run, 500));
    cr_assert(step_exists(f.run, 600) && step_exists(f.run, 1000000));
    cr_assert_eq(latest_step(f.run, true), 550);

    /* keep 0 keeps everything; saving an existing step replaces it */
    f.params[0] = 42.0f;
    save(&f, 500, 0);
    cr_assert(step_exists(f.run, 500) && step_exists(f.run, 550));
    tmm_checkpoint c;
    H_OK(tmm_checkpoint_load(f.run, NULL, TMM_CHECKPOINT_STATE | ANY, &c));
    cr_assert_eq(c.step, 500);
    cr_assert_eq(c.params[0], 42.0f);
    tmm_checkpoint_free(&c);
    /* keep 1: only the one just written among those up to it */
    save(&f, 560, 1);
    cr_assert(step_exists(f.run, 560) && !step_exists(f.run, 550) && !step_exists(f.run, 500));
    fixture_fini(&f);
}

/* ---- refusals --------------------------------------------------------------- */

Test(checkpoint, refuses_truncated_model)
{
    tmm_model_config config = small_config(2, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 3);
    save(&f, 10, 3);
    char model[256];
    path_in(model, sizeof model, f.run, 10, "model.safetensors");
    truncate_file(model, 5);
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "truncated");
    cr_assert_eq(truncate(model, 100), 0); /* into the header */
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "truncated");
    cr_assert_eq(truncate(model, 0), 0);
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "not a safetensors file");
    fixture_fini(&f);
}

Test(checkpoint, refuses_flipped_data_byte)
{
    tmm_model_config config = small_config(0, 1, true, false);
    fixture f;
    fixture_init(&f, &config, 4);
    save(&f, 10, 3);
    char model[256], state[256];
    path_in(model, sizeof model, f.run, 10, "model.safetensors");
    path_in(state, sizeof state, f.run, 10, "train_state.safetensors");
    flip_byte(state, 101);
    expect_refused(f.run, true, TMM_ERR_IO, "train_state.safetensors", "data checksum mismatch");
    /* the model alone still loads */
    tmm_checkpoint c;
    H_OK(tmm_checkpoint_load(f.run, &config, ANY, &c));
    tmm_checkpoint_free(&c);
    flip_byte(model, 37);
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "data checksum mismatch");
    fixture_fini(&f);
}

Test(checkpoint, refuses_corrupt_header)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 6);
    save(&f, 10, 3);
    char model[256];
    path_in(model, sizeof model, f.run, 10, "model.safetensors");

    /* broken JSON */
    patch_file(model, "{\"__metadata__\"", "{\"__metadata__'");
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "not valid JSON");

    /* valid JSON, changed value: the metadata checksum catches it */
    save(&f, 10, 3);
    patch_file(model, "\"d_model\":\"8\"", "\"d_model\":\"9\"");
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "header checksum mismatch");

    /* a tensor's shape changed (data_offsets then disagree) */
    save(&f, 10, 3);
    patch_file(model, "\"shape\":[19,8]", "\"shape\":[19,9]");
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "data_offsets");

    /* a tensor renamed: the checksum covers the table (version 6) */
    save(&f, 10, 3);
    patch_file(model, "lm_head.weight", "lm_head.weighx");
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "header checksum mismatch");
    /* (two tensors that trade their bytes: tests/hostile_test.sh, "swaps two tensors") */

    /* not a tmm file */
    float x = 1;
    tmm_st_tensor t = { "x", TMM_ST_F32, 1, { 1 }, &x };
    H_OK(tmm_safetensors_write(model, &t, 1, NULL, 0));
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "not a tmm model");
    fixture_fini(&f);
}

Test(checkpoint, refuses_missing_files)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 7);
    expect_refused(f.run, false, TMM_ERR_IO, f.run, "not a checkpoint");
    char missing[128];
    snprintf(missing, sizeof missing, "%s/nope", f.run);
    expect_refused(missing, false, TMM_ERR_IO, "nope", "No such file");

    save(&f, 10, 3);
    char model[256], state[256], step_dir[256];
    path_in(model, sizeof model, f.run, 10, "model.safetensors");
    path_in(state, sizeof state, f.run, 10, "train_state.safetensors");
    H_OK(tmm_checkpoint_step_dir(f.run, 10, step_dir, sizeof step_dir));
    cr_assert_eq(remove(state), 0);
    expect_refused(f.run, true, TMM_ERR_IO, "train_state.safetensors", "missing");
    cr_assert_eq(remove(model), 0);
    expect_refused(f.run, false, TMM_ERR_IO, "model.safetensors", "No such file");
    expect_refused(step_dir, false, TMM_ERR_IO, "model.safetensors", "missing");

    /* latest naming nothing, or garbage */
    char latest[256];
    snprintf(latest, sizeof latest, "%s/checkpoints/latest", f.run);
    H_OK(tmm_write_file_atomic(latest, "step-000099\n", 12));
    expect_refused(f.run, false, TMM_ERR_IO, "step-000099", "does not exist");
    H_OK(tmm_write_file_atomic(latest, "../../etc\n", 10));
    expect_refused(f.run, false, TMM_ERR_IO, "latest", "does not name a checkpoint");
    fixture_fini(&f);
}

Test(checkpoint, refuses_config_mismatch)
{
    tmm_model_config config = small_config(2, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 8);
    save(&f, 10, 3);
    tmm_checkpoint c;
    tmm_model_config other = config;
    other.d_model = 16;
    cr_assert_eq(tmm_checkpoint_load(f.run, &other, TMM_CHECKPOINT_STATE | ANY, &c), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "d_model is 8, expected 16"), "%s", tmm_last_error());
    cr_assert(strstr(tmm_last_error(), "model.safetensors"), "%s", tmm_last_error());
    other = config;
    other.frozen = true;
    cr_assert_eq(tmm_checkpoint_load(f.run, &other, ANY, &c), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "frozen is 0, expected 1"), "%s", tmm_last_error());
    other = config;
    other.seed = 1;
    cr_assert_eq(tmm_checkpoint_load(f.run, &other, ANY, &c), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "seed"), "%s", tmm_last_error());
    cr_assert_str_eq(tmm_checkpoint_config_diff(&config, &other), "seed");
    cr_assert_null(tmm_checkpoint_config_diff(&config, &config));
    fixture_fini(&f);
}

Test(checkpoint, refuses_state_of_another_model)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture a, b;
    fixture_init(&a, &config, 10);
    fixture_init(&b, &config, 11);
    save(&a, 10, 3);
    save(&b, 10, 3);
    char sa[256], sb[256];
    path_in(sa, sizeof sa, a.run, 10, "train_state.safetensors");
    path_in(sb, sizeof sb, b.run, 10, "train_state.safetensors");
    void *data;
    size_t n;
    H_OK(tmm_read_file(sb, "test file", UINT64_MAX, &data, &n));
    H_OK(tmm_write_file_atomic(sa, data, n));
    free(data);
    expect_refused(a.run, true, TMM_ERR_IO, "train_state.safetensors", "another model file");
    fixture_fini(&a);
    fixture_fini(&b);
}

/* ---- interrupted saves ------------------------------------------------------ */

Test(checkpoint, interrupted_save_leaves_latest_good)
{
    tmm_model_config config = small_config(2, 2, true, false);
    fixture f;
    fixture_init(&f, &config, 12);
    save(&f, 100, 3);
    save(&f, 200, 3);
    /* a save of step 300 died while writing: its temporary directory holds a
     * partial model file and the file's own temporary */
    char tmp[256], p[300];
    snprintf(tmp, sizeof tmp, "%s/checkpoints/.step-000300.tmp", f.run);
    cr_assert_eq(mkdir(tmp, 0755), 0);
    snprintf(p, sizeof p, "%s/model.safetensors.tmp", tmp);
    H_OK(tmm_write_file_atomic(p, "partial", 7));
    snprintf(p, sizeof p, "%s/model.safetensors", tmp);
    H_OK(tmm_write_file_atomic(p, "\x10\0\0\0\0\0\0\0{\"a\":", 13));
    cr_assert_eq(latest_step(f.run, true), 200);

    /* the next save replaces the leftover */
    save(&f, 300, 3);
    struct stat st;
    cr_assert_neq(stat(tmp, &st), 0, "the temporary directory is left over");
    cr_assert_eq(latest_step(f.run, true), 300);

    /* died after the directory was renamed, before "latest" moved: the
     * complete step-000400 is ignored until a save names it */
    char dir300[256], dir400[256];
    H_OK(tmm_checkpoint_step_dir(f.run, 300, dir300, sizeof dir300));
    H_OK(tmm_checkpoint_step_dir(f.run, 400, dir400, sizeof dir400));
    cr_assert_eq(mkdir(dir400, 0755), 0);
    cr_assert_eq(latest_step(f.run, true), 300);
    cr_assert_eq(rmdir(dir400), 0);

    /* died while replacing step 300 by a new save of step 300, between its
     * two renames: the set-aside copy is found */
    char old[256];
    snprintf(old, sizeof old, "%s/checkpoints/.step-000300.old", f.run);
    cr_assert_eq(rename(dir300, old), 0);
    cr_assert_eq(latest_step(f.run, true), 300);
    cr_assert_eq(rename(old, dir300), 0);

    /* "latest" itself lost: the newest step directory is used */
    char latest[256];
    snprintf(latest, sizeof latest, "%s/checkpoints/latest", f.run);
    cr_assert_eq(remove(latest), 0);
    cr_assert_eq(latest_step(f.run, true), 300);
    fixture_fini(&f);
}

/* ---- hostile contents and layouts ------------------------------------------------ */

/* NaN and infinities in weights are refused by default, naming the tensor;
 * TMM_CHECKPOINT_ALLOW_NONFINITE loads them (debugging a diverged run). */
Test(checkpoint, refuses_nonfinite_weights)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 21);
    save(&f, 1, 0);
    tmm_checkpoint c;
    cr_assert_eq(tmm_checkpoint_load(f.run, NULL, 0, &c), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "'embed.weight' holds NaN"), "%s", tmm_last_error());
    cr_assert(strstr(tmm_last_error(), "--allow-nonfinite"), "%s", tmm_last_error());
    H_OK(tmm_checkpoint_load(f.run, NULL, ANY | TMM_CHECKPOINT_STATE, &c));
    tmm_checkpoint_free(&c);
    /* finite weights, non-finite moments: the state is refused too */
    float *p = f.params + f.table.params[0].offset;
    for (int i = 0; i < 4; i++)
        p[i] = 0.5f;
    save(&f, 2, 0);
    H_OK(tmm_checkpoint_load(f.run, NULL, 0, &c));
    tmm_checkpoint_free(&c);
    cr_assert_eq(tmm_checkpoint_load(f.run, NULL, TMM_CHECKPOINT_STATE, &c), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "'m.embed.weight'"), "%s", tmm_last_error());
    fixture_fini(&f);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp, "cannot write %s", path);
    fputs(text, fp);
    fclose(fp);
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Pruning old checkpoints and clearing leftovers never follow a symbolic
 * link: a link named like a checkpoint (to a directory outside the run) is
 * neither counted nor emptied, and what it points to is untouched. */
Test(checkpoint, pruning_never_follows_symlinks)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 22);
    char outside[64], victim[128], link[256], tmp_link[256];
    make_run_dir(outside, sizeof outside);
    snprintf(victim, sizeof victim, "%s/precious.txt", outside);
    write_file(victim, "keep me");
    save(&f, 1, 1);
    snprintf(link, sizeof link, "%s/checkpoints/step-000000", f.run);
    snprintf(tmp_link, sizeof tmp_link, "%s/checkpoints/.step-000002.tmp", f.run);
    cr_assert_eq(symlink(outside, link), 0);
    cr_assert_eq(symlink(outside, tmp_link), 0);
    /* keep 1: step 1 goes, the links stay, the outside file stays */
    f.state.step = 2;
    tmm_status s = tmm_checkpoint_save(f.run, 2, &f.table, f.params, &f.state, extra, 3, 1);
    cr_assert_eq(s, TMM_ERR_IO, "a leftover temporary that is a link must not be written through (%d: %s)", s,
                 tmm_last_error());
    cr_assert_eq(remove(tmp_link), 0);
    save(&f, 2, 1);
    save(&f, 3, 1);
    cr_assert(exists(victim), "pruning deleted a file outside the run directory");
    cr_assert(exists(link), "the link itself was counted as a checkpoint");
    char step1[256];
    H_OK(tmm_checkpoint_step_dir(f.run, 1, step1, sizeof step1));
    cr_assert(!exists(step1), "step 1 was not pruned");
    /* a checkpoints directory that is itself a link is refused for saving */
    char run2[64], ck2[128];
    make_run_dir(run2, sizeof run2);
    snprintf(ck2, sizeof ck2, "%s/checkpoints", run2);
    cr_assert_eq(symlink(outside, ck2), 0);
    f.state.step = 1;
    cr_assert_eq(tmm_checkpoint_save(run2, 1, &f.table, f.params, &f.state, extra, 3, 1), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "symbolic link"), "%s", tmm_last_error());
    cr_assert(exists(victim));
    rm_rf(run2);
    rm_rf(outside);
    fixture_fini(&f);
}

/* The run directory of a checkpoint comes from its path, never from inside it. */
Test(checkpoint, run_dir_from_the_path)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 23);
    save(&f, 7, 0);
    char buf[256], p[256];
    H_OK(tmm_checkpoint_run_dir(f.run, buf, sizeof buf));
    cr_assert_str_eq(buf, f.run);
    snprintf(p, sizeof p, "%s/checkpoints", f.run);
    H_OK(tmm_checkpoint_run_dir(p, buf, sizeof buf));
    cr_assert_str_eq(buf, f.run);
    H_OK(tmm_checkpoint_step_dir(f.run, 7, p, sizeof p));
    H_OK(tmm_checkpoint_run_dir(p, buf, sizeof buf));
    cr_assert_str_eq(buf, f.run);
    strcat(p, "/model.safetensors");
    H_OK(tmm_checkpoint_run_dir(p, buf, sizeof buf));
    cr_assert_str_eq(buf, f.run);
    /* a step directory copied out of its run: no run to continue in */
    char copy[64], from[256], to[300];
    make_run_dir(copy, sizeof copy);
    H_OK(tmm_checkpoint_step_dir(f.run, 7, from, sizeof from));
    snprintf(to, sizeof to, "%s/step-000007", copy);
    cr_assert_eq(rename(from, to), 0);
    cr_assert_eq(tmm_checkpoint_run_dir(to, buf, sizeof buf), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "--run-dir"), "%s", tmm_last_error());
    rm_rf(copy);
    fixture_fini(&f);
}

/* Clearing a run removes what tmm wrote and stops at anything else. */
Test(checkpoint, run_dir_clear)
{
    tmm_model_config config = small_config(0, 1, false, false);
    fixture f;
    fixture_init(&f, &config, 24);
    cr_assert(!tmm_run_dir_holds_run(f.run));
    save(&f, 1, 0);
    save(&f, 2, 0);
    char p[256], mine[256];
    snprintf(p, sizeof p, "%s/metrics.jsonl", f.run);
    write_file(p, "{}\n");
    snprintf(mine, sizeof mine, "%s/notes.txt", f.run);
    write_file(mine, "the user's");
    cr_assert(tmm_run_dir_holds_run(f.run));
    H_OK(tmm_run_dir_clear(f.run));
    cr_assert(!tmm_run_dir_holds_run(f.run));
    cr_assert(exists(mine), "a file tmm did not write was removed");
    save(&f, 1, 0);
    snprintf(p, sizeof p, "%s/checkpoints/foreign", f.run);
    write_file(p, "?");
    cr_assert_eq(tmm_run_dir_clear(f.run), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "not written by tmm"), "%s", tmm_last_error());
    cr_assert(exists(p));
    fixture_fini(&f);
}

/* ---- the PyTorch reference's reader ----------------------------------------- */

Test(checkpoint, torch_reference_reads_the_model)
{
    const char *py = getenv("TMM_TORCH_PYTHON"), *src = getenv("TMM_SOURCE_DIR");
    if (!py || !*py || !src || !*src)
        cr_skip_test("no Python with torch (TMM_TORCH_PYTHON)");
    tmm_model_config config = small_config(2, 2, true, false);
    fixture f;
    fixture_init(&f, &config, 13);
    save(&f, 10, 3);
    char model[256], cmd[1024], out[256] = "";
    path_in(model, sizeof model, f.run, 10, "model.safetensors");
    snprintf(cmd, sizeof cmd,
             "%s -c \"import sys; sys.path.insert(0, '%s/tools'); from torch_ref import read_safetensors; "
             "m, t = read_safetensors('%s'); "
             "print(len(t), m['d_model'], m['heads'], m['expanded'], m['task'], "
             "float.hex(t['lm_head.weight'][2, 5].item()), list(t['blocks.1.mix.w'].shape))\"",
             py, src, model);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s failed: %s", cmd, out);
    unsigned count, d, heads, expanded;
    char task[16], hex[64];
    cr_assert_eq(sscanf(out, "%u %u %u %u %15s %63s", &count, &d, &heads, &expanded, task, hex), 6, "output: %s", out);
    cr_assert_eq(count, f.table.count);
    cr_assert_eq(d, 8);
    cr_assert_eq(heads, 2);
    cr_assert_eq(expanded, 1);
    cr_assert_str_eq(task, "copy");
    const tmm_param *head = &f.table.params[tmm_param_find(&f.table, "lm_head.weight")];
    float want = f.params[head->offset + 2 * 8 + 5];
    cr_assert_eq((float)strtod(hex, NULL), want, "torch read %s, tmm wrote %a", hex, (double)want);
    cr_assert(strstr(out, "[2, 2, 6]"), "output: %s", out);
    fixture_fini(&f);
}
