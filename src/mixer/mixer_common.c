/* What the mixers' implementations share (mixer_common.h). */
#include "mixer/mixer_common.h"

#include <stdlib.h>

#include "mixer/toeplitz_select.h"

tmm_status tmm_mixer_create(const tmm_mixer_class *cls, const tmm_mixer_setup *s, size_t bytes,
                            tmm_status (*allocate)(tmm_mixer *m), tmm_mixer **out)
{
    *out = NULL;
    tmm_mixer *m = calloc(1, bytes);
    if (!m)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    *m = (tmm_mixer){ .cls = cls, .s = *s, .rows = s->batch * s->table->config.n_ctx };
    tmm_status st = allocate(m);
    if (st != TMM_OK) {
        cls->destroy(m);
        return st;
    }
    *out = m;
    return TMM_OK;
}

tmm_status tmm_mixer_decoder_done(const tmm_mixer *m, tmm_mixer_decoder *dec, tmm_status s,
                                  tmm_mixer_decoder **out)
{
    if (s != TMM_OK) {
        m->cls->decoder_destroy(dec);
        return s;
    }
    *out = dec;
    return TMM_OK;
}

tmm_status tmm_mixer_buffers_create(tmm_device *device, const tmm_buffer_spec *specs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        TMM_TRY(tmm_buffer_create(device, (specs[i].floats ? specs[i].floats : 1) * 4, TMM_MEMORY_DEVICE,
                                  specs[i].buffer));
    return TMM_OK;
}

void tmm_mixer_buffers_destroy(tmm_buffer *const *buffers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tmm_buffer_destroy(buffers[i]);
}

tmm_status tmm_mixer_layer_buffers(tmm_device *device, uint32_t layers, uint64_t floats, tmm_buffer ***out)
{
    if (!(*out = calloc(layers, sizeof **out)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < layers; l++)
        TMM_TRY(tmm_buffer_create(device, floats * 4, TMM_MEMORY_DEVICE, &(*out)[l]));
    return TMM_OK;
}

void tmm_mixer_layer_buffers_free(tmm_buffer **buffers, uint32_t layers)
{
    if (buffers)
        tmm_mixer_buffers_destroy(buffers, layers);
    free(buffers);
}

tmm_status tmm_mixer_write_zeros(tmm_buffer *b, uint64_t floats)
{
    float *zeros = calloc(floats, sizeof *zeros);
    if (!zeros)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = tmm_buffer_write(b, 0, zeros, floats * sizeof *zeros);
    free(zeros);
    return s;
}

tmm_status tmm_mixer_toeplitz_resolve(tmm_device *device, tmm_toeplitz_impl impl, uint32_t n, uint64_t work,
                                      uint32_t direct_slowdown, tmm_toeplitz_impl *out)
{
    *out = impl;
    if (impl != TMM_TOEPLITZ_AUTO)
        return TMM_OK;
    *out = TMM_TOEPLITZ_DIRECT;
    if (n < TMM_MIXER_CALIBRATE_FROM)
        return TMM_OK;
    uint32_t crossover;
    TMM_TRY(tmm_toeplitz_crossover(device, work, &crossover));
    if (crossover != UINT32_MAX && n >= crossover / direct_slowdown)
        *out = TMM_TOEPLITZ_FFT;
    return TMM_OK;
}

tmm_status tmm_mixer_toeplitz_plan(tmm_mixer *m, tmm_toeplitz_impl impl, uint32_t direct_slowdown,
                                   tmm_toeplitz_desc desc, tmm_toeplitz_fft **fft)
{
    const tmm_allocation *al = m->s.alloc;
    const uint64_t work = (uint64_t)desc.batch * desc.d;
    m->s.impl = impl;
    if (al->dry) {
        if (impl == TMM_TOEPLITZ_AUTO && al->device)
            TMM_TRY(tmm_mixer_toeplitz_resolve(al->device, impl, desc.n, work, direct_slowdown, &impl));
        desc.impl = impl;
        if (impl == TMM_TOEPLITZ_FFT)
            al->dry->fft_plans += tmm_toeplitz_fft_planned_bytes(al->device, &desc);
        return TMM_OK;
    }
    TMM_TRY(tmm_mixer_toeplitz_resolve(al->device, impl, desc.n, work, direct_slowdown, &impl));
    desc.impl = impl;
    return tmm_toeplitz_match_plan(al->device, impl, &desc, fft);
}
