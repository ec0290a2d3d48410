/* Gates (ssm_ops.h): y = a * b, y = a * silu(z), y = a * k[c], forward and
 * backward; element kernels over rows in chunks that fit one binding, the
 * scale's gradient as partial sums over segments of TMM_NN_COL_SEG rows
 * combined by tmm_op_sum_cols. Also the element-wise aliasing check the
 * ops of ssm_ops.h share. Kernels: shaders/gate_*.comp. */
#include "nn_util.h"
#include "ssm_ops.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

static bool overlaps(const tmm_op_span *a, const tmm_op_span *b)
{
    if (!a->n || !b->n || a->v.buffer != b->v.buffer)
        return false;
    uint64_t a0 = a->v.offset, a1 = a0 + a->n * sizeof(float), b0 = b->v.offset, b1 = b0 + b->n * sizeof(float);
    return a0 < b1 && b0 < a1;
}

tmm_status tmm_ssm_check_alias(const char *op, const tmm_op_span *ins, size_t n_ins, const tmm_op_span *outs,
                               size_t n_outs)
{
    for (size_t k = 0; k < n_outs; k++) {
        const tmm_op_span *o = &outs[k];
        for (size_t i = 0; i < n_ins; i++)
            if (overlaps(o, &ins[i]) && (o->v.offset != ins[i].v.offset || o->n != ins[i].n))
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s without being the same view", op,
                                o->name, ins[i].name);
        for (size_t j = 0; j < k; j++)
            if (overlaps(o, &outs[j]))
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s; outputs must not alias each other",
                                op, o->name, outs[j].name);
    }
    return TMM_OK;
}

/* ---- y = a * b and y = a * silu(z) ---------------------------------------------- */

/* Two row inputs u, v -> y (forward kernels gate_mul_fwd, gate_silu_fwd). */
static tmm_status two_forward(tmm_recorder *r, const char *op, const tmm_spirv *spv, const char *vname, tmm_view u,
                              tmm_view v, uint32_t rows, uint32_t C, tmm_view y)
{
    const uint64_t n = (uint64_t)rows * C;
    if (n == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "a", u, n));
    TMM_TRY(tmm_op_need_floats(op, vname, v, n));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    tmm_op_span in[] = { { "a", u, n }, { vname, v, n } }, out[] = { { "y", y, n } };
    TMM_TRY(tmm_ssm_check_alias(op, in, 2, out, 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "a", C, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, spv, 3, 16, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bu = nn_rows(dev, u, r0, nr, C), bv = nn_rows(dev, v, r0, nr, C), by = nn_rows(dev, y, r0, nr, C);
        struct {
            uint32_t n, base_a, base_b, base_y;
        } push = { .n = nr * C, .base_a = bu.base, .base_b = bv.base, .base_y = by.base };
        tmm_arg args[3] = { tmm_in(bu.view), tmm_in(bv.view), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

/* Gradients du, dv (each optional) from u, v, dy (gate_mul_bwd, gate_silu_bwd). */
static tmm_status two_backward(tmm_recorder *r, const char *op, const tmm_spirv *spv, const char *vname,
                               const char *dvname, tmm_view u, tmm_view v, tmm_view dy, uint32_t rows, uint32_t C,
                               tmm_view du, tmm_view dv)
{
    const uint64_t n = (uint64_t)rows * C;
    const bool has_du = !tmm_ssm_absent(du), has_dv = !tmm_ssm_absent(dv);
    if (n == 0 || (!has_du && !has_dv))
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "a", u, n));
    TMM_TRY(tmm_op_need_floats(op, vname, v, n));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    if (has_du)
        TMM_TRY(tmm_op_need_floats(op, "da", du, n));
    if (has_dv)
        TMM_TRY(tmm_op_need_floats(op, dvname, dv, n));
    tmm_op_span in[] = { { "a", u, n }, { vname, v, n }, { "dy", dy, n } };
    tmm_op_span out[] = { { "da", du, has_du ? n : 0 }, { dvname, dv, has_dv ? n : 0 } };
    TMM_TRY(tmm_ssm_check_alias(op, in, 3, out, 2));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "a", C, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, spv, 5, 32, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind bu = nn_rows(dev, u, r0, nr, C), bv = nn_rows(dev, v, r0, nr, C), bdy = nn_rows(dev, dy, r0, nr, C);
        /* an absent output binds dy in its place, never written */
        nn_bind bdu = has_du ? nn_rows(dev, du, r0, nr, C) : bdy, bdv = has_dv ? nn_rows(dev, dv, r0, nr, C) : bdy;
        struct {
            uint32_t n, has_da, has_db, base_a, base_b, base_dy, base_da, base_db;
        } push = { .n = nr * C, .has_da = has_du, .has_db = has_dv, .base_a = bu.base, .base_b = bv.base,
                   .base_dy = bdy.base, .base_da = bdu.base, .base_db = bdv.base };
        tmm_arg args[5] = { tmm_in(bu.view), tmm_in(bv.view), tmm_in(bdy.view),
                            has_du ? tmm_out(bdu.view) : tmm_in(bdu.view),
                            has_dv ? tmm_out(bdv.view) : tmm_in(bdv.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 5, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_gate_mul_forward(tmm_recorder *r, tmm_view a, tmm_view b, uint32_t rows, uint32_t C, tmm_view y)
{
    return two_forward(r, "gate_mul_forward", &tmm_spv_gate_mul_fwd, "b", a, b, rows, C, y);
}

tmm_status tmm_op_gate_mul_backward(tmm_recorder *r, tmm_view a, tmm_view b, tmm_view dy, uint32_t rows, uint32_t C,
                                    tmm_view da, tmm_view db)
{
    return two_backward(r, "gate_mul_backward", &tmm_spv_gate_mul_bwd, "b", "db", a, b, dy, rows, C, da, db);
}

tmm_status tmm_op_gate_silu_forward(tmm_recorder *r, tmm_view a, tmm_view z, uint32_t rows, uint32_t C, tmm_view y)
{
    return two_forward(r, "gate_silu_forward", &tmm_spv_gate_silu_fwd, "z", a, z, rows, C, y);
}

tmm_status tmm_op_gate_silu_backward(tmm_recorder *r, tmm_view a, tmm_view z, tmm_view dy, uint32_t rows, uint32_t C,
                                     tmm_view da, tmm_view dz)
{
    return two_backward(r, "gate_silu_backward", &tmm_spv_gate_silu_bwd, "z", "dz", a, z, dy, rows, C, da, dz);
}

/* ---- y = a * k[c] ------------------------------------------------------------------ */

tmm_status tmm_op_gate_scale_forward(tmm_recorder *r, tmm_view a, tmm_view k, uint32_t rows, uint32_t C, tmm_view y)
{
    static const char *op = "gate_scale_forward";
    const uint64_t n = (uint64_t)rows * C;
    if (n == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "a", a, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "k", k, C));
    TMM_TRY(tmm_op_need_floats(op, "y", y, n));
    tmm_op_span in[] = { { "a", a, n }, { "k", k, C } }, out[] = { { "y", y, n } };
    TMM_TRY(tmm_op_no_overlap(op, &out[0], &in[1], 1));
    TMM_TRY(tmm_ssm_check_alias(op, in, 1, out, 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "a", C, &per));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_gate_scale_fwd, 3, 16, local_elem, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
        nn_bind ba = nn_rows(dev, a, r0, nr, C), by = nn_rows(dev, y, r0, nr, C);
        struct {
            uint32_t n, d, base_a, base_y;
        } push = { .n = nr * C, .d = C, .base_a = ba.base, .base_y = by.base };
        tmm_arg args[3] = { tmm_in(ba.view), tmm_in(k), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

static uint32_t n_segments(uint32_t rows) { return tmm_div_up(rows, TMM_NN_COL_SEG); }

uint64_t tmm_op_gate_scale_backward_scratch(uint32_t rows, uint32_t C)
{
    uint32_t nseg = n_segments(rows);
    return nseg > 1 ? nn_colsum_scratch(nseg, C, 1) : 0;
}

tmm_status tmm_op_gate_scale_backward(tmm_recorder *r, tmm_view a, tmm_view k, tmm_view dy, uint32_t rows, uint32_t C,
                                      bool accumulate, tmm_view scratch, tmm_view da, tmm_view dk)
{
    static const char *op = "gate_scale_backward";
    if (C == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    const bool has_da = !tmm_ssm_absent(da), has_dk = !tmm_ssm_absent(dk);
    if (has_dk)
        TMM_TRY(tmm_op_need_bound(dev, op, "dk", dk, C));
    if (rows == 0)
        return accumulate || !has_dk ? TMM_OK : tmm_op_fill(r, dk, C, 0.0f);
    const uint64_t n = (uint64_t)rows * C;
    const uint32_t nseg = n_segments(rows);
    const bool direct = nseg == 1;
    TMM_TRY(tmm_op_need_floats(op, "a", a, n));
    TMM_TRY(tmm_op_need_bound(dev, op, "k", k, C));
    TMM_TRY(tmm_op_need_floats(op, "dy", dy, n));
    if (has_da)
        TMM_TRY(tmm_op_need_floats(op, "da", da, n));
    if (has_dk && !direct)
        TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_op_gate_scale_backward_scratch(rows, C)));
    tmm_op_span all[] = { { "a", a, n }, { "dy", dy, n }, { "k", k, C }, { "da", da, has_da ? n : 0 },
                          { "dk", dk, has_dk ? C : 0 } };
    TMM_TRY(tmm_op_no_overlap(op, &all[4], all, 5));
    TMM_TRY(tmm_op_no_overlap(op, &all[3], &all[2], 1));
    TMM_TRY(tmm_ssm_check_alias(op, all, 2, &all[3], 1));
    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "a", C, &per));
    per = nn_round_chunk(per);
    if (has_dk && per < TMM_NN_COL_SEG && per < rows)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: C = %u leaves %llu rows per binding, fewer than the %u that "
                        "the column sums need", op, C, (unsigned long long)per, TMM_NN_COL_SEG);
    tmm_view region = direct || !has_dk ? (tmm_view){ 0 }
                                        : tmm_op_sub(scratch, 0, tmm_op_gate_scale_backward_scratch(rows, C));
    tmm_view plane = direct ? dk : nn_colsum_plane(region, 0, nseg, C);
    tmm_pipeline *pk = NULL, *pe = NULL;
    if (has_dk)
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_gate_scale_bwd_k, 3, 36, local_loop, NULL, 0, &pk));
    if (has_da)
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_gate_scale_bwd, 3, 16, local_elem, NULL, 0, &pe));
    /* The scale's sums first: they read a and dy, which da may overwrite. */
    for (int phase = has_dk ? 0 : 1; phase < (has_da ? 2 : 1); phase++) {
        uint32_t seg0 = 0;
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bdy = nn_rows(dev, dy, r0, nr, C);
            if (phase == 0) {
                nn_bind ba = nn_rows(dev, a, r0, nr, C);
                uint32_t ns = n_segments(nr);
                struct {
                    uint32_t rows, d, seg, nseg, seg0, direct, accumulate, base_a, base_dy;
                } push = { .rows = nr, .d = C, .seg = TMM_NN_COL_SEG, .nseg = ns, .seg0 = seg0, .direct = direct,
                           .accumulate = accumulate, .base_a = ba.base, .base_dy = bdy.base };
                tmm_arg args[3] = { tmm_in(ba.view), tmm_in(bdy.view),
                                    { plane, direct && accumulate ? TMM_READ_WRITE : TMM_WRITE } };
                TMM_TRY(tmm_record_dispatch(r, pk, args, 3, &push, tmm_div_up((uint64_t)ns * C, NN_WG_LOOP), 1, 1));
                seg0 += ns;
            } else {
                nn_bind bda = nn_rows(dev, da, r0, nr, C);
                struct {
                    uint32_t n, d, base_dy, base_da;
                } push = { .n = nr * C, .d = C, .base_dy = bdy.base, .base_da = bda.base };
                tmm_arg args[3] = { tmm_in(k), tmm_in(bdy.view), tmm_out(bda.view) };
                TMM_TRY(tmm_record_dispatch(r, pe, args, 3, &push, tmm_div_up((uint64_t)nr * C, TMM_WG_1D), 1, 1));
            }
        }
    }
    if (has_dk && !direct)
        TMM_TRY(nn_colsum_finish(r, region, 1, nseg, C, accumulate, &dk));
    return TMM_OK;
}
