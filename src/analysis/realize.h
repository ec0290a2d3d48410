/* State-space realizations of Toeplitz vectors (tmm distill).
 *
 * A Toeplitz vector w (length n) is the impulse response of a causal FIR
 * filter. With an exact head of m >= 1 lags, the tail h[j] = w[m + j],
 * j = 0 .. L-1 (L = n - m), is fitted by a sum of M modes
 *
 *     ŵ[m + j] = Σ_i Re(res_i · pole_i^j)          (j >= 0)
 *
 * one mode per real pole (pole and residue real) or per complex-conjugate
 * pair (one pole of the pair kept, its residue doubled: the pair's real
 * response). The order r (the state dimension) counts a real mode once and
 * a pair twice. Decoding runs the recurrence z_i <- pole_i·z_i + u per mode
 * (docs/model.md "Distilled decoding").
 *
 * Method (poles from balanced truncation of the FIR system or from Kung's
 * method, then a least-squares fit of the residues):
 *   - The FIR realization of h (A = the L x L down-shift, B = e_0, C = hᵀ)
 *     has controllability Gramian I and observability Gramian H², where H is
 *     the L x L Hankel matrix H[i][k] = h[i + k] (0 when i + k >= L), which
 *     is symmetric: its eigenvalues μ_i give the Hankel singular values
 *     σ_i = |μ_i| (sorted descending) and its eigenvectors V the balancing
 *     transform. Truncating to the r largest gives A_r similar to
 *     V_rᵀ·A·V_r, whose eigenvalues are the poles.
 *   - Balanced truncation's bound: the ℓ2 norm of the whole impulse-response
 *     error (hence max |w - ŵ|) is at most 2·Σ_{i>r} σ_i.
 *   - Kung's method: the left singular vectors U of the window's p x q
 *     Hankel (h[i + j], p + q - 1 = L) are shift invariant, U_r[1:p] =
 *     U_r[0:p-1]·A_r (least squares); A_r's eigenvalues are exact poles for a
 *     window that is a sum of r modes (the zero-padded H also sees the
 *     window's end), but need not lie inside the unit circle.
 *   - Poles are rounded to float (what decoding uses); a pole of modulus >= 1
 *     (Kung's, or balanced truncation's through rounding) is reflected into
 *     the disk (λ -> 1/conj(λ); on the circle, its modulus
 *     set to 1 - 2^-20) and counted. The residues are then the least-squares
 *     fit of h over the window j < L given the poles (real unknowns: one per
 *     real mode, two per pair), rounded to float. With no pole reflected the
 *     fit is at least as close as balanced truncation's residues, so the
 *     bound holds for it (up to float rounding, ~1e-6·||w||_2) while r is
 *     well below L: near r = L the truncation tends to the FIR's nilpotent
 *     shift, whose clustered poles make the modal fit ill-conditioned, and
 *     the achieved error can be far above the bound.
 *   - Both pole sets are fitted and the closer fit is kept: the bound holds
 *     for the result whenever it holds for balanced truncation's.
 *   - Achieved errors are measured in double with the float poles and
 *     residues, over the whole vector (the head is exact).
 */
#ifndef TMM_ANALYSIS_REALIZE_H
#define TMM_ANALYSIS_REALIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

/* Largest order a realization may have (the decoding kernel's loop budget
 * is checked separately, per layer). */
#define TMM_REALIZE_MAX_ORDER 1024u

typedef struct tmm_realization {
    uint32_t head;      /* m: lags kept exactly (>= 1) */
    uint32_t order;     /* r: state dimension */
    uint32_t modes;     /* M <= r */
    float *pole_re, *pole_im, *res_re, *res_im;  /* [modes] each (one malloc'ed block: tmm_realization_free) */
    uint32_t reflected; /* poles moved into the unit disk */
    double bound;       /* 2·Σ_{i>r} σ_i (Hankel singular values of the tail); 0 when r = L */
    double sigma1;      /* the largest Hankel singular value (0 for a zero tail) */
    double max_abs;     /* max_k |w[k] - ŵ[k]| */
    double l2;          /* ||w - ŵ||_2: what the bound bounds */
    double rel_l2;      /* ||w - ŵ||_2 / ||w||_2 (0 when w = 0) */
    bool bound_met;     /* l2 <= bound (+ 1e-5·||w||_2 for float poles and residues): always so for
                           tmm_realize's result, which falls back to a lower order where a fit misses it */
} tmm_realization;

/* How the order of each vector is chosen. */
typedef struct tmm_realize_options {
    uint32_t head;       /* m >= 1 (clamped to n) */
    uint32_t order;      /* > 0: this order (clamped to L and TMM_REALIZE_MAX_ORDER), or the largest
                            below it whose fit meets its bound (the result's order says which) */
    double tol;          /* order 0: the smallest r whose achieved rel_l2 <= tol (and whose fit meets its
                            bound), searched by bisection up to the smallest r whose bound <= tol·||w||_2
                            (capped at max_order); TMM_ERR_INVALID_ARGUMENT when none reaches tol */
    uint32_t max_order;  /* cap of the tol search (0: TMM_REALIZE_MAX_ORDER) */
} tmm_realize_options;

/* A realization of w[0 .. n) as above. TMM_ERR_INVALID_ARGUMENT for n = 0,
 * head = 0, a non-finite w, or neither order nor a tol > 0;
 * TMM_ERR_UNSUPPORTED (with LAPACK's info, as src/analysis/linalg.c) when a
 * decomposition fails; TMM_ERR_OUT_OF_HOST_MEMORY when memory runs out. On
 * failure *out owns nothing. */
tmm_status tmm_realize(const float *w, uint32_t n, const tmm_realize_options *opt, tmm_realization *out);

/* ŵ[0 .. n): w's head (copied from w) and the modes' tail, in double. */
void tmm_realization_response(const tmm_realization *re, const float *w, uint32_t n, double *out);

/* The Hankel singular values of the tail h[0 .. L), descending, into sigma[L]. */
tmm_status tmm_hankel_singular_values(const double *h, uint32_t L, double *sigma);

void tmm_realization_free(tmm_realization *re);

#endif
