#include "model/mixer_select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "files.h"
#include "ops/toeplitz_fft.h"

#define CAL_D 64u
#define CAL_MAX_N 8192u

/* Device time of forward + backward at length n, direct or FFT. */
static tmm_status time_mixer(tmm_device *dev, uint32_t n, bool fft_path, double *ms)
{
    tmm_toeplitz_desc td = { 1, n, CAL_D, 1, 1, TMM_TOEPLITZ_DIRECT };
    const uint64_t act = (uint64_t)n * CAL_D;
    const uint64_t sizes[9] = { act, n, n, act, act, act, n, n, tmm_op_toeplitz_backward_scratch(&td, 0) };
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
        /* the first run compiles the kernels on some drivers: time the second */
        if (s == TMM_OK && (s = tmm_recorder_run(r)) == TMM_OK && (s = tmm_recorder_run(r)) == TMM_OK)
            s = tmm_recorder_region_time(r, 0, NULL, ms);
    }
    tmm_recorder_destroy(r);
    tmm_toeplitz_fft_destroy(plan);
    for (int i = 0; i < 9; i++)
        tmm_buffer_destroy(b[i]);
    return s;
}

static void cache_path(const tmm_device *dev, char *out, size_t size)
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

tmm_status tmm_mixer_crossover(tmm_device *dev, uint32_t *out)
{
    char path[2300];
    cache_path(dev, path, sizeof path);
    void *text = NULL;
    size_t size;
    if (path[0] && tmm_read_file(path, &text, &size) == TMM_OK) {
        unsigned long n;
        char buf[64] = { 0 };
        memcpy(buf, text, size < sizeof buf - 1 ? size : sizeof buf - 1);
        free(text);
        if (sscanf(buf, "crossover %lu", &n) == 1 && n >= TMM_MIXER_CALIBRATE_FROM) {
            *out = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
            return TMM_OK;
        }
        tmm_warn("ignoring unreadable mixer calibration %s; measuring again", path);
    }
    uint32_t crossover = UINT32_MAX;
    for (uint32_t n = TMM_MIXER_CALIBRATE_FROM; n <= CAL_MAX_N; n *= 2) {
        double direct, fft;
        TMM_TRY(time_mixer(dev, n, false, &direct));
        TMM_TRY(time_mixer(dev, n, true, &fft));
        if (fft < direct) {
            crossover = n;
            break;
        }
    }
    if (path[0]) {
        char line[64];
        int len = snprintf(line, sizeof line, "crossover %lu\n", (unsigned long)crossover);
        char *slash = strrchr(path, '/');
        if (slash) {
            *slash = '\0';
            tmm_status s = tmm_make_dirs(path);
            *slash = '/';
            if (s == TMM_OK)
                s = tmm_write_file_atomic(path, line, (size_t)len);
            if (s != TMM_OK)
                tmm_warn("not saving the mixer calibration: %s", tmm_last_error());
        }
    }
    *out = crossover;
    return TMM_OK;
}

tmm_status tmm_mixer_resolve(tmm_device *dev, tmm_toeplitz_impl impl, uint32_t n, tmm_toeplitz_impl *out)
{
    *out = impl;
    if (impl != TMM_TOEPLITZ_AUTO)
        return TMM_OK;
    *out = TMM_TOEPLITZ_DIRECT;
    if (n < TMM_MIXER_CALIBRATE_FROM)
        return TMM_OK;
    uint32_t crossover;
    TMM_TRY(tmm_mixer_crossover(dev, &crossover));
    if (n >= crossover)
        *out = TMM_TOEPLITZ_FFT;
    return TMM_OK;
}
