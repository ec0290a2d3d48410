/* FFT implementation of the causal Toeplitz op (toeplitz.h), as a plan
 * object: created once per shape and device, it owns its padded buffers and
 * VkFFT plans; the record functions take the same views as
 * tmm_op_toeplitz_forward / tmm_op_toeplitz_backward and compute the same
 * thing (up to FFT rounding: errors grow about like log2(N) times the size of
 * the terms, see tests/test_toeplitz_fft.c).
 *
 * Layout: N = tmm_fft_good_length(2n - 1) (>= 2n-1, so the circular
 * convolution of the zero-padded rows is the causal one on [0, n): nothing is
 * masked), M = N/2 + 1. One real buffer R and one complex buffer C hold
 * rows of N floats / M complex numbers:
 *   forward:  R rows [0, Bd) = u transposed to channel rows (row b*d + c),
 *             rows [Bd, Bd + GK) = the w vectors (one per group and tap,
 *             transformed once per call, not per channel); one R2C of all
 *             rows into C; the spectral product (sum over taps) into the
 *             complex buffer C2; one C2R of Bd rows back into R; crop to n,
 *             add beta, scatter to y [B, n, d].
 *   backward: R rows [0, Bd) = gy, [Bd, 2Bd) = u, [2Bd, 2Bd + GK) = w; dbeta
 *             summed from the gy rows in the real domain (fixed order); one
 *             R2C; C2 rows [0, Bd) = du spectrum (conjugate products,
 *             correlation), rows [Bd, Bd + GK) = dw spectrum summed over
 *             batch and group channels in the frequency domain (fixed order,
 *             passes of at most TMM_MAX_LOOP terms); one C2R of Bd + GK rows
 *             into R; crop and scatter du and dw.
 * The plans are bound to R/C/C2 at byte 0 (runtime/fft.h). R, C and C2
 * are scratch within each record call (the backward packs u, w and gy
 * again), so one plan object serves every op of its shape, recorded one
 * after another into any recordings (barriers are automatic): the model's
 * layers, and both ops of an expanded layer, share one (tested).
 * Memory: tmm_toeplitz_fft_planned_bytes, plus VkFFT's temp buffers for
 * multi-pass lengths. Every one of R, C, C2 must
 * fit in maxStorageBufferRange (else TMM_ERR_UNSUPPORTED at creation; no
 * batch splitting yet). Deterministic: no atomics, fixed orders. */
#ifndef TMM_OPS_TOEPLITZ_FFT_H
#define TMM_OPS_TOEPLITZ_FFT_H

#include "toeplitz.h"

typedef struct tmm_toeplitz_fft tmm_toeplitz_fft;

/* Creates the plan for desc's shape (desc->impl is ignored). Compiles VkFFT
 * shaders: do it once, at load time. TMM_ERR_INVALID_ARGUMENT for a bad
 * shape, TMM_ERR_UNSUPPORTED when a buffer exceeds the device's limits. */
tmm_status tmm_toeplitz_fft_create(tmm_device *device, const tmm_toeplitz_desc *desc, tmm_toeplitz_fft **out);
/* NULL is fine. Only after every recording that used it has finished. */
void tmm_toeplitz_fft_destroy(tmm_toeplitz_fft *plan);
/* Bytes of device memory a plan for desc allocates through tmm's allocator
 * (R, C, C2): 8 * M * (5Bd + 3GK), O(B*d*n) since N <= 2.19n (0 for an empty
 * or invalid shape). VkFFT's own temp buffer for lengths it does in several
 * passes, at most about C's size, comes on top. */
uint64_t tmm_toeplitz_fft_planned_bytes(const tmm_toeplitz_desc *desc);

/* The padded FFT length N (0 when the shape is empty). */
uint32_t tmm_toeplitz_fft_length(const tmm_toeplitz_fft *plan);

/* As tmm_op_toeplitz_forward (desc: the plan's). */
tmm_status tmm_toeplitz_fft_record_forward(tmm_recorder *r, tmm_toeplitz_fft *plan, tmm_view u, tmm_view w,
                                           tmm_view beta, tmm_view y);
/* As tmm_op_toeplitz_backward without scratch (the plan owns its memory);
 * same flags. */
tmm_status tmm_toeplitz_fft_record_backward(tmm_recorder *r, tmm_toeplitz_fft *plan, uint32_t flags, tmm_view u,
                                            tmm_view w, tmm_view gy, tmm_view du, tmm_view dw, tmm_view dbeta);

/* Lowers the terms one pass of the dw and dbeta sums adds (default and
 * maximum TMM_MAX_LOOP = 4096, for lavapipe's loop cap), so that tests run
 * the multi-pass path with small shapes; 0 restores the default.
 * Process-wide, not thread-safe; applies to recordings made after it. */
void tmm_toeplitz_fft_set_loop_budget(uint32_t terms);

#endif
