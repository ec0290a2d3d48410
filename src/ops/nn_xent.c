/* Fused softmax cross-entropy (per-row loss, argmax, in-place gradient of
 * the mean loss) and its deterministic mean. */
#include "nn_util.h"

static const uint32_t local_elem[3] = { TMM_WG_1D, 1, 1 };
static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

static uint32_t n_chunks(uint32_t vocab) { return tmm_div_up(vocab, TMM_NN_XENT_CHUNK); }

tmm_status tmm_nn_count_scored(const int32_t *targets, uint32_t rows, uint32_t vocab, uint32_t *n_scored)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < rows; i++) {
        if (targets[i] < 0)
            continue;
        if ((uint32_t)targets[i] >= vocab)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "cross-entropy: target %d at position %u is outside the "
                            "vocabulary of %u (negative targets are ignored)", targets[i], i, vocab);
        n++;
    }
    *n_scored = n;
    return TMM_OK;
}

/* part [rows, nchunk, 3], then lse [rows] */
uint64_t tmm_op_xent_scratch(uint32_t rows, uint32_t vocab)
{
    return nn_aligned(3ull * rows * n_chunks(vocab)) + rows;
}

uint64_t tmm_op_argmax_scratch(uint32_t rows, uint32_t vocab) { return tmm_op_xent_scratch(rows, vocab); }

static tmm_status xent(tmm_recorder *r, const char *op, tmm_view logits, const tmm_view *targets, uint32_t rows,
                       uint32_t vocab, uint32_t denominator, bool backward, tmm_view loss_scale, tmm_view scratch,
                       tmm_view loss, tmm_view argmax)
{
    if (rows == 0)
        return TMM_OK;
    if (vocab == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the vocabulary is empty", op);
    if (vocab > TMM_NN_XENT_MAX_VOCAB)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: vocab %u is above the supported %u", op, vocab,
                        TMM_NN_XENT_MAX_VOCAB);
    const uint32_t nc = n_chunks(vocab);
    const bool has_loss = loss.size != 0, has_argmax = argmax.size != 0, has_scale = backward && loss_scale.size != 0;
    TMM_TRY(tmm_op_need_floats(op, "logits", logits, (uint64_t)rows * vocab));
    if (targets)
        TMM_TRY(tmm_op_need_floats(op, "targets", *targets, rows));
    if (has_scale)
        TMM_TRY(tmm_op_need_floats(op, "loss scale", loss_scale, 1));
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, tmm_op_xent_scratch(rows, vocab)));
    if (has_loss)
        TMM_TRY(tmm_op_need_floats(op, "loss", loss, rows));
    if (has_argmax)
        TMM_TRY(tmm_op_need_floats(op, "argmax", argmax, rows));
    tmm_view part = tmm_op_sub(scratch, 0, 3ull * rows * nc);
    tmm_view lse = tmm_op_sub(scratch, nn_aligned(3ull * rows * nc), rows);

    uint64_t per = rows;
    TMM_TRY(nn_fit_rows(dev, op, "logits", vocab, &per));
    TMM_TRY(nn_fit_rows(dev, op, "scratch", 3ull * nc, &per));
    tmm_pipeline *pp, *pc, *pg = NULL;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_xent_partial, 2, 24, local_loop, NULL, 0, &pp));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_xent_combine, 6, 48, local_loop, NULL, 0, &pc));
    if (backward)
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_xent_grad, 4, 32, local_elem, NULL, 0, &pg));
    const float scale = denominator ? 1.0f / (float)denominator : 0.0f;
    /* GPUs: passes 1 and 2 in one, a workgroup per row (xent_row_sg) */
    const uint32_t wg = tmm_op_sg_workgroup(&dev->info);
    const bool sg = tmm_op_rows_use_subgroups(dev) && tmm_div_up(vocab, wg) <= TMM_MAX_LOOP;
    tmm_pipeline *psg = NULL;
    if (sg) {
        const uint32_t local[3] = { wg, 1, 1 };
        TMM_TRY(tmm_op_pipeline(r, &tmm_spv_xent_row_sg, 5, 40, local, NULL, 0, &psg));
    }

    for (int phase = sg ? 1 : 0; phase < (backward ? 3 : 2); phase++)
        for (uint64_t r0 = 0; r0 < rows; r0 += per) {
            uint32_t nr = (uint32_t)(rows - r0 < per ? rows - r0 : per);
            nn_bind bx = nn_rows(dev, logits, r0, nr, vocab), bp = nn_rows(dev, part, r0, nr, 3ull * nc);
            nn_bind bl = nn_rows(dev, lse, r0, nr, 1);
            /* Absent optional views are stood in for by views the kernel does not touch then. */
            nn_bind bt = targets ? nn_rows(dev, *targets, r0, nr, 1) : bp;
            nn_bind bloss = has_loss ? nn_rows(dev, loss, r0, nr, 1) : bl;
            nn_bind ba = has_argmax ? nn_rows(dev, argmax, r0, nr, 1) : bl;
            if (phase == 0) {
                struct { uint32_t rows, vocab, chunk, nchunk, base_x, base_p; } push = { .rows = nr, .vocab = vocab,
                                                                                         .chunk = TMM_NN_XENT_CHUNK,
                                                                                         .nchunk = nc,
                                                                                         .base_x = bx.base,
                                                                                         .base_p = bp.base };
                tmm_arg args[2] = { tmm_in(bx.view), tmm_out(bp.view) };
                TMM_TRY(tmm_record_dispatch(r, pp, args, 2, &push, tmm_div_up((uint64_t)nr * nc, NN_WG_LOOP), 1, 1));
            } else if (phase == 1 && sg) {
                struct {
                    uint32_t rows, vocab, has_targets, has_loss, has_argmax, base_x, base_t, base_l, base_lse, base_a;
                } push = { .rows = nr, .vocab = vocab, .has_targets = targets != NULL, .has_loss = has_loss,
                           .has_argmax = has_argmax, .base_x = bx.base, .base_t = bt.base, .base_l = bloss.base,
                           .base_lse = bl.base, .base_a = ba.base };
                tmm_arg args[5] = { tmm_in(bx.view), tmm_in(bt.view), tmm_out(bloss.view), tmm_out(bl.view),
                                    tmm_out(ba.view) };
                TMM_TRY(tmm_record_dispatch(r, psg, args, 5, &push, nr < 65535 ? nr : 65535, tmm_div_up(nr, 65535),
                                            1));
            } else if (phase == 1) {
                struct {
                    uint32_t rows, vocab, nchunk, has_targets, has_loss, has_argmax;
                    uint32_t base_x, base_p, base_t, base_l, base_lse, base_a;
                } push = { .rows = nr, .vocab = vocab, .nchunk = nc, .has_targets = targets != NULL,
                           .has_loss = has_loss, .has_argmax = has_argmax, .base_x = bx.base, .base_p = bp.base,
                           .base_t = bt.base, .base_l = bloss.base, .base_lse = bl.base, .base_a = ba.base };
                tmm_arg args[6] = { tmm_in(bx.view),     tmm_in(bp.view),  tmm_in(bt.view),
                                    tmm_out(bloss.view), tmm_out(bl.view), tmm_out(ba.view) };
                TMM_TRY(tmm_record_dispatch(r, pc, args, 6, &push, tmm_div_up(nr, NN_WG_LOOP), 1, 1));
            } else {
                nn_bind bs = has_scale ? nn_rows(dev, loss_scale, 0, 1, 1) : bl;
                struct {
                    uint32_t n, vocab, base_x, base_t, base_lse;
                    float scale;
                    uint32_t has_loss_scale, base_s;
                } push = { .n = nr * vocab, .vocab = vocab, .base_x = bx.base, .base_t = bt.base,
                           .base_lse = bl.base, .scale = scale, .has_loss_scale = has_scale, .base_s = bs.base };
                tmm_arg args[4] = { tmm_inout(bx.view), tmm_in(bt.view), tmm_in(bl.view), tmm_in(bs.view) };
                TMM_TRY(tmm_record_dispatch(r, pg, args, 4, &push, tmm_div_up((uint64_t)nr * vocab, TMM_WG_1D), 1,
                                            1));
            }
        }
    return TMM_OK;
}

tmm_status tmm_op_xent(tmm_recorder *r, tmm_view logits, tmm_view targets, uint32_t rows, uint32_t vocab,
                       uint32_t denominator, bool backward, tmm_view loss_scale, tmm_view scratch, tmm_view loss,
                       tmm_view argmax)
{
    return xent(r, "xent", logits, &targets, rows, vocab, denominator, backward, loss_scale, scratch, loss, argmax);
}

tmm_status tmm_op_argmax(tmm_recorder *r, tmm_view logits, uint32_t rows, uint32_t vocab, tmm_view scratch,
                         tmm_view argmax)
{
    if (rows && argmax.size == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "argmax: empty output view");
    return xent(r, "argmax", logits, NULL, rows, vocab, 0, false, (tmm_view){ 0 }, scratch, (tmm_view){ 0 }, argmax);
}

uint64_t tmm_op_xent_mean_scratch(uint32_t rows) { return nn_aligned(tmm_op_sum_scratch(rows)) + 1; }

tmm_status tmm_op_xent_mean(tmm_recorder *r, tmm_view loss, uint32_t rows, uint32_t denominator, tmm_view scratch,
                            tmm_view out)
{
    static const char *op = "xent_mean";
    TMM_TRY(tmm_op_need_bound(tmm_recorder_device(r), op, "out", out, 1));
    if (rows == 0 || denominator == 0)
        return tmm_op_fill(r, out, 1, 0.0f);
    TMM_TRY(tmm_op_need_bound(tmm_recorder_device(r), op, "loss", loss, rows));
    TMM_TRY(tmm_op_need_bound(tmm_recorder_device(r), op, "scratch", scratch, tmm_op_xent_mean_scratch(rows)));
    uint64_t ns = tmm_op_sum_scratch(rows);
    tmm_view sc = ns ? tmm_op_sub(scratch, 0, ns) : (tmm_view){ 0 };
    tmm_view sum = tmm_op_sub(scratch, nn_aligned(ns), 1);
    TMM_TRY(tmm_op_sum(r, loss, rows, sc, sum));
    TMM_TRY(tmm_op_fill(r, out, 1, 0.0f));
    return tmm_op_axpy(r, 1.0f / (float)denominator, sum, out, 1);
}
