/* Cached decoding ops: the one-position Toeplitz step and the linear layers of a few rows. */
#include "decode_ops.h"

#include "llama_ops.h"
#include "nn_util.h"
#include "ssm_ops.h"

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

static tmm_status check(const char *op, tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view pos,
                        tmm_view cache, uint64_t *seqs_per_bind)
{
    TMM_TRY(tmm_toeplitz_check(NULL, desc));
    const uint64_t B = desc->batch, seq = (uint64_t)desc->n * desc->d;
    TMM_TRY(tmm_op_need_floats(op, "pos", pos, B));
    TMM_TRY(tmm_op_need_floats(op, "cache", cache, B * seq));
    *seqs_per_bind = B;
    return nn_fit_rows(tmm_recorder_device(r), op, "cache (one sequence)", seq, seqs_per_bind);
}

static tmm_status linear_rows(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                              tmm_view bias, tmm_row_act act, tmm_view y, bool accumulate)
{
    static const char *op = "linear_rows";
    tmm_device *dev = tmm_recorder_device(r);
    const bool vec = in % 4 == 0;
    if ((unsigned)act > TMM_ROW_ACT_GELU || (act && accumulate))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: activation %d%s", op, (int)act,
                        act && accumulate ? " with accumulate" : " is unknown");
    if (rows == 0 || rows > TMM_DECODE_MAX_ROWS || in == 0 || in > (vec ? 4 : 1) * TMM_MAX_LOOP) {
        tmm_matmul_desc d = { .m = rows, .n = out, .k = in, .trans_b = true, .batch = 1, .accumulate = accumulate };
        static const tmm_view none = { 0 };
        TMM_TRY(tmm_op_matmul(r, &d, x, w, act ? none : bias, y));
        if (act == TMM_ROW_ACT_SILU)
            return tmm_op_bias_silu_forward(r, y, bias, rows, out, y);
        return act == TMM_ROW_ACT_GELU ? tmm_op_gelu_forward(r, y, bias, rows, out, y) : TMM_OK;
    }
    const bool has_bias = bias.size > 0;
    TMM_TRY(tmm_op_need_floats(op, "x", x, (uint64_t)rows * in));
    TMM_TRY(tmm_op_need_bound(dev, op, "w", w, (uint64_t)out * in));
    if (has_bias)
        TMM_TRY(tmm_op_need_bound(dev, op, "bias", bias, out));
    TMM_TRY(tmm_op_need_floats(op, "y", y, (uint64_t)rows * out));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "x", in, &per));
    TMM_TRY(nn_fit_rows(dev, op, "y", out, &per));
    if (per < rows || (uint64_t)out * in > UINT32_MAX / 2)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %u x %u weights do not fit one binding", op, out, in);
    nn_bind bx = nn_rows(dev, x, 0, rows, in), by = nn_rows(dev, y, 0, rows, out);
    const uint32_t spec[3] = { vec && bx.base % 4 == 0, rows, (uint32_t)act };
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_decode_linear, 4, 28, local_loop, spec, 3, &p));
    struct { uint32_t in, out, has_bias, accumulate, base_x, base_w, base_y; } push = { .in = in, .out = out,
                                                                                        .has_bias = has_bias,
                                                                                        .accumulate = accumulate,
                                                                                        .base_x = bx.base,
                                                                                        .base_y = by.base };
    tmm_arg args[4] = { tmm_in(bx.view), tmm_in(w), tmm_in(has_bias ? bias : w),
                        { by.view, accumulate ? TMM_READ_WRITE : TMM_WRITE } };
    return tmm_record_dispatch(r, p, args, 4, &push, tmm_div_up(out, NN_WG_LOOP), 1, 1);
}

tmm_status tmm_op_linear_rows(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                              tmm_view bias, tmm_view y, bool accumulate)
{
    return linear_rows(r, x, rows, in, out, w, bias, TMM_ROW_ACT_NONE, y, accumulate);
}

tmm_status tmm_op_linear_rows_act(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                                  tmm_view bias, tmm_row_act act, tmm_view y)
{
    return linear_rows(r, x, rows, in, out, w, bias, act, y, false);
}

/* ---- several linear layers of the same rows --------------------------- */

static uint32_t w_rows(const tmm_row_group *g) { return g->act == TMM_ROW_ACT_SWIGLU ? 2 * g->out : g->out; }

static tmm_status group_check(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, const tmm_row_group *groups,
                              uint32_t n, const tmm_row_rope *rope)
{
    static const char *op = "linear_rows_group";
    if (n == 0 || n > TMM_ROW_GROUPS || rows == 0 || in == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %u groups (1 to %u) of %u rows of %u", op, n, TMM_ROW_GROUPS,
                        rows, in);
    TMM_TRY(tmm_op_need_floats(op, "x", x, (uint64_t)rows * in));
    for (uint32_t i = 0; i < n; i++) {
        const tmm_row_group *g = &groups[i];
        const tmm_row_act act = g->act;
        if (act != TMM_ROW_ACT_NONE && act != TMM_ROW_ACT_SWIGLU && act != TMM_ROW_ACT_ROPE &&
            act != TMM_ROW_ACT_SOFTPLUS)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: group %u: activation %d is not none, swiglu, rope or "
                            "softplus", op, i, (int)act);
        if (g->bias.size && (act == TMM_ROW_ACT_SWIGLU || act == TMM_ROW_ACT_ROPE))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: group %u: swiglu and rope take no bias", op, i);
        if (act == TMM_ROW_ACT_ROPE && (!rope || !rope->dh || rope->dh % 2 || g->out % rope->dh))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: group %u: rope needs an even head width that divides "
                            "its %u channels", op, i, g->out);
        if (g->out == 0)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: group %u has no outputs", op, i);
        TMM_TRY(tmm_op_need_floats(op, "w", g->w, (uint64_t)w_rows(g) * in));
        TMM_TRY(tmm_op_need_floats(op, "y", g->y, (uint64_t)rows * g->out));
        if (g->bias.size)
            TMM_TRY(tmm_op_need_floats(op, "bias", g->bias, g->out));
        if (act == TMM_ROW_ACT_ROPE) {
            TMM_TRY(tmm_op_need_floats(op, "pos", rope->pos, rows));
            TMM_TRY(tmm_op_need_bound(tmm_recorder_device(r), op, "table", rope->table,
                                      tmm_rope_table_floats(rope->npos, rope->dh)));
        }
    }
    return TMM_OK;
}

/* y = x · Wᵀ + bias by the row kernel where W and bias can be bound as
 * given, else by the matmul op. */
static tmm_status plain(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                        tmm_view bias, tmm_view y)
{
    const uint64_t align = tmm_op_offset_align(tmm_recorder_device(r));
    if (w.offset % align == 0 && bias.offset % align == 0)
        return tmm_op_linear_rows(r, x, rows, in, out, w, bias, y, false);
    return tmm_op_linear(r, x, rows, in, out, w, bias, y, false);
}

/* The unfused path: each group's linear layer, then its activation's op. */
static tmm_status each(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, const tmm_row_group *groups,
                       uint32_t n, const tmm_row_rope *rope, tmm_view tmp)
{
    static const tmm_view none = { 0 };
    for (uint32_t i = 0; i < n; i++) {
        const tmm_row_group *g = &groups[i];
        if (g->act == TMM_ROW_ACT_SWIGLU) {
            TMM_TRY(tmm_op_need_floats("linear_rows_group", "tmp", tmp, (uint64_t)rows * 2 * g->out));
            TMM_TRY(plain(r, x, rows, in, 2 * g->out, g->w, none, tmp));
            TMM_TRY(tmm_op_swiglu_forward(r, tmp, rows, g->out, g->y));
        } else if (g->act == TMM_ROW_ACT_ROPE) {
            TMM_TRY(plain(r, x, rows, in, g->out, g->w, none, g->y));
            TMM_TRY(tmm_op_rope(r, TMM_ROPE_POSITIONS, g->y, rope->table, rope->pos, rows, g->out,
                                g->out / rope->dh, rope->npos, false, g->y));
        } else if (g->act == TMM_ROW_ACT_SOFTPLUS) {
            TMM_TRY(plain(r, x, rows, in, g->out, g->w, g->bias, g->y));
            TMM_TRY(tmm_op_softplus_forward(r, g->y, none, rows, g->out, g->y));
        } else {
            TMM_TRY(plain(r, x, rows, in, g->out, g->w, g->bias, g->y));
        }
    }
    return TMM_OK;
}

/* One binding over the non-empty views' span in their shared buffer, from an
 * aligned offset, with base[i] the index of view i's first float in it
 * (false: no view, several buffers, or a span past one binding). */
static bool span(const tmm_device *dev, const tmm_view *v, uint32_t n, tmm_view *bind, uint32_t *base)
{
    tmm_buffer *buf = NULL;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!v[i].size)
            continue;
        if (buf && v[i].buffer != buf)
            return false;
        buf = v[i].buffer;
        lo = v[i].offset < lo ? v[i].offset : lo;
        hi = v[i].offset + v[i].size > hi ? v[i].offset + v[i].size : hi;
    }
    if (!buf || (hi - lo) / 4 > tmm_op_binding_floats(dev))
        return false;
    const uint64_t start = lo - lo % tmm_op_offset_align(dev);
    *bind = tmm_sub(buf, start, hi - start);
    for (uint32_t i = 0; i < n; i++)
        base[i] = v[i].size ? (uint32_t)((v[i].offset - start) / 4) : 0;
    return true;
}

tmm_status tmm_op_linear_rows_group(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in,
                                    const tmm_row_group *groups, uint32_t n, const tmm_row_rope *rope, tmm_view tmp)
{
    TMM_TRY(group_check(r, x, rows, in, groups, n, rope));
    tmm_device *dev = tmm_recorder_device(r);
    struct {
        uint32_t outs[4], base_w[4], base_b[4], base_y[4], mode[4];
        uint32_t in, base_x, half_dh, npos, base_pos;
    } push = { .in = in };
    tmm_view ws[TMM_ROW_GROUPS], bs[TMM_ROW_GROUPS], ys[TMM_ROW_GROUPS], bw, bb = { 0 }, by;
    bool two = false, has_bias = false;
    uint32_t lanes = 0;
    for (uint32_t i = 0; i < n; i++) {
        const tmm_row_group *g = &groups[i];
        ws[i] = tmm_op_sub(g->w, 0, (uint64_t)w_rows(g) * in), bs[i] = g->bias, ys[i] = g->y;
        two |= g->act == TMM_ROW_ACT_SWIGLU || g->act == TMM_ROW_ACT_ROPE;
        has_bias |= g->bias.size > 0;
        push.outs[i] = g->out, push.mode[i] = (uint32_t)g->act | (g->bias.size ? 16u : 0u);
        const uint32_t l = g->act == TMM_ROW_ACT_ROPE ? g->out / 2 : g->out;
        lanes = l > lanes ? l : lanes;
    }
    nn_bind bx = nn_rows(dev, x, 0, rows, in);
    bool fused = rows <= TMM_DECODE_MAX_ROWS && span(dev, ws, n, &bw, push.base_w) &&
                 span(dev, ys, n, &by, push.base_y) && (!has_bias || span(dev, bs, n, &bb, push.base_b));
    bool vec = in % 4 == 0 && bx.base % 4 == 0;
    for (uint32_t i = 0; i < n; i++)
        vec = vec && push.base_w[i] % 4 == 0;
    fused = fused && (uint64_t)(vec ? in / 4 : in) * (two ? 2 : 1) <= TMM_MAX_LOOP;
    if (!fused)
        return each(r, x, rows, in, groups, n, rope, tmp);
    push.base_x = bx.base;
    tmm_view table = bx.view, pos = bx.view;
    if (rope) {
        push.half_dh = rope->dh / 2, push.npos = rope->npos, table = rope->table;
        pos = tmm_op_bind(dev, rope->pos, 0, rows, &push.base_pos);
    }
    const uint32_t spec[2] = { vec, rows };
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_linear_rows_group, 6, sizeof push, local_loop, spec, 2, &p));
    tmm_arg args[6] = { tmm_in(bx.view), tmm_in(bw), tmm_in(has_bias ? bb : bw), tmm_out(by), tmm_in(table),
                        tmm_in(pos) };
    return tmm_record_dispatch(r, p, args, 6, &push, tmm_div_up(lanes, NN_WG_LOOP), n, 1);
}

/* ---- Hyena's short convolutions --------------------------------------- */

tmm_status tmm_op_hyena_conv_step(tmm_recorder *r, tmm_view u, tmm_view w, tmm_view bias, tmm_view pos, uint32_t batch,
                                  uint32_t d, uint32_t K, tmm_view window)
{
    static const char *op = "hyena_conv_step";
    tmm_device *dev = tmm_recorder_device(r);
    if (!batch || !d || !K || K > TMM_CONV1D_MAX_K)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: batch %u, d %u, K %u (1 to %u)", op, batch, d, K,
                        TMM_CONV1D_MAX_K);
    const char *names[5] = { "u", "w", "bias", "pos", "window" };
    const tmm_view views[5] = { u, w, bias, pos, window };
    const uint64_t floats[5] = { 3ull * batch * d, 3ull * d * K, 3ull * d, batch, 3ull * batch * (K - 1) * d };
    nn_bind b[5];
    for (int i = 0; i < 5; i++) {
        if (!floats[i]) { /* K = 1: no window */
            b[i] = b[0];
            continue;
        }
        TMM_TRY(tmm_op_need_floats(op, names[i], views[i], floats[i]));
        if (floats[i] > tmm_op_binding_floats(dev))
            return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s does not fit one binding", op, names[i]);
        b[i] = nn_rows(dev, views[i], 0, 1, floats[i]);
    }
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_hyena_conv_step, 5, 32, local_1d, NULL, 0, &p));
    struct { uint32_t batch, d, K, base_u, base_w, base_b, base_pos, base_win; } push = {
        .batch = batch, .d = d, .K = K, .base_u = b[0].base, .base_w = b[1].base, .base_b = b[2].base,
        .base_pos = b[3].base, .base_win = b[4].base
    };
    tmm_arg args[5] = { tmm_inout(b[0].view), tmm_in(b[1].view), tmm_in(b[2].view), tmm_in(b[3].view),
                        K > 1 ? tmm_inout(b[4].view) : tmm_in(b[4].view) };
    return tmm_record_dispatch(r, p, args, 5, &push, tmm_div_up((uint64_t)batch * d, TMM_WG_1D), 1, 1);
}

/* ---- Mamba 2's gate and norm ------------------------------------------- */

tmm_status tmm_op_rmsnorm_gate_step(tmm_recorder *r, tmm_view x, tmm_view z, tmm_view g, uint32_t rows, uint32_t d,
                                   float eps, tmm_view scratch, tmm_view rstd, tmm_view y)
{
    static const char *op = "rmsnorm_gate_step";
    tmm_device *dev = tmm_recorder_device(r);
    const uint64_t n = (uint64_t)rows * d;
    uint64_t per = rows;
    bool fused = rows && d && rows <= NN_ROW_NORM_ROWS && 2ull * d <= TMM_MAX_LOOP &&
                 !tmm_op_rows_use_subgroups(dev) && nn_fit_rows(dev, op, "x", d, &per) == TMM_OK && per == rows;
    if (!fused) { /* the unfused path: the gate's op, then the norm's */
        TMM_TRY(tmm_op_gate_silu_forward(r, x, z, rows, d, y));
        return tmm_op_rmsnorm_forward(r, y, g, rows, d, eps, scratch, y, rstd);
    }
    TMM_TRY(tmm_op_need_floats(op, "x", x, n));
    TMM_TRY(tmm_op_need_floats(op, "z", z, n));
    TMM_TRY(tmm_op_need_floats(op, "g", g, d));
    TMM_TRY(tmm_op_need_floats(op, "rstd", rstd, rows));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    nn_bind bx = nn_rows(dev, x, 0, rows, d), bz = nn_rows(dev, z, 0, rows, d), bg = nn_rows(dev, g, 0, 1, d);
    nn_bind br = nn_rows(dev, rstd, 0, rows, 1), by = nn_rows(dev, y, 0, rows, d);
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_rmsnorm_gate_step, 5, 32, local_loop, NULL, 0, &p));
    struct {
        uint32_t rows, d, base_x, base_z, base_g, base_r, base_y;
        float eps;
    } push = { .rows = rows, .d = d, .base_x = bx.base, .base_z = bz.base, .base_g = bg.base, .base_r = br.base,
               .base_y = by.base, .eps = eps };
    tmm_arg args[5] = { tmm_in(bx.view), tmm_in(bz.view), tmm_in(bg.view), tmm_out(br.view), tmm_inout(by.view) };
    return tmm_record_dispatch(r, p, args, 5, &push, tmm_div_up(rows, NN_WG_LOOP), 1, 1);
}

/* Positions one invocation of the step kernel sums: n <= TMM_STEP_CHUNK in
 * one dispatch; longer sums spread over more invocations (on llvmpipe one
 * invocation per channel over a long cache costs more than the second
 * dispatch). */
static uint32_t step_chunk(const tmm_toeplitz_desc *desc)
{
    const uint32_t K = desc->taps ? desc->taps : 1;
    return TMM_STEP_CHUNK * K <= TMM_MAX_LOOP ? TMM_STEP_CHUNK : TMM_MAX_LOOP / K;
}
static uint32_t n_chunks(const tmm_toeplitz_desc *desc) { return tmm_div_up(desc->n, step_chunk(desc)); }

uint64_t tmm_op_toeplitz_step_scratch(const tmm_toeplitz_desc *desc)
{
    return (uint64_t)n_chunks(desc) * desc->batch * desc->d;
}

/* The step; with a gate (not empty) y is multiplied by it. */
static tmm_status tz_step(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view pos, tmm_view x, tmm_view cache,
                          tmm_view w, tmm_view beta, tmm_view gate, tmm_view scratch, tmm_view y)
{
    static const char *op = "toeplitz_step";
    uint64_t per;
    TMM_TRY(check(op, r, desc, pos, cache, &per));
    tmm_device *dev = tmm_recorder_device(r);
    const uint32_t B = desc->batch, n = desc->n, d = desc->d;
    const uint32_t G = desc->groups ? desc->groups : 1, K = desc->taps ? desc->taps : 1;
    const uint32_t nch = n_chunks(desc);
    TMM_TRY(tmm_op_need_floats(op, "x", x, (uint64_t)B * d));
    TMM_TRY(tmm_op_need_bound(dev, op, "w", w, (uint64_t)G * K * n));
    TMM_TRY(tmm_op_need_bound(dev, op, "beta", beta, (uint64_t)G * n));
    if (nch > 1)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_op_toeplitz_step_scratch(desc)));
    TMM_TRY(tmm_op_need_floats(op, "y", y, (uint64_t)B * d));
    if (nch > TMM_MAX_LOOP) /* toeplitz_step_sum.comp loops over the chunks */
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: n %u is longer than decoding supports (%u)", op, n,
                        TMM_MAX_LOOP * step_chunk(desc));
    if ((uint64_t)B * d * nch > UINT32_MAX / 2)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: batch %u x d %u x n %u is too large for one step", op, B, d, n);
    nn_bind bx = nn_rows(dev, x, 0, B, d), by = nn_rows(dev, y, 0, B, d), bg = bx;
    if (gate.size) {
        TMM_TRY(tmm_op_need_floats(op, "gate", gate, (uint64_t)B * d));
        bg = nn_rows(dev, gate, 0, B, d);
    }
    /* 4 channels per invocation where they share a group and one tap, and
     * every sequence's rows start on a vec4 (nn_rows' bases: per binding) */
    bool vec = K == 1 && d % 4 == 0 && (d / G) % 4 == 0 && bx.base % 4 == 0;
    for (uint64_t b0 = 0; vec && b0 < B; b0 += per)
        vec = nn_rows(dev, cache, b0, B - b0 < per ? B - b0 : per, (uint64_t)n * d).base % 4 == 0;
    const uint32_t spec[1] = { vec }, lanes = vec ? d / 4 : d;
    tmm_pipeline *ps;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_step, 8, 56, local_loop, spec, 1, &ps));
    for (uint64_t b0 = 0; b0 < B; b0 += per) {
        uint32_t nb = (uint32_t)(B - b0 < per ? B - b0 : per);
        nn_bind bc = nn_rows(dev, cache, b0, nb, (uint64_t)n * d);
        struct {
            uint32_t nseq, batch, n, d, group_channels, taps, chunk, nchunks, seq0, base_x, base_cache, base_y;
            uint32_t gated, base_gate;
        } push = { .nseq = nb, .batch = B, .n = n, .d = d, .group_channels = d / G, .taps = K,
                   .chunk = step_chunk(desc), .nchunks = nch, .seq0 = (uint32_t)b0, .base_x = bx.base,
                   .base_cache = bc.base, .base_y = by.base, .gated = gate.size > 0, .base_gate = bg.base };
        /* the cache is read-write: the rows of other positions must survive */
        tmm_arg args[8] = { tmm_in(pos), tmm_in(bx.view), tmm_inout(bc.view), tmm_in(w), tmm_in(beta),
                            tmm_out(nch > 1 ? scratch : by.view), tmm_out(by.view), tmm_in(bg.view) };
        TMM_TRY(tmm_record_dispatch(r, ps, args, 8, &push, tmm_div_up((uint64_t)nb * lanes * nch, NN_WG_LOOP), 1,
                                    1));
    }
    if (nch == 1)
        return TMM_OK;
    tmm_pipeline *pf;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_toeplitz_step_sum, 5, 32, local_1d, NULL, 0, &pf));
    struct { uint32_t batch, n, d, group_channels, nchunks, base_y, gated, base_gate; } push = {
        .batch = B, .n = n, .d = d, .group_channels = d / G, .nchunks = nch, .base_y = by.base,
        .gated = gate.size > 0, .base_gate = bg.base
    };
    tmm_arg args[5] = { tmm_in(pos), tmm_in(scratch), tmm_in(beta), tmm_out(by.view), tmm_in(bg.view) };
    return tmm_record_dispatch(r, pf, args, 5, &push, tmm_div_up((uint64_t)B * d, TMM_WG_1D), 1, 1);
}

tmm_status tmm_op_toeplitz_step(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view pos, tmm_view x,
                                tmm_view cache, tmm_view w, tmm_view beta, tmm_view scratch, tmm_view y)
{
    static const tmm_view none = { 0 };
    return tz_step(r, desc, pos, x, cache, w, beta, none, scratch, y);
}

tmm_status tmm_op_toeplitz_step_gate(tmm_recorder *r, const tmm_toeplitz_desc *desc, tmm_view pos, tmm_view x,
                                     tmm_view cache, tmm_view w, tmm_view beta, tmm_view gate, tmm_view scratch,
                                     tmm_view y)
{
    if (!gate.size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "toeplitz_step: an empty gate");
    return tz_step(r, desc, pos, x, cache, w, beta, gate, scratch, y);
}
