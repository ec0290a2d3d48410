/* Causal Toeplitz mixing: host side (see toeplitz.h for the op, the
 * shaders for the kernels).
 *
 * DIRECT implementation, in two variants chosen per device (like
 * tmm_matmul_variant; tests force one with the device's tuning.kernel_variant):
 * REGISTER, for CPU devices (lavapipe): no shared memory, each invocation
 * keeps a block of outputs in registers.
 *   forward  shaders/toeplitz_fwd.comp: TT positions x TC channels per
 *            invocation, reading TT source positions of u and 2TT-1 lags of
 *            w per step.
 *   du       shaders/toeplitz_du.comp: the same blocking, anti-causal.
 *   dw/dbeta shaders/toeplitz_dw.comp: TT lags per invocation, summed over
 *            a slab of channel blocks and a chunk of positions into partial
 *            rows; tmm_op_sum_cols adds the rows (fixed order) into dw and
 *            dbeta. With one partial row the kernel writes dw/dbeta itself.
 * TILED, for GPUs: shared-memory tiles of 16 x 16 invocations
 * (shaders/toeplitz_{fwd,du,dw}_tiled.comp): forward and du as a tiled
 * matmul with the Toeplitz tiles read from w by index (64 x 64 outputs per
 * workgroup, steps of 16 positions); dw 64 lags per workgroup over channel
 * blocks of 16 and t-blocks of 16, with the same partial rows as REGISTER.
 * The two share this file's passes, bindings and partial-row plan; only the
 * block sizes (struct blocking) and the dispatch shape differ.
 *
 * lavapipe's loop cap (65535 iterations per invocation, loop_limit.glsl):
 * every invocation makes at most loop_budget = TMM_MAX_LOOP iterations of
 * its (non-unrolled) loops. Forward and du run in passes over chunks of
 * step * loop_budget positions, the first pass writing and later ones adding
 * in a fixed order; dw picks its chunk and slab sizes so that
 * ctb * (ns + 1) <= loop_budget. Tests lower the budget (the device's
 * tuning.loop_budget) to run many passes on short sequences.
 *
 * Determinism: no atomics; each output element is written by one
 * invocation per pass, passes run in a fixed order, partial rows are summed
 * by tmm_op_sum_cols in a fixed order. */
#include "toeplitz.h"

#include "op_util.h"

#define LOOP_BUDGET TMM_MAX_LOOP
#define WG 64u            /* invocations per workgroup (x), REGISTER */
#define DW_SLAB_MAX 8u    /* channel blocks per dw partial row: more rows, more parallel invocations */
#define SCRATCH_ALIGN 64u /* floats: covers minStorageBufferOffsetAlignment up to 256 bytes */

static const uint32_t local_x[3] = { WG, 1, 1 };

/* TILED: fixed in shaders/toeplitz_*_tiled.comp. */
#define TILE_TS 16u /* invocations per axis */
#define TILE_T 64u  /* positions (forward, du) and lags (dw) per workgroup */
#define TILE_C 64u  /* channels per workgroup (forward, du) */
#define TILE_S 16u  /* positions per step */
#define TILE_DC 16u /* channels per dw block */
static const uint32_t local_tiled[3] = { TILE_TS, TILE_TS, 1 };

typedef struct geom {
    uint32_t B, n, d, G, K, dg;
    bool tiled;
    uint32_t budget;   /* loop iterations per invocation (LOOP_BUDGET unless the device's tuning lowers it) */
    uint32_t forced;   /* the device's tuning.kernel_variant: AUTO, or a forced variant */
} geom;

/* The loop budget and forced variant of a device's tuning (defaults without a device). */
static void tuning_of(const tmm_device *dev, geom *g)
{
    uint32_t t = dev ? dev->tuning.loop_budget : 0;
    g->budget = t == 0 || t > LOOP_BUDGET ? LOOP_BUDGET : t < 2 ? 2 : t;
    g->forced = dev ? dev->tuning.kernel_variant : TMM_TOEPLITZ_VARIANT_AUTO;
}

const char *tmm_toeplitz_impl_name(tmm_toeplitz_impl impl)
{
    switch (impl) {
    case TMM_TOEPLITZ_AUTO:
        return "auto";
    case TMM_TOEPLITZ_DIRECT:
        return "direct";
    case TMM_TOEPLITZ_FFT:
        return "fft";
    }
    return "invalid";
}

const char *tmm_toeplitz_variant_name(tmm_toeplitz_variant variant)
{
    switch (variant) {
    case TMM_TOEPLITZ_VARIANT_AUTO:
        return "auto";
    case TMM_TOEPLITZ_REGISTER:
        return "register";
    case TMM_TOEPLITZ_TILED:
        return "tiled";
    }
    return "invalid";
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Channels per invocation: 4, or fewer when a group has fewer channels. */
static uint32_t pick_tc(uint32_t dg) { return dg >= 3 ? 4u : dg; }

/* Positions per invocation (TT, and lags per invocation in dw): 16 for
 * widths whose rows can be read as vec4 (the shapes models use), 8 for the
 * rest. 16 reuses each load twice as often (measured about 2x faster on
 * lavapipe) but its fully unrolled kernels take about 3x longer to compile
 * (llvmpipe: ~2.5 s for the three kernels), which tests with odd shapes
 * would pay for every variant. */
static uint32_t pick_tt(const geom *g, uint32_t tc) { return tc == 4 && g->dg % 4 == 0 && g->d % 4 == 0 && g->K == 1 ? 16u : 8u; }

/* Block sizes of a variant. Forward and du: an output block (an
 * invocation's in REGISTER, a workgroup's in TILED) of tt positions x tc
 * channels of one group, advancing `step` source positions per loop
 * iteration. dw: blocks of `lags` lags, over t-blocks of dstep positions
 * and channel blocks of dtc channels. */
typedef struct blocking {
    uint32_t tt, tc, step;
    uint32_t lags, dstep, dtc;
} blocking;

static blocking blocking_of(const geom *g)
{
    if (g->tiled)
        return (blocking){ TILE_T, TILE_C, TILE_S, TILE_T, TILE_S, TILE_DC };
    uint32_t tc = pick_tc(g->dg), tt = pick_tt(g, tc);
    return (blocking){ tt, tc, tt, tt, tt, tc };
}

/* Shared memory of the TILED kernels at K taps (bytes; see the shaders). */
static uint64_t tiled_shared_bytes(uint32_t K)
{
    uint64_t du = (uint64_t)TILE_S * (TILE_C + K - 1) + (uint64_t)K * (TILE_T + TILE_S - 1);
    uint64_t dw = (uint64_t)(TILE_S + TILE_T - 1) * (TILE_DC + K - 1) + TILE_S * TILE_DC + TILE_TS * TILE_T;
    return 4 * (du > dw ? du : dw);
}

/* Why the TILED kernels cannot run this shape on dev (NULL: they can). */
static const char *tiled_unfit(const geom *g, const tmm_device *dev)
{
    (void)g;
    if (tiled_shared_bytes(g->K) > dev->info.max_shared_memory)
        return "the tiled kernels need more shared memory than the device has";
    return NULL;
}

static tmm_status resolve(const char *op, const tmm_device *dev, const tmm_toeplitz_desc *desc, geom *g)
{
    if (!desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL descriptor", op);
    switch (desc->impl) {
    case TMM_TOEPLITZ_AUTO:
    case TMM_TOEPLITZ_DIRECT:
        break;
    case TMM_TOEPLITZ_FFT:
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the FFT implementation is a plan object "
                        "(tmm_toeplitz_fft_create), not this op", op);
    default:
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown implementation %d", op, (int)desc->impl);
    }
    geom s = { .B = desc->batch, .n = desc->n, .d = desc->d, .G = desc->groups ? desc->groups : 1,
               .K = desc->taps ? desc->taps : 1 };
    tuning_of(dev, &s);
    s.tiled = s.forced == TMM_TOEPLITZ_TILED;
    if (s.K > TMM_TOEPLITZ_MAX_TAPS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u taps, at most %u are supported", op, s.K,
                        TMM_TOEPLITZ_MAX_TAPS);
    if (s.d % s.G)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u groups do not divide d = %u channels", op, s.G, s.d);
    s.dg = s.d / s.G;
    if (dev) {
        uint64_t range = dev->info.max_storage_buffer_range;
        uint64_t lead = dev->info.min_storage_buffer_offset_alignment; /* at most this much before a view */
        uint64_t seq = (uint64_t)s.n * s.d * sizeof(float);
        uint64_t par = (uint64_t)s.G * s.K * s.n * sizeof(float);
        if (seq + lead > range)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: one sequence of n*d = %u*%u floats (%llu bytes) does not fit in "
                            "the device's maxStorageBufferRange (%llu bytes)", op, s.n, s.d,
                            (unsigned long long)seq, (unsigned long long)range);
        if (par + lead > range)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: w of G*K*n = %u*%u*%u floats (%llu bytes) does not fit in the "
                            "device's maxStorageBufferRange (%llu bytes)", op, s.G, s.K, s.n,
                            (unsigned long long)par, (unsigned long long)range);
        const char *unfit = tiled_unfit(&s, dev);
        if (s.tiled && unfit)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s (%u taps, %u groups of %u channels, %llu of %u bytes of "
                            "shared memory); use the register variant", op, unfit, s.K, s.G, s.dg,
                            (unsigned long long)tiled_shared_bytes(s.K), dev->info.max_shared_memory);
        if (s.forced == TMM_TOEPLITZ_VARIANT_AUTO)
            s.tiled = dev->info.type != TMM_DEVICE_CPU && !unfit;
    }
    *g = s;
    return TMM_OK;
}

tmm_status tmm_toeplitz_check(const tmm_recorder *r, const tmm_toeplitz_desc *desc)
{
    geom g = { 0 };
    return resolve("toeplitz", r ? tmm_recorder_device(r) : NULL, desc, &g);
}


/* Views bound directly by the deterministic sums must be aligned. */
static tmm_status need_aligned(const tmm_recorder *r, const char *op, const char *name, tmm_view v)
{
    uint64_t align = tmm_recorder_device(r)->info.min_storage_buffer_offset_alignment;
    if (align > 1 && v.offset % align)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s starts at byte %llu, not a multiple of the device's "
                        "minStorageBufferOffsetAlignment (%llu)", op, name, (unsigned long long)v.offset,
                        (unsigned long long)align);
    return TMM_OK;
}


/* Floats [e0, e0 + count) of v, bound from the largest aligned offset at or
 * before them; *base is e0's element offset in the binding. */
static tmm_view bind(const tmm_recorder *r, tmm_view v, uint64_t e0, uint64_t count, uint32_t *base)
{
    return tmm_op_bind(tmm_recorder_device(r), v, e0, count, base);
}

/* How many sequences of n*d floats one binding holds. resolve() checked >= 1. */
static uint32_t batches_per_binding(const tmm_recorder *r, const geom *g)
{
    const tmm_device *dev = tmm_recorder_device(r);
    uint64_t seq = (uint64_t)g->n * g->d * sizeof(float);
    uint64_t fit = (dev->info.max_storage_buffer_range - dev->info.min_storage_buffer_offset_alignment) / seq;
    return fit > g->B ? g->B : (uint32_t)fit;
}

/* vec4 loads (spec constant VEC of the kernels): activation rows when a
 * block's 4 channels start at a multiple of 4 floats, w windows when its
 * rows do (TT is a multiple of 4). */
enum { VEC_ROWS = 1, VEC_W = 2 };

static bool vec_channels(const geom *g, uint32_t tc, uint32_t base)
{
    return tc == 4 && g->dg % 4 == 0 && g->d % 4 == 0 && base % 4 == 0;
}

static bool vec_w(const geom *g, uint32_t tt, uint32_t base)
{
    return tt % 4 == 0 && g->n % 4 == 0 && base % 4 == 0;
}

/* ---- forward ------------------------------------------------------------- */

typedef struct fwd_push {
    uint32_t n, d, dg, nbg, ncb, tb0, ntb, lo, hi, accumulate;
    uint32_t base_u, base_w, base_beta, base_y;
} fwd_push;

/* A direct product's arithmetic: each output sums K channels over its t + 1 positions. */
static double direct_flops(const geom *g) { return (double)g->B * g->d * g->K * g->n * (g->n + 1.0); }

tmm_status tmm_op_toeplitz_forward(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view u, tmm_view w,
                                   tmm_view beta, tmm_view y)
{
    static const char op[] = "toeplitz_forward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, tmm_recorder_device(r), desc, &g));
    const uint64_t seq = (uint64_t)g.n * g.d, act = seq * g.B;
    if (act == 0)
        return TMM_OK; /* y is empty */
    tmm_op_span s[4] = { { "u", u, act }, { "w", w, (uint64_t)g.G * g.K * g.n }, { "beta", beta, (uint64_t)g.G * g.n },
                  { "y", y, act } };
    for (int i = 0; i < 4; i++)
        TMM_TRY(tmm_op_need_floats(op, s[i].name, s[i].v, s[i].n));
    TMM_TRY(tmm_op_no_overlap(op, &s[3], s, 4));
    tmm_record_flops(r, direct_flops(&g)); /* the FFT path's ops declare none */

    const blocking bk = blocking_of(&g);
    const uint32_t nbg = tmm_div_up(g.dg, bk.tc), ncb = g.G * nbg, ntb = tmm_div_up(g.n, bk.tt);
    tmm_pipeline *pipes[4] = { 0 };

    fwd_push push = { .n = g.n, .d = g.d, .dg = g.dg, .nbg = nbg, .ncb = ncb };
    tmm_view vw = bind(r, w, 0, s[1].n, &push.base_w);
    tmm_view vbeta = bind(r, beta, 0, s[2].n, &push.base_beta);
    const uint64_t chunk = (uint64_t)bk.step * g.budget, end = (uint64_t)ntb * bk.tt;
    const uint32_t per = batches_per_binding(r, &g);
    for (uint32_t b0 = 0; b0 < g.B; b0 += per) {
        uint32_t count = g.B - b0 < per ? g.B - b0 : per;
        tmm_view vu = bind(r, u, (uint64_t)b0 * seq, (uint64_t)count * seq, &push.base_u);
        tmm_view vy = bind(r, y, (uint64_t)b0 * seq, (uint64_t)count * seq, &push.base_y);
        /* pass lo adds s in [lo, hi) to the positions t >= lo */
        for (uint64_t lo = 0; lo < g.n; lo += chunk) {
            push.lo = (uint32_t)lo;
            push.hi = (uint32_t)(lo + chunk < end ? lo + chunk : end);
            push.tb0 = (uint32_t)(lo / bk.tt);
            push.ntb = ntb - push.tb0;
            push.accumulate = lo > 0;
            uint32_t vec = g.tiled ? 0 : (vec_channels(&g, bk.tc, push.base_u) ? VEC_ROWS : 0) |
                                         (vec_w(&g, bk.tt, push.base_w) ? VEC_W : 0);
            if (!pipes[vec] && g.tiled) {
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fwd_tiled, 4, sizeof(fwd_push), local_tiled, &g.K, 1,
                                        &pipes[vec]));
            } else if (!pipes[vec]) {
                const uint32_t spec[4] = { g.K, bk.tc, bk.tt, vec };
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_fwd, 4, sizeof(fwd_push), local_x, spec, 4, &pipes[vec]));
            }
            tmm_arg args[4] = { tmm_in(vu), tmm_in(vw), tmm_in(vbeta), lo > 0 ? tmm_inout(vy) : tmm_out(vy) };
            uint64_t blocks = (uint64_t)push.ntb * ncb;
            TMM_TRY(tmm_record_dispatch(r, pipes[vec], args, 4, &push, g.tiled ? blocks : tmm_div_up(blocks, WG), 1,
                                        count));
        }
    }
    return TMM_OK;
}

/* ---- backward ------------------------------------------------------------ */

typedef struct du_push {
    uint32_t n, d, dg, nbg, ncb, tb0, ntb, lo, hi, accumulate;
    uint32_t base_gy, base_w, base_du;
} du_push;

typedef struct dw_push {
    uint32_t n, d, dg, nbg, groups, nkb, ns, nslab, ctb, nq, ntb, b_first;
    uint32_t base_u, base_gy, base_dwp, base_dbp;
} dw_push;

/* How dw and dbeta are split into partial rows, and where they live in the
 * scratch (floats). */
typedef struct dw_plan {
    uint32_t nkb, nbg, ntb, ctb, nq, ns, nslab; /* lag blocks, channel blocks per group, t-blocks, ... */
    uint64_t rows, beta_rows;         /* partial rows of dw and of dbeta */
    uint64_t cols, beta_cols;         /* G*K*n and G*n */
    uint64_t at_dw, at_beta, at_sum;  /* scratch offsets; rows == 1: no partials in scratch */
    uint64_t n_sum, total;
} dw_plan;

static dw_plan plan_dw(const geom *g)
{
    const blocking bk = blocking_of(g);
    dw_plan pl = { 0 };
    pl.nkb = tmm_div_up(g->n, bk.lags);
    pl.nbg = g->dg ? tmm_div_up(g->dg, bk.dtc) : 0;
    pl.ntb = tmm_div_up(g->n, bk.dstep);
    pl.ctb = pl.ntb < g->budget / 2 ? pl.ntb : g->budget / 2;
    if (pl.ctb == 0)
        pl.ctb = 1;
    pl.nq = tmm_div_up(pl.ntb, pl.ctb);
    uint32_t ns_max = g->budget / pl.ctb - 1; /* ctb * (ns + 1) <= budget */
    if (ns_max > DW_SLAB_MAX)
        ns_max = DW_SLAB_MAX;
    pl.nslab = pl.nbg ? tmm_div_up(pl.nbg, ns_max) : 1;
    pl.ns = pl.nbg ? tmm_div_up(pl.nbg, pl.nslab) : 1;
    pl.rows = (uint64_t)g->B * pl.nslab * pl.nq;
    pl.beta_rows = (uint64_t)g->B * pl.nslab;
    pl.cols = (uint64_t)g->G * g->K * g->n;
    pl.beta_cols = (uint64_t)g->G * g->n;
    uint64_t at = 0;
    if (pl.rows > 1) {
        pl.at_dw = at;
        at += align_up(pl.rows * pl.cols, SCRATCH_ALIGN);
    }
    if (pl.beta_rows > 1) {
        pl.at_beta = at;
        at += align_up(pl.beta_rows * pl.beta_cols, SCRATCH_ALIGN);
    }
    uint64_t s1 = pl.rows > 1 ? tmm_op_sum_cols_scratch((uint32_t)pl.rows, (uint32_t)pl.cols) : 0;
    uint64_t s2 = pl.beta_rows > 1 ? tmm_op_sum_cols_scratch((uint32_t)pl.beta_rows, (uint32_t)pl.beta_cols) : 0;
    pl.at_sum = at;
    pl.n_sum = s1 > s2 ? s1 : s2;
    pl.total = at + pl.n_sum;
    return pl;
}

uint64_t tmm_op_toeplitz_backward_scratch(const tmm_device *dev, const tmm_toeplitz_desc *desc, uint32_t flags)
{
    geom g = { 0 };
    if (flags & TMM_TOEPLITZ_SKIP_PARAMS || resolve("toeplitz_backward", dev, desc, &g) != TMM_OK)
        return 0;
    if ((uint64_t)g.B * g.n * g.d == 0)
        return 0;
    uint64_t need = plan_dw(&g).total;
    if (g.forced == TMM_TOEPLITZ_VARIANT_AUTO) {
        g.tiled = !g.tiled; /* the device decides: room for either */
        uint64_t other = plan_dw(&g).total;
        need = other > need ? other : need;
    }
    return need;
}

static tmm_status record_du(tmm_recorder *r, const geom *g, tmm_view gy, tmm_view w, tmm_view du)
{
    const uint64_t seq = (uint64_t)g->n * g->d;
    const blocking bk = blocking_of(g);
    const uint32_t nbg = tmm_div_up(g->dg, bk.tc), ncb = g->G * nbg, ntb = tmm_div_up(g->n, bk.tt);
    tmm_pipeline *pipes[4] = { 0 };

    du_push push = { .n = g->n, .d = g->d, .dg = g->dg, .nbg = nbg, .ncb = ncb };
    tmm_view vw = bind(r, w, 0, (uint64_t)g->G * g->K * g->n, &push.base_w);
    const uint64_t chunk = (uint64_t)bk.step * g->budget, end = (uint64_t)ntb * bk.tt;
    const uint32_t passes = (uint32_t)((end + chunk - 1) / chunk);
    const uint32_t per = batches_per_binding(r, g);
    for (uint32_t b0 = 0; b0 < g->B; b0 += per) {
        uint32_t count = g->B - b0 < per ? g->B - b0 : per;
        tmm_view vgy = bind(r, gy, (uint64_t)b0 * seq, (uint64_t)count * seq, &push.base_gy);
        tmm_view vdu = bind(r, du, (uint64_t)b0 * seq, (uint64_t)count * seq, &push.base_du);
        /* last chunk of t first: pass [lo, hi) adds to the positions s < hi */
        for (uint32_t q = passes; q-- > 0;) {
            uint64_t lo = q * chunk, hi = lo + chunk < end ? lo + chunk : end;
            push.lo = (uint32_t)lo;
            push.hi = (uint32_t)hi;
            push.tb0 = 0;
            push.ntb = (uint32_t)tmm_div_up(hi, bk.tt);
            push.accumulate = q + 1 < passes;
            uint32_t vec = g->tiled ? 0 : (vec_channels(g, bk.tc, push.base_gy) ? VEC_ROWS : 0) |
                                          (vec_w(g, bk.tt, push.base_w) ? VEC_W : 0);
            if (!pipes[vec] && g->tiled) {
                const uint32_t spec[1] = { g->K };
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_du_tiled, 3, sizeof(du_push), local_tiled, spec, 1,
                                        &pipes[vec]));
            } else if (!pipes[vec]) {
                const uint32_t spec[4] = { g->K, bk.tc, bk.tt, vec };
                TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_du, 3, sizeof(du_push), local_x, spec, 4, &pipes[vec]));
            }
            tmm_arg args[3] = { tmm_in(vgy), tmm_in(vw), push.accumulate ? tmm_inout(vdu) : tmm_out(vdu) };
            uint64_t blocks = (uint64_t)push.ntb * ncb;
            TMM_TRY(tmm_record_dispatch(r, pipes[vec], args, 3, &push, g->tiled ? blocks : tmm_div_up(blocks, WG), 1,
                                        count));
        }
    }
    return TMM_OK;
}

static tmm_status record_dw(tmm_recorder *r, const geom *g, tmm_view u, tmm_view gy, tmm_view scratch,
                            tmm_view dw, tmm_view dbeta)
{
    const dw_plan pl = plan_dw(g);
    const blocking bk = blocking_of(g);
    const uint64_t seq = (uint64_t)g->n * g->d;
    tmm_pipeline *pipes[2] = { 0 };

    dw_push push = { .n = g->n, .d = g->d, .dg = g->dg, .nbg = pl.nbg, .groups = g->G, .nkb = pl.nkb, .ns = pl.ns,
                     .nslab = pl.nslab, .ctb = pl.ctb, .nq = pl.nq, .ntb = pl.ntb };
    tmm_view dwp = pl.rows > 1 ? tmm_op_sub(scratch, pl.at_dw, pl.rows * pl.cols) : dw;
    tmm_view dbp = pl.beta_rows > 1 ? tmm_op_sub(scratch, pl.at_beta, pl.beta_rows * pl.beta_cols) : dbeta;
    tmm_view vdwp = bind(r, dwp, 0, pl.rows * pl.cols, &push.base_dwp);
    tmm_view vdbp = bind(r, dbp, 0, pl.beta_rows * pl.beta_cols, &push.base_dbp);
    const uint64_t blocks = (uint64_t)pl.nkb * g->G * pl.nslab * pl.nq; /* invocations or workgroups */
    const uint32_t per = batches_per_binding(r, g);
    for (uint32_t b0 = 0; b0 < g->B; b0 += per) {
        uint32_t count = g->B - b0 < per ? g->B - b0 : per;
        tmm_view vu = bind(r, u, (uint64_t)b0 * seq, (uint64_t)count * seq, &push.base_u);
        tmm_view vgy = bind(r, gy, (uint64_t)b0 * seq, (uint64_t)count * seq, &push.base_gy);
        push.b_first = b0;
        uint32_t vec = !g->tiled && vec_channels(g, bk.dtc, push.base_u) && vec_channels(g, bk.dtc, push.base_gy)
                           ? VEC_ROWS : 0;
        if (!pipes[vec] && g->tiled) {
            TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_dw_tiled, 4, sizeof(dw_push), local_tiled, &g->K, 1,
                                    &pipes[vec]));
        } else if (!pipes[vec]) {
            const uint32_t spec[4] = { g->K, bk.dtc, bk.lags, vec };
            TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_dw, 4, sizeof(dw_push), local_x, spec, 4, &pipes[vec]));
        }
        tmm_arg args[4] = { tmm_in(vu), tmm_in(vgy), tmm_out(vdwp), tmm_out(vdbp) };
        TMM_TRY(tmm_record_dispatch(r, pipes[vec], args, 4, &push, g->tiled ? blocks : tmm_div_up(blocks, WG), 1,
                                    count));
    }
    tmm_view sum_scratch = tmm_op_sub(scratch, pl.at_sum, pl.n_sum);
    if (pl.rows > 1)
        TMM_TRY(tmm_op_sum_cols(r, dwp, (uint32_t)pl.rows, (uint32_t)pl.cols, sum_scratch, dw));
    if (pl.beta_rows > 1)
        TMM_TRY(tmm_op_sum_cols(r, dbp, (uint32_t)pl.beta_rows, (uint32_t)pl.beta_cols, sum_scratch, dbeta));
    return TMM_OK;
}

tmm_status tmm_op_toeplitz_backward(tmm_recorder *r, const tmm_toeplitz_desc *desc, uint32_t flags, tmm_view u,
                                    tmm_view w, tmm_view gy, tmm_view scratch, tmm_view du, tmm_view dw,
                                    tmm_view dbeta)
{
    static const char op[] = "toeplitz_backward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    if (flags & ~(TMM_TOEPLITZ_SKIP_DU | TMM_TOEPLITZ_SKIP_PARAMS))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", op, flags);
    geom g = { 0 };
    TMM_TRY(resolve(op, tmm_recorder_device(r), desc, &g));
    const bool want_du = !(flags & TMM_TOEPLITZ_SKIP_DU), want_params = !(flags & TMM_TOEPLITZ_SKIP_PARAMS);
    const uint64_t act = (uint64_t)g.B * g.n * g.d;
    const uint64_t n_scratch = tmm_op_toeplitz_backward_scratch(tmm_recorder_device(r), desc, flags);
    tmm_op_span s[7] = {
        { "u", u, want_params ? act : 0 },
        { "w", w, want_du && act ? (uint64_t)g.G * g.K * g.n : 0 },
        { "gy", gy, act },
        { "du", du, want_du ? act : 0 },
        { "dw", dw, want_params ? (uint64_t)g.G * g.K * g.n : 0 },
        { "dbeta", dbeta, want_params ? (uint64_t)g.G * g.n : 0 },
        { "scratch", scratch, n_scratch },
    };
    if (!want_du && !want_params)
        s[2].n = 0;
    for (int i = 0; i < 7; i++)
        if (s[i].n)
            TMM_TRY(tmm_op_need_floats(op, s[i].name, s[i].v, s[i].n));
    for (int i = 3; i < 7; i++)
        TMM_TRY(tmm_op_no_overlap(op, &s[i], s, 7));
    for (int i = 4; i < 7; i++)
        if (s[i].n)
            TMM_TRY(need_aligned(r, op, s[i].name, s[i].v));

    tmm_record_flops(r, direct_flops(&g) * ((want_du && act) + (want_params && act)));
    if (want_du && act)
        TMM_TRY(record_du(r, &g, gy, w, du));
    if (want_params && g.n) {
        if (act == 0) {
            /* no terms: the gradients are zero */
            TMM_TRY(tmm_op_fill(r, dw, g.G * g.K * g.n, 0.0f));
            TMM_TRY(tmm_op_fill(r, dbeta, g.G * g.n, 0.0f));
        } else {
            TMM_TRY(record_dw(r, &g, u, gy, scratch, dw, dbeta));
        }
    }
    return TMM_OK;
}
