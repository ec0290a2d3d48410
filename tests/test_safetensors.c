/* The safetensors reader and writer: round trip, and refusal of broken files. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "io/safetensors.h"

static void path_for(char *buf, size_t size, const char *what)
{
    snprintf(buf, size, "/tmp/tmm-st-%d-%s.safetensors", (int)getpid(), what);
}

static void write_sample(const char *path)
{
    float a[6] = { 1, 2, 3, 4, 5, 6 };
    int32_t b[3] = { -1, 0, 7 };
    double c = 2.5;
    tmm_st_tensor ts[] = { { "a.weight", TMM_ST_F32, 2, { 2, 3 }, a },
                           { "b", TMM_ST_I32, 1, { 3 }, b },
                           { "scalar", TMM_ST_F64, 0, { 0 }, &c } };
    tmm_st_meta meta[] = { { "vocab", "256" }, { "note", "quotes \" and \\ survive" } };
    H_OK(tmm_safetensors_write(path, ts, 3, meta, 2));
}

Test(safetensors, round_trip)
{
    char path[64];
    path_for(path, sizeof path, "rt");
    write_sample(path);
    tmm_safetensors *st;
    H_OK(tmm_safetensors_read(path, &st));
    cr_assert_eq(tmm_safetensors_count(st), 3);
    const tmm_st_tensor *a = tmm_safetensors_find(st, "a.weight");
    cr_assert(a && a->dtype == TMM_ST_F32 && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3);
    cr_assert_float_eq(((const float *)a->data)[5], 6.0f, 0);
    const tmm_st_tensor *b = tmm_safetensors_find(st, "b");
    cr_assert(b && ((const int32_t *)b->data)[0] == -1 && ((const int32_t *)b->data)[2] == 7);
    const tmm_st_tensor *s = tmm_safetensors_find(st, "scalar");
    cr_assert(s && s->ndim == 0 && tmm_st_numel(s) == 1 && *(const double *)s->data == 2.5);
    cr_assert_str_eq(tmm_safetensors_meta(st, "vocab"), "256");
    cr_assert_str_eq(tmm_safetensors_meta(st, "note"), "quotes \" and \\ survive");
    cr_assert_null(tmm_safetensors_meta(st, "missing"));
    cr_assert_null(tmm_safetensors_find(st, "missing"));
    tmm_safetensors_free(st);
    remove(path);
}

static void expect_refused(const char *path, const char *words)
{
    tmm_safetensors *st = (tmm_safetensors *)1;
    cr_assert_eq(tmm_safetensors_read(path, &st), TMM_ERR_IO);
    cr_assert_null(st);
    cr_assert(strstr(tmm_last_error(), words), "message '%s' lacks '%s'", tmm_last_error(), words);
}

Test(safetensors, refuses_truncated_and_corrupt_files)
{
    char path[64];
    path_for(path, sizeof path, "bad");
    write_sample(path);
    FILE *f = fopen(path, "r+b");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    cr_assert_eq(ftruncate(fileno(f), size - 4), 0);
    fclose(f);
    expect_refused(path, "outside the file");

    write_sample(path);
    f = fopen(path, "r+b");
    fseek(f, 8, SEEK_SET);
    fputc('#', f); /* break the JSON */
    fclose(f);
    expect_refused(path, "not valid JSON");

    f = fopen(path, "wb");
    fputs("tiny", f);
    fclose(f);
    expect_refused(path, "not a safetensors file");

    f = fopen(path, "wb");
    unsigned char huge[16] = { 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, '{', '}' };
    fwrite(huge, 1, sizeof huge, f);
    fclose(f);
    expect_refused(path, "does not fit");
    remove(path);

    cr_assert_eq(tmm_safetensors_read("/nonexistent/x.safetensors", &(tmm_safetensors *){ NULL }), TMM_ERR_IO);
}

/* A file made of a JSON header and `data_bytes` zero bytes of data. */
static void write_header(const char *path, const char *json, size_t data_bytes)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    uint64_t n = strlen(json);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(json, 1, n, f);
    for (size_t i = 0; i < data_bytes; i++)
        fputc(0, f);
    fclose(f);
}

/* Regressions of hostile headers: each was a crash, an overflow or a silent
 * misreading before; each is now one clear refusal. */
Test(safetensors, refuses_hostile_headers)
{
    char path[64];
    path_for(path, sizeof path, "hostile");
    /* a second __metadata__ reallocated the pairs but kept the count: heap overflow */
    write_header(path, "{\"__metadata__\":{\"a\":\"1\",\"b\":\"2\"},\"__metadata__\":{\"c\":\"3\",\"d\":\"4\"}}", 0);
    expect_refused(path, "'__metadata__' twice");
    /* __metadata__ as an array: a NULL key was copied */
    write_header(path, "{\"__metadata__\":[\"a\"]}", 0);
    expect_refused(path, "not a JSON object");
    write_header(path, "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0);
    expect_refused(path, "occurs twice");
    write_header(path, "{\"__metadata__\":{\"a\":1}}", 0);
    expect_refused(path, "not a string");
    /* the same tensor twice: which one is meant? */
    write_header(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    expect_refused(path, "'t' twice");
    /* shapes and offsets must be whole numbers, not strings or fractions */
    write_header(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8);
    expect_refused(path, "bad shape");
    write_header(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0.5,8.5]}}", 9);
    expect_refused(path, "data_offsets");
    write_header(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    expect_refused(path, "bad shape");
    /* a shape whose element count overflows 64 bits (it wrapped to match the offsets before) */
    write_header(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,1],\"data_offsets\":[0,0]}}", 0);
    expect_refused(path, "bad shape");
    write_header(path, "{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4);
    expect_refused(path, "bad or unsupported");
    write_header(path, "{\"t\":5}", 0);
    expect_refused(path, "bad or unsupported");
    write_header(path, "[1,2]", 0);
    expect_refused(path, "not a JSON object");
    /* a valid file of the same form still reads */
    write_header(path, "{\"__metadata__\":{\"k\":\"v\"},\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    tmm_safetensors *st;
    H_OK(tmm_safetensors_read(path, &st));
    cr_assert_eq(tmm_safetensors_count(st), 1);
    cr_assert_str_eq(tmm_safetensors_meta(st, "k"), "v");
    tmm_safetensors_free(st);
    remove(path);
}

/* Not regular files: refused at once, without blocking on a FIFO or reading a device. */
Test(safetensors, refuses_what_is_not_a_regular_file)
{
    char fifo[64];
    path_for(fifo, sizeof fifo, "fifo");
    remove(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, "FIFO");
    remove(fifo);
    expect_refused("/dev/zero", "device");
    expect_refused("/tmp", "directory");
}
