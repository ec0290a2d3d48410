/* The on-disk pipeline cache: written at teardown, loaded on the next run,
 * and a corrupt or truncated file is ignored with a warning (and replaced). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops/op_util.h"

static char dir[64];

static void use_private_cache_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/tmm-pcache-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("TMM_CACHE_DIR", dir, 1);
}

/* Opens a device, builds one pipeline, closes; returns the cache state seen. */
static tmm_pipeline_cache_state run_once(char *path, size_t size)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.validate = 1;
    tmm_device *d;
    H_OK(tmm_device_create(&opt, &d));
    tmm_pipeline_cache_state state = tmm_device_pipeline_cache_state(d);
    snprintf(path, size, "%s", tmm_device_pipeline_cache_path(d));
    tmm_kernel k = { .spirv = &tmm_spv_axpy, .n_buffers = 2, .push_size = 8, .n_spec = 3, .spec = { 64, 1, 1 } };
    tmm_pipeline *p;
    H_OK(tmm_pipeline_get(d, &k, &p));
    tmm_pipeline *again;
    H_OK(tmm_pipeline_get(d, &k, &again));
    cr_assert_eq(p, again, "pipelines are created once per kernel");
    tmm_device_destroy(d);
    cr_assert_eq(tmm_validation_messages_total(), 0);
    return state;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

Test(pipeline_cache, is_saved_and_loaded)
{
    use_private_cache_dir();
    char path[4096];
    cr_assert_eq(run_once(path, sizeof path), TMM_PIPELINE_CACHE_EMPTY);
    cr_assert(strncmp(path, dir, strlen(dir)) == 0, "cache at %s, not under %s", path, dir);
    cr_assert_gt(file_size(path), 32, "no cache file written at %s", path);
    cr_assert_eq(run_once(path, sizeof path), TMM_PIPELINE_CACHE_LOADED);
}

static void corrupt(const char *path, bool truncate_it)
{
    long n = file_size(path);
    cr_assert_gt(n, 40, "our 24-byte header and the driver's 32-byte one");
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    if (truncate_it) {
        cr_assert_eq(ftruncate(fileno(f), n / 2), 0);
    } else {
        fseek(f, n - 1, SEEK_SET); /* a byte of the driver's data */
        int c = fgetc(f);
        fseek(f, n - 1, SEEK_SET);
        fputc(c ^ 0x5a, f);
    }
    fclose(f);
}

Test(pipeline_cache, corrupt_file_is_ignored_and_rewritten)
{
    use_private_cache_dir();
    char path[4096];
    run_once(path, sizeof path);
    corrupt(path, false);
    cr_assert_eq(run_once(path, sizeof path), TMM_PIPELINE_CACHE_IGNORED);
    cr_assert_eq(run_once(path, sizeof path), TMM_PIPELINE_CACHE_LOADED, "the bad file was not replaced");
}

Test(pipeline_cache, truncated_file_is_ignored)
{
    use_private_cache_dir();
    char path[4096];
    run_once(path, sizeof path);
    corrupt(path, true);
    cr_assert_eq(run_once(path, sizeof path), TMM_PIPELINE_CACHE_IGNORED);
}

Test(pipeline_cache, garbage_file_is_ignored)
{
    use_private_cache_dir();
    char path[4096];
    run_once(path, sizeof path);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fputs("not a pipeline cache", f);
    fclose(f);
    cr_assert_eq(run_once(path, sizeof path), TMM_PIPELINE_CACHE_IGNORED);
}

Test(pipeline_cache, can_be_disabled)
{
    use_private_cache_dir();
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.no_pipeline_cache = true;
    tmm_device *d;
    H_OK(tmm_device_create(&opt, &d));
    cr_assert_eq(tmm_device_pipeline_cache_state(d), TMM_PIPELINE_CACHE_DISABLED);
    tmm_device_destroy(d);
}
