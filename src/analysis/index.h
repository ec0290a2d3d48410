/* Operator analysis of Toeplitz vectors (tmm index; docs/model.md, "Operator
 * analysis"). Pure CPU code in double precision.
 *
 * For a vector w of length n the symbol is a(z) = Σ_k w_k z^k, and the causal
 * (lower-triangular) Toeplitz operator T(a) has Fredholm index -wind(a, 0).
 * Per vector we compute:
 *
 * - the winding number of a(e^{iθ}) around 0, certified up to rounding: a and
 *   da/dθ are sampled by FFT on N >= max(8n, 16·(degree+1)) points (a power
 *   of two). On a step of length h, Taylor's theorem keeps a within
 *   h²/2·max|a''| of the tangent segment at either end, and Bernstein's
 *   inequality bounds max|a''| by degree·max|a'| (from the samples). A step
 *   whose segment stays farther than that from 0 changes the phase by the
 *   principal argument of a(end)/a(start); other steps are halved, with
 *   Horner evaluations. The winding number is undefined when
 *   min |a| <= tol·‖w‖₁: a relative change of tol in every weight moves a by
 *   at most that, so only then could it put a zero on the circle.
 * - min over the circle of |a| and the angle θ in [0, π] where it occurs, by
 *   branch and bound over the same steps (to a relative 1e-9).
 * - zeros of the polynomial inside, on and outside the unit circle, from the
 *   eigenvalues of the balanced companion matrix (LAPACK dgebal + dhseqr).
 *   A zero z is on the circle when |a(z/|z|)| <= tol·‖w‖₁, the winding's
 *   tolerance, so with a defined winding number none is on it. Leading zero
 *   coefficients are zeros at z = 0
 *   (inside); trailing zero coefficients lower the degree. When the
 *   polynomial left after removing both has degree >= exact_max_n (or LAPACK
 *   fails), the counts come from the argument principle instead: inside =
 *   winding, none on the circle (min |a| > tol·‖w‖₁), undefined with the
 *   winding.
 * - the singular values of the n×n finite section T[t][s] = w[t-s] (LAPACK
 *   dgesdd, values only) for n <= exact_max_n. Values below n·ε·σ_max are
 *   not resolved by double precision and are reported as that bound; with
 *   w_0 = 0 the section is exactly singular (σ_min = 0).
 */
#ifndef TMM_ANALYSIS_INDEX_H
#define TMM_ANALYSIS_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "model/checkpoint.h"

#define TMM_INDEX_TOL_DEFAULT 1e-6
#define TMM_INDEX_EXACT_MAX_N 2048

typedef struct tmm_index_options {
    double tol;            /* relative tolerance, see above; in (0, 1) */
    uint32_t exact_max_n;  /* SVD up to this n, eigenvalue zero counts below this degree */
    uint32_t jobs;         /* threads for a model's vectors; 0: one per online CPU */
} tmm_index_options;

#define TMM_INDEX_OPTIONS_DEFAULT { TMM_INDEX_TOL_DEFAULT, TMM_INDEX_EXACT_MAX_N, 0 }

/* ---- building blocks (exposed for tests) ---------------------------------- */

/* In-place complex FFT of length N (a power of two): x_j <- Σ_k x_k e^{sign·2πi jk/N}. */
tmm_status tmm_cfft(double *re, double *im, uint32_t N, int sign);

/* a(e^{iθ}) = Σ_{k<=degree} c_k e^{ikθ} by Horner's rule. */
void tmm_symbol_eval(const double *c, uint32_t degree, double theta, double *re, double *im);

typedef struct tmm_winding {
    bool defined;
    int winding;
    double min_abs, min_theta; /* min |a| over the circle and where: θ in [0, π] (also at -θ) */
    double max_abs;            /* max of the FFT samples of |a| */
    uint32_t fft_points;       /* N */
    uint32_t direct_evals;     /* points evaluated by Horner (bisection, refinement) */
} tmm_winding;

/* Winding number of the symbol of w[0..n) around 0; undefined when min |a| <= tol_abs. */
tmm_status tmm_symbol_winding(const double *w, uint32_t n, double tol_abs, tmm_winding *out);

/* Samples a(e^{2πij/N}), j < N, into re/im (N a power of two >= n). */
tmm_status tmm_symbol_samples(const double *w, uint32_t n, uint32_t N, double *re, double *im);

/* Zeros of Σ_{k<=degree} c_k z^k (c_degree != 0) into re/im (degree each). */
tmm_status tmm_poly_roots(const double *c, uint32_t degree, double *re, double *im);

/* The n singular values of the lower-triangular Toeplitz matrix of w, descending. */
tmm_status tmm_toeplitz_singular_values(const double *w, uint32_t n, double *sigma);

/* ---- one vector ------------------------------------------------------------- */

typedef enum tmm_zeros_method {
    TMM_ZEROS_EIGENVALUES,  /* companion matrix */
    TMM_ZEROS_ARGUMENT,     /* argument principle: inside = winding, none on the circle */
    TMM_ZEROS_UNDEFINED,    /* a ≡ 0, or n > exact_max_n with the winding undefined */
} tmm_zeros_method;

typedef struct tmm_symbol_report {
    uint32_t n;
    int degree;              /* of a: index of the last nonzero w_k; -1 when w = 0 */
    double l1, w0_abs;       /* ‖w‖₁, |w_0| */
    double tol_abs;          /* tol·‖w‖₁: min |a| at or below it leaves the winding undefined */
    tmm_winding wind;        /* wind.defined false also when w = 0 */
    tmm_zeros_method zeros_method;
    uint32_t zeros_inside, zeros_on, zeros_outside;
    bool svd;                /* the finite section's singular values were computed */
    double sigma_min, sigma_max;
    double sigma_floor;      /* n·ε·σ_max: smaller σ are not resolved */
    bool sigma_min_resolved; /* false: the true σ_min is below sigma_floor (or 0 when w_0 = 0) */
} tmm_symbol_report;

tmm_status tmm_symbol_analyse(const double *w, uint32_t n, const tmm_index_options *opt, tmm_symbol_report *out);

/* ---- a model ---------------------------------------------------------------- */

typedef struct tmm_index_entry {
    uint32_t layer, head, tap;
    bool second;             /* blocks.L.mix.w2 (expanded variant) rather than mix.w */
    tmm_symbol_report report;
} tmm_index_entry;

typedef struct tmm_index_result {
    tmm_index_entry *entries; /* layer, then w / w2, then head, then tap */
    uint32_t count;
    uint32_t heads, taps;     /* G (1 for flat) and k */
} tmm_index_result;

/* The Toeplitz vector of an entry, as stored (float). */
const float *tmm_index_vector(const tmm_checkpoint *ckpt, const tmm_index_entry *e);
/* Analyses every Toeplitz vector of a loaded checkpoint (opt->jobs threads;
 * the result does not depend on their number). */
tmm_status tmm_index_model(const tmm_checkpoint *ckpt, const tmm_index_options *opt, tmm_index_result *out);
void tmm_index_result_free(tmm_index_result *r);

typedef struct tmm_index_bin {
    int index;
    uint32_t count;
} tmm_index_bin;

/* Histogram of the Fredholm indices of r's entries: distinct indices in
 * ascending order into bins (room for r->count), returns how many; entries
 * whose winding number is undefined are counted in *undefined. */
uint32_t tmm_index_histogram(const tmm_index_result *r, tmm_index_bin *bins, uint32_t *undefined);

/* ---- plots (index_plot.c) --------------------------------------------------- */

/* Writes DIR/layer-LL.svg for each layer (its symbol curves in the complex
 * plane, origin marked) and DIR/summary.svg (all layers in a grid). */
tmm_status tmm_index_plot(const char *dir, const tmm_checkpoint *ckpt, const tmm_index_result *r);

#endif
