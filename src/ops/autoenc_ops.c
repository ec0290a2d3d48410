/* The autoencoder's unroll, forward and backward (autoenc_ops.h). */
#include "ops/autoenc_ops.h"

#include "op_util.h"

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };

tmm_status tmm_unroll_check(uint32_t batch, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n)
{
    if (d == 0 || d % 2)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unroll: the width d = %u must be even (windows of d/2 channels)",
                        d);
    if (batch == 0 || n_src == 0 || n == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unroll: batch %u, source rows %u and positions %u must be at "
                        "least 1", batch, n_src, n);
    if (src_row >= n_src)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unroll: source row %u is outside the %u rows of a sequence",
                        src_row, n_src);
    if ((uint64_t)batch * n * (d / 2) > UINT32_MAX || (uint64_t)batch * n_src * d > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "unroll: batch %u x %u positions x width %u is too large for one step",
                        batch, n > n_src ? n : n_src, d);
    return TMM_OK;
}

/* The view, checked to be bindable whole for n floats. */
static tmm_status need_whole(tmm_device *dev, const char *op, const char *name, tmm_view v, uint64_t n)
{
    TMM_TRY(tmm_op_need_bound(dev, op, name, v, n));
    if (n > tmm_op_binding_floats(dev))
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: %s of %llu floats does not fit one binding of the device", op,
                        name, (unsigned long long)n);
    return TMM_OK;
}

tmm_status tmm_op_unroll_forward(tmm_recorder *r, tmm_view h, uint32_t batch, uint32_t n_src, uint32_t src_row,
                                 uint32_t d, uint32_t n, tmm_view u)
{
    static const char *op = "unroll_forward";
    TMM_TRY(tmm_unroll_check(batch, n_src, src_row, d, n));
    tmm_device *dev = tmm_recorder_device(r);
    const uint64_t nh = (uint64_t)batch * n_src * d, nu = (uint64_t)batch * n * (d / 2);
    TMM_TRY(need_whole(dev, op, "h", h, nh));
    TMM_TRY(need_whole(dev, op, "u", u, nu));
    tmm_op_span spans[] = { { "u", u, nu }, { "h", h, nh } };
    TMM_TRY(tmm_op_no_overlap(op, &spans[0], spans, 2));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_unroll_fwd, 2, 20, local_1d, NULL, 0, &p));
    struct {
        uint32_t total, n, d, n_src, src_row;
    } push = { .total = (uint32_t)nu, .n = n, .d = d, .n_src = n_src, .src_row = src_row };
    tmm_arg args[2] = { tmm_in(tmm_op_sub(h, 0, nh)), tmm_out(tmm_op_sub(u, 0, nu)) };
    return tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up(nu, TMM_WG_1D), 1, 1);
}

tmm_status tmm_op_unroll_backward(tmm_recorder *r, tmm_view du, uint32_t batch, uint32_t n_src, uint32_t src_row,
                                  uint32_t d, uint32_t n, tmm_view dh)
{
    static const char *op = "unroll_backward";
    TMM_TRY(tmm_unroll_check(batch, n_src, src_row, d, n));
    tmm_device *dev = tmm_recorder_device(r);
    const uint64_t nh = (uint64_t)batch * n_src * d, nu = (uint64_t)batch * n * (d / 2);
    TMM_TRY(need_whole(dev, op, "du", du, nu));
    TMM_TRY(need_whole(dev, op, "dh", dh, nh));
    tmm_op_span spans[] = { { "dh", dh, nh }, { "du", du, nu } };
    TMM_TRY(tmm_op_no_overlap(op, &spans[0], spans, 2));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_unroll_bwd, 2, 32, local_1d, NULL, 0, &p));
    for (uint32_t i0 = 0; i0 < n; i0 += TMM_MAX_LOOP) {
        uint32_t i1 = n - i0 < TMM_MAX_LOOP ? n : i0 + TMM_MAX_LOOP;
        struct {
            uint32_t total, n, d, n_src, src_row, i0, i1, first;
        } push = { .total = (uint32_t)nh, .n = n, .d = d, .n_src = n_src, .src_row = src_row, .i0 = i0, .i1 = i1,
                   .first = i0 == 0 };
        tmm_arg args[2] = { tmm_in(tmm_op_sub(du, 0, nu)), i0 == 0 ? tmm_out(tmm_op_sub(dh, 0, nh))
                                                                   : tmm_inout(tmm_op_sub(dh, 0, nh)) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up(nh, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}
