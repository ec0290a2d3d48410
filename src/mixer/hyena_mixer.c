/* Hyena's mixer (hyena_mixer.h, docs/baselines.md section 4): the config
 * rules, the tensors, the fixed features. The device mixer is not built yet:
 * create refuses with one line, so every device model of this architecture
 * (training, memory plans, generation) stops there. */
#include "mixer/hyena_mixer.h"

#include <math.h>

#define PI 3.14159265358979323846

static tmm_status check(const tmm_model_config *c)
{
    if (c->heads)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "hyena has no heads: heads must be 0, got %u", c->heads);
    if ((uint64_t)3 * c->d_model * c->d_model > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    return TMM_OK;
}

static void declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx)
{
    const uint32_t d = c->d_model, F = TMM_HYENA_FEATURES, O = TMM_HYENA_ORDER, K = TMM_HYENA_SHORT_TAPS;
    /* the model's Linear layers: Kaiming normal, zero biases */
    const tmm_param_spec in_w = { 2, { 3 * d, d }, TMM_INIT_KAIMING, d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec in_b = { 1, { 3 * d }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec out_w = { 2, { d, d }, TMM_INIT_KAIMING, d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec out_b = { 1, { d }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    /* the short conv and the filter MLP: PyTorch's defaults, U(±1/sqrt(fan_in)) */
    const tmm_param_spec conv_w = { 2, { 3 * d, K }, TMM_INIT_UNIFORM, K, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec conv_b = { 1, { 3 * d }, TMM_INIT_UNIFORM, K, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec f1_w = { 2, { O, F }, TMM_INIT_UNIFORM, F, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec f1_b = { 1, { O }, TMM_INIT_UNIFORM, F, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec f_w = { 2, { O, O }, TMM_INIT_UNIFORM, O, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec f_b = { 1, { O }, TMM_INIT_UNIFORM, O, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec f4_w = { 2, { d, O }, TMM_INIT_UNIFORM, O, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec omega = { 1, { O }, TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true };
    const tmm_param_spec D = { 1, { d }, TMM_INIT_NORMAL, 0, TMM_PARAM_LINEAR_BIAS, true };
    idx[TMM_HY_IN_W] = tmm_param_add(b, l, "hyena.in_proj.weight", in_w);
    idx[TMM_HY_IN_B] = tmm_param_add(b, l, "hyena.in_proj.bias", in_b);
    idx[TMM_HY_CONV_W] = tmm_param_add(b, l, "hyena.short_conv.weight", conv_w);
    idx[TMM_HY_CONV_B] = tmm_param_add(b, l, "hyena.short_conv.bias", conv_b);
    idx[TMM_HY_F1_W] = tmm_param_add(b, l, "hyena.filter.fc1.weight", f1_w);
    idx[TMM_HY_F1_B] = tmm_param_add(b, l, "hyena.filter.fc1.bias", f1_b);
    idx[TMM_HY_F1_OMEGA] = tmm_param_add(b, l, "hyena.filter.omega1", omega);
    idx[TMM_HY_F2_W] = tmm_param_add(b, l, "hyena.filter.fc2.weight", f_w);
    idx[TMM_HY_F2_B] = tmm_param_add(b, l, "hyena.filter.fc2.bias", f_b);
    idx[TMM_HY_F2_OMEGA] = tmm_param_add(b, l, "hyena.filter.omega2", omega);
    idx[TMM_HY_F3_W] = tmm_param_add(b, l, "hyena.filter.fc3.weight", f_w);
    idx[TMM_HY_F3_B] = tmm_param_add(b, l, "hyena.filter.fc3.bias", f_b);
    idx[TMM_HY_F3_OMEGA] = tmm_param_add(b, l, "hyena.filter.omega3", omega);
    idx[TMM_HY_F4_W] = tmm_param_add(b, l, "hyena.filter.fc4.weight", f4_w);
    idx[TMM_HY_D] = tmm_param_add(b, l, "hyena.D", D);
    idx[TMM_HY_OUT_W] = tmm_param_add(b, l, "hyena.out_proj.weight", out_w);
    idx[TMM_HY_OUT_B] = tmm_param_add(b, l, "hyena.out_proj.bias", out_b);
}

/* tt_t = t/(n-1): 0 .. 1 over the context (torch.linspace(0, 1, n)) */
static double rel_pos(uint32_t n, uint32_t t) { return n > 1 ? (double)t / (double)(n - 1) : 0.0; }

void tmm_hyena_features(uint32_t n, uint32_t t, double z[TMM_HYENA_FEATURES])
{
    const double angle = 2.0 * PI * 1e-4 * (double)t / (double)n;
    z[0] = rel_pos(n, t);
    z[1] = cos(angle);
    z[2] = -sin(angle);
}

double tmm_hyena_decay(uint32_t n, uint32_t d, uint32_t t, uint32_t c)
{
    const double slow = log(0.01) / 1.5, fast = log(0.01) / 0.3;
    const double delta = d > 1 ? slow + (fast - slow) * (double)c / (double)(d - 1) : slow;
    return exp(-rel_pos(n, t) * fabs(delta));
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    (void)s;
    *out = NULL;
    return tmm_fail(TMM_ERR_UNSUPPORTED, "hyena: the device mixer is not built yet");
}

/* Only check, declare and create until the device mixer exists: create fails,
 * so nothing else is ever called. */
const tmm_mixer_class tmm_hyena_mixer = {
    .check = check,
    .declare = declare,
    .create = create,
};
