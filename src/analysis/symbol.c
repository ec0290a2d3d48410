/* The symbol a(e^{iθ}) of a Toeplitz vector: FFT samples, Horner evaluation,
 * and the certified winding number around 0 (see index.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/index.h"
#include "status.h"

#define PI 3.14159265358979323846264338327950
#define TWO_PI (2 * PI)
#define MAX_BISECT_DEPTH 64  /* a safeguard: tol_abs > 0 ends the bisection long before */
#define MAX_MIN_EVALS 100000 /* points evaluated in the search for min |a| */
#define MAX_FFT_POINTS (1u << 22)
#define GRID_PER_DEGREE 16   /* FFT points per degree (and at least 8n) */

tmm_status tmm_cfft(double *re, double *im, uint32_t N, int sign)
{
    if (N == 0 || (N & (N - 1)))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "FFT length %u is not a power of two", N);
    for (uint32_t i = 1, j = 0; i < N; i++) { /* bit-reversal permutation */
        uint32_t bit = N >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j |= bit;
        if (i < j) {
            double t = re[i]; re[i] = re[j]; re[j] = t;
            t = im[i]; im[i] = im[j]; im[j] = t;
        }
    }
    for (uint32_t len = 2; len <= N; len <<= 1) {
        const uint32_t half = len / 2;
        for (uint32_t k = 0; k < half; k++) {
            /* twiddles from cos/sin directly (not by recurrence): error stays at ε·log N */
            const double ang = sign * TWO_PI * k / len, wr = cos(ang), wi = sin(ang);
            for (uint32_t s = k; s < N; s += len) {
                const uint32_t t = s + half;
                const double xr = re[t] * wr - im[t] * wi, xi = re[t] * wi + im[t] * wr;
                re[t] = re[s] - xr; im[t] = im[s] - xi;
                re[s] += xr; im[s] += xi;
            }
        }
    }
    return TMM_OK;
}

void tmm_symbol_eval(const double *c, uint32_t degree, double theta, double *re, double *im)
{
    const double zr = cos(theta), zi = sin(theta);
    double pr = c[degree], pi = 0;
    for (uint32_t k = degree; k-- > 0;) {
        const double t = pr * zr - pi * zi + c[k];
        pi = pr * zi + pi * zr;
        pr = t;
    }
    *re = pr;
    *im = pi;
}

tmm_status tmm_symbol_samples(const double *w, uint32_t n, uint32_t N, double *re, double *im)
{
    if (N < n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%u samples of a symbol of length %u would alias", N, n);
    memcpy(re, w, n * sizeof *re);
    memset(re + n, 0, (N - n) * sizeof *re);
    memset(im, 0, N * sizeof *im);
    return tmm_cfft(re, im, N, +1);
}

/* Value and θ-derivative of a at θ: Horner for p and p' at z = e^{iθ}, and
 * da/dθ = i·z·p'(z). */
static void eval_with_derivative(const double *c, uint32_t degree, double theta, double v[4])
{
    const double zr = cos(theta), zi = sin(theta);
    double pr = c[degree], pi = 0, dr = 0, di = 0;
    for (uint32_t k = degree; k-- > 0;) {
        const double t = dr * zr - di * zi + pr;
        di = dr * zi + di * zr + pi;
        dr = t;
        const double u = pr * zr - pi * zi + c[k];
        pi = pr * zi + pi * zr;
        pr = u;
    }
    const double qr = zr * dr - zi * di, qi = zr * di + zi * dr; /* z·p' */
    v[0] = pr;
    v[1] = pi;
    v[2] = -qi;
    v[3] = qr;
}

typedef struct walk {
    const double *c;
    uint32_t degree;
    double curvature;  /* bound on |d²a/dθ²| over the circle */
    double tol_abs;
    double min_abs, min_theta;
    uint32_t direct_evals;
    bool unresolved;   /* an arc could not be certified */
} walk;

static void note_min(walk *k, double theta, double m)
{
    if (m < k->min_abs) {
        k->min_abs = m;
        k->min_theta = theta;
    }
}

static double eval_abs(walk *k, double theta)
{
    double re, im;
    tmm_symbol_eval(k->c, k->degree, theta, &re, &im);
    k->direct_evals++;
    const double m = hypot(re, im);
    note_min(k, theta, m);
    return m;
}

/* Where on the segment p + s·v, s in [0, 1], the distance to 0 is smallest. */
static double closest(const double p[2], const double v[2])
{
    const double vv = v[0] * v[0] + v[1] * v[1];
    const double s = vv > 0 ? -(p[0] * v[0] + p[1] * v[1]) / vv : 0;
    return fmin(fmax(s, 0), 1);
}

static double segment_distance(const double p[2], const double v[2])
{
    const double s = closest(p, v);
    return hypot(p[0] + s * v[0], p[1] + s * v[1]);
}

/* Phase change of a along the arc [t0, t1], given a and da/dθ at both ends
 * (e = {re, im, dre, dim}). With h = t1 - t0, Taylor's theorem puts a(t0 + s)
 * within R = h²/2·max|a''| of the segment from a(t0) to a(t0) + h·a'(t0);
 * when that segment is farther than R from 0, a stays in a convex set without
 * 0 and the change is the principal argument of a(t1)/a(t0) (likewise from
 * the other end). Otherwise the arc is halved. */
static double arc_phase(walk *k, double t0, const double e0[4], double t1, const double e1[4], int depth)
{
    const double h = t1 - t0, r = 0.5 * h * h * k->curvature;
    const double v0[2] = { h * e0[2], h * e0[3] }, v1[2] = { -h * e1[2], -h * e1[3] };
    if (segment_distance(e0, v0) > r || segment_distance(e1, v1) > r)
        return atan2(e1[1] * e0[0] - e1[0] * e0[1], e1[0] * e0[0] + e1[1] * e0[1]);
    if (r <= 0.5 * k->tol_abs || depth >= MAX_BISECT_DEPTH) {
        /* a comes within tol_abs of 0 near the segment's closest point: record it */
        eval_abs(k, t0 + closest(e0, v0) * h);
        k->unresolved = true;
        return 0;
    }
    const double tm = 0.5 * (t0 + t1);
    double em[4];
    eval_with_derivative(k->c, k->degree, tm, em);
    k->direct_evals++;
    note_min(k, tm, hypot(em[0], em[1]));
    return arc_phase(k, t0, e0, tm, em, depth + 1) + arc_phase(k, tm, em, t1, e1, depth + 1);
}

/* a and da/dθ on N points (two FFTs), and Bernstein's bound on |d²a/dθ²|:
 * a' is a polynomial of the same degree, so |a''| <= degree·‖a'‖∞, and
 * ‖a'‖∞ <= max sample / (1 - π·degree/N) (the nearest sample is within π/N). */
typedef struct grid {
    uint32_t N;
    double *re, *im, *dre, *dim, *mag;
    double max_abs, curvature;
} grid;

static tmm_status sample_grid(const double *b, uint32_t n, uint32_t degree, grid *g)
{
    uint64_t want = (uint64_t)GRID_PER_DEGREE * (degree + 1);
    if (want > MAX_FFT_POINTS)
        want = MAX_FFT_POINTS;
    if (want < 8ull * n)
        want = 8ull * n;
    uint32_t N = 64;
    while (N < want)
        N <<= 1;
    double *p = malloc(5 * (size_t)N * sizeof *p);
    if (!p)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %u symbol samples", N);
    *g = (grid){ .N = N, .re = p, .im = p + N, .dre = p + 2 * (size_t)N, .dim = p + 3 * (size_t)N,
                 .mag = p + 4 * (size_t)N };
    TMM_TRY(tmm_symbol_samples(b, degree + 1, N, g->re, g->im));
    double *kb = g->mag; /* k·b_k, before mag is needed */
    for (uint32_t k = 0; k <= degree; k++)
        kb[k] = k * b[k];
    /* Σ k·b_k z^k = z·p'(z) = X + iY, and da/dθ = i·z·p' = -Y + iX: X goes to dim, -Y to dre */
    TMM_TRY(tmm_symbol_samples(kb, degree + 1, N, g->dim, g->dre));
    double max_d = 0;
    for (uint32_t j = 0; j < N; j++) {
        g->dre[j] = -g->dre[j];
        g->mag[j] = hypot(g->re[j], g->im[j]);
        g->max_abs = fmax(g->max_abs, g->mag[j]);
        max_d = fmax(max_d, hypot(g->dre[j], g->dim[j]));
    }
    g->curvature = degree * max_d / (1 - PI * degree / N);
    return TMM_OK;
}

/* An arc with a and da/dθ at its ends, and a lower bound of |a| on it. */
typedef struct arc {
    double lower;
    double t0, t1, e0[4], e1[4];
} arc;

/* Taylor lower bound: every a(θ) on the arc is within R = h²/2·max|a''| of
 * both tangent segments, so |a| >= (their distance from 0) - R. */
static double arc_lower(const walk *k, const arc *a)
{
    const double h = a->t1 - a->t0, r = 0.5 * h * h * k->curvature;
    const double v0[2] = { h * a->e0[2], h * a->e0[3] }, v1[2] = { -h * a->e1[2], -h * a->e1[3] };
    return fmax(segment_distance(a->e0, v0), segment_distance(a->e1, v1)) - r;
}

typedef struct heap {
    arc *a;
    uint32_t count, cap;
} heap;

static bool heap_push(heap *q, const arc *x)
{
    if (q->count == q->cap) {
        const uint32_t cap = q->cap ? 2 * q->cap : 256;
        arc *p = realloc(q->a, cap * sizeof *p);
        if (!p)
            return false;
        q->a = p;
        q->cap = cap;
    }
    uint32_t i = q->count++;
    for (; i > 0 && q->a[(i - 1) / 2].lower > x->lower; i = (i - 1) / 2)
        q->a[i] = q->a[(i - 1) / 2];
    q->a[i] = *x;
    return true;
}

static arc heap_pop(heap *q)
{
    const arc top = q->a[0], last = q->a[--q->count];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= q->count)
            break;
        if (c + 1 < q->count && q->a[c + 1].lower < q->a[c].lower)
            c++;
        if (q->a[c].lower >= last.lower)
            break;
        q->a[i] = q->a[c];
        i = c;
    }
    if (q->count)
        q->a[i] = last;
    return top;
}

/* min |a| over the circle by branch and bound: arcs whose lower bound is
 * below the best value found are halved, lowest bound first, until every
 * bound is within a relative 1e-9 of it (or MAX_MIN_EVALS points). */
static tmm_status refine_minimum(walk *k, const grid *g)
{
    const uint32_t N = g->N;
    heap q = { 0 };
    bool ok = true;
    for (uint32_t j = 0; j < N && ok; j++) {
        const uint32_t j1 = (j + 1) % N;
        arc a = { 0, TWO_PI * j / N, TWO_PI * (j + 1) / N, { g->re[j], g->im[j], g->dre[j], g->dim[j] },
                  { g->re[j1], g->im[j1], g->dre[j1], g->dim[j1] } };
        a.lower = arc_lower(k, &a);
        if (a.lower < k->min_abs)
            ok = heap_push(&q, &a);
    }
    const double slack = 1e-15 * g->max_abs;
    for (uint32_t evals = 0; ok && q.count && evals < MAX_MIN_EVALS; evals++) {
        const arc a = heap_pop(&q);
        if (a.lower >= k->min_abs * (1 - 1e-9) - slack)
            break;
        const double tm = 0.5 * (a.t0 + a.t1);
        arc half[2] = { { 0, a.t0, tm, { 0 }, { 0 } }, { 0, tm, a.t1, { 0 }, { 0 } } };
        eval_with_derivative(k->c, k->degree, half[0].t1, half[0].e1);
        k->direct_evals++;
        note_min(k, half[0].t1, hypot(half[0].e1[0], half[0].e1[1]));
        memcpy(half[0].e0, a.e0, sizeof a.e0);
        memcpy(half[1].e0, half[0].e1, sizeof a.e0);
        memcpy(half[1].e1, a.e1, sizeof a.e1);
        for (int i = 0; i < 2 && ok; i++) {
            half[i].lower = arc_lower(k, &half[i]);
            if (half[i].lower < k->min_abs && half[i].t1 > half[i].t0)
                ok = heap_push(&q, &half[i]);
        }
    }
    free(q.a);
    return ok ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory searching min |a|");
}

tmm_status tmm_symbol_winding(const double *w, uint32_t n, double tol_abs, tmm_winding *out)
{
    memset(out, 0, sizeof *out);
    uint32_t first = 0, last = n;
    while (first < n && w[first] == 0)
        first++;
    if (first == n)
        return TMM_OK; /* a ≡ 0: undefined, min = max = 0 */
    while (w[last - 1] == 0)
        last--;
    /* a(z) = z^first · b(z): on the circle |a| = |b|, and z^first winds first times */
    const double *b = w + first;
    const uint32_t degree = last - 1 - first;
    grid g = { 0 };
    tmm_status s = sample_grid(b, n, degree, &g);
    if (s != TMM_OK) {
        free(g.re);
        return s;
    }
    const uint32_t N = g.N;
    walk k = { .c = b, .degree = degree, .curvature = g.curvature, .tol_abs = tol_abs, .min_abs = INFINITY };
    for (uint32_t j = 0; j < N; j++)
        note_min(&k, TWO_PI * j / N, g.mag[j]);
    double phase = 0;
    for (uint32_t j = 0; j < N; j++) {
        const uint32_t j1 = (j + 1) % N;
        const double e0[4] = { g.re[j], g.im[j], g.dre[j], g.dim[j] };
        const double e1[4] = { g.re[j1], g.im[j1], g.dre[j1], g.dim[j1] };
        phase += arc_phase(&k, TWO_PI * j / N, e0, TWO_PI * (j + 1) / N, e1, 0);
    }
    s = refine_minimum(&k, &g);
    free(g.re);
    if (s != TMM_OK)
        return s;

    const double turns = phase / TWO_PI;
    out->defined = !k.unresolved && k.min_abs > tol_abs && fabs(turns - round(turns)) < 0.25;
    out->winding = out->defined ? (int)first + (int)round(turns) : 0;
    out->min_abs = k.min_abs;
    /* w is real, so |a(e^{-iθ})| = |a(e^{iθ})|: report θ in [0, π] */
    const double theta = fmod(k.min_theta + TWO_PI, TWO_PI);
    out->min_theta = theta > PI ? TWO_PI - theta : theta;
    out->max_abs = g.max_abs;
    out->fft_points = N;
    out->direct_evals = k.direct_evals;
    return TMM_OK;
}
