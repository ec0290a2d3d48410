/* Plain C references of the Llama-style transformer's ops (src/ops/llama_ops.h):
 * RMSNorm, SwiGLU and RoPE, forward and backward, in double. They define what
 * the device ops compute and are checked by finite differences
 * (tests/test_llama_fd.c). Arrays are row-major [rows, width]. Parameter
 * gradients are overwritten, or added to with accumulate. */
#ifndef TMM_REF_LLAMA_H
#define TMM_REF_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RMSNorm over d: rstd[r] = 1 / sqrt(sum_c x[r, c]^2 / d + eps),
 * y[r, c] = x[r, c] * rstd[r] * g[c]. rstd ([rows]) may be NULL. y may be x. */
void ref_rmsnorm_fwd_d(const double *x, const double *g, size_t rows, size_t d, double eps, double *y, double *rstd);
/* Gradients of sum(dy * y) (rstd recomputed from x), with xhat = x * rstd:
 *   dx[r, c] = rstd[r] * (dy[r, c] g[c] - xhat[r, c] * sum_j dy[r, j] g[j] xhat[r, j] / d)
 *   dg[c] (+)= sum_r dy[r, c] xhat[r, c]
 * dx may be dy. */
void ref_rmsnorm_bwd_d(const double *x, const double *g, const double *dy, size_t rows, size_t d, double eps,
                       bool accumulate, double *dx, double *dg);

/* SwiGLU: gu [rows, 2f] holds the gate a (columns 0..f-1) and the up
 * projection b (columns f..2f-1); y [rows, f] = silu(a) * b, silu(a) =
 * a * sigmoid(a). */
void ref_swiglu_fwd_d(const double *gu, size_t rows, size_t f, double *y);
/* dgu [rows, 2f] from gu and dy [rows, f]: the gate half
 * da = dy * b * silu'(a), silu'(a) = s + a s (1 - s), s = sigmoid(a); the up
 * half db = dy * silu(a). dgu may be gu. */
void ref_swiglu_bwd_d(const double *gu, const double *dy, size_t rows, size_t f, double *dgu);

/* RoPE, "rotate half", on x [rows, d] with `heads` heads of dh = d / heads
 * channels (dh even). Row r is at position t = r mod n (pos NULL: rows
 * [B, n, d]) or t = pos[r] (rows [B, d], one per sequence). For head h and
 * i < dh/2, with c0 = h dh + i, c1 = c0 + dh/2 and theta = t * base^(-2i/dh):
 *   y[c0] = x[c0] cos(theta) - x[c1] sin(theta)
 *   y[c1] = x[c0] sin(theta) + x[c1] cos(theta)
 * inverse rotates by -theta: the transpose, so the backward is
 * ref_rope_d(dy, ..., inverse = true, dx). y may be x. */
void ref_rope_d(const double *x, size_t rows, size_t d, size_t heads, size_t n, const uint32_t *pos, double base,
                bool inverse, double *y);

#endif
