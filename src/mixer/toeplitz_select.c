/* The fft/direct crossover per device and work size (toeplitz_select.h). */
#include "mixer/toeplitz_select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "files.h"
#include "io/limits.h"
#include "mixer/mixer_common.h"
#include "ops/toeplitz_fft.h"

/* First line of the cache file; files without it (older formats, damage)
 * are measured again. Bumped when the kernels' speed changes enough to move
 * the crossover (3: the chunked FFT path). */
#define CACHE_HEADER "tmm mixer calibration 3\n"

const uint32_t tmm_mixer_bucket_work[TMM_TOEPLITZ_BUCKETS] = { 16, 128, 512 };

/* Device time of forward + backward at length n with B = 1 and d = work,
 * direct or FFT, of the last of `runs` runs (llvmpipe compiles kernels at
 * their first dispatch: a first run is not timed). */
static tmm_status time_mixer(tmm_device *dev, uint32_t n, uint32_t work, bool fft_path, int runs, double *ms)
{
    tmm_toeplitz_desc td = { 1, n, work, 1, 1, TMM_TOEPLITZ_DIRECT };
    const uint64_t act = (uint64_t)n * work;
    const uint64_t sizes[9] = { act, n, n, act, act, act, n, n, tmm_op_toeplitz_backward_scratch(dev, &td, 0) };
    tmm_buffer *b[9] = { 0 };
    tmm_view v[9];
    tmm_toeplitz_fft *plan = NULL;
    tmm_recorder *r = NULL;
    tmm_status s = TMM_OK;
    for (int i = 0; i < 9 && s == TMM_OK; i++)
        if ((s = tmm_buffer_create(dev, (sizes[i] ? sizes[i] : 1) * 4, TMM_MEMORY_DEVICE, &b[i])) == TMM_OK)
            v[i] = tmm_whole(b[i]);
    if (s == TMM_OK && fft_path)
        s = tmm_toeplitz_fft_create(dev, &td, &plan);
    if (s == TMM_OK && (s = tmm_recorder_create(dev, &r)) == TMM_OK && (s = tmm_recorder_begin(r)) == TMM_OK) {
        /* inputs of zeros time the same as any others */
        for (int i = 0; i < 9 && s == TMM_OK; i++)
            s = tmm_record_fill_u32(r, v[i], 0);
        if (s == TMM_OK)
            s = tmm_record_region_begin(r, "mixer");
        if (s == TMM_OK)
            s = plan ? tmm_toeplitz_fft_record_forward(r, plan, v[0], v[1], v[2], v[3])
                     : tmm_op_toeplitz_forward(r, &td, v[0], v[1], v[2], v[3]);
        if (s == TMM_OK)
            s = plan ? tmm_toeplitz_fft_record_backward(r, plan, 0, v[0], v[1], v[4], v[5], v[6], v[7])
                     : tmm_op_toeplitz_backward(r, &td, 0, v[0], v[1], v[4], v[8], v[5], v[6], v[7]);
        if (s == TMM_OK)
            s = tmm_record_region_end(r);
        if (s == TMM_OK)
            s = tmm_recorder_end(r);
        for (int i = 0; i < runs && s == TMM_OK; i++)
            s = tmm_recorder_run(r);
        if (s == TMM_OK)
            s = tmm_recorder_region_time(r, 0, NULL, ms);
    }
    tmm_recorder_destroy(r);
    tmm_toeplitz_fft_destroy(plan);
    for (int i = 0; i < 9; i++)
        tmm_buffer_destroy(b[i]);
    return s;
}

/* Whether the FFT path beats the direct one at (n, work). The direct
 * kernels do not depend on n or work: after the first measurement (*warm)
 * they are compiled; every FFT plan has kernels of its own. */
static tmm_status fft_wins(tmm_device *dev, uint32_t n, uint32_t work, bool *warm, bool *wins)
{
    double direct, fft;
    TMM_TRY(time_mixer(dev, n, work, false, *warm ? 1 : 2, &direct));
    *warm = true;
    TMM_TRY(time_mixer(dev, n, work, true, 2, &fft));
    *wins = fft < direct;
    return TMM_OK;
}

/* One bucket's crossover: the shortest power-of-two length from
 * TMM_MIXER_CALIBRATE_FROM at which the FFT path wins, searched from
 * `start` (the previous bucket's, usually close) down or up. */
static tmm_status measure_bucket(tmm_device *dev, uint32_t work, uint32_t start, bool *warm, uint32_t *out)
{
    uint32_t n = start;
    bool wins;
    TMM_TRY(fft_wins(dev, n, work, warm, &wins));
    if (wins) {
        while (n / 2 >= TMM_MIXER_CALIBRATE_FROM) {
            TMM_TRY(fft_wins(dev, n / 2, work, warm, &wins));
            if (!wins)
                break;
            n /= 2;
        }
        *out = n;
        return TMM_OK;
    }
    *out = UINT32_MAX;
    for (n *= 2; n <= TMM_MIXER_CALIBRATE_TO; n *= 2) {
        TMM_TRY(fft_wins(dev, n, work, warm, &wins));
        if (wins) {
            *out = n;
            break;
        }
    }
    return TMM_OK;
}

void tmm_toeplitz_cache_path(const tmm_device *dev, char *out, size_t size)
{
    char dir[2048];
    out[0] = '\0';
    if (tmm_cache_dir(dir, sizeof dir) != TMM_OK)
        return;
    const tmm_device_info *info = tmm_device_get_info(dev);
    int n = snprintf(out, size, "%s/mixer-", dir);
    for (int i = 0; i < 16 && n > 0 && (size_t)n < size; i++)
        n += snprintf(out + n, size - (size_t)n, "%02x", info->device_uuid[i]);
    if (n > 0 && (size_t)n < size)
        snprintf(out + n, size - (size_t)n, "-%08x.txt", info->driver_version);
}

/* The header, then "work W crossover N|never" per bucket, in order. */
static bool parse(const char *text, uint32_t x[TMM_TOEPLITZ_BUCKETS])
{
    size_t head = strlen(CACHE_HEADER);
    if (strncmp(text, CACHE_HEADER, head) != 0)
        return false;
    text += head;
    for (int i = 0; i < TMM_TOEPLITZ_BUCKETS; i++) {
        unsigned long work;
        char value[16];
        int used = 0;
        if (sscanf(text, " work %lu crossover %15s%n", &work, value, &used) != 2 || work != tmm_mixer_bucket_work[i])
            return false;
        text += used;
        char *end;
        unsigned long n = strtoul(value, &end, 10);
        if (strcmp(value, "never") == 0)
            x[i] = UINT32_MAX;
        else if (*end == '\0' && n >= TMM_MIXER_CALIBRATE_FROM && n <= TMM_MIXER_CALIBRATE_TO)
            x[i] = (uint32_t)n;
        else
            return false;
    }
    return true;
}

static void save(char *path, const uint32_t x[TMM_TOEPLITZ_BUCKETS])
{
    char text[256];
    int len = snprintf(text, sizeof text, "%s", CACHE_HEADER);
    for (int i = 0; i < TMM_TOEPLITZ_BUCKETS; i++) {
        char value[16];
        snprintf(value, sizeof value, x[i] == UINT32_MAX ? "never" : "%u", x[i]);
        len += snprintf(text + len, sizeof text - (size_t)len, "work %u crossover %s\n", tmm_mixer_bucket_work[i],
                        value);
    }
    char *slash = strrchr(path, '/');
    if (!slash)
        return;
    *slash = '\0';
    tmm_status s = tmm_make_dirs(path);
    *slash = '/';
    if (s == TMM_OK)
        s = tmm_write_file_atomic(path, text, (size_t)len);
    if (s != TMM_OK)
        tmm_warn("not saving the mixer calibration: %s", tmm_last_error());
}

/* Every bucket's crossover, each search starting from the previous one's. */
static tmm_status measure_all(tmm_device *dev, uint32_t x[TMM_TOEPLITZ_BUCKETS])
{
    bool warm = false;
    uint32_t start = TMM_MIXER_CALIBRATE_FROM;
    for (int i = 0; i < TMM_TOEPLITZ_BUCKETS; i++) {
        TMM_TRY(measure_bucket(dev, tmm_mixer_bucket_work[i], start, &warm, &x[i]));
        start = x[i] < TMM_MIXER_CALIBRATE_TO ? x[i] : TMM_MIXER_CALIBRATE_TO;
    }
    return TMM_OK;
}

/* The cached calibration, if path holds a valid one; warns when a file is there but not valid. */
static bool load_cached(const char *path, uint32_t x[TMM_TOEPLITZ_BUCKETS], bool warn)
{
    void *data = NULL;
    size_t size;
    if (!path[0] || tmm_read_file(path, "mixer calibration file", TMM_LIMIT_CACHE, &data, &size) != TMM_OK)
        return false;
    bool ok = parse(data, x); /* tmm_read_file ends the data with a NUL */
    free(data);
    if (!ok && warn)
        tmm_warn("the mixer calibration %s is outdated or unreadable; measuring again", path);
    return ok;
}

tmm_status tmm_toeplitz_calibration(tmm_device *dev, uint32_t x[TMM_TOEPLITZ_BUCKETS])
{
    char path[2300], lock_path[2310];
    tmm_toeplitz_cache_path(dev, path, sizeof path);
    if (load_cached(path, x, false))
        return TMM_OK;
    /* One process measures at a time: others starting together wait for its
     * result instead of measuring on a loaded machine and overwriting it. */
    tmm_lock *lock = NULL;
    if (path[0]) {
        char dir[2300];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        snprintf(lock_path, sizeof lock_path, "%s.lock", path);
        if (tmm_make_dirs(dir) != TMM_OK ||
            tmm_lock_take(lock_path, path, "measuring the mixer crossover", true, &lock) != TMM_OK)
            tmm_warn("measuring the mixer crossover without a lock: %s", tmm_last_error());
        if (load_cached(path, x, true)) {
            tmm_lock_release(lock);
            return TMM_OK;
        }
    }
    fprintf(stderr, "tmm: measuring where the FFT path overtakes the direct one on this device (once: cached in "
            "%s)\n", path[0] ? path : "memory");
    tmm_status s = measure_all(dev, x);
    if (s == TMM_OK && path[0])
        save(path, x);
    tmm_lock_release(lock);
    return s;
}


tmm_status tmm_toeplitz_crossover(tmm_device *dev, uint64_t work, uint32_t *out)
{
    uint32_t x[TMM_TOEPLITZ_BUCKETS];
    TMM_TRY(tmm_toeplitz_calibration(dev, x));
    /* the bucket nearest in log scale */
    const double lw = log2(work ? (double)work : 1.0);
    int best = 0;
    for (int i = 1; i < TMM_TOEPLITZ_BUCKETS; i++)
        if (fabs(lw - log2(tmm_mixer_bucket_work[i])) < fabs(lw - log2(tmm_mixer_bucket_work[best])))
            best = i;
    *out = x[best];
    return TMM_OK;
}

tmm_status tmm_toeplitz_resolve(tmm_device *dev, tmm_toeplitz_impl impl, uint32_t n, uint64_t work,
                             tmm_toeplitz_impl *out)
{
    return tmm_mixer_toeplitz_resolve(dev, impl, n, work, 1, out);
}

tmm_status tmm_toeplitz_match_plan(tmm_device *device, tmm_toeplitz_impl impl, const tmm_toeplitz_desc *desc,
                                tmm_toeplitz_fft **fft)
{
    if (impl == TMM_TOEPLITZ_FFT && !*fft)
        return tmm_toeplitz_fft_create(device, desc, fft);
    if (impl != TMM_TOEPLITZ_FFT && *fft) {
        tmm_toeplitz_fft_destroy(*fft);
        *fft = NULL;
    }
    return TMM_OK;
}
