/* Choosing how to compute the Toeplitz layers: the FFT path wins from some
 * sequence length on, which depends on the device. That length is measured
 * once per device (a short calibration: direct against FFT, forward and
 * backward, at d 64 and n = 256, 512, ... 8192) and cached beside the
 * pipeline cache (mixer-<device uuid>-<driver version>.txt). */
#ifndef TMM_MIXER_SELECT_H
#define TMM_MIXER_SELECT_H

#include "ops/toeplitz.h"

/* Below this length the direct kernel is used without calibrating. */
#define TMM_MIXER_CALIBRATE_FROM 256u

/* The crossover length of this device (UINT32_MAX: the FFT path never won up
 * to the largest length tried). */
tmm_status tmm_mixer_crossover(tmm_device *device, uint32_t *n);
/* DIRECT or FFT for a sequence length; AUTO and the others pass through. */
tmm_status tmm_mixer_resolve(tmm_device *device, tmm_toeplitz_impl impl, uint32_t n, tmm_toeplitz_impl *out);

#endif
