/* Batched 1-D real FFTs on the device (VkFFT), recorded into a recorder.
 *
 * A plan transforms `batch` contiguous rows of length n:
 *   real rows:     n floats each, row b at float b*n;
 *   complex rows:  n/2+1 complex numbers each (interleaved re, im floats),
 *                  row b at complex b*(n/2+1); no padding.
 *
 * Lengths (VkFFT 1.2.26): n >= 2 whose prime factors are all at most 13
 * (others take VkFFT's Bluestein path, which gives wrong real FFTs there:
 * TMM_ERR_UNSUPPORTED); odd n only up to the length one pass handles (about
 * maxComputeSharedMemorySize / 8: 4096 on lavapipe; beyond, VkFFT refuses:
 * TMM_ERR_FFT). tmm_fft_good_length picks a safe padded length.
 *
 * Conventions (numpy's rfft/irfft):
 *   R2C:  X[k] = sum_j x[j] exp(-2 pi i jk/n),  k = 0..n/2   (unnormalized)
 *   C2R:  x[j] = (1/n) sum_k X[k] exp(+2 pi i jk/n) over the Hermitian
 *         extension of X, so c2r(r2c(x)) == x and c2r(r2c(a) * r2c(b)) is the
 *         circular convolution of a and b.
 *   R2C leaves its real input untouched. C2R may overwrite its complex input
 *   (it does for lengths that need several passes, e.g. 6000 and 8192 on
 *   lavapipe): treat the spectrum as scratch after a C2R.
 *
 * Buffers are bound when the plan is created. VkFFT 1.2 keeps one descriptor
 * set per plan stage and rewrites it in place (vkUpdateDescriptorSets) when a
 * launch names other buffers or offsets, which would invalidate every command
 * buffer already recorded with the plan; and the bound sizes are compiled
 * into its shaders. So a plan belongs to one (real, complex) buffer pair, and
 * the record calls insist on exactly the views it was created with. Create a
 * plan per pair (creation compiles shaders: do it once, at load time).
 *
 * Binding rules, from VkFFT 1.2.26's behaviour (TMM_ERR_INVALID_ARGUMENT):
 *   - both views start at byte 0 of their own buffers (nonzero offsets break
 *     its multi-pass paths: wrong results and out-of-range bindings);
 *   - the real view is exactly tmm_fft_real_bytes, the complex view exactly
 *     tmm_fft_complex_bytes;
 *   - BOTH buffers hold at least tmm_fft_complex_bytes: VkFFT binds that
 *     much of the real buffer as the C2R output. The bytes of the real buffer
 *     past the real view are not written.
 *   - tmm_fft_complex_bytes <= maxStorageBufferRange (else TMM_ERR_UNSUPPORTED).
 *
 * Memory owned by a plan, outside tmm's allocator: VkFFT allocates a temp
 * buffer of about tmm_fft_complex_bytes when n needs several passes, and
 * small twiddle tables (plans turn VkFFT's lookup tables on, so twiddles are
 * computed in double on the host on every device); all freed by
 * tmm_fft_plan_destroy. VkFFT 1.2.26 creates its pipelines without
 * a VkPipelineCache (it has no field for one), so the device's cache is not
 * used. Plan creation may submit work to the device's queue (with the
 * device's transfer fence) and waits for it.
 *
 * A plan may be recorded into any number of recordings, which may be
 * replayed; destroy it only after they have finished and will not be
 * submitted again. One thread at a time per device, like the rest of the
 * runtime. */
#ifndef TMM_RT_FFT_H
#define TMM_RT_FFT_H

#include "recorder.h"

typedef struct tmm_fft_plan tmm_fft_plan;

/* Complex numbers per row of a length-n real FFT: n/2 + 1. */
static inline uint32_t tmm_fft_complex_count(uint32_t n) { return n / 2 + 1; }
/* Bytes of the real and complex views of a plan. */
static inline uint64_t tmm_fft_real_bytes(uint32_t n, uint32_t batch) { return (uint64_t)n * batch * 4; }
static inline uint64_t tmm_fft_complex_bytes(uint32_t n, uint32_t batch)
{
    return (uint64_t)tmm_fft_complex_count(n) * batch * 8;
}

/* Smallest even length >= min_n (and >= 2) whose prime factors are 2, 3, 5
 * and 7: fast, and a length every device takes. 0 on overflow. */
uint32_t tmm_fft_good_length(uint32_t min_n);

/* Creates a plan for `batch` rows of length n bound to the two views (see
 * above). Compiles VkFFT's shaders (about 0.1 s per plan on lavapipe).
 * VkFFT failures are TMM_ERR_FFT with the VkFFT error named. */
tmm_status tmm_fft_plan_create(tmm_device *device, uint32_t n, uint32_t batch, tmm_view real,
                               tmm_view complex, tmm_fft_plan **out);
/* NULL is fine. */
void tmm_fft_plan_destroy(tmm_fft_plan *plan);

uint32_t tmm_fft_plan_n(const tmm_fft_plan *plan);
uint32_t tmm_fft_plan_batch(const tmm_fft_plan *plan);

/* Records the forward transform real_in -> complex_out. The views must be the
 * plan's real and complex views. Ordered after earlier work in the recording,
 * and later work after it. */
tmm_status tmm_record_fft_r2c(tmm_recorder *recorder, tmm_fft_plan *plan, tmm_view real_in, tmm_view complex_out);
/* Records the normalized inverse complex_in -> real_out (complex_in may be
 * overwritten). The views must be the plan's complex and real views. */
tmm_status tmm_record_fft_c2r(tmm_recorder *recorder, tmm_fft_plan *plan, tmm_view complex_in, tmm_view real_out);

#endif
