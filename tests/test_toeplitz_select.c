/* The measured fft/direct crossover behind --toeplitz-impl auto: one length per
 * work size B*d, measured once, cached per device in a versioned file; the
 * nearest bucket decides; outdated or bad cache files are measured again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files.h"
#include "harness.h"
#include "mixer/toeplitz_select.h"

/* A private cache directory for the test; the device's cache file in it. */
static void fresh_cache(char *path, size_t size)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tmm-mixer-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("TMM_CACHE_DIR", dir, 1);
    tmm_toeplitz_cache_path(h_dev, path, size);
    cr_assert(strncmp(path, dir, strlen(dir)) == 0, "%s", path);
}

static void write_text(const char *path, const char *text) { H_OK(tmm_write_file_atomic(path, text, strlen(text))); }

static bool file_starts_with(const char *path, const char *prefix)
{
    void *data;
    size_t size;
    if (tmm_read_file(path, "test file", UINT64_MAX, &data, &size) != TMM_OK)
        return false;
    bool ok = size >= strlen(prefix) && memcmp(data, prefix, strlen(prefix)) == 0;
    free(data);
    return ok;
}

static void check_calibration(const uint32_t x[TMM_TOEPLITZ_BUCKETS])
{
    for (int i = 0; i < TMM_TOEPLITZ_BUCKETS; i++) {
        printf("  measured crossover at B*d = %u: n = %u\n", tmm_mixer_bucket_work[i], x[i]);
        cr_assert(x[i] == UINT32_MAX ||
                      (x[i] >= TMM_MIXER_CALIBRATE_FROM && x[i] <= TMM_MIXER_CALIBRATE_TO && !(x[i] & (x[i] - 1))),
                  "crossover %u", x[i]);
    }
}

static const char header[] = "tmm mixer calibration 3\n";

H_TEST(mixer_select, lookup_uses_the_nearest_bucket)
{
    char path[2300];
    fresh_cache(path, sizeof path);
    tmm_toeplitz_impl impl;
    H_OK(tmm_toeplitz_resolve(h_dev, TMM_TOEPLITZ_AUTO, 64, 1024, &impl));
    cr_assert_eq(impl, TMM_TOEPLITZ_DIRECT, "short sequences use the direct kernel");
    H_OK(tmm_toeplitz_resolve(h_dev, TMM_TOEPLITZ_FFT, 64, 1024, &impl));
    cr_assert_eq(impl, TMM_TOEPLITZ_FFT, "an explicit choice passes through");
    H_OK(tmm_toeplitz_resolve(h_dev, TMM_TOEPLITZ_DIRECT, 8192, 1024, &impl));
    cr_assert_eq(impl, TMM_TOEPLITZ_DIRECT, "an explicit choice passes through");
    cr_assert_neq(access(path, F_OK), 0, "nothing needed calibrating");

    /* a calibration as a device might give it, for buckets 16, 128, 512 */
    write_text(path, "tmm mixer calibration 3\nwork 16 crossover never\nwork 128 crossover 1024\n"
                     "work 512 crossover 256\n");
    static const struct { uint32_t n; uint64_t work; tmm_toeplitz_impl want; } cases[] = {
        { 8192, 16, TMM_TOEPLITZ_DIRECT }, /* never */
        { 8192, 40, TMM_TOEPLITZ_DIRECT }, /* nearer 16 than 128 in log scale */
        { 1024, 50, TMM_TOEPLITZ_FFT },    /* nearer 128 */
        { 512, 128, TMM_TOEPLITZ_DIRECT },
        { 1024, 2 * 128, TMM_TOEPLITZ_FFT },
        { 256, 4 * 128, TMM_TOEPLITZ_FFT },
        { 256, 1u << 20, TMM_TOEPLITZ_FFT }, /* past the last bucket: the last */
        { 255, 1u << 20, TMM_TOEPLITZ_DIRECT },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        H_OK(tmm_toeplitz_resolve(h_dev, TMM_TOEPLITZ_AUTO, cases[i].n, cases[i].work, &impl));
        cr_assert_eq(impl, cases[i].want, "n = %u, B*d = %llu: %s", cases[i].n, (unsigned long long)cases[i].work,
                     tmm_toeplitz_impl_name(impl));
    }
    uint32_t n;
    H_OK(tmm_toeplitz_crossover(h_dev, 100, &n));
    cr_assert_eq(n, 1024);
    unlink(path);
}

H_TEST(mixer_select, calibration_is_measured_once_and_cached)
{
    char path[2300];
    fresh_cache(path, sizeof path);
    write_text(path, "tmm mixer calibration 3\nwork 16 crossover 512\n"); /* damaged: measured again */
    uint32_t first[TMM_TOEPLITZ_BUCKETS], again[TMM_TOEPLITZ_BUCKETS];
    H_OK(tmm_toeplitz_calibration(h_dev, first));
    check_calibration(first);
    cr_assert(file_starts_with(path, header), "no versioned cache file at %s", path);
    H_OK(tmm_toeplitz_calibration(h_dev, again));
    cr_assert(memcmp(first, again, sizeof first) == 0, "the cached values differ");
    /* what is read is the file */
    write_text(path, "tmm mixer calibration 3\nwork 16 crossover 8192\nwork 128 crossover 512\n"
                     "work 512 crossover never\n");
    H_OK(tmm_toeplitz_calibration(h_dev, again));
    cr_assert(again[0] == 8192 && again[1] == 512 && again[2] == UINT32_MAX);
    unlink(path);
}

/* a complete file of the previous version (kernels have changed since) */
H_TEST(mixer_select, outdated_files_are_measured_again)
{
    char path[2300];
    fresh_cache(path, sizeof path);
    write_text(path, "tmm mixer calibration 2\nwork 16 crossover 2048\nwork 128 crossover 2048\n"
                     "work 512 crossover 2048\n");
    uint32_t x[TMM_TOEPLITZ_BUCKETS];
    H_OK(tmm_toeplitz_calibration(h_dev, x));
    check_calibration(x);
    cr_assert(file_starts_with(path, header), "the cache file was not rewritten");
    unlink(path);
}
