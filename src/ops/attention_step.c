/* Cached-decoding attention: host side (see attention_step.h for the ops).
 *
 *   cache_write  shaders/attention_step_write.comp, one invocation per (b, c)
 *   cache_fill   shaders/attention_step_fill.comp, one per (b, position, c)
 *   step         shaders/attention_step_part.comp, one invocation per
 *                (chunk, b, h), then attention_step_combine.comp over the
 *                chunk records: passes of `group` records each until one is
 *                left, the last writing o. With a single chunk the part
 *                kernel writes o itself (one dispatch).
 *
 * The caches (and fill's k, v) are bound per group of whole sequences that
 * fits maxStorageBufferRange; pos, len, q, k, v of a step, o and scratch are
 * bound whole from an aligned offset with the first element's index pushed.
 *
 * Loop cap: a chunk holds at most loop_budget <= TMM_MAX_LOOP positions, a
 * combine pass merges at most max(2, loop_budget) records, channel loops are
 * unrolled (DH is a specialization constant). */
#include "attention_step.h"

#include <math.h>

#include "nn_util.h"

#define WG 64u

static const uint32_t local_x[3] = { WG, 1, 1 };

typedef struct sgeom {
    uint32_t B, d, H, dh, C, W;
    uint32_t chunk;  /* positions per chunk */
    uint32_t nch;    /* chunks of the longest span, min(W, C) (W = 0: C) */
    uint32_t group;  /* records per combine invocation */
    uint32_t levels; /* combine passes */
    uint64_t rec;    /* floats of one record set [B, H, dh + 2] */
    uint64_t second; /* records of the combine's second region (0: none) */
} sgeom;

static uint32_t loop_budget_of(const tmm_device *dev)
{
    uint32_t t = dev ? dev->tuning.loop_budget : 0;
    return t == 0 || t > TMM_MAX_LOOP ? TMM_MAX_LOOP : t;
}

static tmm_status resolve(const char *op, const tmm_device *dev, const tmm_attention_step_desc *desc, sgeom *out)
{
    if (!desc)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL descriptor", op);
    sgeom g = { .B = desc->batch, .d = desc->d, .H = desc->heads ? desc->heads : 1, .C = desc->capacity,
                .W = desc->window };
    if (!g.B || !g.d || !g.C)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: empty shape B=%u d=%u capacity=%u", op, g.B, g.d, g.C);
    if (g.d % g.H)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u heads do not divide d = %u channels", op, g.H, g.d);
    g.dh = g.d / g.H;
    if (g.dh > TMM_ATTENTION_MAX_HEAD_DIM)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %u channels per head, at most %u are supported", op, g.dh,
                        TMM_ATTENTION_MAX_HEAD_DIM);
    const uint32_t budget = loop_budget_of(dev);
    const uint32_t span = g.W && g.W < g.C ? g.W : g.C;
    g.chunk = budget < TMM_ATTENTION_STEP_CHUNK ? budget : TMM_ATTENTION_STEP_CHUNK;
    g.nch = tmm_div_up(span, g.chunk);
    g.group = budget < 2 ? 2 : budget;
    g.rec = (uint64_t)g.B * g.H * (g.dh + 2);
    g.levels = 0;
    for (uint32_t cnt = g.nch; cnt > 1; cnt = tmm_div_up(cnt, g.group))
        g.levels++;
    g.second = g.levels > 1 ? tmm_div_up(g.nch, g.group) : 0;
    /* 32-bit indices in the kernels */
    if ((uint64_t)g.C * g.d > UINT32_MAX / 2 || (g.nch + g.second) * g.rec > UINT32_MAX / 2)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: capacity %u x d %u (B=%u) is too large", op, g.C, g.d, g.B);
    *out = g;
    return TMM_OK;
}

tmm_status tmm_attention_step_check(const tmm_recorder *r, const tmm_attention_step_desc *desc)
{
    sgeom g;
    return resolve("attention step", r ? tmm_recorder_device(r) : NULL, desc, &g);
}

uint64_t tmm_op_attention_step_scratch(const tmm_device *dev, const tmm_attention_step_desc *desc)
{
    sgeom g = { 0 };
    if (resolve("attention step", dev, desc, &g) != TMM_OK)
        return 0;
    return g.nch > 1 ? (g.nch + g.second) * g.rec : 0;
}

/* A small tensor of n floats (or uint32) bound whole from an aligned offset. */
static tmm_status bind_whole(const tmm_device *dev, const char *op, const char *name, tmm_view v, uint64_t n,
                             nn_bind *out)
{
    TMM_TRY(tmm_op_need_floats(op, name, v, n));
    if (n > tmm_op_binding_floats(dev))
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s (%llu floats) does not fit one binding", op, name,
                        (unsigned long long)n);
    out->view = tmm_op_bind(dev, v, 0, n, &out->base);
    return TMM_OK;
}

tmm_status tmm_op_attention_cache_write(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos,
                                        tmm_view k, tmm_view v, tmm_view kcache, tmm_view vcache)
{
    static const char op[] = "attention cache_write";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    tmm_device *dev = tmm_recorder_device(r);
    sgeom g;
    TMM_TRY(resolve(op, dev, desc, &g));
    const uint64_t seq = (uint64_t)g.C * g.d;
    nn_bind bp, bk, bv;
    TMM_TRY(bind_whole(dev, op, "pos", pos, g.B, &bp));
    TMM_TRY(bind_whole(dev, op, "k", k, (uint64_t)g.B * g.d, &bk));
    TMM_TRY(bind_whole(dev, op, "v", v, (uint64_t)g.B * g.d, &bv));
    TMM_TRY(tmm_op_need_floats(op, "kcache", kcache, g.B * seq));
    TMM_TRY(tmm_op_need_floats(op, "vcache", vcache, g.B * seq));
    uint64_t per = g.B;
    TMM_TRY(nn_fit_rows(dev, op, "the cache (one sequence)", seq, &per));
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_attention_step_write, 5, 36, local_x, NULL, 0, &pipe));
    for (uint64_t b0 = 0; b0 < g.B; b0 += per) {
        const uint32_t nb = (uint32_t)(g.B - b0 < per ? g.B - b0 : per);
        nn_bind bkc = nn_rows(dev, kcache, b0, nb, seq), bvc = nn_rows(dev, vcache, b0, nb, seq);
        struct {
            uint32_t nseq, seq0, d, cap, base_pos, base_k, base_v, base_kc, base_vc;
        } push = { .nseq = nb, .seq0 = (uint32_t)b0, .d = g.d, .cap = g.C, .base_pos = bp.base, .base_k = bk.base,
                   .base_v = bv.base, .base_kc = bkc.base, .base_vc = bvc.base };
        /* the caches are read-write: the other slots must survive */
        tmm_arg args[5] = { tmm_in(bp.view), tmm_in(bk.view), tmm_in(bv.view), tmm_inout(bkc.view),
                            tmm_inout(bvc.view) };
        TMM_TRY(tmm_record_dispatch(r, pipe, args, 5, &push, tmm_div_up((uint64_t)nb * g.d, WG), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_attention_cache_fill(tmm_recorder *r, const tmm_attention_step_desc *desc, uint32_t n,
                                       tmm_view len, tmm_view k, tmm_view v, tmm_view kcache, tmm_view vcache)
{
    static const char op[] = "attention cache_fill";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    tmm_device *dev = tmm_recorder_device(r);
    sgeom g;
    TMM_TRY(resolve(op, dev, desc, &g));
    if (!n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: empty prefill (n = 0)", op);
    const uint64_t seq = (uint64_t)g.C * g.d, full = (uint64_t)n * g.d;
    const uint32_t span = n < g.C ? n : g.C;
    if (full > UINT32_MAX / 2)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: n %u x d %u is too large", op, n, g.d);
    nn_bind bl;
    TMM_TRY(bind_whole(dev, op, "len", len, g.B, &bl));
    TMM_TRY(tmm_op_need_floats(op, "k", k, g.B * full));
    TMM_TRY(tmm_op_need_floats(op, "v", v, g.B * full));
    TMM_TRY(tmm_op_need_floats(op, "kcache", kcache, g.B * seq));
    TMM_TRY(tmm_op_need_floats(op, "vcache", vcache, g.B * seq));
    uint64_t per = g.B;
    TMM_TRY(nn_fit_rows(dev, op, "the cache (one sequence)", seq, &per));
    TMM_TRY(nn_fit_rows(dev, op, "k (one sequence)", full, &per));
    tmm_pipeline *pipe;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_attention_step_fill, 5, 40, local_x, NULL, 0, &pipe));
    for (uint64_t b0 = 0; b0 < g.B; b0 += per) {
        const uint32_t nb = (uint32_t)(g.B - b0 < per ? g.B - b0 : per);
        nn_bind bk = nn_rows(dev, k, b0, nb, full), bv = nn_rows(dev, v, b0, nb, full);
        nn_bind bkc = nn_rows(dev, kcache, b0, nb, seq), bvc = nn_rows(dev, vcache, b0, nb, seq);
        struct {
            uint32_t n, d, cap, seq0, span, base_len, base_k, base_v, base_kc, base_vc;
        } push = { .n = n, .d = g.d, .cap = g.C, .seq0 = (uint32_t)b0, .span = span, .base_len = bl.base,
                   .base_k = bk.base, .base_v = bv.base, .base_kc = bkc.base, .base_vc = bvc.base };
        tmm_arg args[5] = { tmm_in(bl.view), tmm_in(bk.view), tmm_in(bv.view), tmm_inout(bkc.view),
                            tmm_inout(bvc.view) };
        TMM_TRY(tmm_record_dispatch(r, pipe, args, 5, &push, tmm_div_up((uint64_t)span * g.d, WG), nb, 1));
    }
    return TMM_OK;
}

/* The step; with k (not empty) and v, the part kernel writes them to the caches first. */
static tmm_status step(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos, tmm_view q, tmm_view k,
                       tmm_view v, tmm_view kcache, tmm_view vcache, tmm_view scratch, tmm_view o)
{
    static const char op[] = "attention step";
    if (!r)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: NULL recorder", op);
    tmm_device *dev = tmm_recorder_device(r);
    sgeom g;
    TMM_TRY(resolve(op, dev, desc, &g));
    const uint64_t seq = (uint64_t)g.C * g.d, nscratch = g.nch > 1 ? (g.nch + g.second) * g.rec : 0;
    nn_bind bp, bq, bo, bs = { { 0 }, 0 };
    TMM_TRY(bind_whole(dev, op, "pos", pos, g.B, &bp));
    TMM_TRY(bind_whole(dev, op, "q", q, (uint64_t)g.B * g.d, &bq));
    const bool write = k.size > 0;
    nn_bind bk = bq, bv = bq;
    if (write) {
        TMM_TRY(bind_whole(dev, op, "k", k, (uint64_t)g.B * g.d, &bk));
        TMM_TRY(bind_whole(dev, op, "v", v, (uint64_t)g.B * g.d, &bv));
    }
    TMM_TRY(bind_whole(dev, op, "o", o, (uint64_t)g.B * g.d, &bo));
    if (nscratch)
        TMM_TRY(bind_whole(dev, op, "scratch", scratch, nscratch, &bs));
    TMM_TRY(tmm_op_need_floats(op, "kcache", kcache, g.B * seq));
    TMM_TRY(tmm_op_need_floats(op, "vcache", vcache, g.B * seq));
    uint64_t per = g.B;
    TMM_TRY(nn_fit_rows(dev, op, "the cache (one sequence)", seq, &per));
    const uint32_t spec[1] = { g.dh };
    tmm_pipeline *ppart;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_attention_step_part, 7, 76, local_x, spec, 1, &ppart));
    /* the chunk records: region A at the start of scratch, region B after it */
    const bool direct = g.nch == 1;
    nn_bind ra = direct ? bo : bs, rb = ra;
    if (!direct) {
        ra.view = tmm_op_bind(dev, scratch, 0, g.nch * g.rec, &ra.base);
        if (g.second)
            rb.view = tmm_op_bind(dev, scratch, g.nch * g.rec, g.second * g.rec, &rb.base);
    }
    for (uint64_t b0 = 0; b0 < g.B; b0 += per) {
        const uint32_t nb = (uint32_t)(g.B - b0 < per ? g.B - b0 : per);
        nn_bind bkc = nn_rows(dev, kcache, b0, nb, seq), bvc = nn_rows(dev, vcache, b0, nb, seq);
        struct {
            uint32_t nseq, seq0, batch, cap, d, H, window, chunk, nchunks, direct;
            uint32_t base_pos, base_q, base_kc, base_vc, base_out;
            float scale;
            uint32_t write, base_k, base_v;
        } push = { .nseq = nb, .seq0 = (uint32_t)b0, .batch = g.B, .cap = g.C, .d = g.d, .H = g.H, .window = g.W,
                   .chunk = g.chunk, .nchunks = g.nch, .direct = direct, .base_pos = bp.base, .base_q = bq.base,
                   .base_kc = bkc.base, .base_vc = bvc.base, .base_out = ra.base,
                   .scale = (float)(1.0 / sqrt((double)g.dh)), .write = write, .base_k = bk.base,
                   .base_v = bv.base };
        /* with the write the caches are read-write: the other slots must survive */
        tmm_arg args[7] = { tmm_in(bp.view), tmm_in(bq.view), write ? tmm_inout(bkc.view) : tmm_in(bkc.view),
                            write ? tmm_inout(bvc.view) : tmm_in(bvc.view), tmm_out(ra.view), tmm_in(bk.view),
                            tmm_in(bv.view) };
        TMM_TRY(tmm_record_dispatch(r, ppart, args, 7, &push, tmm_div_up((uint64_t)g.nch * nb * g.H, WG), 1, 1));
    }
    if (direct)
        return TMM_OK;
    tmm_pipeline *pcomb;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_attention_step_combine, 2, 36, local_x, spec, 1, &pcomb));
    nn_bind src = ra, dst = rb;
    for (uint32_t cnt = g.nch; cnt > 1;) {
        const uint32_t nout = tmm_div_up(cnt, g.group);
        if (nout == 1)
            dst = bo;
        struct {
            uint32_t batch, d, H, nin, nout, group, final, base_src, base_dst;
        } push = { .batch = g.B, .d = g.d, .H = g.H, .nin = cnt, .nout = nout, .group = g.group,
                   .final = nout == 1, .base_src = src.base, .base_dst = dst.base };
        tmm_arg args[2] = { tmm_in(src.view), tmm_out(dst.view) };
        TMM_TRY(tmm_record_dispatch(r, pcomb, args, 2, &push, tmm_div_up((uint64_t)nout * g.B * g.H, WG), 1, 1));
        nn_bind next = dst;
        dst = src;
        src = next;
        cnt = nout;
    }
    return TMM_OK;
}

tmm_status tmm_op_attention_step(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos, tmm_view q,
                                 tmm_view kcache, tmm_view vcache, tmm_view scratch, tmm_view o)
{
    static const tmm_view none = { 0 };
    return step(r, desc, pos, q, none, none, kcache, vcache, scratch, o);
}

tmm_status tmm_op_attention_step_write(tmm_recorder *r, const tmm_attention_step_desc *desc, tmm_view pos,
                                       tmm_view q, tmm_view k, tmm_view v, tmm_view kcache, tmm_view vcache,
                                       tmm_view scratch, tmm_view o)
{
    if (!k.size || !v.size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "attention step: no k or v to write");
    return step(r, desc, pos, q, k, v, kcache, vcache, scratch, o);
}
