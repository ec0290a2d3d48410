/* The safetensors reader and writer: round trip, and refusal of broken files. */
#include <stdio.h>
#include <string.h>
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
