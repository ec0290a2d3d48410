/* Batched 1-D real FFTs on the device (VkFFT), recorded into a recorder.
 *
 * A plan transforms `batch` contiguous rows of length n:
 *   real rows:     n floats each, row b at float offset b*n;
 *   complex rows:  n/2+1 complex numbers each (interleaved re, im floats),
 *                  row b at complex offset b*(n/2+1); no padding.
 * Any n >= 2 that VkFFT supports works (odd n too; lengths with prime factors
 * above 13 go through Bluestein's algorithm).
 *
 * Conventions (numpy's rfft/irfft):
 *   R2C:  X[k] = sum_j x[j] exp(-2 pi i jk/n),  k = 0..n/2   (unnormalized)
 *   C2R:  x[j] = (1/n) sum_k X[k] exp(+2 pi i jk/n) over the Hermitian
 *         extension of X, so c2r(r2c(x)) == x and c2r(r2c(a) * r2c(b)) is the
 *         circular convolution of a and b.
 *   R2C leaves its real input untouched. C2R may overwrite its complex input
 *   (VkFFT works in place there when n needs several passes): treat the
 *   spectrum as scratch after a C2R.
 *
 * Buffers are bound when the plan is created. VkFFT 1.2 keeps one descriptor
 * set per plan and rewrites it in place (vkUpdateDescriptorSets) whenever a
 * launch names other buffers, which would invalidate every command buffer
 * already recorded with the plan; and the bound ranges and offsets are
 * compiled into its shaders. So a plan belongs to one (real view, complex
 * view) pair, and the record calls insist on exactly those views. Create a
 * plan per pair (plan creation compiles shaders: do it once, at load time).
 *
 * Binding rules (checked at creation, TMM_ERR_INVALID_ARGUMENT otherwise):
 *   real view:    size n*batch*4 bytes, offset a multiple of 4;
 *   complex view: size (n/2+1)*batch*8 bytes, offset a multiple of 8;
 *   VkFFT binds each buffer from byte 0 up to the end of its view rounded up
 *   to 8 bytes, so that much must lie inside the buffer (with an odd n*batch
 *   and a real view ending at the buffer's end, allocate one float more), and
 *   must not exceed maxStorageBufferRange (TMM_ERR_UNSUPPORTED otherwise).
 * The two views must not overlap.
 *
 * Memory owned by a plan: VkFFT allocates, outside tmm's allocator, a temp
 * buffer of the complex view's size when n needs several passes (large n,
 * Bluestein), plus small twiddle/Bluestein tables on some devices; all are
 * freed by tmm_fft_plan_destroy. VkFFT does not use the device's pipeline
 * cache (1.2.26 has no field for it). Plan creation may submit work to the
 * device's queue and waits for it.
 *
 * A plan may be recorded into any number of recordings, and they may be
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

/* Creates a plan for `batch` rows of length n bound to the two views (see
 * above). Compiles VkFFT's shaders: slow (tens to hundreds of ms per plan on
 * lavapipe). VkFFT failures are TMM_ERR_FFT with the VkFFT error named. */
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
