/* What the mixers' implementations share (src/mixer/NAME_mixer.c): the
 * lifecycle of a mixer and of its decoder, lists of device buffers, and the
 * Toeplitz op's direct/FFT choice and plan for the mixers built on it (the
 * TMM's and Hyena's). Internal to src/mixer. */
#ifndef TMM_MIXER_COMMON_H
#define TMM_MIXER_COMMON_H

#include "mixer/mixer.h"
#include "ops/toeplitz.h"
#include "ops/toeplitz_fft.h"

/* ---- lifecycle ------------------------------------------------------------ */

/* A class's create: `bytes` zeroed bytes for its own struct, which begins
 * with its tmm_mixer (filled in from s here), then allocate(m) makes the rest
 * (its checks, activations, workspace; in a dry run it counts them). On a
 * failure the class's destroy frees what was made: it must take a mixer that
 * allocate left half made. */
tmm_status tmm_mixer_create(const tmm_mixer_class *cls, const tmm_mixer_setup *s, size_t bytes,
                            tmm_status (*allocate)(tmm_mixer *m), tmm_mixer **out);
/* The slots that every class fills, each with the static function of its
 * file named after it (so a missing one fails to compile); a class adds
 * .declare and the optional slots it has. */
#define TMM_MIXER_SLOTS                                                                                    \
    .check = check, .flops = flops, .describe = describe, .create = create, .destroy = destroy,           \
    .scratch_floats = scratch_floats, .forward = forward, .backward = backward,                           \
    .decoder_create = decoder_create, .decoder_destroy = decoder_destroy, .record_prefill = record_prefill, \
    .record_step = record_step
/* Ends m's decoder_create: *out = dec when s is TMM_OK; else dec is destroyed
 * (m's class) and s returned. */
tmm_status tmm_mixer_decoder_done(const tmm_mixer *m, tmm_mixer_decoder *dec, tmm_status s,
                                  tmm_mixer_decoder **out);

/* ---- device buffers -------------------------------------------------------- */

typedef struct tmm_buffer_spec {
    tmm_buffer **buffer;
    uint64_t floats;
} tmm_buffer_spec;

/* Creates the device buffer of each spec (at least one float each, so that an
 * op's scratch of 0 floats still binds), in order, up to the first failure. */
tmm_status tmm_mixer_buffers_create(tmm_device *device, const tmm_buffer_spec *specs, size_t n);
/* Destroys buffers[0..n) (NULL ones are skipped). */
void tmm_mixer_buffers_destroy(tmm_buffer *const *buffers, size_t n);
/* One buffer of `floats` per layer (a decoder's state): *out, an array of
 * `layers` (calloc'ed; free it with tmm_mixer_layer_buffers_free, which takes
 * a half made one and NULL). */
tmm_status tmm_mixer_layer_buffers(tmm_device *device, uint32_t layers, uint64_t floats, tmm_buffer ***out);
void tmm_mixer_layer_buffers_free(tmm_buffer **buffers, uint32_t layers);
/* Writes `floats` zeros to b (a fixed zero bias). */
tmm_status tmm_mixer_write_zeros(tmm_buffer *b, uint64_t floats);

/* ---- mixers built on the Toeplitz op ----------------------------------------- */

/* DIRECT or FFT for the Toeplitz op at sequence length n and work size
 * B*d = work; AUTO's choice, the others pass through. The FFT path is chosen
 * from the device's crossover (tmm_toeplitz_crossover) divided by
 * direct_slowdown: how many times slower the mixer's direct kernels run than
 * those of the calibration (1: the same shape of groups). Never below
 * TMM_MIXER_CALIBRATE_FROM, where nothing is calibrated. */
tmm_status tmm_mixer_toeplitz_resolve(tmm_device *device, tmm_toeplitz_impl impl, uint32_t n, uint64_t work,
                                      uint32_t direct_slowdown, tmm_toeplitz_impl *out);
/* Sets m's choice (m->s.impl) to impl and makes or frees *fft to match what
 * it resolves to for desc's shape (desc.impl is ignored). A dry run makes no
 * plan and counts the bytes of the one it would make instead (AUTO resolves
 * only with a device: else no plan is counted). */
tmm_status tmm_mixer_toeplitz_plan(tmm_mixer *m, tmm_toeplitz_impl impl, uint32_t direct_slowdown,
                                   tmm_toeplitz_desc desc, tmm_toeplitz_fft **fft);

#endif
