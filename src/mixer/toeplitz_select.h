/* Choosing how to compute the Toeplitz layers: the FFT path wins from some
 * sequence length on, which depends on the device and on the work size
 * B*d (the rows the FFTs transform: small ones leave the FFT's fixed costs,
 * its many dispatches, uncovered). That length is measured once per device
 * (a short calibration: direct against FFT, forward and backward, at
 * B*d = 16, 128 and 512, n = 256 ... 8192) and cached beside the pipeline
 * cache (mixer-<device uuid>-<driver version>.txt, a versioned text file;
 * others are measured again). A shape uses the bucket whose B*d is nearest
 * in log scale (heads and taps are not told apart: they add only G*K rows
 * to the FFT's B*d). */
#ifndef TMM_MIXER_SELECT_H
#define TMM_MIXER_SELECT_H

#include "ops/toeplitz.h"
#include "ops/toeplitz_fft.h"

/* Below this length the direct kernel is used without calibrating. */
#define TMM_MIXER_CALIBRATE_FROM 256u
/* The longest length calibrated. */
#define TMM_MIXER_CALIBRATE_TO 8192u

/* The work sizes B*d calibrated. */
#define TMM_TOEPLITZ_BUCKETS 3
extern const uint32_t tmm_mixer_bucket_work[TMM_TOEPLITZ_BUCKETS];

/* The cache file of this device's calibration ("" when there is no cache
 * directory: then every call measures). */
void tmm_toeplitz_cache_path(const tmm_device *device, char *out, size_t size);

/* The crossover length of each bucket on this device (UINT32_MAX: the FFT
 * path never won up to TMM_MIXER_CALIBRATE_TO), from the cache or measured. */
tmm_status tmm_toeplitz_calibration(tmm_device *device, uint32_t crossover[TMM_TOEPLITZ_BUCKETS]);
/* The crossover length for work size B*d = work. */
tmm_status tmm_toeplitz_crossover(tmm_device *device, uint64_t work, uint32_t *n);
/* DIRECT or FFT for sequence length n and work size B*d; AUTO's choice, the
 * others pass through. */
tmm_status tmm_toeplitz_resolve(tmm_device *device, tmm_toeplitz_impl impl, uint32_t n, uint64_t work,
                             tmm_toeplitz_impl *out);

/* The FFT plan to match a resolved implementation: *fft is made for desc
 * when impl is FFT and there is none, freed (NULL) when impl is not FFT. */
tmm_status tmm_toeplitz_match_plan(tmm_device *device, tmm_toeplitz_impl impl, const tmm_toeplitz_desc *desc,
                                tmm_toeplitz_fft **fft);

#endif
