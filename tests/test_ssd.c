/* The Mamba 2 SSD op (src/ops/ssd.h) on the device against its C reference
 * (src/ref/ref_ssd.c, the plain recurrence): the chunked forward (y) and
 * backward (dxs, dBt, dCt, ddt, dA_log, dD) on awkward shapes (n = 1, a
 * chunk, a chunk + 1, not a multiple; B = 1 and 3; nh = 1 to 3; P, N odd and
 * up to 128; chunks of 1, 7, 64 and 256), many passes over chunks, positions
 * and sequences (loop budget lowered), n = 8192, strong and mixed decays
 * (dt up to 50 with A_log = ln 16), views at odd float offsets and sequences
 * dispatched one at a time (a small maxStorageBufferRange), accumulate on
 * and off, bit-identical reruns; decoding: the step over a sequence against
 * the forward row by row, the state after len positions against the
 * reference, prompts then steps; errors.
 *
 * Tolerance (device vs reference), per element: |got - ref| <= atol + RTOL |ref|
 * with atol = TOL * (the largest |ref| of the array) + FLOOR, TOL = 2e-5,
 * FLOOR = 1e-6, RTOL = 1e-4. Inputs are uniform in [-1, 1) (dt in
 * [0.01, 1), A_log in [-1, 2)): every value is a float sum of at most
 * Q + N + P products (2Q + 2P for dBt, dCt; n for the parameters' and ddt's
 * scans), relative rounding ~ sqrt(terms) 2^-24 plus exp's few ulp on each
 * decay; the decays' exponents are compensated sums, so their error is a
 * few ulp of the exponent itself. A dropped term (a position, a chunk's
 * state) changes the values by ~1/Q of their size or more, far above atol.
 * The largest deviations, and the largest as a fraction of atol, are
 * printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ssd.h"
#include "ref/ref_ssd.h"

#define TOL 2e-5   /* of the largest |reference| of each array */
#define FLOOR 1e-6 /* absolute */
#define RTOL 1e-4

typedef struct shape {
    uint32_t B, n, H, P, N, Q; /* Q = 0: the default chunk */
} shape;

/* Ranges of the random inputs. */
typedef struct ranges {
    float dt_lo, dt_hi, al_lo, al_hi;
    float dt_big;   /* > 0: every third position of dt is this value (mixed decays) */
} ranges;

static const ranges NORMAL = { 0.01f, 1.0f, -1.0f, 2.0f, 0 };

static tmm_ssd_desc desc_of(shape s)
{
    return (tmm_ssd_desc){ .batch = s.B, .n = s.n, .heads = s.H, .head_dim = s.P, .state = s.N, .chunk = s.Q };
}

static size_t cx_of(shape s) { return (size_t)s.H * s.P + 2 * (size_t)s.N; }

typedef struct inputs {
    float *x, *dt, *al, *D, *g;
    size_t nx, ndt, ny;
} inputs;

static inputs make_inputs(shape s, uint64_t seed, ranges rg)
{
    const size_t rows = (size_t)s.B * s.n;
    inputs in = { 0 };
    in.nx = rows * cx_of(s);
    in.ndt = rows * s.H;
    in.ny = rows * s.H * s.P;
    in.x = h_floats(in.nx);
    in.dt = h_floats(in.ndt);
    in.al = h_floats(s.H);
    in.D = h_floats(s.H);
    in.g = h_floats(in.ny);
    h_rand(in.x, in.nx, seed, -1, 1);
    h_rand(in.dt, in.ndt, seed + 1, rg.dt_lo, rg.dt_hi);
    h_rand(in.al, s.H, seed + 2, rg.al_lo, rg.al_hi);
    h_rand(in.D, s.H, seed + 3, -1, 1);
    h_rand(in.g, in.ny, seed + 4, -1, 1);
    if (rg.dt_big > 0)
        for (size_t i = 0; i < in.ndt; i += 3)
            in.dt[i] = rg.dt_big;
    return in;
}

static void free_inputs(inputs *in)
{
    free(in->x);
    free(in->dt);
    free(in->al);
    free(in->D);
    free(in->g);
}

typedef struct outputs {
    float *y, *dx, *ddt, *dal, *dD;
} outputs;

static void free_outputs(outputs *o)
{
    free(o->y);
    free(o->dx);
    free(o->ddt);
    free(o->dal);
    free(o->dD);
}

static void destroy_all(tmm_buffer **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        tmm_buffer_destroy(b[i]);
}

/* A buffer holding n floats of data (or zeros) at float offset pad; *v is their view. */
static tmm_buffer *padded(const float *data, size_t n, uint32_t pad, tmm_view *v)
{
    float *h = h_floats(n + pad);
    memset(h, 0, (n + pad) * sizeof *h);
    if (data)
        memcpy(h + pad, data, n * sizeof *h);
    tmm_buffer *b = h_buffer(h, n + pad);
    free(h);
    *v = tmm_sub(b, pad * sizeof(float), n * sizeof(float));
    return b;
}

static void read_padded(tmm_buffer *b, uint32_t pad, float *out, size_t n)
{
    float *h = h_floats(n + pad);
    h_read(b, h, n + pad);
    memcpy(out, h + pad, n * sizeof *h);
    free(h);
}

/* Forward and backward on the device in one recording; every view at float
 * offset `pad` of its buffer. With accumulate, dA_log and dD start from
 * prior[0..nh) and prior[nh..2nh). */
static outputs run_device(shape s, const inputs *in, uint32_t pad, bool accumulate, const float *prior)
{
    tmm_ssd_desc desc = desc_of(s);
    const uint64_t ns = tmm_ssd_saved_floats(&desc), nx = tmm_ssd_backward_scratch_floats(&desc);
    cr_assert(ns > 0 && nx > 0);
    tmm_view vx, vdt, val, vD, vg, vy, vs, vsc, vdx, vddt, vdal, vdD;
    tmm_buffer *bufs[] = {
        padded(in->x, in->nx, pad, &vx),      padded(in->dt, in->ndt, pad, &vdt), padded(in->al, s.H, pad, &val),
        padded(in->D, s.H, pad, &vD),         padded(in->g, in->ny, pad, &vg),    padded(NULL, in->ny, pad, &vy),
        padded(NULL, ns, pad, &vs),           padded(NULL, nx, pad, &vsc),        padded(NULL, in->nx, pad, &vdx),
        padded(NULL, in->ndt, pad, &vddt),    padded(accumulate ? prior : NULL, s.H, pad, &vdal),
        padded(accumulate ? prior + s.H : NULL, s.H, pad, &vdD),
    };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_ssd_forward(r, &desc, vx, vdt, val, vD, vy, vs));
    H_OK(tmm_op_ssd_backward(r, &desc, vx, vdt, val, vD, vs, vg, vsc, vdx, vddt, vdal, vdD, accumulate));
    h_run(r);
    outputs o = { h_floats(in->ny), h_floats(in->nx), h_floats(in->ndt), h_floats(s.H), h_floats(s.H) };
    read_padded(bufs[5], pad, o.y, in->ny);
    read_padded(bufs[8], pad, o.dx, in->nx);
    read_padded(bufs[9], pad, o.ddt, in->ndt);
    read_padded(bufs[10], pad, o.dal, s.H);
    read_padded(bufs[11], pad, o.dD, s.H);
    destroy_all(bufs, sizeof bufs / sizeof bufs[0]);
    return o;
}

static double worst_seen;

/* h_compare with atol = tol * the largest |ref| of the array + FLOOR. */
static void compare(const char *what, shape s, const float *got, const float *ref, size_t n, double tol)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert(isfinite(got[i]), "%s[%zu] = %g", what, i, got[i]);
        scale = fmax(scale, fabs((double)ref[i]));
    }
    char name[160];
    snprintf(name, sizeof name, "%s B=%u n=%u nh=%u P=%u N=%u Q=%u (max %.2g)", what, s.B, s.n, s.H, s.P, s.N, s.Q,
             scale);
    double w = h_compare(name, got, ref, n, tol * scale + FLOOR, RTOL) / (tol * scale + FLOOR);
    worst_seen = fmax(worst_seen, w);
}

/* Splits the columns of dxbc [rows, Cx] into dxs, dBt, dCt and compares each. */
static void compare_dxbc(shape s, const float *got, const float *ref, double tol)
{
    const size_t rows = (size_t)s.B * s.n, cx = cx_of(s), nx = (size_t)s.H * s.P;
    const size_t widths[3] = { nx, s.N, s.N }, starts[3] = { 0, nx, nx + s.N };
    static const char *names[3] = { "dxs", "dBt", "dCt" };
    for (int part = 0; part < 3; part++) {
        float *a = h_floats(rows * widths[part]), *b = h_floats(rows * widths[part]);
        for (size_t r = 0; r < rows; r++) {
            memcpy(a + r * widths[part], got + r * cx + starts[part], widths[part] * sizeof *a);
            memcpy(b + r * widths[part], ref + r * cx + starts[part], widths[part] * sizeof *b);
        }
        compare(names[part], s, a, b, rows * widths[part], tol);
        free(a);
        free(b);
    }
}

/* dA_log and dD are sums over all B n positions of terms that cancel (dA_log:
 * A dt_t da_t, with da_t itself a sum of terms that cancel); their error is
 * a rounding of the terms' sizes, not of the result: atol = tol * scale +
 * FLOOR with scale = sum_{b,t} dt_{t,h} max_t |ddt_{t,h}| (|A da_t| is at
 * most about |ddt_t|) and sum_{b,t} |dy_t|·|xs_t| over head h. */
static void compare_params(shape s, const inputs *in, const outputs *dev, const outputs *ref, double tol)
{
    const size_t rows = (size_t)s.B * s.n, cx = cx_of(s);
    for (uint32_t h = 0; h < s.H; h++) {
        double sdt = 0, top = 0, sgx = 0;
        for (size_t r = 0; r < rows; r++) {
            sdt += in->dt[r * s.H + h];
            top = fmax(top, fabs((double)ref->ddt[r * s.H + h]));
            for (uint32_t q = 0; q < s.P; q++)
                sgx += fabs((double)in->g[(r * s.H + h) * s.P + q] * in->x[r * cx + h * s.P + q]);
        }
        char name[160];
        snprintf(name, sizeof name, "dA_log[%u] B=%u n=%u nh=%u P=%u N=%u Q=%u (scale %.2g)", h, s.B, s.n, s.H, s.P,
                 s.N, s.Q, sdt * top);
        double atol = tol * sdt * top + FLOOR;
        worst_seen = fmax(worst_seen, h_compare(name, dev->dal + h, ref->dal + h, 1, atol, RTOL) / atol);
        snprintf(name, sizeof name, "dD[%u] B=%u n=%u nh=%u P=%u N=%u Q=%u (scale %.2g)", h, s.B, s.n, s.H, s.P, s.N,
                 s.Q, sgx);
        atol = tol * sgx + FLOOR;
        worst_seen = fmax(worst_seen, h_compare(name, dev->dD + h, ref->dD + h, 1, atol, RTOL) / atol);
    }
}

/* One shape on the device against the reference. */
static void check_shape_with(shape s, uint64_t seed, ranges rg, uint32_t pad, bool accumulate, double tol)
{
    tmm_ssd_desc desc = desc_of(s);
    inputs in = make_inputs(s, seed, rg);
    float *prior = h_floats(2 * (size_t)s.H);
    h_rand(prior, 2 * (size_t)s.H, seed + 9, -1, 1);
    outputs dev = run_device(s, &in, pad, accumulate, prior);
    outputs ref = { h_floats(in.ny), h_floats(in.nx), h_floats(in.ndt), h_floats(s.H), h_floats(s.H) };
    ref_ssd_forward(&desc, in.x, in.dt, in.al, in.D, ref.y);
    ref_ssd_backward(&desc, in.x, in.dt, in.al, in.D, in.g, ref.dx, ref.ddt, ref.dal, ref.dD);
    if (accumulate)
        for (uint32_t h = 0; h < s.H; h++) {
            ref.dal[h] += prior[h];
            ref.dD[h] += prior[s.H + h];
        }
    compare("y", s, dev.y, ref.y, in.ny, tol);
    compare_dxbc(s, dev.dx, ref.dx, tol);
    compare("ddt", s, dev.ddt, ref.ddt, in.ndt, tol);
    compare_params(s, &in, &dev, &ref, tol);
    free_outputs(&dev);
    free_outputs(&ref);
    free_inputs(&in);
    free(prior);
}

static void check_shape(shape s, uint64_t seed) { check_shape_with(s, seed, NORMAL, 0, false, TOL); }

H_TEST(ssd, matches_reference)
{
    static const uint32_t ns[] = { 1, 5, 64, 65, 130 }; /* one position, < Q, = Q, Q + 1, 2Q + 2 */
    static const uint32_t hpn[][3] = { { 1, 1, 1 }, { 2, 3, 5 }, { 3, 8, 9 } };
    worst_seen = 0;
    uint64_t seed = 100;
    for (uint32_t B = 1; B <= 3; B += 2)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < 3; j++)
                check_shape((shape){ B, ns[i], hpn[j][0], hpn[j][1], hpn[j][2], 0 }, seed += 10);
    printf("ssd: largest |device - reference| / atol %.3g\n", worst_seen);
}
