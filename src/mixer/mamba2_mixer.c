/* Mamba 2's mixer (mamba2_mixer.h, docs/baselines.md section 5): the config
 * rules and the tensors. The device mixer is not built yet: create refuses
 * with one line, so every device model of this architecture (training,
 * memory plans, generation) stops there. */
#include "mixer/mamba2_mixer.h"

tmm_mamba2_dims tmm_mamba2_dims_of(const tmm_model_config *c)
{
    tmm_mamba2_dims m = { .d = c->d_model, .di = 2 * c->d_model, .heads = c->heads, .N = c->state };
    m.P = m.heads ? m.di / m.heads : 0;
    m.conv = m.di + 2 * m.N;
    m.in = 2 * m.di + 2 * m.N + m.heads;
    return m;
}

static tmm_status check(const tmm_model_config *c)
{
    if (c->heads == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2 needs heads >= 1 (--heads)");
    if ((2 * c->d_model) % c->heads)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2's inner width 2·d_model (%u) must be a multiple of heads (%u)",
                        2 * c->d_model, c->heads);
    if (c->state == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2 needs state >= 1 (--state)");
    const tmm_mamba2_dims m = tmm_mamba2_dims_of(c);
    if ((uint64_t)m.in * m.d > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    return TMM_OK;
}

static void declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx)
{
    const tmm_mamba2_dims m = tmm_mamba2_dims_of(c);
    const uint32_t K = TMM_MAMBA2_CONV_TAPS;
    /* Win, Wout and the conv: PyTorch's defaults, U(±1/sqrt(fan_in)) */
    const tmm_param_spec in_w = { 2, { m.in, m.d }, TMM_INIT_UNIFORM, m.d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec conv_w = { 2, { m.conv, K }, TMM_INIT_UNIFORM, K, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec conv_b = { 1, { m.conv }, TMM_INIT_UNIFORM, K, TMM_PARAM_LINEAR_BIAS, true };
    /* per head; no weight decay, as mamba_ssm's */
    const tmm_param_spec dt_bias = { 1, { m.heads }, TMM_INIT_DT_BIAS, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec a_log = { 1, { m.heads }, TMM_INIT_A_LOG, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec D = { 1, { m.heads }, TMM_INIT_ONE, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec gn = { 1, { m.di }, TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true };
    const tmm_param_spec out_w = { 2, { m.d, m.di }, TMM_INIT_UNIFORM, m.di, TMM_PARAM_LINEAR_WEIGHT, true };
    idx[TMM_M2_IN_W] = tmm_param_add(b, l, "mamba.in_proj.weight", in_w);
    idx[TMM_M2_CONV_W] = tmm_param_add(b, l, "mamba.conv1d.weight", conv_w);
    idx[TMM_M2_CONV_B] = tmm_param_add(b, l, "mamba.conv1d.bias", conv_b);
    idx[TMM_M2_DT_BIAS] = tmm_param_add(b, l, "mamba.dt_bias", dt_bias);
    idx[TMM_M2_A_LOG] = tmm_param_add(b, l, "mamba.A_log", a_log);
    idx[TMM_M2_D] = tmm_param_add(b, l, "mamba.D", D);
    idx[TMM_M2_NORM_W] = tmm_param_add(b, l, "mamba.norm.weight", gn);
    idx[TMM_M2_OUT_W] = tmm_param_add(b, l, "mamba.out_proj.weight", out_w);
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    (void)s;
    *out = NULL;
    return tmm_fail(TMM_ERR_UNSUPPORTED, "mamba2: the device mixer is not built yet");
}

/* Only check, declare and create until the device mixer exists: create fails,
 * so nothing else is ever called. */
const tmm_mixer_class tmm_mamba2_mixer = {
    .check = check,
    .declare = declare,
    .create = create,
};
