/* Causal Toeplitz mixing (the spec's "Mix", "Multi-head mixing" and
 * "kernel k"), forward and backward, behind one interface with a choice of
 * implementation. Its meaning is the C reference in src/ref/ref_toeplitz.c.
 *
 * Shapes (float32, row-major, position-major activations):
 *   u, y, gy, du   [B, n, d]      element (b, t, c) at (b*n + t)*d + c
 *   w, dw          [G, K, n]      G groups ("heads"), K taps per group
 *   beta, dbeta    [G, n]
 * Channel c belongs to group g(c) = c / (d/G): G groups of d/G contiguous
 * channels (flat: G = 1; multi-head: G = H). G must divide d.
 *
 *   y[b, t, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * u[b, s, c-(K-1)+a],  g = g(c)
 *
 * The tap window stays inside the group (the spec's kernel-k variant: each
 * head is a module of its own that zero-pads its channels): input channels
 * c-(K-1)+a below group g's first channel g*d/G count as zero. The
 * "expanded" variant is two of these ops with a SiLU between, composed by
 * the model.
 *
 * Backward, with gy = dL/dy:
 *   du[b, s, c']  = sum_a sum_{t>=s} w[g, a, t-s] * gy[b, t, c],   c = c'+(K-1)-a in g = g(c')
 *   dw[g, a, k]   = sum_b sum_{c in g} sum_{t>=k} gy[b, t, c] * u[b, t-k, c-(K-1)+a],  c-(K-1)+a in g
 *   dbeta[g, t]   = sum_b sum_{c in g} gy[b, t, c]
 * Gradients are written, not accumulated into. Every sum runs in a fixed
 * order (no atomics): the same inputs give the same bits on every run.
 *
 * Views: float offsets (multiples of 4 bytes). u, w, beta, y, gy, du may start
 * anywhere; each op binds them from an aligned offset at or before the
 * view. scratch, dw and dbeta must start at a multiple of the device's
 * minStorageBufferOffsetAlignment (the deterministic sums bind them
 * directly). Outputs must not overlap inputs or each other. One sequence
 * (n*d floats) and w (G*K*n floats) must each fit in maxStorageBufferRange
 * (else TMM_ERR_UNSUPPORTED); longer batches are split over dispatches. */
#ifndef TMM_OPS_TOEPLITZ_H
#define TMM_OPS_TOEPLITZ_H

#include "recorder.h"

/* How the Toeplitz layers are computed: tmm_toeplitz_impl (include/tmm/model.h).
 * The ops here are DIRECT (AUTO counts as DIRECT; the model picks per shape
 * and device, mixer/toeplitz_select.h); FFT is a plan object (toeplitz_fft.h). */
#include "tmm/model.h"

/* Kernels of the DIRECT implementation (the same results up to rounding). */
typedef enum tmm_toeplitz_variant {
    TMM_TOEPLITZ_VARIANT_AUTO = 0, /* REGISTER on CPU devices, TILED on GPUs (REGISTER where its tiles do not fit) */
    TMM_TOEPLITZ_REGISTER,         /* register blocks, no shared memory (CPU devices: lavapipe) */
    TMM_TOEPLITZ_TILED,            /* shared-memory tiles (GPUs): up to 15 KiB of shared memory (K = 16), and
                                    * K - 1 <= d/G when G > 1 */
} tmm_toeplitz_variant;

#define TMM_TOEPLITZ_MAX_TAPS 16u

typedef struct tmm_toeplitz_desc {
    uint32_t batch;  /* B */
    uint32_t n;      /* sequence length (= length of w and beta) */
    uint32_t d;      /* channels */
    uint32_t groups; /* G, divides d; 0 counts as 1 */
    uint32_t taps;   /* K, 1..TMM_TOEPLITZ_MAX_TAPS; 0 counts as 1 */
    tmm_toeplitz_impl impl;
} tmm_toeplitz_desc;

/* Backward flags. */
#define TMM_TOEPLITZ_SKIP_DU 1u     /* du is not computed (first layer); du may be an empty view */
#define TMM_TOEPLITZ_SKIP_PARAMS 2u /* dw and dbeta are not computed (frozen layer); they may be empty */

const char *tmm_toeplitz_impl_name(tmm_toeplitz_impl impl);
const char *tmm_toeplitz_variant_name(tmm_toeplitz_variant variant);

/* Checks a descriptor without recording anything: G divides d, K in range,
 * the implementation exists, and the shape can be bound (and a forced TILED
 * variant's tiles fit in shared memory) on the device of r (r may be NULL:
 * shape checks only). TMM_ERR_INVALID_ARGUMENT or TMM_ERR_UNSUPPORTED
 * with a message. */
tmm_status tmm_toeplitz_check(const tmm_recorder *r, const tmm_toeplitz_desc *desc);

/* y = Toeplitz(u) + beta, as above. */
tmm_status tmm_op_toeplitz_forward(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view u, tmm_view w,
                                   tmm_view beta, tmm_view y);

/* Floats of scratch the backward needs for this shape and flags on device
 * (0 when none: then scratch may be an empty view). device may be NULL: the
 * default tuning; with variant AUTO the larger of the two variants' needs. */
uint64_t tmm_op_toeplitz_backward_scratch(const tmm_device *device, const tmm_toeplitz_desc *desc, uint32_t flags);

/* du, dw, dbeta from u (the forward's input), w and gy, as above. With
 * TMM_TOEPLITZ_SKIP_DU du is left alone (and u is still needed for dw); with
 * TMM_TOEPLITZ_SKIP_PARAMS dw and dbeta are left alone and u is not read. */
tmm_status tmm_op_toeplitz_backward(tmm_recorder *r, const tmm_toeplitz_desc *desc, uint32_t flags, tmm_view u,
                                    tmm_view w, tmm_view gy, tmm_view scratch, tmm_view du, tmm_view dw,
                                    tmm_view dbeta);

/* Tests and benchmarks steer these ops through the device's tuning
 * (runtime/device.h): kernel_variant forces a variant of the DIRECT kernels
 * (AUTO picks per device), loop_budget lowers the loop iterations one
 * invocation may make (default TMM_MAX_LOOP) so the multi-pass and
 * partial-row paths run on short sequences; both change the scratch size of
 * tmm_op_toeplitz_backward_scratch on that device. */

#endif
