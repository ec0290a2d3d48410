/* FFT implementation of the causal Toeplitz op (toeplitz.h), as a plan
 * object: created once per shape and device, it owns its padded buffers and
 * VkFFT plans; the record functions take the same views as
 * tmm_op_toeplitz_forward / tmm_op_toeplitz_backward and compute the same
 * thing (up to FFT rounding: errors grow about like log2(N) times the size of
 * the terms, see tests/test_toeplitz_fft.c).
 *
 * Layout: activations stay position-major [B, n, d] (the layout of every
 * other op); the pack kernel transposes them into channel rows, one
 * zero-padded row of N floats per (b, c), so that every FFT runs over a
 * contiguous sequence, and the unpack kernel transposes back (consecutive
 * invocations touch consecutive channels of the activations). N =
 * tmm_fft_good_length(2n - 1) (>= 2n-1, so the circular convolution of the
 * zero-padded rows is the causal one on [0, n): nothing is masked), M =
 * N/2 + 1 complex numbers per spectrum.
 *
 * The B*d channel rows (global row b*d + c) go through in equal chunks of
 * cr rows (as few chunks as the device's bindings allow: one unless N*B*d
 * is large; at n = 65536, d = 256 on a 128 MiB range, 3 of 86), each with
 * a halo of h = K-1 rows on either side (the kernel-k taps reach K-1
 * channels down, du's K-1 up); hr = cr + 2h. Buffers: real R and complex C of 2hr + GK
 * rows, products C2 of cr rows, dw's spectra CW of GK rows.
 *   forward:  R rows [hr, hr + GK) = the w vectors (one per group and tap,
 *             packed once per call and transformed with each chunk: GK
 *             rows, not one per channel); per chunk R rows [0, hr) = its u
 *             rows; one R2C of hr + GK rows into C; the spectral product
 *             (sum over taps) into C2; one C2R of cr rows back into R; crop
 *             to n, add beta, scatter to y.
 *   backward: dbeta summed straight from gy in the real domain; R rows
 *             [hr, hr + GK) = w (zeros when du is skipped); per chunk R rows
 *             [0, hr) = gy, [hr + GK, 2hr + GK) = u; one R2C; du:
 *             conjugate products (a correlation) into C2, one C2R, crop and
 *             scatter; dw: conj(U) * GY summed over the chunk's rows of
 *             each group into CW (every chunk adding: the sum over batch and
 *             group channels happens in the frequency domain); after the
 *             last chunk one C2R of the GK rows of CW and a crop to dw.
 * The plans are bound to R/C/C2/CW at byte 0 (runtime/fft.h). They are
 * scratch within each record call (the backward packs u, w and gy again),
 * so one plan object serves every op of its shape, recorded one after
 * another into any recordings (barriers are automatic): the model's layers,
 * and both ops of an expanded layer, share one (tested).
 * Memory: tmm_toeplitz_fft_planned_bytes, plus VkFFT's temp buffers for
 * multi-pass lengths. Deterministic: no atomics, fixed orders (chunks, then
 * rows, in increasing order). */
#ifndef TMM_OPS_TOEPLITZ_FFT_H
#define TMM_OPS_TOEPLITZ_FFT_H

#include "toeplitz.h"

typedef struct tmm_toeplitz_fft tmm_toeplitz_fft;

/* Creates the plan for desc's shape (desc->impl is ignored). Compiles VkFFT
 * shaders: do it once, at load time. TMM_ERR_INVALID_ARGUMENT for a bad
 * shape, TMM_ERR_UNSUPPORTED when not even one row of spectra (or one
 * sequence) fits in the device's maxStorageBufferRange. */
tmm_status tmm_toeplitz_fft_create(tmm_device *device, const tmm_toeplitz_desc *desc, tmm_toeplitz_fft **out);
/* NULL is fine. Only after every recording that used it has finished. */
void tmm_toeplitz_fft_destroy(tmm_toeplitz_fft *plan);
/* Bytes of device memory a plan for desc on device allocates through tmm's
 * allocator (R, C, C2, CW): 8 * M * (4hr + cr + 3GK), at most linear in
 * B*d*n since N <= 2.19n (0 for an empty or invalid shape, or one the
 * device cannot take). VkFFT's own temp buffer for lengths it does in
 * several passes, at most about C's size, comes on top. */
uint64_t tmm_toeplitz_fft_planned_bytes(const tmm_device *device, const tmm_toeplitz_desc *desc);
/* Channel rows per chunk, cr (0 when the shape is empty). */
uint32_t tmm_toeplitz_fft_chunk_rows(const tmm_toeplitz_fft *plan);

/* The padded FFT length N (0 when the shape is empty). */
uint32_t tmm_toeplitz_fft_length(const tmm_toeplitz_fft *plan);

/* As tmm_op_toeplitz_forward (desc: the plan's). */
tmm_status tmm_toeplitz_fft_record_forward(tmm_recorder *r, tmm_toeplitz_fft *plan, tmm_view u, tmm_view w,
                                           tmm_view beta, tmm_view y);
/* As tmm_op_toeplitz_backward without scratch (the plan owns its memory);
 * same flags. */
tmm_status tmm_toeplitz_fft_record_backward(tmm_recorder *r, tmm_toeplitz_fft *plan, uint32_t flags, tmm_view u,
                                            tmm_view w, tmm_view gy, tmm_view du, tmm_view dw, tmm_view dbeta);

/* Tests steer plans through the device's tuning (runtime/device.h):
 * max_chunk_rows caps the channel rows per chunk of plans created after it
 * (many chunks on small shapes), loop_budget the terms one pass of the dw
 * and dbeta sums adds (the multi-pass path). */

#endif
