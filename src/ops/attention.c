/* Causal softmax attention: host side (see attention.h for the op, the
 * shaders for the kernels).
 *
 * MEMORY_EFFICIENT (online softmax, no n x n matrix):
 *   forward  shaders/attention_fwd.comp, one invocation per (b, t, h) row,
 *            in passes over the key positions [lo, hi) (full), or over the
 *            offsets [lo, hi) of each row's window (window W < n: the keys
 *            [t+1-W+lo, t+1-W+hi), clipped at 0); o and lse carry the
 *            normalized running state between passes.
 *   backward shaders/attention_bwd_delta.comp (Delta into scratch), then
 *            attention_bwd_dq.comp (per query row, passes over keys) and
 *            attention_bwd_dkv.comp (per key row, passes over queries: with a
 *            window, the offsets t - s in [lo, hi)), both recomputing P from
 *            lse.
 * NAIVE (for checking): attention_naive_scores/softmax/pv forward (P kept in
 * saved; the softmax by attention_naive_softmax_sg, a workgroup per row, where
 * tmm_op_rows_use_subgroups), attention_naive_ds/dq/dkv backward (dS in
 * scratch).
 *
 * Loop cap: a MEMORY_EFFICIENT pass covers at most loop_budget <= 4096
 * positions (window offsets), and every channel loop is unrolled (DH is a
 * specialization constant), so no invocation loops more than loop_budget
 * times for any n.
 * NAIVE loops over rows and is limited to n <= TMM_ATTENTION_NAIVE_MAX_N.
 *
 * Determinism: no atomics; each output element is written by one invocation
 * per pass, passes run in a fixed order. */
#include "attention.h"

#include <math.h>

#include "nn_ops.h"
#include "op_util.h"

#define LOOP_BUDGET TMM_MAX_LOOP
#define WG 64u

static const uint32_t local_x[3] = { WG, 1, 1 };
/* LOOP_BUDGET, unless the device's tuning lowers it (tests: many passes on short sequences). */
static uint32_t loop_budget_of(const tmm_device *dev)
{
    uint32_t t = dev->tuning.loop_budget;
    return t == 0 || t > LOOP_BUDGET ? LOOP_BUDGET : t;
}

/* The push constants of every attention kernel. */
typedef struct push {
    uint32_t n, d, H;
    uint32_t lo, hi;
    uint32_t row0, nrows;
    uint32_t window;
    uint32_t pbase;
    float scale;
} push;

typedef struct geom {
    uint32_t B, n, d, H, dh;
    uint32_t W; /* window, 1 <= W < n; 0: full */
    tmm_attention_impl impl;
} geom;

const char *tmm_attention_impl_name(tmm_attention_impl impl)
{
    switch (impl) {
    case TMM_ATTENTION_AUTO:
        return "auto";
    case TMM_ATTENTION_NAIVE:
        return "naive";
    case TMM_ATTENTION_MEMORY_EFFICIENT:
        return "memory-efficient";
    }
    return "invalid";
}

static uint64_t act_floats(const geom *g) { return (uint64_t)g->B * g->n * g->d; }
static uint64_t row_floats(const geom *g) { return (uint64_t)g->B * g->H * g->n; }
static uint64_t mat_floats(const geom *g) { return (uint64_t)g->B * g->H * g->n * g->n; }

/* The forward's arithmetic: scores and weighted values, 2 x 2 dh per (query, key) pair
 * attended, over the heads; the backward's is twice that. */
static double forward_flops(const geom *g)
{
    const double n = g->n, W = g->W ? g->W : g->n;
    const double pairs = W >= n ? n * (n + 1) / 2 : W * (W + 1) / 2 + (n - W) * W;
    return 4.0 * g->B * g->d * pairs;
}

static tmm_status resolve(const char *op, const tmm_recorder *r, const tmm_attention_desc *desc, geom *out)
{
    if (!desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL descriptor", op);
    geom g = { desc->batch, desc->n, desc->d, desc->heads ? desc->heads : 1, 0,
               desc->window < desc->n ? desc->window : 0, desc->impl };
    switch (desc->impl) {
    case TMM_ATTENTION_AUTO:
        g.impl = TMM_ATTENTION_MEMORY_EFFICIENT;
        break;
    case TMM_ATTENTION_NAIVE:
    case TMM_ATTENTION_MEMORY_EFFICIENT:
        break;
    default:
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: unknown implementation %d", op, (int)desc->impl);
    }
    if (!g.B || !g.n || !g.d)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: empty shape B=%u n=%u d=%u", op, g.B, g.n, g.d);
    if (g.d % g.H)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u heads do not divide d = %u channels", op, g.H, g.d);
    if (g.n > INT32_MAX) /* t + 1 + W stays within 32 bits in the kernels */
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: n = %u positions, at most %u are supported", op, g.n,
                        (uint32_t)INT32_MAX);
    g.dh = g.d / g.H;
    if (g.dh > TMM_ATTENTION_MAX_HEAD_DIM)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %u channels per head, at most %u are supported", op, g.dh,
                        TMM_ATTENTION_MAX_HEAD_DIM);
    if (g.impl == TMM_ATTENTION_NAIVE && g.n > TMM_ATTENTION_NAIVE_MAX_N)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the naive implementation supports n <= %u (got %u); use the "
                        "memory-efficient one", op, TMM_ATTENTION_NAIVE_MAX_N, g.n);
    /* 32-bit indices in the kernels */
    uint64_t biggest = act_floats(&g);
    if (g.impl == TMM_ATTENTION_NAIVE && mat_floats(&g) + row_floats(&g) > biggest)
        biggest = mat_floats(&g) + row_floats(&g);
    if (biggest > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %llu floats in one tensor exceed 32-bit indexing", op,
                        (unsigned long long)biggest);
    if (r) {
        uint64_t range = tmm_recorder_device(r)->info.max_storage_buffer_range;
        if (biggest * sizeof(float) > range)
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: a tensor of %llu bytes (B=%u n=%u d=%u H=%u, %s) does not fit "
                            "in the device's maxStorageBufferRange (%llu bytes)", op,
                            (unsigned long long)(biggest * sizeof(float)), g.B, g.n, g.d, g.H,
                            tmm_attention_impl_name(g.impl), (unsigned long long)range);
    }
    *out = g;
    return TMM_OK;
}

tmm_status tmm_attention_check(const tmm_recorder *r, const tmm_attention_desc *desc)
{
    geom g = { 0 };
    return resolve("attention", r, desc, &g);
}

uint64_t tmm_op_attention_saved(const tmm_attention_desc *desc)
{
    geom g = { 0 };
    if (resolve("attention", NULL, desc, &g) != TMM_OK)
        return 0;
    return row_floats(&g) + (g.impl == TMM_ATTENTION_NAIVE ? mat_floats(&g) : 0);
}

uint64_t tmm_op_attention_backward_scratch(const tmm_attention_desc *desc)
{
    geom g = { 0 };
    if (resolve("attention", NULL, desc, &g) != TMM_OK)
        return 0;
    return g.impl == TMM_ATTENTION_NAIVE ? mat_floats(&g) : row_floats(&g);
}

/* v holds n floats and starts at an offset that can be bound directly; the
 * bound view is its first n floats. */
static tmm_status need(const tmm_recorder *r, const char *op, const char *name, tmm_view v, uint64_t n,
                       tmm_view *bound)
{
    TMM_TRY(tmm_op_need(op, name, v, n));
    uint64_t align = tmm_recorder_device(r)->info.min_storage_buffer_offset_alignment;
    if (align > 1 && v.offset % align)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s starts at byte %llu, not a multiple of the device's "
                        "minStorageBufferOffsetAlignment (%llu)", op, name, (unsigned long long)v.offset,
                        (unsigned long long)align);
    if (v.offset > v.buffer->size || v.size > v.buffer->size - v.offset)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s overruns its buffer", op, name);
    bound->buffer = v.buffer;
    bound->offset = v.offset;
    bound->size = n * sizeof(float);
    return TMM_OK;
}

static push push_of(const geom *g)
{
    push p = { g->n, g->d, g->H, 0, 0, 0, 0, g->W, 0, (float)(1.0 / sqrt((double)g->dh)) };
    return p;
}

static tmm_status pipeline(tmm_recorder *r, const tmm_spirv *spv, uint32_t n_buffers, const geom *g,
                           tmm_pipeline **out)
{
    uint32_t spec[1] = { g->dh };
    return tmm_op_pipeline(r, spv, n_buffers, sizeof(push), local_x, spec, 1, out);
}

/* The NAIVE forward's row softmax of P in saved, in place. */
static tmm_status record_naive_softmax(tmm_recorder *r, const geom *g, const push *p, tmm_view saved)
{
    tmm_device *dev = tmm_recorder_device(r);
    tmm_arg args[] = { tmm_inout(saved) };
    tmm_pipeline *pipe;
    if (tmm_op_rows_use_subgroups(dev)) {
        const uint32_t local[3] = { tmm_op_sg_workgroup(&dev->info), 1, 1 };
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_attention_naive_softmax_sg, 1, sizeof(push), local, NULL, 0, &pipe));
        return tmm_record_dispatch(r, pipe, args, 1, p, g->n, g->B * g->H, 1);
    }
    TMM_TRY(pipeline(r, &tmm_spv_attention_naive_softmax, 1, g, &pipe));
    return tmm_record_dispatch(r, pipe, args, 1, p, tmm_div_up(g->n, WG), g->B * g->H, 1);
}

/* What the MEMORY_EFFICIENT passes run over: key positions 0 .. n-1 (full)
 * or window offsets 0 .. W-1. */
static uint32_t span_of(const geom *g) { return g->W ? g->W : g->n; }

/* The pass [lo, lo + budget) clipped to the span. */
static void pass_of(const geom *g, uint32_t lo, uint32_t budget, push *p)
{
    const uint32_t span = span_of(g);
    p->lo = lo;
    p->hi = span - lo > budget ? lo + budget : span;
}

/* The first query row with keys in pass [lo, hi): full t >= lo; window
 * t + 1 - W + hi > 0. */
static uint32_t query_row0(const geom *g, const push *p)
{
    if (!g->W)
        return p->lo;
    return g->W > p->hi ? g->W - p->hi : 0;
}

tmm_status tmm_op_attention_forward(tmm_recorder *r, const tmm_attention_desc *desc, tmm_view q, tmm_view k,
                                    tmm_view v, tmm_view o, tmm_view saved)
{
    static const char op[] = "attention forward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, &g));
    uint64_t na = act_floats(&g);
    tmm_view bq = { 0 }, bk = { 0 }, bv = { 0 }, bo = { 0 }, bs = { 0 };
    TMM_TRY(need(r, op, "q", q, na, &bq));
    TMM_TRY(need(r, op, "k", k, na, &bk));
    TMM_TRY(need(r, op, "v", v, na, &bv));
    TMM_TRY(need(r, op, "o", o, na, &bo));
    TMM_TRY(need(r, op, "saved", saved, tmm_op_attention_saved(desc), &bs));
    tmm_record_flops(r, forward_flops(&g));
    push p = push_of(&g);
    tmm_pipeline *pipe;
    if (g.impl == TMM_ATTENTION_NAIVE) {
        p.pbase = (uint32_t)row_floats(&g);
        TMM_TRY(pipeline(r, &tmm_spv_attention_naive_scores, 3, &g, &pipe));
        tmm_arg a1[] = { tmm_in(bq), tmm_in(bk), tmm_out(bs) };
        TMM_TRY(tmm_record_dispatch(r, pipe, a1, 3, &p, tmm_div_up(g.n, WG), g.n, g.B * g.H));
        TMM_TRY(record_naive_softmax(r, &g, &p, bs));
        TMM_TRY(pipeline(r, &tmm_spv_attention_naive_pv, 3, &g, &pipe));
        tmm_arg a3[] = { tmm_in(bs), tmm_in(bv), tmm_out(bo) };
        return tmm_record_dispatch(r, pipe, a3, 3, &p, tmm_div_up((uint64_t)g.n * g.H, WG), g.B, 1);
    }
    TMM_TRY(pipeline(r, &tmm_spv_attention_fwd, 5, &g, &pipe));
    tmm_arg args[] = { tmm_in(bq), tmm_in(bk), tmm_in(bv), tmm_inout(bo), tmm_inout(bs) };
    const uint32_t loop_budget = loop_budget_of(tmm_recorder_device(r));
    for (uint32_t lo = 0; lo < span_of(&g); lo += loop_budget) {
        pass_of(&g, lo, loop_budget, &p);
        p.row0 = query_row0(&g, &p);
        p.nrows = g.n - p.row0;
        TMM_TRY(tmm_record_dispatch(r, pipe, args, 5, &p, tmm_div_up((uint64_t)p.nrows * g.H, WG), g.B, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_attention_backward(tmm_recorder *r, const tmm_attention_desc *desc, tmm_view q, tmm_view k,
                                     tmm_view v, tmm_view o, tmm_view saved, tmm_view dout, tmm_view scratch,
                                     tmm_view dq, tmm_view dk, tmm_view dv)
{
    static const char op[] = "attention backward";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    geom g = { 0 };
    TMM_TRY(resolve(op, r, desc, &g));
    uint64_t na = act_floats(&g);
    tmm_view bq = { 0 }, bk = { 0 }, bv = { 0 }, bo = { 0 }, bs = { 0 }, bg = { 0 }, bx = { 0 }, bdq = { 0 }, bdk = { 0 },
             bdv = { 0 };
    TMM_TRY(need(r, op, "q", q, na, &bq));
    TMM_TRY(need(r, op, "k", k, na, &bk));
    TMM_TRY(need(r, op, "v", v, na, &bv));
    TMM_TRY(need(r, op, "o", o, na, &bo));
    TMM_TRY(need(r, op, "saved", saved, tmm_op_attention_saved(desc), &bs));
    TMM_TRY(need(r, op, "dout", dout, na, &bg));
    TMM_TRY(need(r, op, "scratch", scratch, tmm_op_attention_backward_scratch(desc), &bx));
    TMM_TRY(need(r, op, "dq", dq, na, &bdq));
    TMM_TRY(need(r, op, "dk", dk, na, &bdk));
    TMM_TRY(need(r, op, "dv", dv, na, &bdv));
    tmm_record_flops(r, 2 * forward_flops(&g));
    push p = push_of(&g);
    tmm_pipeline *pipe;
    if (g.impl == TMM_ATTENTION_NAIVE) {
        p.pbase = (uint32_t)row_floats(&g);
        TMM_TRY(pipeline(r, &tmm_spv_attention_naive_ds, 5, &g, &pipe));
        tmm_arg a1[] = { tmm_in(bs), tmm_in(bv), tmm_in(bo), tmm_in(bg), tmm_out(bx) };
        TMM_TRY(tmm_record_dispatch(r, pipe, a1, 5, &p, tmm_div_up(g.n, WG), g.n, g.B * g.H));
        TMM_TRY(pipeline(r, &tmm_spv_attention_naive_dq, 3, &g, &pipe));
        tmm_arg a2[] = { tmm_in(bx), tmm_in(bk), tmm_out(bdq) };
        TMM_TRY(tmm_record_dispatch(r, pipe, a2, 3, &p, tmm_div_up((uint64_t)g.n * g.H, WG), g.B, 1));
        TMM_TRY(pipeline(r, &tmm_spv_attention_naive_dkv, 6, &g, &pipe));
        tmm_arg a3[] = { tmm_in(bs), tmm_in(bx), tmm_in(bq), tmm_in(bg), tmm_out(bdk), tmm_out(bdv) };
        return tmm_record_dispatch(r, pipe, a3, 6, &p, tmm_div_up((uint64_t)g.n * g.H, WG), g.B, 1);
    }
    /* the lse part of saved */
    tmm_view blse = tmm_sub(bs.buffer, bs.offset, row_floats(&g) * sizeof(float));
    p.nrows = g.n;
    TMM_TRY(pipeline(r, &tmm_spv_attention_bwd_delta, 3, &g, &pipe));
    tmm_arg a0[] = { tmm_in(bo), tmm_in(bg), tmm_out(bx) };
    TMM_TRY(tmm_record_dispatch(r, pipe, a0, 3, &p, tmm_div_up((uint64_t)g.n * g.H, WG), g.B, 1));
    tmm_pipeline *pq, *pkv;
    TMM_TRY(pipeline(r, &tmm_spv_attention_bwd_dq, 7, &g, &pq));
    TMM_TRY(pipeline(r, &tmm_spv_attention_bwd_dkv, 8, &g, &pkv));
    tmm_arg aq[] = { tmm_in(bq), tmm_in(bk), tmm_in(bv), tmm_in(bg), tmm_in(blse), tmm_in(bx), tmm_inout(bdq) };
    tmm_arg akv[] = { tmm_in(bq), tmm_in(bk), tmm_in(bv), tmm_in(bg), tmm_in(blse), tmm_in(bx),
                      tmm_inout(bdk), tmm_inout(bdv) };
    const uint32_t loop_budget = loop_budget_of(tmm_recorder_device(r));
    for (uint32_t lo = 0; lo < span_of(&g); lo += loop_budget) {
        pass_of(&g, lo, loop_budget, &p);
        /* dq: the query rows with keys in this pass */
        p.row0 = query_row0(&g, &p);
        p.nrows = g.n - p.row0;
        TMM_TRY(tmm_record_dispatch(r, pq, aq, 7, &p, tmm_div_up((uint64_t)p.nrows * g.H, WG), g.B, 1));
        /* dk, dv: the key rows with queries in this pass: full s < hi; window s + lo < n */
        p.row0 = 0;
        p.nrows = g.W ? g.n - lo : p.hi;
        TMM_TRY(tmm_record_dispatch(r, pkv, akv, 8, &p, tmm_div_up((uint64_t)p.nrows * g.H, WG), g.B, 1));
    }
    return TMM_OK;
}
