/* State-space realizations of Toeplitz vectors: balanced truncation of the
 * tail's FIR system through the eigendecomposition of its symmetric Hankel
 * matrix, poles from the projected shift (or Kung's method on the window's
 * Hankel, when closer), residues by least squares (realize.h). */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LAPACK_COMPLEX_STRUCTURE /* keep <complex.h> out: we pass no complex data */
#include <lapacke.h>

#include "analysis/realize.h"
#include "model/distilled.h"

/* A pole whose imaginary part is this small relative to its modulus is real. */
#define REAL_POLE_RTOL 1e-12
/* Modulus given to a pole that reflection leaves on the unit circle: 1 - 2^-20. */
#define ON_CIRCLE_MODULUS (1.0 - 1.0 / 1048576.0)

static tmm_status lapack_fail(lapack_int info, const char *what, uint32_t rows, uint32_t cols)
{
    if (info == LAPACK_WORK_MEMORY_ERROR || info == LAPACK_TRANSPOSE_MEMORY_ERROR)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory in LAPACK %s (%u x %u)", what, rows, cols);
    return tmm_fail(TMM_ERR_UNSUPPORTED, "LAPACK %s failed on a %u x %u matrix (info %d)", what, rows, cols,
                    (int)info);
}

static tmm_status out_of_memory(const char *what, uint32_t size)
{
    return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %s (size %u)", what, size);
}

/* ---- the Hankel eigendecomposition ------------------------------------------------ */

/* Eigenvalues mu (ascending) and, for jobz 'V', eigenvectors in a (L x L,
 * column-major) of the Hankel matrix H[i][k] = h[i + k] (0 past the end). */
static tmm_status hankel_eig(const double *h, uint32_t L, char jobz, double *a, double *mu)
{
    const size_t l = L;
    for (size_t k = 0; k < l; k++)
        for (size_t i = 0; i < l; i++)
            a[k * l + i] = i + k < l ? h[i + k] : 0;
    lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, jobz, 'U', (lapack_int)L, a, (lapack_int)L, mu);
    return info == 0 ? TMM_OK : lapack_fail(info, "dsyevd (Hankel eigenvalues)", L, L);
}

typedef struct magnitude {
    double abs;
    uint32_t index;
} magnitude;

/* Descending |μ|; ties keep the eigensolver's order (deterministic). */
static int magnitude_cmp(const void *pa, const void *pb)
{
    const magnitude *a = pa, *b = pb;
    if (a->abs != b->abs)
        return a->abs < b->abs ? 1 : -1;
    return (a->index > b->index) - (a->index < b->index);
}

/* sigma[i] = |mu|, descending; perm[i] = the index of that eigenvalue in mu. */
static tmm_status sort_magnitudes(const double *mu, uint32_t L, double *sigma, uint32_t *perm)
{
    magnitude *s = malloc((size_t)L * sizeof *s);
    if (!s)
        return out_of_memory("sorting Hankel eigenvalues", L);
    for (uint32_t i = 0; i < L; i++)
        s[i] = (magnitude){fabs(mu[i]), i};
    qsort(s, L, sizeof *s, magnitude_cmp);
    for (uint32_t i = 0; i < L; i++) {
        sigma[i] = s[i].abs;
        if (perm)
            perm[i] = s[i].index;
    }
    free(s);
    return TMM_OK;
}

tmm_status tmm_hankel_singular_values(const double *h, uint32_t L, double *sigma)
{
    if (L == 0)
        return TMM_OK;
    if (!h || !sigma)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "Hankel singular values need h and sigma");
    double *a = malloc(((size_t)L * L + L) * sizeof *a);
    if (!a)
        return out_of_memory("a Hankel matrix", L);
    double *mu = a + (size_t)L * L;
    tmm_status s = hankel_eig(h, L, 'N', a, mu);
    if (s == TMM_OK)
        s = sort_magnitudes(mu, L, sigma, NULL);
    free(a);
    return s;
}

static double dot(const double *x, const double *y, size_t n)
{
    double acc[4] = {0, 0, 0, 0}; /* independent sums: the loop is latency bound otherwise */
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (size_t t = 0; t < 4; t++)
            acc[t] += x[i + t] * y[i + t];
    for (; i < n; i++)
        acc[0] += x[i] * y[i];
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* A = V_kᵀ·S·V_k (k x k, column-major) for the eigenvectors of the k largest
 * |μ|: A[a][b] = Σ_{i>=1} V[i][a]·V[i-1][b]. A candidate order r <= k uses
 * the leading r x r block. */
static void projected_shift(const double *v, uint32_t L, const uint32_t *perm, uint32_t k, double *a)
{
    const size_t l = L;
    for (size_t b = 0; b < k; b++)
        for (size_t c = 0; c < k; c++)
            a[b * k + c] = dot(v + perm[c] * l + 1, v + perm[b] * l, l - 1);
}

/* ---- one realization of a given order ---------------------------------------------- */

typedef struct fit_input {
    const float *w;
    uint32_t n, head, L;
    const double *h;     /* the tail [L] */
    const double *sigma; /* Hankel singular values [L], descending */
    const double *shift; /* projected shift [k x k] */
    uint32_t k;          /* its order (the largest r fitted) */
    const double *u;     /* Kung: left singular vectors of the window's p x q Hankel [p x ku], or NULL */
    uint32_t p, ku;
} fit_input;

static double truncation_bound(const double *sigma, uint32_t L, uint32_t r)
{
    double sum = 0;
    for (uint32_t i = L; i > r; i--) /* smallest first */
        sum += sigma[i - 1];
    return 2 * sum;
}

typedef enum mode_kind { MODE_NONE, MODE_REAL, MODE_PAIR } mode_kind;

/* dgeev lists a conjugate pair as adjacent eigenvalues, positive imaginary
 * part first: the pair is one mode (the first); a tiny imaginary part (none
 * left after rounding to float) makes each member a real mode. */
static mode_kind mode_of(double re, double im)
{
    if (fabs(im) <= REAL_POLE_RTOL * hypot(re, im) || (float)im == 0)
        return MODE_REAL;
    return im > 0 ? MODE_PAIR : MODE_NONE;
}

/* Moves a float pole of modulus >= 1 into the unit disk (λ -> 1/conj(λ),
 * or modulus 1 - 2^-20 when that rounds back onto the circle). */
static bool reflect_into_disk(float *re, float *im)
{
    const double x = *re, y = *im, m2 = x * x + y * y;
    if (m2 < 1)
        return false;
    float rf = (float)(x / m2), imf = (float)(y / m2);
    if ((double)rf * rf + (double)imf * imf >= 1) {
        const double scale = ON_CIRCLE_MODULUS / sqrt(m2);
        rf = (float)(x * scale);
        imf = (float)(y * scale);
    }
    *re = rf;
    *im = imf;
    return true;
}

/* The order-r state matrix of Kung's method into a [r x r]: the shift
 * invariance of the window's observability, U_r[1:p] = U_r[0:p-1]·A, solved
 * by least squares. Exact for a window that is a sum of r modes, where the
 * truncated FIR's balanced truncation is not (its Hankel sees the window's
 * end). */
static tmm_status kung_matrix(const fit_input *in, uint32_t r, double *a)
{
    const size_t rows = in->p - 1;
    double *x = malloc((2 * rows * r + r) * sizeof *x);
    if (!x)
        return out_of_memory("Kung's shift", r);
    double *y = x + rows * r, *sv = y + rows * r;
    for (size_t c = 0; c < r; c++) {
        memcpy(x + c * rows, in->u + c * in->p, rows * sizeof *x);
        memcpy(y + c * rows, in->u + c * in->p + 1, rows * sizeof *y);
    }
    lapack_int rank; /* minimum norm where the window has rank below r (a pure delay) */
    lapack_int info = LAPACKE_dgelsd(LAPACK_COL_MAJOR, (lapack_int)rows, (lapack_int)r, (lapack_int)r, x,
                                     (lapack_int)rows, y, (lapack_int)rows, sv, -1, &rank);
    for (size_t c = 0; info == 0 && c < r; c++)
        memcpy(a + c * r, y + c * rows, r * sizeof *a);
    free(x);
    return info == 0 ? TMM_OK : lapack_fail(info, "dgelsd (Kung)", (uint32_t)rows, r);
}

/* The poles of order r into re (modes, pole arrays set): of the balanced
 * truncation's projected shift, or with kung of Kung's state matrix. */
static tmm_status fit_poles(const fit_input *in, uint32_t r, bool kung, tmm_realization *re)
{
    double *a = malloc(((size_t)r * r + 2 * (size_t)r) * sizeof *a);
    if (!a)
        return out_of_memory("a projected shift", r);
    double *wr = a + (size_t)r * r, *wi = wr + r;
    tmm_status s = TMM_OK;
    if (kung)
        s = kung_matrix(in, r, a);
    else
        for (size_t b = 0; b < r; b++)
            memcpy(a + b * r, in->shift + b * in->k, r * sizeof *a);
    lapack_int info = s == TMM_OK ? LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'N', (lapack_int)r, a, (lapack_int)r, wr, wi,
                                                  NULL, 1, NULL, 1) : 0;
    if (s == TMM_OK && info != 0)
        s = lapack_fail(info, "dgeev (poles)", r, r);
    uint32_t modes = 0;
    for (uint32_t i = 0; s == TMM_OK && i < r; i++)
        modes += mode_of(wr[i], wi[i]) != MODE_NONE;
    float *block = s == TMM_OK ? malloc(4 * (size_t)modes * sizeof *block) : NULL;
    if (s == TMM_OK && !block)
        s = out_of_memory("realization modes", modes);
    if (s == TMM_OK) {
        re->modes = modes;
        re->pole_re = block;
        re->pole_im = block + modes;
        re->res_re = block + 2 * (size_t)modes;
        re->res_im = block + 3 * (size_t)modes;
        for (uint32_t i = 0, j = 0; i < r; i++) {
            const mode_kind kind = mode_of(wr[i], wi[i]);
            if (kind == MODE_NONE)
                continue;
            re->pole_re[j] = (float)wr[i];
            re->pole_im[j] = kind == MODE_PAIR ? (float)wi[i] : 0.0f;
            re->reflected += reflect_into_disk(&re->pole_re[j], &re->pole_im[j]);
            j++;
        }
    }
    free(a);
    return s;
}

/* Least-squares residues for the poles of re over the window j < L: one
 * real unknown per real mode, two (Re, Im of the residue) per pair. Columns
 * are scaled to unit norm and singular values below float precision
 * dropped: directions the float residues could not resolve anyway. */
static tmm_status fit_residues(const fit_input *in, uint32_t r, tmm_realization *re)
{
    const size_t l = in->L;
    double *m = malloc((l * r + l + 2 * (size_t)r) * sizeof *m);
    if (!m)
        return out_of_memory("a residue least-squares problem", r);
    double *b = m + l * r, *norm = b + l, *sv = norm + r;
    size_t c = 0;
    for (uint32_t i = 0; i < re->modes; i++) {
        const double pr = re->pole_re[i], pi = re->pole_im[i];
        const bool pair = pi != 0;
        double xr = 1, xi = 0; /* pole^j */
        for (size_t j = 0; j < l; j++) {
            m[c * l + j] = xr;
            if (pair)
                m[(c + 1) * l + j] = -xi;
            const double t = xr * pr - xi * pi;
            xi = xr * pi + xi * pr;
            xr = t;
        }
        c += pair ? 2 : 1;
    }
    for (size_t k = 0; k < r; k++) {
        const double nk = sqrt(dot(m + k * l, m + k * l, l));
        norm[k] = nk > 0 ? nk : 1;
        for (size_t j = 0; j < l; j++)
            m[k * l + j] /= norm[k];
    }
    memcpy(b, in->h, l * sizeof *b);
    lapack_int rank;
    lapack_int info = LAPACKE_dgelsd(LAPACK_COL_MAJOR, (lapack_int)l, (lapack_int)r, 1, m, (lapack_int)l, b,
                                     (lapack_int)l, sv, FLT_EPSILON, &rank);
    tmm_status s = info == 0 ? TMM_OK : lapack_fail(info, "dgelsd (residues)", in->L, r);
    for (uint32_t i = 0, k = 0; s == TMM_OK && i < re->modes; i++) {
        re->res_re[i] = (float)(b[k] / norm[k]);
        re->res_im[i] = re->pole_im[i] != 0 ? (float)(b[k + 1] / norm[k + 1]) : 0.0f;
        k += re->pole_im[i] != 0 ? 2 : 1;
    }
    free(m);
    return s;
}

/* What float poles and residues may add to balanced truncation's error, relative to ||w||_2. */
#define BOUND_SLACK 1e-5

/* max_abs, l2, rel_l2 and bound_met of re against w, in double. */
static tmm_status measure(const fit_input *in, tmm_realization *re)
{
    double *what = malloc((size_t)in->n * sizeof *what);
    if (!what)
        return out_of_memory("a realization's response", in->n);
    tmm_realization_response(re, in->w, in->n, what);
    double max_abs = 0, err2 = 0, norm2 = 0;
    for (uint32_t k = 0; k < in->n; k++) {
        const double d = in->w[k] - what[k];
        max_abs = fmax(max_abs, fabs(d));
        err2 += d * d;
        norm2 += (double)in->w[k] * in->w[k];
    }
    free(what);
    re->max_abs = max_abs;
    re->l2 = sqrt(err2);
    re->rel_l2 = norm2 > 0 ? sqrt(err2 / norm2) : 0;
    re->bound_met = re->l2 <= re->bound + BOUND_SLACK * sqrt(norm2);
    return TMM_OK;
}

/* The realization of order r with one choice of poles; on failure out owns nothing. */
static tmm_status fit_with(const fit_input *in, uint32_t r, bool kung, tmm_realization *out)
{
    *out = (tmm_realization){.head = in->head,
                             .order = r,
                             .bound = truncation_bound(in->sigma, in->L, r),
                             .sigma1 = in->L > 0 ? in->sigma[0] : 0};
    tmm_status s = TMM_OK;
    if (r > 0) {
        s = fit_poles(in, r, kung, out);
        if (s == TMM_OK)
            s = fit_residues(in, r, out);
    }
    if (s == TMM_OK)
        s = measure(in, out);
    if (s != TMM_OK)
        tmm_realization_free(out);
    return s;
}

/* The realization of order r (<= in->k): the balanced truncation's poles or
 * Kung's, whichever fit is closer (so the bound, which holds for the first,
 * holds for the result). */
static tmm_status fit(const fit_input *in, uint32_t r, tmm_realization *out)
{
    TMM_TRY(fit_with(in, r, false, out));
    if (r == 0 || !in->u || r > in->ku || r + 1 > in->p || out->rel_l2 == 0)
        return TMM_OK;
    tmm_realization k;
    tmm_status s = fit_with(in, r, true, &k);
    if (s != TMM_OK) {
        tmm_realization_free(out);
        return s;
    }
    const bool better = k.rel_l2 < out->rel_l2;
    tmm_realization_free(better ? out : &k);
    if (better)
        *out = k;
    return TMM_OK;
}

/* The fit of order r, or, where it misses its bound (the modal form near r = L,
 * where the truncation tends to the FIR's nilpotent shift, or a reflected
 * pole), of the largest order below r whose fit meets its bound: never a fit
 * that is worse than the bound it reports. Order 0 always meets it. */
static tmm_status fit_bounded(const fit_input *in, uint32_t r, tmm_realization *out)
{
    for (;; r--) {
        TMM_TRY(fit(in, r, out));
        if (out->bound_met || r == 0)
            return TMM_OK;
        tmm_realization_free(out);
    }
}

/* ---- the order ------------------------------------------------------------------- */

/* The smallest r <= cap whose bound is within target (cap when none is). */
static uint32_t bound_order(const double *sigma, uint32_t L, uint32_t cap, double target)
{
    double tail = truncation_bound(sigma, L, cap) / 2;
    uint32_t r = cap;
    while (r > 0 && 2 * (tail + sigma[r - 1]) <= target)
        tail += sigma[--r];
    return 2 * tail <= target ? r : cap;
}

/* The smallest r in [0, r_hi] whose achieved rel_l2 is within tol (and whose
 * fit meets its bound), by bisection that presumes r_hi reaches it; when no
 * probe does, r_hi's bounded fit (fit_bounded), and an error if that misses
 * tol too. r_hi is fitted only then: it is the dearest fit, and near r = L
 * the modal form is ill-conditioned (the FIR's realization is nilpotent), so
 * a smaller probe may reach tol where r_hi does not. */
static tmm_status search_order(const fit_input *in, uint32_t r_hi, double tol, tmm_realization *out)
{
    bool found = false;
    uint32_t lo = 0, hi = r_hi; /* once found, *out is hi's fit, which reaches tol; lo - 1 does not */
    while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        tmm_realization cand;
        tmm_status s = fit(in, mid, &cand);
        if (s != TMM_OK) {
            tmm_realization_free(out);
            return s;
        }
        if (cand.rel_l2 <= tol && cand.bound_met) {
            tmm_realization_free(out);
            *out = cand;
            hi = mid;
            found = true;
        } else {
            tmm_realization_free(&cand);
            lo = mid + 1;
        }
    }
    if (found)
        return TMM_OK;
    TMM_TRY(fit_bounded(in, r_hi, out));
    if (out->rel_l2 <= tol)
        return TMM_OK;
    const tmm_realization best = *out;
    tmm_realization_free(out);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no order up to %u reaches the relative L2 error %g (the closest "
                    "fit that meets its bound: order %u, %.3g): raise the order cap or give an order", r_hi, tol,
                    best.order, best.rel_l2);
}

static tmm_status check_arguments(const float *w, uint32_t n, const tmm_realize_options *opt,
                                  const tmm_realization *out)
{
    if (!w || !opt || !out)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "realize needs a vector, options and an output");
    if (n == 0 || opt->head == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "realize needs n >= 1 and head >= 1 (n %u, head %u)", n,
                        opt->head);
    if (opt->order == 0 && !(opt->tol > 0))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "realize needs an order or a tolerance > 0");
    for (uint32_t k = 0; k < n; k++)
        if (!isfinite(w[k]))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "realize: w[%u] is not finite", k);
    return TMM_OK;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* The order of an order request, or the top of the tol search: the smallest
 * r whose bound is within tol·||w||_2. Both within L and the caps. */
static uint32_t largest_order(const float *w, uint32_t n, const tmm_realize_options *opt, const double *sigma,
                              uint32_t L)
{
    const uint32_t cap = min_u32(L, TMM_REALIZE_MAX_ORDER);
    if (opt->order > 0)
        return min_u32(cap, opt->order);
    double norm2 = 0;
    for (uint32_t i = 0; i < n; i++)
        norm2 += (double)w[i] * w[i];
    return bound_order(sigma, L, opt->max_order > 0 ? min_u32(cap, opt->max_order) : cap, opt->tol * sqrt(norm2));
}

/* The left singular vectors U [p x min(p, q)] of the window's Hankel
 * W[i][j] = h[i + j], i < p, j < q (into *u, malloc'ed). */
static tmm_status window_svd(const double *h, uint32_t p, uint32_t q, double **u)
{
    const size_t P = p, Q = q, kmin = p < q ? p : q;
    double *m = malloc((P * Q + P * kmin + kmin + kmin * Q) * sizeof *m);
    if (!m)
        return out_of_memory("Kung's Hankel", p);
    double *uu = m + P * Q, *sv = uu + P * kmin, *vt = sv + kmin;
    for (size_t j = 0; j < Q; j++)
        memcpy(m + j * P, h + j, P * sizeof *m);
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)p, (lapack_int)q, m, (lapack_int)p, sv, uu,
                                     (lapack_int)p, vt, (lapack_int)kmin);
    if (info != 0) {
        free(m);
        return lapack_fail(info, "dgesdd (Kung)", p, q);
    }
    memmove(m, uu, P * kmin * sizeof *m);
    *u = m;
    return TMM_OK;
}

tmm_status tmm_realize(const float *w, uint32_t n, const tmm_realize_options *opt, tmm_realization *out)
{
    if (out)
        *out = (tmm_realization){0};
    TMM_TRY(check_arguments(w, n, opt, out));
    const uint32_t head = min_u32(opt->head, n), L = n - head;
    const size_t l = L;
    /* h, sigma, mu, perm; then V (L x L) */
    double *buf = malloc((3 * l + l * l + 1) * sizeof *buf);
    if (!buf)
        return out_of_memory("a Hankel eigendecomposition", L);
    double *h = buf, *sigma = h + l, *mu = sigma + l, *v = mu + l;
    uint32_t *perm = malloc((l + 1) * sizeof *perm);
    double *shift = NULL;
    tmm_status s = perm ? TMM_OK : out_of_memory("a Hankel eigendecomposition", L);
    for (size_t j = 0; j < l; j++)
        h[j] = w[head + j];
    if (s == TMM_OK && L > 0) {
        s = hankel_eig(h, L, 'V', v, mu);
        if (s == TMM_OK)
            s = sort_magnitudes(mu, L, sigma, perm);
    }
    const uint32_t k = s == TMM_OK ? largest_order(w, n, opt, sigma, L) : 0;
    if (s == TMM_OK && !(shift = malloc(((size_t)k * k + 1) * sizeof *shift)))
        s = out_of_memory("a projected shift", k);
    /* Kung: the p x q Hankel of the window, p + q - 1 = L, U of its SVD */
    const uint32_t p = (L + 2) / 2, q = L + 1 - p, ku = p < q ? p : q;
    double *u = NULL;
    if (s == TMM_OK && L >= 3)
        s = window_svd(h, p, q, &u);
    if (s == TMM_OK) {
        projected_shift(v, L, perm, k, shift);
        const fit_input in = {w, n, head, L, h, sigma, shift, k, u, p, ku};
        s = opt->order > 0 ? fit_bounded(&in, k, out) : search_order(&in, k, opt->tol, out);
    }
    free(u);
    free(shift);
    free(perm);
    free(buf);
    return s;
}

void tmm_realization_response(const tmm_realization *re, const float *w, uint32_t n, double *out)
{
    const uint32_t head = min_u32(re->head, n);
    for (uint32_t k = 0; k < n; k++)
        out[k] = k < head ? w[k] : 0;
    for (uint32_t i = 0; i < re->modes; i++)
        tmm_mode_accumulate(re->pole_re[i], re->pole_im[i], re->res_re[i], re->res_im[i], n - head, out + head);
}

void tmm_realization_free(tmm_realization *re)
{
    if (!re)
        return;
    free(re->pole_re);
    *re = (tmm_realization){0};
}
