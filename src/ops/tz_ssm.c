/* Distilled decoding ops: the state-space step of a Toeplitz layer and the
 * states after a prefill (tz_ssm_ops.h). */
#include "tz_ssm_ops.h"

#include "nn_util.h"

static const uint32_t local_loop[3] = { NN_WG_LOOP, 1, 1 };

tmm_status tmm_tz_ssm_check(const tmm_tz_ssm_desc *desc)
{
    TMM_TRY(tmm_toeplitz_check(NULL, &desc->tz));
    const uint32_t K = desc->tz.taps ? desc->tz.taps : 1;
    if (desc->head == 0 || desc->head > desc->tz.n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tz_ssm: the exact head must be 1 to n (%u) lags, got %u",
                        desc->tz.n, desc->head);
    if ((uint64_t)K * (desc->head - 1 + (uint64_t)desc->modes) > TMM_MAX_LOOP)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "tz_ssm: %u taps x (head %u - 1 + %u modes) is more than one "
                        "decoding step can loop (%u): distill with a smaller --order or --head", K, desc->head,
                        desc->modes, TMM_MAX_LOOP);
    return TMM_OK;
}

uint64_t tmm_tz_ssm_state_floats(const tmm_tz_ssm_desc *desc)
{
    const uint64_t K = desc->tz.taps ? desc->tz.taps : 1;
    return (uint64_t)desc->tz.batch * desc->tz.d * K * desc->modes * 2;
}

/* Checks shared by both ops; *per: sequences of the cache one binding holds. */
static tmm_status check(const char *op, tmm_recorder *r, const tmm_tz_ssm_desc *desc, tmm_view pos,
                        tmm_view cache, tmm_view modes, tmm_view state, uint64_t *per)
{
    TMM_TRY(tmm_tz_ssm_check(desc));
    tmm_device *dev = tmm_recorder_device(r);
    const tmm_toeplitz_desc *td = &desc->tz;
    const uint64_t B = td->batch, seq = (uint64_t)td->n * td->d;
    const uint64_t G = td->groups ? td->groups : 1, K = td->taps ? td->taps : 1;
    TMM_TRY(tmm_op_need_floats(op, "pos", pos, B));
    TMM_TRY(tmm_op_need_floats(op, "cache", cache, B * seq));
    TMM_TRY(tmm_op_need_bound(dev, op, "modes", modes, G * K * desc->modes * 4));
    TMM_TRY(tmm_op_need_bound(dev, op, "state", state, tmm_tz_ssm_state_floats(desc)));
    if (tmm_tz_ssm_state_floats(desc) > tmm_op_binding_floats(dev) || B * td->d * K * desc->modes > UINT32_MAX / 2)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: the state of batch %u x d %u x %u taps x %u modes does not fit "
                        "one binding", op, td->batch, td->d, (uint32_t)K, desc->modes);
    *per = B;
    return nn_fit_rows(dev, op, "cache (one sequence)", seq, per);
}

tmm_status tmm_op_tz_ssm_step(tmm_recorder *r, const tmm_tz_ssm_desc *desc, tmm_view pos, tmm_view x,
                              tmm_view cache, tmm_view w, tmm_view beta, tmm_view modes, tmm_view state, tmm_view y)
{
    static const char *op = "tz_ssm_step";
    uint64_t per;
    TMM_TRY(check(op, r, desc, pos, cache, modes, state, &per));
    tmm_device *dev = tmm_recorder_device(r);
    const tmm_toeplitz_desc *td = &desc->tz;
    const uint32_t B = td->batch, n = td->n, d = td->d;
    const uint32_t G = td->groups ? td->groups : 1, K = td->taps ? td->taps : 1;
    TMM_TRY(tmm_op_need_floats(op, "x", x, (uint64_t)B * d));
    TMM_TRY(tmm_op_need_floats(op, "y", y, (uint64_t)B * d));
    TMM_TRY(tmm_op_need_bound(dev, op, "w", w, (uint64_t)G * K * n));
    TMM_TRY(tmm_op_need_bound(dev, op, "beta", beta, (uint64_t)G * n));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_tz_ssm_step, 8, 44, local_loop, NULL, 0, &p));
    nn_bind bx = nn_rows(dev, x, 0, B, d), by = nn_rows(dev, y, 0, B, d);
    for (uint64_t b0 = 0; b0 < B; b0 += per) {
        uint32_t nb = (uint32_t)(B - b0 < per ? B - b0 : per);
        nn_bind bc = nn_rows(dev, cache, b0, nb, (uint64_t)n * d);
        struct {
            uint32_t nseq, n, d, group_channels, taps, head, nmodes, seq0, base_x, base_cache, base_y;
        } push = { .nseq = nb, .n = n, .d = d, .group_channels = d / G, .taps = K, .head = desc->head,
                   .nmodes = desc->modes, .seq0 = (uint32_t)b0, .base_x = bx.base, .base_cache = bc.base,
                   .base_y = by.base };
        tmm_arg args[8] = { tmm_in(pos), tmm_in(bx.view), tmm_inout(bc.view), tmm_in(w), tmm_in(beta),
                            tmm_in(modes), tmm_inout(state), tmm_out(by.view) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 8, &push, tmm_div_up((uint64_t)nb * d, NN_WG_LOOP), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_tz_ssm_prefill(tmm_recorder *r, const tmm_tz_ssm_desc *desc, tmm_view len, tmm_view cache,
                                 tmm_view modes, tmm_view state)
{
    static const char *op = "tz_ssm_prefill";
    uint64_t per;
    TMM_TRY(check(op, r, desc, len, cache, modes, state, &per));
    if (desc->modes == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    const tmm_toeplitz_desc *td = &desc->tz;
    const uint32_t B = td->batch, n = td->n, d = td->d;
    const uint32_t G = td->groups ? td->groups : 1, K = td->taps ? td->taps : 1;
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_tz_ssm_prefill, 4, 48, local_loop, NULL, 0, &p));
    for (uint32_t s0 = 0; s0 < n; s0 += TMM_MAX_LOOP)
        for (uint64_t b0 = 0; b0 < B; b0 += per) {
            uint32_t nb = (uint32_t)(B - b0 < per ? B - b0 : per);
            nn_bind bc = nn_rows(dev, cache, b0, nb, (uint64_t)n * d);
            struct {
                uint32_t nseq, n, d, group_channels, taps, head, nmodes, seq0, base_cache, s0, s1, first;
            } push = { .nseq = nb, .n = n, .d = d, .group_channels = d / G, .taps = K, .head = desc->head,
                       .nmodes = desc->modes, .seq0 = (uint32_t)b0, .base_cache = bc.base, .s0 = s0,
                       .s1 = n - s0 < TMM_MAX_LOOP ? n : s0 + TMM_MAX_LOOP, .first = s0 == 0 };
            tmm_arg args[4] = { tmm_in(len), tmm_in(bc.view), tmm_in(modes), tmm_inout(state) };
            TMM_TRY(tmm_record_dispatch(r, p, args, 4, &push,
                                        tmm_div_up((uint64_t)nb * d * K * desc->modes, NN_WG_LOOP), 1, 1));
        }
    return TMM_OK;
}
