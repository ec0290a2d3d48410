/* Causal linear attention: host side (see linear_attention.h for the op, the
 * shaders for the kernels).
 *
 *   forward   linattn_fwd_state (chunk states Sc, zc, in passes over the
 *             positions), linattn_scores (W = fq·fk inside each chunk),
 *             linattn_fwd (y and den, per row and block of CB channels).
 *   backward  linattn_scores (U = dy·v inside each chunk), linattn_fwd
 *             again (y into scratch), linattn_bwd_dq (dq and db per row and
 *             block), linattn_bwd_state (reverse chunk states, passes over
 *             the positions from the end), linattn_bwd_dkv (dk, dv per row
 *             and block).
 *   decoding  linattn_state (prefill state, passes over the positions),
 *             linattn_step (one invocation per (b, h)).
 * D is a push constant: each kernel compiles once whatever the head width
 * (llvmpipe compiles at the first dispatch); the row kernels keep CB
 * channels in registers.
 *
 * Loop cap: a state pass covers at most loop_budget <= TMM_MAX_LOOP
 * positions; the other kernels loop at most 2 D + C <= 1280 times (the
 * scores D, the step D + ceil(D / CB) D <= 1152).
 * Determinism: no atomics; each output element is written by one invocation
 * per dispatch, passes run in a fixed order. */
#include "linear_attention.h"

#include "op_util.h"

#define WG 64u
#define CB 16u /* channels per invocation of the row kernels (specialization constant 3) */

static const uint32_t local_x[3] = { WG, 1, 1 };

/* TMM_MAX_LOOP, unless the device's tuning lowers it (tests: many passes on short sequences). */
static uint32_t loop_budget_of(const tmm_device *dev)
{
    uint32_t t = dev->tuning.loop_budget;
    return t == 0 || t > TMM_MAX_LOOP ? TMM_MAX_LOOP : t;
}

/* The push constants of every linear attention kernel (each shader's block). */
typedef struct push {
    uint32_t n, d, H, D;
    uint32_t chunk, nchunk, nb;
    uint32_t lo, hi;
    float eps;
} push;

typedef struct geom {
    uint32_t B, n, d, H, D, C, NC;
} geom;

/* Regions of saved (Sc, zc, den, W) and of the backward scratch (Sb, zb,
 * db, U, y): offsets in floats, each a multiple of TMM_LINATTN_ALIGN. */
typedef struct layout {
    uint64_t s, z, row, sc, act, total;
} layout;

static uint64_t align_up(uint64_t x) { return (x + TMM_LINATTN_ALIGN - 1) / TMM_LINATTN_ALIGN * TMM_LINATTN_ALIGN; }

static uint64_t act_floats(const geom *g) { return (uint64_t)g->B * g->n * g->d; }
static uint64_t s_floats(const geom *g) { return (uint64_t)g->B * g->H * g->NC * g->D * g->D; }
static uint64_t z_floats(const geom *g) { return (uint64_t)g->B * g->H * g->NC * g->D; }
static uint64_t row_floats(const geom *g) { return (uint64_t)g->B * g->H * g->n; }
static uint64_t score_floats(const geom *g) { return (uint64_t)g->B * g->H * g->n * g->C; }

static layout layout_of(const geom *g, bool scratch)
{
    layout l = { 0 };
    l.z = align_up(s_floats(g));
    l.row = l.z + align_up(z_floats(g));
    l.sc = l.row + align_up(row_floats(g));
    l.act = l.sc + align_up(score_floats(g));
    l.total = scratch ? l.act + act_floats(g) : l.sc + score_floats(g);
    return l;
}

/* What a descriptor is checked for: the training ops use every tensor above;
 * the prefill state only the activations and the state; the step ignores n
 * and the chunk (its rows are checked as one position). */
typedef enum use { FOR_TRAINING, FOR_STATE, FOR_STEP } use;

static tmm_status resolve(const char *op, const tmm_recorder *r, const tmm_linear_attention_desc *desc, use u,
                          geom *out)
{
    if (!desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL descriptor", op);
    geom g = { desc->batch, u == FOR_STEP ? 1 : desc->n, desc->d, desc->heads ? desc->heads : 1, 0,
               u == FOR_TRAINING && desc->chunk ? desc->chunk : TMM_LINATTN_CHUNK, 0 };
    if (!g.B || !g.n || !g.d)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: empty shape B=%u n=%u d=%u", op, g.B, g.n, g.d);
    if (g.d % g.H)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u heads do not divide d = %u channels", op, g.H, g.d);
    g.D = g.d / g.H;
    if (g.D > TMM_LINATTN_MAX_HEAD_DIM)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %u channels per head, at most %u are supported", op, g.D,
                        TMM_LINATTN_MAX_HEAD_DIM);
    if (g.C > TMM_LINATTN_MAX_CHUNK)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: chunk of %u positions, at most %u are supported", op, g.C,
                        TMM_LINATTN_MAX_CHUNK);
    g.NC = tmm_div_up(g.n, g.C);
    /* 32-bit indices in the kernels; each tensor and region is one binding */
    const uint64_t sizes[] = { act_floats(&g), (uint64_t)g.B * g.H * g.D * g.D, s_floats(&g), z_floats(&g),
                               row_floats(&g), score_floats(&g) };
    static const char *names[] = { "an activation", "the state",     "the chunk states",
                                   "the chunk sums", "the denominators", "the intra-chunk scores" };
    const size_t count = u == FOR_TRAINING ? sizeof sizes / sizeof sizes[0] : 2;
    for (size_t i = 0; i < count; i++) {
        if (sizes[i] > UINT32_MAX)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s (%llu floats) exceed 32-bit indexing", op, names[i],
                            (unsigned long long)sizes[i]);
        if (r && sizes[i] * sizeof(float) > tmm_recorder_device(r)->info.max_storage_buffer_range)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s (%llu bytes; B=%u n=%u d=%u H=%u C=%u) do not fit in the "
                            "device's maxStorageBufferRange (%llu bytes)", op, names[i],
                            (unsigned long long)(sizes[i] * sizeof(float)), g.B, g.n, g.d, g.H, g.C,
                            (unsigned long long)tmm_recorder_device(r)->info.max_storage_buffer_range);
    }
    if (r && tmm_op_offset_align(tmm_recorder_device(r)) > TMM_LINATTN_ALIGN * sizeof(float))
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the device's minStorageBufferOffsetAlignment (%llu) is above %u "
                        "bytes", op, (unsigned long long)tmm_op_offset_align(tmm_recorder_device(r)),
                        TMM_LINATTN_ALIGN * (unsigned)sizeof(float));
    *out = g;
    return TMM_OK;
}

tmm_status tmm_linear_attention_check(const tmm_recorder *r, const tmm_linear_attention_desc *desc)
{
    geom g = { 0 };
    return resolve("linear attention", r, desc, FOR_TRAINING, &g);
}

uint64_t tmm_op_linear_attention_saved(const tmm_linear_attention_desc *desc)
{
    geom g = { 0 };
    if (resolve("linear attention", NULL, desc, FOR_TRAINING, &g) != TMM_OK)
        return 0;
    return layout_of(&g, false).total;
}

uint64_t tmm_op_linear_attention_backward_scratch(const tmm_linear_attention_desc *desc)
{
    geom g = { 0 };
    if (resolve("linear attention", NULL, desc, FOR_TRAINING, &g) != TMM_OK)
        return 0;
    return layout_of(&g, true).total;
}

/* v holds n floats and is bound directly; *bound is its first n floats. */
static tmm_status need(const tmm_recorder *r, const char *op, const char *name, tmm_view v, uint64_t n,
                       tmm_view *bound)
{
    TMM_TRY(tmm_op_need_bound(tmm_recorder_device(r), op, name, v, n));
    *bound = tmm_op_sub(v, 0, n);
    return TMM_OK;
}

/* Outputs (the spans from `first` on) overlap no other argument. */
static tmm_status no_overlap(const char *op, const tmm_op_span *all, size_t count, size_t first)
{
    for (size_t i = first; i < count; i++)
        TMM_TRY(tmm_op_no_overlap(op, &all[i], all, count));
    return TMM_OK;
}

static push push_of(const geom *g)
{
    return (push){ .n = g->n, .d = g->d, .H = g->H, .D = g->D, .chunk = g->C, .nchunk = g->NC,
                   .nb = tmm_div_up(g->D, CB), .lo = 0, .hi = 0, .eps = TMM_LINATTN_EPS };
}

static tmm_status pipeline(tmm_recorder *r, const tmm_spirv *spv, uint32_t n_buffers, tmm_pipeline **out)
{
    const uint32_t spec[1] = { CB };
    return tmm_op_pipeline(r, spv, n_buffers, sizeof(push), local_x, spec, 1, out);
}

/* The regions of a saved or scratch view (already checked). */
typedef struct regions {
    tmm_view s, z, row, sc, act;
} regions;

static regions regions_of(const geom *g, tmm_view v, bool scratch)
{
    layout l = layout_of(g, scratch);
    regions x = { tmm_op_sub(v, 0, s_floats(g)), tmm_op_sub(v, l.z, z_floats(g)), tmm_op_sub(v, l.row, row_floats(g)),
                  tmm_op_sub(v, l.sc, score_floats(g)), tmm_op_sub(v, l.act, scratch ? act_floats(g) : 0) };
    return x;
}

/* Scores of a and b inside each chunk into w (see linattn_scores.comp); phi
 * is its PHI: 1 for the scores of f(q), f(k), 0 for those of dy, v. */
static tmm_status record_scores(tmm_recorder *r, const geom *g, const push *p, uint32_t phi, tmm_view a, tmm_view b,
                                tmm_view w)
{
    const uint32_t spec[2] = { CB, phi };
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_linattn_scores, 3, sizeof(push), local_x, spec, 2, &pipe));
    tmm_arg args[] = { tmm_in(a), tmm_in(b), tmm_out(w) };
    return tmm_record_dispatch(r, pipe, args, 3, p, tmm_div_up((uint64_t)g->n * g->C, WG), g->H, g->B);
}

/* y and den from q, v, the chunk states and the scores W (linattn_fwd.comp). */
static tmm_status record_outputs(tmm_recorder *r, const geom *g, const push *p, tmm_view q, tmm_view v,
                                 const regions *saved, tmm_view y, tmm_view den)
{
    tmm_pipeline *pipe;
    TMM_TRY(pipeline(r, &tmm_spv_linattn_fwd, 7, &pipe));
    tmm_arg args[] = { tmm_in(q), tmm_in(v), tmm_in(saved->s), tmm_in(saved->z), tmm_in(saved->sc), tmm_out(y),
                       tmm_out(den) };
    return tmm_record_dispatch(r, pipe, args, 7, p, tmm_div_up((uint64_t)g->n * g->H * p->nb, WG), g->B, 1);
}

tmm_status tmm_op_linear_attention_forward(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view q,
                                           tmm_view k, tmm_view v, tmm_view y, tmm_view saved)
{
    static const char op[] = "linear attention forward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_TRAINING, &g));
    const uint64_t na = act_floats(&g), ns = layout_of(&g, false).total;
    tmm_view bq, bk, bv, by, bs;
    TMM_TRY(need(r, op, "q", q, na, &bq));
    TMM_TRY(need(r, op, "k", k, na, &bk));
    TMM_TRY(need(r, op, "v", v, na, &bv));
    TMM_TRY(need(r, op, "y", y, na, &by));
    TMM_TRY(need(r, op, "saved", saved, ns, &bs));
    const tmm_op_span spans[] = { { "q", q, na }, { "k", k, na }, { "v", v, na }, { "y", y, na },
                                  { "saved", saved, ns } };
    TMM_TRY(no_overlap(op, spans, 5, 3));
    const regions sv = regions_of(&g, bs, false);

    tmm_pipeline *pstate;
    TMM_TRY(pipeline(r, &tmm_spv_linattn_fwd_state, 4, &pstate));
    push p = push_of(&g);
    const uint32_t budget = loop_budget_of(tmm_recorder_device(r)), ne = g.D * p.nb;
    tmm_arg as[] = { tmm_in(bk), tmm_in(bv), tmm_inout(sv.s), tmm_inout(sv.z) };
    for (uint32_t lo = 0; lo < g.n; lo += budget) {
        p.lo = lo;
        p.hi = g.n - lo > budget ? lo + budget : g.n;
        TMM_TRY(tmm_record_dispatch(r, pstate, as, 4, &p, tmm_div_up(ne, WG), g.H, g.B));
    }
    TMM_TRY(record_scores(r, &g, &p, 1, bq, bk, sv.sc));
    return record_outputs(r, &g, &p, bq, bv, &sv, by, sv.row);
}

tmm_status tmm_op_linear_attention_backward(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view q,
                                            tmm_view k, tmm_view v, tmm_view saved, tmm_view dy, tmm_view scratch,
                                            tmm_view dq, tmm_view dk, tmm_view dv)
{
    static const char op[] = "linear attention backward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_TRAINING, &g));
    const uint64_t na = act_floats(&g), ns = layout_of(&g, false).total, nx = layout_of(&g, true).total;
    tmm_view bq, bk, bv, bs, bg, bx, bdq, bdk, bdv;
    TMM_TRY(need(r, op, "q", q, na, &bq));
    TMM_TRY(need(r, op, "k", k, na, &bk));
    TMM_TRY(need(r, op, "v", v, na, &bv));
    TMM_TRY(need(r, op, "saved", saved, ns, &bs));
    TMM_TRY(need(r, op, "dy", dy, na, &bg));
    TMM_TRY(need(r, op, "scratch", scratch, nx, &bx));
    TMM_TRY(need(r, op, "dq", dq, na, &bdq));
    TMM_TRY(need(r, op, "dk", dk, na, &bdk));
    TMM_TRY(need(r, op, "dv", dv, na, &bdv));
    const tmm_op_span spans[] = { { "q", q, na },         { "k", k, na },   { "v", v, na },
                                  { "saved", saved, ns }, { "dy", dy, na }, { "scratch", scratch, nx },
                                  { "dq", dq, na },       { "dk", dk, na }, { "dv", dv, na } };
    TMM_TRY(no_overlap(op, spans, 9, 5));
    const regions sv = regions_of(&g, bs, false), sx = regions_of(&g, bx, true);

    push p = push_of(&g);
    /* U = dy·v inside the chunks; y again (its den output goes to db, overwritten below) */
    TMM_TRY(record_scores(r, &g, &p, 0, bg, bv, sx.sc));
    TMM_TRY(record_outputs(r, &g, &p, bq, bv, &sv, sx.act, sx.row));
    tmm_pipeline *pdq, *pstate, *pdkv;
    TMM_TRY(pipeline(r, &tmm_spv_linattn_bwd_dq, 10, &pdq));
    TMM_TRY(pipeline(r, &tmm_spv_linattn_bwd_state, 6, &pstate));
    TMM_TRY(pipeline(r, &tmm_spv_linattn_bwd_dkv, 12, &pdkv));
    const uint32_t rows = tmm_div_up((uint64_t)g.n * g.H * p.nb, WG);
    tmm_arg aq[] = { tmm_in(bq),   tmm_in(bk),    tmm_in(sx.act), tmm_in(bg),   tmm_in(sv.s),
                     tmm_in(sv.z), tmm_in(sv.row), tmm_in(sx.sc), tmm_out(bdq), tmm_out(sx.row) };
    TMM_TRY(tmm_record_dispatch(r, pdq, aq, 10, &p, rows, g.B, 1));
    const uint32_t budget = loop_budget_of(tmm_recorder_device(r)), ne = g.D * p.nb;
    tmm_arg as[] = { tmm_in(bq), tmm_in(bg), tmm_in(sv.row), tmm_in(sx.row), tmm_inout(sx.s), tmm_inout(sx.z) };
    for (uint32_t hi = g.n; hi > 0; hi = p.lo) {
        p.hi = hi;
        p.lo = hi > budget ? hi - budget : 0;
        TMM_TRY(tmm_record_dispatch(r, pstate, as, 6, &p, tmm_div_up(ne, WG), g.H, g.B));
    }
    tmm_arg akv[] = { tmm_in(bq),    tmm_in(bk),     tmm_in(bv),   tmm_in(bg),   tmm_in(sv.row), tmm_in(sx.row),
                      tmm_in(sx.s),  tmm_in(sx.z),   tmm_in(sv.sc), tmm_in(sx.sc), tmm_out(bdk), tmm_out(bdv) };
    return tmm_record_dispatch(r, pdkv, akv, 12, &p, rows, g.B, 1);
}

tmm_status tmm_op_linear_attention_state(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view len,
                                         tmm_view k, tmm_view v, tmm_view S, tmm_view z)
{
    static const char op[] = "linear attention state";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_STATE, &g));
    const uint64_t na = act_floats(&g), nS = (uint64_t)g.B * g.H * g.D * g.D, nz = (uint64_t)g.B * g.H * g.D;
    tmm_view bl, bk, bv, bS, bz;
    TMM_TRY(need(r, op, "len", len, g.B, &bl));
    TMM_TRY(need(r, op, "k", k, na, &bk));
    TMM_TRY(need(r, op, "v", v, na, &bv));
    TMM_TRY(need(r, op, "S", S, nS, &bS));
    TMM_TRY(need(r, op, "z", z, nz, &bz));
    const tmm_op_span spans[] = { { "len", len, g.B }, { "k", k, na }, { "v", v, na }, { "S", S, nS },
                                  { "z", z, nz } };
    TMM_TRY(no_overlap(op, spans, 5, 3));

    tmm_pipeline *pipe;
    TMM_TRY(pipeline(r, &tmm_spv_linattn_state, 5, &pipe));
    push p = push_of(&g);
    const uint32_t budget = loop_budget_of(tmm_recorder_device(r)), ne = g.D * p.nb;
    tmm_arg args[] = { tmm_in(bl), tmm_in(bk), tmm_in(bv), tmm_inout(bS), tmm_inout(bz) };
    for (uint32_t lo = 0; lo < g.n; lo += budget) {
        p.lo = lo;
        p.hi = g.n - lo > budget ? lo + budget : g.n;
        TMM_TRY(tmm_record_dispatch(r, pipe, args, 5, &p, tmm_div_up(ne, WG), g.H, g.B));
    }
    return TMM_OK;
}

tmm_status tmm_op_linear_attention_step(tmm_recorder *r, const tmm_linear_attention_desc *desc, tmm_view q,
                                        tmm_view k, tmm_view v, tmm_view S, tmm_view z, tmm_view y)
{
    static const char op[] = "linear attention step";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, FOR_STEP, &g));
    const uint64_t nr = (uint64_t)g.B * g.d, nS = (uint64_t)g.B * g.H * g.D * g.D, nz = (uint64_t)g.B * g.H * g.D;
    tmm_view bq, bk, bv, bS, bz, by;
    TMM_TRY(need(r, op, "q", q, nr, &bq));
    TMM_TRY(need(r, op, "k", k, nr, &bk));
    TMM_TRY(need(r, op, "v", v, nr, &bv));
    TMM_TRY(need(r, op, "S", S, nS, &bS));
    TMM_TRY(need(r, op, "z", z, nz, &bz));
    TMM_TRY(need(r, op, "y", y, nr, &by));
    const tmm_op_span spans[] = { { "q", q, nr }, { "k", k, nr }, { "v", v, nr },
                                  { "S", S, nS }, { "z", z, nz }, { "y", y, nr } };
    TMM_TRY(no_overlap(op, spans, 6, 3));

    tmm_pipeline *pipe;
    TMM_TRY(pipeline(r, &tmm_spv_linattn_step, 6, &pipe));
    push p = push_of(&g);
    tmm_arg args[] = { tmm_in(bq), tmm_in(bk), tmm_in(bv), tmm_inout(bS), tmm_inout(bz), tmm_out(by) };
    return tmm_record_dispatch(r, pipe, args, 6, &p, tmm_div_up(g.H, WG), g.B, 1);
}
