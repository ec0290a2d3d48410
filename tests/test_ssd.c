/* The Mamba 2 SSD op (src/ops/ssd.h) on the device against its C reference
 * (src/ref/ref_ssd.c, the plain recurrence): the chunked forward (y) and
 * backward (dxs, dBt, dCt, ddt, dA_log, dD) on awkward shapes (n = 1, a
 * chunk, a chunk + 1, not a multiple; B = 1 and 3; nh = 1 to 3; P, N odd and
 * up to 128; chunks of 1, 4, 7, 8, 16, 32 (the default), 64 and 256), many
 * passes over chunks, positions
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
    /* one position, < Q, = Q, Q + 1, 4Q + 2 (Q = TMM_SSD_CHUNK) */
    static const uint32_t ns[] = { 1, 5, TMM_SSD_CHUNK, TMM_SSD_CHUNK + 1, 4 * TMM_SSD_CHUNK + 2 };
    static const uint32_t hpn[][3] = { { 1, 1, 1 }, { 2, 3, 5 }, { 3, 8, 9 } };
    worst_seen = 0;
    uint64_t seed = 100;
    for (uint32_t B = 1; B <= 3; B += 2)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < 3; j++)
                check_shape((shape){ B, ns[i], hpn[j][0], hpn[j][1], hpn[j][2], 0 }, seed += 10);
    printf("ssd: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Chunks of 1, 7 and 256 positions: many chunks on short sequences, one
 * long chunk. */
H_TEST(ssd, other_chunks)
{
    static const uint32_t ns[] = { 1, 7, 13, 50 };
    worst_seen = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        check_shape((shape){ 2, ns[i], 2, 3, 5, 7 }, 300 + i);
        check_shape((shape){ 1, ns[i], 1, 4, 2, 1 }, 400 + i);
    }
    check_shape((shape){ 2, 300, 2, 5, 3, 256 }, 450);
    printf("ssd, other chunks: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Wide heads and states: P, N = 37 and 19 (partial blocks of 8), 64 (the
 * defaults) and 128. */
H_TEST(ssd, wide)
{
    worst_seen = 0;
    check_shape((shape){ 3, 67, 2, 37, 19, 0 }, 490);
    check_shape((shape){ 2, 100, 2, 64, 64, 0 }, 500);
    check_shape((shape){ 1, 70, 1, 128, 128, 32 }, 510);
    printf("ssd, wide: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* The GPUs' 8 x 8 blocks (lavapipe uses 16 x 16): rows and columns that
 * are not multiples of either. */
H_TEST(ssd, gpu_blocks)
{
    worst_seen = 0;
    h_dev->tuning.ssd_block = 8;
    check_shape((shape){ 2, 45, 2, 12, 9, 16 }, 700);
    check_shape((shape){ 1, 33, 3, 17, 20, 0 }, 710);
    h_dev->tuning.ssd_block = 0;
    printf("ssd, 8 x 8 blocks: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Many passes over the chunks and over the (sequence, chunk) partial sums:
 * loop budgets of 1 and 3. */
H_TEST(ssd, multi_pass)
{
    static const uint32_t budgets[] = { 1, 3 };
    worst_seen = 0;
    for (size_t i = 0; i < 2; i++) {
        h_dev->tuning.loop_budget = budgets[i];
        check_shape((shape){ 3, 40, 2, 3, 5, 4 }, 600 + i);
        check_shape((shape){ 1, 130, 3, 8, 9, 0 }, 610 + i);
        check_shape((shape){ 2, 5, 1, 1, 1, 1 }, 620 + i);
    }
    h_dev->tuning.loop_budget = 0;
    printf("ssd, multi-pass: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* n = 8192, the longest sequence the model uses: 128 chunks (and 8192 with
 * chunks of 1: the scans over the chunks take two passes). */
H_TEST(ssd, long_sequence)
{
    worst_seen = 0;
    check_shape((shape){ 1, 8192, 2, 3, 5, 0 }, 700);
    check_shape((shape){ 1, 8192, 1, 2, 3, 1 }, 710);
    printf("ssd, n = 8192: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* Strong decays: dt in [40, 60) with A_log = ln 16 (decays of e^-640 and
 * less: every state forgets all but its own position), over chunks of 64
 * and 256; mixed: every third dt = 50 among small ones, A_log in
 * [ln 8, ln 16) (segment sums from -0.01 to -10^5 inside one chunk, where
 * plain float cumulative sums would lose the small differences). */
H_TEST(ssd, strong_decays)
{
    const ranges strong = { 40.0f, 60.0f, 2.7725887f, 2.7725888f, 0 };
    const ranges mixed = { 0.001f, 0.05f, 2.0794415f, 2.7725887f, 50.0f };
    worst_seen = 0;
    check_shape_with((shape){ 2, 130, 2, 3, 5, 64 }, 800, strong, 0, false, TOL);
    check_shape_with((shape){ 1, 300, 2, 8, 9, 256 }, 810, strong, 0, false, TOL);
    check_shape_with((shape){ 2, 130, 2, 3, 5, 64 }, 820, mixed, 0, false, TOL);
    check_shape_with((shape){ 1, 300, 2, 8, 9, 256 }, 830, mixed, 0, false, TOL);
    printf("ssd, strong decays: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* dA_log and dD added to what they held; views at odd float offsets. */
H_TEST(ssd, accumulate_and_offsets)
{
    worst_seen = 0;
    check_shape_with((shape){ 3, 70, 2, 3, 5, 0 }, 900, NORMAL, 0, true, TOL);
    check_shape_with((shape){ 2, 33, 3, 5, 7, 8 }, 910, NORMAL, 1, true, TOL);
    check_shape_with((shape){ 2, 33, 3, 5, 7, 8 }, 920, NORMAL, 3, false, TOL);
    printf("ssd, accumulate and offsets: largest |device - reference| / atol %.3g\n", worst_seen);
}

/* The dispatches a forward of shape s records. */
static uint32_t forward_dispatches(shape s)
{
    tmm_ssd_desc desc = desc_of(s);
    const size_t rows = (size_t)s.B * s.n;
    tmm_buffer *bx = h_buffer(NULL, rows * cx_of(s)), *bdt = h_buffer(NULL, rows * s.H), *bp = h_buffer(NULL, s.H);
    tmm_buffer *by = h_buffer(NULL, rows * s.H * s.P), *bs = h_buffer(NULL, tmm_ssd_saved_floats(&desc));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_ssd_forward(r, &desc, tmm_whole(bx), tmm_whole(bdt), tmm_whole(bp), tmm_whole(bp), tmm_whole(by),
                            tmm_whole(bs)));
    const uint32_t count = tmm_recorder_dispatches(r);
    h_run(r);
    tmm_buffer *all[] = { bx, bdt, bp, by, bs };
    destroy_all(all, 5);
    return count;
}

/* Sequences dispatched in groups (here one or two at a time): a device
 * whose maxStorageBufferRange holds only a few sequences' tensors. */
H_TEST(ssd, sequence_groups)
{
    const uint64_t range = h_dev->info.max_storage_buffer_range;
    worst_seen = 0;
    const shape s1 = { 3, 40, 2, 3, 5, 16 }, s2 = { 5, 20, 2, 3, 5, 8 };
    const uint32_t whole1 = forward_dispatches(s1), whole2 = forward_dispatches(s2);
    /* s1: M holds 2*40*16 floats per sequence (5120 bytes): all 3 in one group, then one at a time */
    h_dev->info.max_storage_buffer_range = 16384;
    cr_assert_eq(forward_dispatches(s1), whole1);
    h_dev->info.max_storage_buffer_range = 8192;
    cr_assert_gt(forward_dispatches(s1), whole1);
    check_shape_with(s1, 1000, NORMAL, 1, true, TOL);
    /* s2: M holds 2*20*8 floats per sequence (1280 bytes): groups of 1 */
    h_dev->info.max_storage_buffer_range = 1536;
    cr_assert_eq(forward_dispatches(s2), 5 * whole2);
    check_shape_with(s2, 1010, NORMAL, 0, false, TOL);
    h_dev->info.max_storage_buffer_range = 800;
    tmm_ssd_desc desc = desc_of(s2);
    cr_assert_eq(tmm_ssd_check(NULL, &desc), TMM_OK);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_ssd_check(r, &desc), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "maxStorageBufferRange"), "%s", tmm_last_error());
    h_run(r);
    h_dev->info.max_storage_buffer_range = range;
    printf("ssd, sequence groups: largest |device - reference| / atol %.3g\n", worst_seen);
}

H_TEST(ssd, reruns_are_bit_identical)
{
    static const shape shapes[] = { { 2, 100, 2, 3, 5, 7 }, { 3, 130, 3, 8, 9, 0 } };
    for (size_t i = 0; i < 2; i++) {
        shape s = shapes[i];
        inputs in = make_inputs(s, 1100 + i, NORMAL);
        outputs a = run_device(s, &in, 0, false, NULL), b = run_device(s, &in, 0, false, NULL);
        cr_assert(memcmp(a.y, b.y, in.ny * sizeof(float)) == 0);
        cr_assert(memcmp(a.dx, b.dx, in.nx * sizeof(float)) == 0);
        cr_assert(memcmp(a.ddt, b.ddt, in.ndt * sizeof(float)) == 0);
        cr_assert(memcmp(a.dal, b.dal, s.H * sizeof(float)) == 0);
        cr_assert(memcmp(a.dD, b.dD, s.H * sizeof(float)) == 0);
        free_outputs(&a);
        free_outputs(&b);
        free_inputs(&in);
    }
}

/* ---- decoding ----------------------------------------------------------- */

/* The state after len[b] positions of each sequence on the device
 * (tmm_op_ssd_state) against the reference; returns the device's state. */
static float *check_state(shape s, const inputs *in, const uint32_t *len)
{
    tmm_ssd_desc desc = desc_of(s);
    const size_t nS = (size_t)s.B * s.H * s.P * s.N;
    const uint64_t nw = tmm_ssd_state_workspace_floats(&desc);
    cr_assert(nw > 0 && nw <= tmm_ssd_saved_floats(&desc));
    float *lenf = h_floats(s.B), *S = h_floats(nS), *ref = h_floats(nS);
    memcpy(lenf, len, s.B * sizeof *len);
    tmm_buffer *bl = h_buffer(lenf, s.B), *bx = h_buffer(in->x, in->nx), *bdt = h_buffer(in->dt, in->ndt);
    tmm_buffer *bal = h_buffer(in->al, s.H), *bw = h_buffer(NULL, nw), *bS = h_buffer(NULL, nS);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_ssd_state(r, &desc, tmm_whole(bl), tmm_whole(bx), tmm_whole(bdt), tmm_whole(bal), tmm_whole(bw),
                          tmm_whole(bS)));
    h_run(r);
    h_read(bS, S, nS);
    ref_ssd_state(&desc, len, in->x, in->dt, in->al, ref);
    char name[160];
    snprintf(name, sizeof name, "state B=%u n=%u nh=%u P=%u N=%u Q=%u, len[0] = %u", s.B, s.n, s.H, s.P, s.N, s.Q,
             len[0]);
    double scale = 0;
    for (size_t i = 0; i < nS; i++)
        scale = fmax(scale, fabs((double)ref[i]));
    h_compare(name, S, ref, nS, TOL * scale + FLOOR, RTOL);
    tmm_buffer *all[] = { bl, bx, bdt, bal, bw, bS };
    destroy_all(all, sizeof all / sizeof all[0]);
    free(lenf);
    free(ref);
    return S;
}

/* Lengths 0, 1, around the chunk boundaries, n and above n (counts as n). */
H_TEST(ssd, state_at_length)
{
    shape s = { 4, 70, 2, 3, 5, 8 };
    inputs in = make_inputs(s, 1200, NORMAL);
    static const uint32_t lens[][4] = { { 0, 1, 7, 8 }, { 9, 16, 17, 69 }, { 70, 71, 1000, 0 } };
    for (size_t i = 0; i < 3; i++)
        free(check_state(s, &in, lens[i]));
    h_dev->tuning.loop_budget = 2; /* the scan over the 9 chunks in 5 passes */
    free(check_state(s, &in, lens[1]));
    h_dev->tuning.loop_budget = 0;
    free_inputs(&in);
    shape w = { 2, 130, 2, 64, 64, 0 };
    inputs iw = make_inputs(w, 1210, NORMAL);
    const uint32_t lw[2] = { 129, 64 };
    free(check_state(w, &iw, lw));
    free_inputs(&iw);
}

/* Steps `steps` positions on the device after a prompt of start[b]
 * positions (tmm_op_ssd_state, then tmm_op_ssd_step; sequence b's step i
 * takes position start[b] + i of the inputs); each step's y is compared with
 * the reference forward's row, the final state with the reference state of
 * start[b] + steps positions. Returns the step outputs then the state
 * (caller frees). */
static float *check_decode(shape s, const uint32_t *start, uint32_t steps, uint64_t seed, ranges rg)
{
    tmm_ssd_desc desc = desc_of(s), one = desc;
    one.n = 1;
    inputs in = make_inputs(s, seed, rg);
    const size_t cx = cx_of(s), ldy = (size_t)s.H * s.P, nS = (size_t)s.B * s.H * s.P * s.N;
    const size_t nr = (size_t)steps * s.B;
    float *rx = h_floats(nr * cx), *rdt = h_floats(nr * s.H), *yref = h_floats(in.ny), *ydev = h_floats(nr * ldy);
    float *ye = h_floats(nr * ldy), *lenf = h_floats(s.B);
    for (uint32_t i = 0; i < steps; i++)
        for (uint32_t b = 0; b < s.B; b++) {
            const size_t from = (size_t)b * s.n + start[b] + i, to = (size_t)i * s.B + b;
            cr_assert(start[b] + i < s.n);
            memcpy(rx + to * cx, in.x + from * cx, cx * sizeof *rx);
            memcpy(rdt + to * s.H, in.dt + from * s.H, s.H * sizeof *rdt);
        }
    ref_ssd_forward(&desc, in.x, in.dt, in.al, in.D, yref);
    for (uint32_t i = 0; i < steps; i++)
        for (uint32_t b = 0; b < s.B; b++)
            memcpy(ye + ((size_t)i * s.B + b) * ldy, yref + ((size_t)b * s.n + start[b] + i) * ldy, ldy * sizeof *ye);
    memcpy(lenf, start, s.B * sizeof *start);
    const uint64_t nw = tmm_ssd_state_workspace_floats(&desc);
    tmm_buffer *bl = h_buffer(lenf, s.B), *bx = h_buffer(in.x, in.nx), *bdt = h_buffer(in.dt, in.ndt);
    tmm_buffer *bal = h_buffer(in.al, s.H), *bD = h_buffer(in.D, s.H), *bw = h_buffer(NULL, nw);
    tmm_buffer *bS = h_buffer(NULL, nS), *brx = h_buffer(rx, nr * cx), *brdt = h_buffer(rdt, nr * s.H);
    tmm_buffer *by = h_buffer(NULL, nr * ldy);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_ssd_state(r, &desc, tmm_whole(bl), tmm_whole(bx), tmm_whole(bdt), tmm_whole(bal), tmm_whole(bw),
                          tmm_whole(bS)));
    for (uint32_t i = 0; i < steps; i++) {
        const uint64_t f = sizeof(float), b = s.B;
        H_OK(tmm_op_ssd_step(r, &one, tmm_sub(brx, i * b * cx * f, b * cx * f),
                             tmm_sub(brdt, i * b * s.H * f, b * s.H * f), tmm_whole(bal), tmm_whole(bD), tmm_whole(bS),
                             tmm_sub(by, i * b * ldy * f, b * ldy * f)));
    }
    h_run(r);
    h_read(by, ydev, nr * ldy);
    char name[160];
    snprintf(name, sizeof name, "step y B=%u n=%u nh=%u P=%u N=%u, %u steps", s.B, s.n, s.H, s.P, s.N, steps);
    double scale = 0;
    for (size_t i = 0; i < nr * ldy; i++)
        scale = fmax(scale, fabs((double)ye[i]));
    h_compare(name, ydev, ye, nr * ldy, TOL * scale + FLOOR, RTOL);
    float *S = h_floats(nS), *rS = h_floats(nS);
    uint32_t *end = calloc(s.B, sizeof *end);
    cr_assert_not_null(end);
    for (uint32_t b = 0; b < s.B; b++)
        end[b] = start[b] + steps;
    h_read(bS, S, nS);
    ref_ssd_state(&desc, end, in.x, in.dt, in.al, rS);
    scale = 0;
    for (size_t i = 0; i < nS; i++)
        scale = fmax(scale, fabs((double)rS[i]));
    h_compare("state after the steps", S, rS, nS, TOL * scale + FLOOR, RTOL);
    float *out = h_floats(nr * ldy + nS);
    memcpy(out, ydev, nr * ldy * sizeof *out);
    memcpy(out + nr * ldy, S, nS * sizeof *out);
    tmm_buffer *all[] = { bl, bx, bdt, bal, bD, bw, bS, brx, brdt, by };
    destroy_all(all, sizeof all / sizeof all[0]);
    float *fl[] = { rx, rdt, yref, ydev, ye, lenf, S, rS };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++)
        free(fl[i]);
    free(end);
    free_inputs(&in);
    return out;
}

/* From an empty state (a prompt of no positions), every row of the forward. */
H_TEST(ssd, steps_match_forward)
{
    const uint32_t zero[2] = { 0, 0 };
    free(check_decode((shape){ 2, 20, 2, 3, 5, 0 }, zero, 20, 1300, NORMAL));
    free(check_decode((shape){ 1, 9, 2, 64, 64, 0 }, zero, 9, 1310, NORMAL));
    free(check_decode((shape){ 1, 3, 1, 1, 1, 0 }, zero, 3, 1320, NORMAL));
    const ranges strong = { 40.0f, 60.0f, 2.7725887f, 2.7725888f, 0 };
    free(check_decode((shape){ 2, 12, 2, 3, 5, 0 }, zero, 12, 1330, strong));
}

/* Prompts of different lengths per sequence (0, inside the first chunk, past
 * a chunk boundary), then steps. */
H_TEST(ssd, prompt_then_steps)
{
    const uint32_t start[3] = { 0, 7, 19 };
    free(check_decode((shape){ 3, 30, 3, 5, 7, 8 }, start, 11, 1400, NORMAL));
    free(check_decode((shape){ 3, 30, 2, 3, 5, 0 }, start, 11, 1410, NORMAL));
}

H_TEST(ssd, decoding_reruns_are_bit_identical)
{
    const shape s = { 3, 30, 3, 5, 7, 8 };
    const uint32_t start[3] = { 0, 7, 19 };
    const size_t n = (size_t)11 * s.B * s.H * s.P + (size_t)s.B * s.H * s.P * s.N;
    float *a = check_decode(s, start, 11, 1500, NORMAL), *b = check_decode(s, start, 11, 1500, NORMAL);
    cr_assert(memcmp(a, b, n * sizeof(float)) == 0);
    free(a);
    free(b);
}

/* ---- errors --------------------------------------------------------------- */

H_TEST(ssd, errors)
{
    const tmm_ssd_desc ok = { .batch = 2, .n = 8, .heads = 2, .head_dim = 3, .state = 5, .chunk = 4 };
    tmm_ssd_desc bad = ok;
    bad.n = 0;
    cr_assert_eq(tmm_ssd_check(NULL, &bad), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_ssd_saved_floats(&bad), 0);
    cr_assert_eq(tmm_ssd_check(NULL, NULL), TMM_ERR_INVALID_ARGUMENT);
    bad = ok;
    bad.head_dim = TMM_SSD_MAX_HEAD_DIM + 1;
    cr_assert_eq(tmm_ssd_check(NULL, &bad), TMM_ERR_UNSUPPORTED);
    bad = ok;
    bad.state = TMM_SSD_MAX_STATE + 1;
    cr_assert_eq(tmm_ssd_check(NULL, &bad), TMM_ERR_UNSUPPORTED);
    bad = ok;
    bad.heads = TMM_SSD_MAX_HEADS + 1;
    cr_assert_eq(tmm_ssd_check(NULL, &bad), TMM_ERR_UNSUPPORTED);
    bad = ok;
    bad.chunk = TMM_SSD_MAX_CHUNK + 1;
    cr_assert_eq(tmm_ssd_check(NULL, &bad), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "chunk"), "%s", tmm_last_error());

    /* rows = 16, Cx = 16: xbc 256 floats, dt 32, y 96 */
    const uint64_t ns = tmm_ssd_saved_floats(&ok), nx = tmm_ssd_backward_scratch_floats(&ok), f = sizeof(float);
    cr_assert(ns > 0 && ns <= 4096 && nx > 0 && nx <= 4096);
    tmm_buffer *b = h_buffer(NULL, 32768);
    tmm_view x = tmm_sub(b, 0, 256 * f), dt = tmm_sub(b, 1024 * f, 32 * f), p = tmm_sub(b, 1100 * f, 2 * f);
    tmm_view y = tmm_sub(b, 2048 * f, 96 * f), saved = tmm_sub(b, 4096 * f, ns * f);
    tmm_view scratch = tmm_sub(b, 8192 * f, nx * f), dx = tmm_sub(b, 12288 * f, 256 * f);
    tmm_view ddt = tmm_sub(b, 13000 * f, 32 * f), g1 = tmm_sub(b, 13100 * f, 2 * f), g2 = tmm_sub(b, 13200 * f, 2 * f);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_ssd_forward(r, &ok, tmm_sub(b, 0, 255 * f), dt, p, p, y, saved), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "xbc holds"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_ssd_forward(r, &ok, x, dt, p, p, tmm_sub(b, 2048 * f + 2, 96 * f), saved),
                 TMM_ERR_INVALID_ARGUMENT); /* not at a float boundary */
    cr_assert_eq(tmm_op_ssd_forward(r, &ok, x, dt, p, p, tmm_sub(b, 200 * f, 96 * f), saved),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "overlaps"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_ssd_forward(r, &ok, x, dt, p, p, y, tmm_sub(b, 4096 * f, (ns - 1) * f)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_ssd_forward(NULL, &ok, x, dt, p, p, y, saved), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_ssd_forward(r, &ok, x, dt, p, p, y, saved), TMM_OK);
    cr_assert_eq(tmm_op_ssd_backward(r, &ok, x, dt, p, p, saved, y, saved, dx, ddt, g1, g2, false),
                 TMM_ERR_INVALID_ARGUMENT); /* scratch overlaps saved */
    cr_assert_eq(tmm_op_ssd_backward(r, &ok, x, dt, p, p, saved, y, scratch, dx, ddt, g1, g1, true),
                 TMM_ERR_INVALID_ARGUMENT); /* dA_log and dD overlap */
    cr_assert_eq(tmm_op_ssd_backward(r, &ok, x, dt, p, p, saved, y, scratch, dx, ddt, g1, g2, true), TMM_OK);
    tmm_view S = tmm_sub(b, 16384 * f, 60 * f), len = tmm_sub(b, 16500 * f, 2 * f);
    cr_assert_eq(tmm_op_ssd_state(r, &ok, len, x, dt, p, saved, S), TMM_OK);
    cr_assert_eq(tmm_op_ssd_state(r, &ok, len, x, dt, p, saved, tmm_sub(b, 16384 * f, 59 * f)),
                 TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "S holds"), "%s", tmm_last_error());
    tmm_ssd_desc step = ok; /* the step ignores n and the chunk */
    step.n = 0;
    step.chunk = TMM_SSD_MAX_CHUNK + 1;
    cr_assert_eq(tmm_op_ssd_step(r, &step, tmm_sub(b, 0, 32 * f), tmm_sub(b, 1024 * f, 4 * f), p, p, S,
                                 tmm_sub(b, 2048 * f, 12 * f)), TMM_OK);
    cr_assert_eq(tmm_op_ssd_step(r, &step, tmm_sub(b, 0, 32 * f), tmm_sub(b, 1024 * f, 4 * f), p, p, S,
                                 tmm_sub(b, 16384 * f, 12 * f)), TMM_ERR_INVALID_ARGUMENT); /* y overlaps S */
    h_run(r);
    tmm_buffer_destroy(b);
}
