/* The Mamba 2 SSD op: host side (see ssd.h for the op, the shaders for the
 * kernels).
 *
 *   forward   ssd_cumsum (cs), ssd_chunk_state (each chunk's own state),
 *             ssd_chunk_scan (passes over the chunks: the state before each
 *             chunk, in place), ssd_fwd_scores (M), ssd_fwd_out (y).
 *   backward  ssd_chunk_state (each chunk's dL/dSp contribution),
 *             ssd_chunk_scan backwards (G_{j+1} per chunk, in place),
 *             ssd_bwd_scores (K), ssd_bwd_dx (dxs), ssd_bwd_bc (w', z' per
 *             head), ssd_bwd_rows (per-head scalars), ssd_bwd_bcsum (dBt,
 *             dCt), ssd_bwd_sdot (<G_{j+1}, Sp_{j+1}> by rows), ssd_bwd_seq
 *             (reverse scans inside the chunks: ddt and the parameters'
 *             partial sums per chunk), ssd_bwd_params (passes over the
 *             (sequence, chunk) partial sums: dA_log, dD).
 *   decoding  ssd_cumsum, ssd_chunk_state, ssd_chunk_scan, then ssd_state;
 *             ssd_step.
 * Every dimension is a push constant: each kernel compiles once (llvmpipe
 * compiles at the first dispatch). The chunk products keep BK x BK outputs
 * in registers (block_of).
 *
 * Bindings: every view is bound through tmm_op_bind, its first float passed
 * in the push constants (base[i] for binding i), so views may start at any
 * float. The sequences are dispatched in groups small enough that each
 * binding of a group fits in maxStorageBufferRange.
 * Determinism: no atomics; each output element is written by one invocation
 * per dispatch; passes and groups run in a fixed order. */
#include "ssd.h"

#include "op_util.h"

#define WG 64u
#define NBIND 10u

static const uint32_t local_x[3] = { WG, 1, 1 };

/* TMM_MAX_LOOP, unless the device's tuning lowers it (tests: many passes on short inputs). */
static uint32_t loop_budget_of(const tmm_device *dev)
{
    uint32_t t = dev->tuning.loop_budget;
    return t == 0 || t > TMM_MAX_LOOP ? TMM_MAX_LOOP : t;
}

/* The push constants of every SSD kernel (each shader's block). */
typedef struct push {
    uint32_t n, nh, P, N;
    uint32_t Q, NC, cx, ldy;
    uint32_t lo, hi, flags, nseq;
    uint32_t base[NBIND];
} push;

typedef struct geom {
    uint32_t B, n, nh, P, N, Q, NC, cx, ldy;
    uint32_t group; /* sequences per dispatch (bindings within maxStorageBufferRange); 0 without a device */
    uint32_t bk;    /* rows and columns per invocation of the blocked kernels (specialization constant 3) */
} geom;

/* 16 x 16 blocks on CPU devices (llvmpipe loads each divergent address lane
 * by lane: larger blocks load less per product, about 20% faster), 8 x 8 on
 * GPUs (registers); the device's tuning.ssd_block overrides (tests). */
static uint32_t block_of(const tmm_device *dev)
{
    if (dev->tuning.ssd_block)
        return dev->tuning.ssd_block;
    return dev->info.type == TMM_DEVICE_CPU ? 16u : 8u;
}

static uint64_t align_up(uint64_t x) { return (x + TMM_SSD_ALIGN - 1) / TMM_SSD_ALIGN * TMM_SSD_ALIGN; }

/* Floats per sequence of each tensor. */
static uint64_t seq_xbc(const geom *g) { return (uint64_t)g->n * g->cx; }
static uint64_t seq_dt(const geom *g) { return (uint64_t)g->n * g->nh; }
static uint64_t seq_y(const geom *g) { return (uint64_t)g->n * g->ldy; }
static uint64_t seq_cs(const geom *g) { return 4ull * g->nh * g->n; }
static uint64_t seq_chunks(const geom *g) { return (uint64_t)g->nh * g->NC * g->P * g->N; }
static uint64_t seq_state(const geom *g) { return (uint64_t)g->nh * g->P * g->N; }
static uint64_t seq_quad(const geom *g) { return (uint64_t)g->nh * g->n * g->Q; }
static uint64_t seq_vec(const geom *g) { return (uint64_t)g->nh * g->n * g->N; }
static uint64_t seq_red(const geom *g) { return 3ull * g->nh * g->n; }
static uint64_t seq_rows(const geom *g) { return (uint64_t)g->nh * g->NC * g->P; }
static uint64_t seq_part(const geom *g) { return 2ull * g->nh * g->NC; }

/* Regions of saved (cs, sp, last, M) and of the backward scratch (gn, carry,
 * K, w, z, red, rd, part, pacc): offsets in floats. */
typedef struct layout {
    uint64_t at[9], total;
} layout;

static layout layout_of(const geom *g, bool scratch)
{
    const uint64_t B = g->B;
    const uint64_t saved[] = { B * seq_cs(g), B * seq_chunks(g), B * seq_state(g), B * seq_quad(g) };
    const uint64_t bwd[] = { B * seq_chunks(g), B * seq_state(g), B * seq_quad(g),
                             B * seq_vec(g),    B * seq_vec(g),   B * seq_red(g),
                             B * seq_rows(g),   B * seq_part(g),  2ull * g->nh };
    const uint64_t *sz = scratch ? bwd : saved;
    const size_t count = scratch ? 9 : 4;
    layout l = { { 0 }, 0 };
    for (size_t i = 0; i < count; i++) {
        l.at[i] = align_up(l.total);
        l.total = l.at[i] + sz[i];
    }
    return l;
}

typedef enum use { FOR_TRAINING, FOR_STATE, FOR_STEP } use;

static tmm_status resolve(const char *op, const tmm_recorder *r, const tmm_ssd_desc *desc, use u, geom *out)
{
    if (!desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL descriptor", op);
    geom g = { desc->batch, u == FOR_STEP ? 1 : desc->n, desc->heads, desc->head_dim, desc->state,
               u == FOR_STEP ? 1 : desc->chunk ? desc->chunk : TMM_SSD_CHUNK, 0, 0, 0, 0, 8u };
    if (!g.B || !g.n || !g.nh || !g.P || !g.N)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: empty shape B=%u n=%u nh=%u P=%u N=%u", op, g.B, g.n, g.nh,
                        g.P, g.N);
    if (g.P > TMM_SSD_MAX_HEAD_DIM || g.N > TMM_SSD_MAX_STATE || g.nh > TMM_SSD_MAX_HEADS ||
        g.Q > TMM_SSD_MAX_CHUNK)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: nh=%u P=%u N=%u chunk=%u; at most %u heads of %u channels, a state "
                        "of %u columns and chunks of %u positions are supported", op, g.nh, g.P, g.N, g.Q,
                        TMM_SSD_MAX_HEADS, TMM_SSD_MAX_HEAD_DIM, TMM_SSD_MAX_STATE, TMM_SSD_MAX_CHUNK);
    if ((uint64_t)g.B * g.n > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %u sequences of %u positions exceed 32-bit row indices", op, g.B,
                        g.n);
    g.NC = tmm_div_up(g.n, g.Q);
    g.ldy = g.nh * g.P;
    g.cx = g.ldy + 2 * g.N;
    if (r) {
        /* each binding holds the rows of a group of whole sequences */
        const tmm_device *dev = tmm_recorder_device(r);
        g.bk = block_of(dev);
        const uint64_t room = tmm_op_binding_floats(dev);
        uint64_t per[] = { seq_xbc(&g), seq_dt(&g), seq_y(&g), seq_cs(&g), seq_chunks(&g), seq_state(&g),
                           seq_quad(&g), seq_vec(&g), seq_red(&g), seq_rows(&g) };
        static const char *names[] = { "xbc", "dt", "y", "the decays' sums", "the chunk states", "the state",
                                       "the chunk products", "the state gradients' products", "the row sums",
                                       "the chunks' row sums" };
        const size_t count = u == FOR_STEP ? 6 : sizeof per / sizeof per[0];
        uint64_t most = 1;
        for (size_t i = 0; i < count; i++) {
            if (per[i] > room)
                return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s of one sequence (%llu bytes; n=%u nh=%u P=%u N=%u "
                                "Q=%u) do not fit in the device's maxStorageBufferRange (%llu bytes)", op, names[i],
                                (unsigned long long)(per[i] * sizeof(float)), g.n, g.nh, g.P, g.N, g.Q,
                                (unsigned long long)dev->info.max_storage_buffer_range);
            most = per[i] > most ? per[i] : most;
        }
        if (u == FOR_TRAINING && (uint64_t)g.B * seq_part(&g) > room)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the partial sums of %u sequences do not fit in one binding", op,
                            g.B);
        g.group = room / most < g.B ? (uint32_t)(room / most) : g.B;
    }
    *out = g;
    return TMM_OK;
}

tmm_status tmm_ssd_check(const tmm_recorder *r, const tmm_ssd_desc *desc)
{
    geom g = { 0 };
    return resolve("ssd", r, desc, FOR_TRAINING, &g);
}

uint64_t tmm_ssd_saved_floats(const tmm_ssd_desc *desc)
{
    geom g = { 0 };
    if (resolve("ssd", NULL, desc, FOR_TRAINING, &g) != TMM_OK)
        return 0;
    return layout_of(&g, false).total;
}

uint64_t tmm_ssd_backward_scratch_floats(const tmm_ssd_desc *desc)
{
    geom g = { 0 };
    if (resolve("ssd", NULL, desc, FOR_TRAINING, &g) != TMM_OK)
        return 0;
    return layout_of(&g, true).total;
}

uint64_t tmm_ssd_state_workspace_floats(const tmm_ssd_desc *desc)
{
    geom g = { 0 };
    if (resolve("ssd", NULL, desc, FOR_STATE, &g) != TMM_OK)
        return 0;
    layout l = layout_of(&g, false);
    return l.at[2] + (uint64_t)g.B * seq_state(&g);
}

/* ---- recording ---------------------------------------------------------- */

/* A view bound to a kernel: `per` floats per sequence (bound for the
 * dispatch's group), or 0: bound whole. */
typedef struct bind {
    tmm_view v;
    uint64_t per;
    tmm_access access;
} bind;

static bind per_seq(tmm_view v, uint64_t per, tmm_access a) { return (bind){ v, per, a }; }
static bind whole(tmm_view v, tmm_access a) { return (bind){ v, 0, a }; }

static push push_of(const geom *g)
{
    return (push){ .n = g->n, .nh = g->nh, .P = g->P, .N = g->N, .Q = g->Q, .NC = g->NC, .cx = g->cx,
                   .ldy = g->ldy, .lo = 0, .hi = 0, .flags = 0, .nseq = g->B, .base = { 0 } };
}

/* Records the kernel once per group of sequences; the sequence index is
 * the dispatch's axis `axis` (1: y, 2: z). */
static tmm_status dispatch(tmm_recorder *r, const geom *g, tmm_pipeline *pipe, const bind *bs, uint32_t nb,
                           push p, uint32_t gx, uint32_t gy, int axis)
{
    const tmm_device *dev = tmm_recorder_device(r);
    tmm_arg args[NBIND];
    for (uint32_t b0 = 0; b0 < g->B; b0 += g->group) {
        const uint32_t count = g->B - b0 < g->group ? g->B - b0 : g->group;
        for (uint32_t i = 0; i < nb; i++) {
            const uint64_t first = bs[i].per * b0, floats = bs[i].per ? bs[i].per * count : bs[i].v.size / 4;
            args[i] = (tmm_arg){ tmm_op_bind(dev, bs[i].v, first, floats, &p.base[i]), bs[i].access };
        }
        p.nseq = count;
        TMM_TRY(tmm_record_dispatch(r, pipe, args, nb, &p, gx, axis == 1 ? count : gy, axis == 2 ? count : 1));
    }
    return TMM_OK;
}

/* n_spec specialization constants from id 3 on: BK, then the kernel's MODE. */
static tmm_status pipeline(tmm_recorder *r, const geom *g, const tmm_spirv *spv, uint32_t n_buffers, uint32_t n_spec,
                           uint32_t mode, tmm_pipeline **out)
{
    const uint32_t spec[2] = { g->bk, mode };
    return tmm_op_pipeline(r, spv, n_buffers, sizeof(push), local_x, spec, n_spec, out);
}

/* The regions of a saved view: cs, sp, last, M (state workspace: the first three). */
typedef struct saved_views {
    tmm_view cs, sp, last, m;
} saved_views;

static saved_views saved_of(const geom *g, tmm_view v, bool with_m)
{
    layout l = layout_of(g, false);
    return (saved_views){ tmm_op_sub(v, l.at[0], g->B * seq_cs(g)), tmm_op_sub(v, l.at[1], g->B * seq_chunks(g)),
                          tmm_op_sub(v, l.at[2], g->B * seq_state(g)),
                          tmm_op_sub(v, l.at[3], with_m ? g->B * seq_quad(g) : 0) };
}

/* cs, each chunk's own state and the scan: sp = the state before each
 * chunk, last = the state after the sequence (forward and state op). */
static tmm_status record_states(tmm_recorder *r, const geom *g, tmm_view xbc, tmm_view dt, tmm_view A_log,
                                const saved_views *sv)
{
    tmm_pipeline *pcum, *pown, *pscan;
    TMM_TRY(pipeline(r, g, &tmm_spv_ssd_cumsum, 3, 0, 0, &pcum));
    TMM_TRY(pipeline(r, g, &tmm_spv_ssd_chunk_state, 4, 2, 0, &pown));
    TMM_TRY(pipeline(r, g, &tmm_spv_ssd_chunk_scan, 3, 0, 0, &pscan));
    push p = push_of(g);
    const bind bc[] = { per_seq(dt, seq_dt(g), TMM_READ), whole(A_log, TMM_READ),
                        per_seq(sv->cs, seq_cs(g), TMM_READ_WRITE) };
    TMM_TRY(dispatch(r, g, pcum, bc, 3, p, tmm_div_up(g->NC, WG), g->nh, 2));
    const uint32_t blocks = g->NC * tmm_div_up(g->P, g->bk) * tmm_div_up(g->N, g->bk);
    const bind bo[] = { per_seq(xbc, seq_xbc(g), TMM_READ), per_seq(xbc, seq_xbc(g), TMM_READ),
                        per_seq(sv->cs, seq_cs(g), TMM_READ), per_seq(sv->sp, seq_chunks(g), TMM_WRITE) };
    TMM_TRY(dispatch(r, g, pown, bo, 4, p, tmm_div_up(blocks, WG), g->nh, 2));
    const bind bs[] = { per_seq(sv->cs, seq_cs(g), TMM_READ), per_seq(sv->sp, seq_chunks(g), TMM_READ_WRITE),
                        per_seq(sv->last, seq_state(g), TMM_READ_WRITE) };
    const uint32_t budget = loop_budget_of(tmm_recorder_device(r));
    for (uint32_t lo = 0; lo < g->NC; lo += budget) {
        p.lo = lo;
        p.hi = g->NC - lo > budget ? lo + budget : g->NC;
        TMM_TRY(dispatch(r, g, pscan, bs, 3, p, tmm_div_up((uint64_t)g->P * g->N, WG), g->nh, 2));
    }
    return TMM_OK;
}

/* Outputs (the spans from `first` on) overlap no other argument. */
static tmm_status no_overlap(const char *op, const tmm_op_span *all, size_t count, size_t first)
{
    for (size_t i = first; i < count; i++)
        TMM_TRY(tmm_op_no_overlap(op, &all[i], all, count));
    return TMM_OK;
}

/* Every span holds its floats and starts at a float boundary. */
static tmm_status need_all(const char *op, const tmm_op_span *all, size_t count)
{
    for (size_t i = 0; i < count; i++)
        TMM_TRY(tmm_op_need_floats(op, all[i].name, all[i].v, all[i].n));
    return TMM_OK;
}

/* The first `n` floats of each span's view, in place. */
static void trim(tmm_op_span *all, size_t count)
{
    for (size_t i = 0; i < count; i++)
        all[i].v = tmm_op_sub(all[i].v, 0, all[i].n);
}

tmm_status tmm_op_ssd_forward(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view xbc, tmm_view dt, tmm_view A_log,
                              tmm_view D, tmm_view y, tmm_view saved)
{
    static const char op[] = "ssd forward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_TRAINING, &g));
    tmm_op_span s[] = { { "xbc", xbc, g.B * seq_xbc(&g) }, { "dt", dt, g.B * seq_dt(&g) }, { "A_log", A_log, g.nh },
                        { "D", D, g.nh }, { "y", y, g.B * seq_y(&g) }, { "saved", saved, layout_of(&g, false).total } };
    TMM_TRY(need_all(op, s, 6));
    TMM_TRY(no_overlap(op, s, 6, 4));
    trim(s, 6);
    const saved_views sv = saved_of(&g, s[5].v, true);
    TMM_TRY(record_states(r, &g, s[0].v, s[1].v, s[2].v, &sv));

    tmm_pipeline *pm, *py;
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_fwd_scores, 4, 1, 0, &pm));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_fwd_out, 6, 1, 0, &py));
    const push p = push_of(&g);
    const uint32_t RB = tmm_div_up(g.Q, g.bk);
    const bind bm[] = { per_seq(s[0].v, seq_xbc(&g), TMM_READ), per_seq(s[1].v, seq_dt(&g), TMM_READ),
                        per_seq(sv.cs, seq_cs(&g), TMM_READ), per_seq(sv.m, seq_quad(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, pm, bm, 4, p, tmm_div_up((uint64_t)g.NC * RB * RB, WG), 1, 1));
    const bind by[] = { per_seq(s[0].v, seq_xbc(&g), TMM_READ), per_seq(sv.m, seq_quad(&g), TMM_READ),
                        per_seq(sv.cs, seq_cs(&g), TMM_READ),   per_seq(sv.sp, seq_chunks(&g), TMM_READ),
                        whole(s[3].v, TMM_READ),                per_seq(s[4].v, seq_y(&g), TMM_WRITE) };
    return dispatch(r, &g, py, by, 6, p, tmm_div_up((uint64_t)g.NC * RB * tmm_div_up(g.P, g.bk), WG), g.nh, 2);
}

tmm_status tmm_op_ssd_backward(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view xbc, tmm_view dt, tmm_view A_log,
                               tmm_view D, tmm_view saved, tmm_view dy, tmm_view scratch, tmm_view dxbc,
                               tmm_view ddt, tmm_view dA_log, tmm_view dD, bool accumulate)
{
    static const char op[] = "ssd backward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_TRAINING, &g));
    const layout lx = layout_of(&g, true);
    tmm_op_span s[] = { { "xbc", xbc, g.B * seq_xbc(&g) },
                        { "dt", dt, g.B * seq_dt(&g) },
                        { "A_log", A_log, g.nh },
                        { "D", D, g.nh },
                        { "saved", saved, layout_of(&g, false).total },
                        { "dy", dy, g.B * seq_y(&g) },
                        { "scratch", scratch, lx.total },
                        { "dxbc", dxbc, g.B * seq_xbc(&g) },
                        { "ddt", ddt, g.B * seq_dt(&g) },
                        { "dA_log", dA_log, g.nh },
                        { "dD", dD, g.nh } };
    TMM_TRY(need_all(op, s, 11));
    TMM_TRY(no_overlap(op, s, 11, 6));
    trim(s, 11);
    const tmm_view vx = s[0].v, vdt = s[1].v, val = s[2].v, vD = s[3].v, vg = s[5].v, vdx = s[7].v;
    const saved_views sv = saved_of(&g, s[4].v, true);
    const uint64_t B = g.B;
    const tmm_view gn = tmm_op_sub(s[6].v, lx.at[0], B * seq_chunks(&g));
    const tmm_view carry = tmm_op_sub(s[6].v, lx.at[1], B * seq_state(&g));
    const tmm_view kq = tmm_op_sub(s[6].v, lx.at[2], B * seq_quad(&g));
    const tmm_view w = tmm_op_sub(s[6].v, lx.at[3], B * seq_vec(&g));
    const tmm_view z = tmm_op_sub(s[6].v, lx.at[4], B * seq_vec(&g));
    const tmm_view red = tmm_op_sub(s[6].v, lx.at[5], B * seq_red(&g));
    const tmm_view rd = tmm_op_sub(s[6].v, lx.at[6], B * seq_rows(&g));
    const tmm_view part = tmm_op_sub(s[6].v, lx.at[7], B * seq_part(&g));
    const tmm_view pacc = tmm_op_sub(s[6].v, lx.at[8], 2ull * g.nh);

    tmm_pipeline *pown, *pscan, *pk, *pdx, *pbc, *prows, *psum, *psdot, *pseq, *ppar;
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_chunk_state, 4, 2, 1, &pown));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_chunk_scan, 3, 0, 0, &pscan));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_scores, 4, 1, 0, &pk));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_dx, 7, 1, 0, &pdx));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_bc, 9, 1, 0, &pbc));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_rows, 6, 0, 0, &prows));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_bcsum, 6, 0, 0, &psum));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_sdot, 3, 0, 0, &psdot));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_seq, 6, 0, 0, &pseq));
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_bwd_params, 5, 0, 0, &ppar));
    push p = push_of(&g);
    const uint32_t budget = loop_budget_of(tmm_recorder_device(r)), RB = tmm_div_up(g.Q, g.bk);
    const uint32_t nPB = tmm_div_up(g.P, g.bk), nNB = tmm_div_up(g.N, g.bk);
    const bind X = per_seq(vx, seq_xbc(&g), TMM_READ), G = per_seq(vg, seq_y(&g), TMM_READ);
    const bind DT = per_seq(vdt, seq_dt(&g), TMM_READ), CS = per_seq(sv.cs, seq_cs(&g), TMM_READ);

    /* G_{j+1}: each chunk's contribution, then the reverse scan over the chunks */
    const bind bo[] = { X, G, CS, per_seq(gn, seq_chunks(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, pown, bo, 4, p, tmm_div_up((uint64_t)g.NC * nPB * nNB, WG), g.nh, 2));
    const bind bs[] = { CS, per_seq(gn, seq_chunks(&g), TMM_READ_WRITE),
                        per_seq(carry, seq_state(&g), TMM_READ_WRITE) };
    p.flags = 1;
    for (uint32_t hi = g.NC; hi > 0; hi = p.lo) {
        p.hi = hi;
        p.lo = hi > budget ? hi - budget : 0;
        TMM_TRY(dispatch(r, &g, pscan, bs, 3, p, tmm_div_up((uint64_t)g.P * g.N, WG), g.nh, 2));
    }
    p = push_of(&g);

    /* the chunk products */
    const bind bk[] = { X, G, CS, per_seq(kq, seq_quad(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, pk, bk, 4, p, tmm_div_up((uint64_t)g.NC * RB * RB, WG), g.nh, 2));
    const bind bdx[] = { X,
                         G,
                         per_seq(sv.m, seq_quad(&g), TMM_READ),
                         CS,
                         per_seq(gn, seq_chunks(&g), TMM_READ),
                         whole(vD, TMM_READ),
                         per_seq(vdx, seq_xbc(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, pdx, bdx, 7, p, tmm_div_up((uint64_t)g.NC * RB * nPB, WG), g.nh, 2));
    const bind bbc[] = { X,
                         G,
                         per_seq(kq, seq_quad(&g), TMM_READ),
                         CS,
                         DT,
                         per_seq(gn, seq_chunks(&g), TMM_READ),
                         per_seq(sv.sp, seq_chunks(&g), TMM_READ),
                         per_seq(w, seq_vec(&g), TMM_WRITE),
                         per_seq(z, seq_vec(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, pbc, bbc, 9, p, tmm_div_up((uint64_t)g.NC * RB * nNB, WG), g.nh, 2));
    const bind W = per_seq(w, seq_vec(&g), TMM_READ), Z = per_seq(z, seq_vec(&g), TMM_READ);
    const bind brw[] = { X, G, DT, W, Z, per_seq(red, seq_red(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, prows, brw, 6, p, tmm_div_up((uint64_t)g.n * g.nh, WG), 1, 1));
    const bind bsum[] = { X, DT, W, Z, per_seq(red, seq_red(&g), TMM_READ), per_seq(vdx, seq_xbc(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, psum, bsum, 6, p, tmm_div_up((uint64_t)g.n * g.N, WG), 1, 1));
    const bind bd[] = { per_seq(gn, seq_chunks(&g), TMM_READ), per_seq(sv.sp, seq_chunks(&g), TMM_READ),
                        per_seq(rd, seq_rows(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, psdot, bd, 3, p, tmm_div_up((uint64_t)g.NC * g.P, WG), g.nh, 2));

    /* the decays' gradient: reverse scans inside the chunks */
    const bind bq[] = { whole(val, TMM_READ),
                        DT,
                        per_seq(red, seq_red(&g), TMM_READ),
                        per_seq(rd, seq_rows(&g), TMM_READ),
                        per_seq(part, seq_part(&g), TMM_WRITE),
                        per_seq(s[8].v, seq_dt(&g), TMM_WRITE) };
    TMM_TRY(dispatch(r, &g, pseq, bq, 6, p, tmm_div_up(g.NC, WG), g.nh, 2));

    /* the parameters: passes over the (sequence, chunk) partial sums */
    p.flags = accumulate ? 2 : 0;
    const tmm_access pa = accumulate ? TMM_READ_WRITE : TMM_WRITE;
    const bind bp[] = { whole(val, TMM_READ), whole(part, TMM_READ), whole(pacc, TMM_READ_WRITE), whole(s[9].v, pa),
                        whole(s[10].v, pa) };
    const tmm_device *dev = tmm_recorder_device(r);
    const uint32_t total = g.B * g.NC;
    tmm_arg args[5];
    for (uint32_t lo = 0; lo < total; lo += budget) {
        p.lo = lo;
        p.hi = total - lo > budget ? lo + budget : total;
        for (uint32_t i = 0; i < 5; i++)
            args[i] = (tmm_arg){ tmm_op_bind(dev, bp[i].v, 0, bp[i].v.size / 4, &p.base[i]), bp[i].access };
        TMM_TRY(tmm_record_dispatch(r, ppar, args, 5, &p, tmm_div_up(g.nh, WG), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_ssd_state(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view len, tmm_view xbc, tmm_view dt,
                            tmm_view A_log, tmm_view work, tmm_view S)
{
    static const char op[] = "ssd state";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_STATE, &g));
    tmm_op_span s[] = { { "len", len, g.B },
                        { "xbc", xbc, g.B * seq_xbc(&g) },
                        { "dt", dt, g.B * seq_dt(&g) },
                        { "A_log", A_log, g.nh },
                        { "work", work, tmm_ssd_state_workspace_floats(desc) },
                        { "S", S, g.B * seq_state(&g) } };
    TMM_TRY(need_all(op, s, 6));
    TMM_TRY(no_overlap(op, s, 6, 4));
    trim(s, 6);
    const saved_views sv = saved_of(&g, s[4].v, false);
    TMM_TRY(record_states(r, &g, s[1].v, s[2].v, s[3].v, &sv));
    tmm_pipeline *pipe;
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_state, 6, 1, 0, &pipe));
    const bind b[] = { per_seq(s[0].v, 1, TMM_READ),
                       per_seq(s[1].v, seq_xbc(&g), TMM_READ),
                       per_seq(s[2].v, seq_dt(&g), TMM_READ),
                       per_seq(sv.cs, seq_cs(&g), TMM_READ),
                       per_seq(sv.sp, seq_chunks(&g), TMM_READ),
                       per_seq(s[5].v, seq_state(&g), TMM_WRITE) };
    return dispatch(r, &g, pipe, b, 6, push_of(&g), tmm_div_up(tmm_div_up(g.P, g.bk) * tmm_div_up(g.N, g.bk), WG),
                    g.nh, 2);
}

tmm_status tmm_op_ssd_step(tmm_recorder *r, const tmm_ssd_desc *desc, tmm_view xbc, tmm_view dt, tmm_view A_log,
                           tmm_view D, tmm_view S, tmm_view y)
{
    static const char op[] = "ssd step";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_STEP, &g));
    tmm_op_span s[] = { { "xbc", xbc, g.B * seq_xbc(&g) }, { "dt", dt, g.B * seq_dt(&g) }, { "A_log", A_log, g.nh },
                        { "D", D, g.nh },                  { "S", S, g.B * seq_state(&g) }, { "y", y, g.B * seq_y(&g) } };
    TMM_TRY(need_all(op, s, 6));
    TMM_TRY(no_overlap(op, s, 6, 4));
    trim(s, 6);
    tmm_pipeline *pipe;
    TMM_TRY(pipeline(r, &g, &tmm_spv_ssd_step, 6, 0, 0, &pipe));
    const bind b[] = { per_seq(s[0].v, seq_xbc(&g), TMM_READ), per_seq(s[1].v, seq_dt(&g), TMM_READ),
                       whole(s[2].v, TMM_READ),                whole(s[3].v, TMM_READ),
                       per_seq(s[4].v, seq_state(&g), TMM_READ_WRITE), per_seq(s[5].v, seq_y(&g), TMM_WRITE) };
    return dispatch(r, &g, pipe, b, 6, push_of(&g), tmm_div_up(g.P, WG), g.nh, 2);
}
