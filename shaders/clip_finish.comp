#version 450
// One invocation: from the sum of squares of the gradients and the host's
// per-step block, the gradient norm and clip factor (PyTorch's
// clip_grad_norm_: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0),
// written to the host-visible stats and, with the step's AdamW coefficients,
// to the device block that adamw.comp reads. The gradients carry the loss
// scale S (a power of two; 1 without loss scaling): norm and clip are those
// of grad / S and the update's factor is clip / S, all exact. With a
// scale_window, S is then updated (train/optim.h): halved on overflow,
// doubled after scale_window good steps.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer SumSq { float sumsq; };
layout(std430, binding = 1) readonly buffer Hyper {
    uint step;
    float lr;
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float eps;
    float max_norm;
    float bc2_rsqrt;
    uint skip_nonfinite;
    uint scale_window;
} h;
layout(std430, binding = 2) writeonly buffer Stats {
    float sumsq;
    float grad_norm;
    float clip_scale;
    uint skipped;
    uint step;
    float lr;
    float loss_scale;
    uint overflows;
} st;
layout(std430, binding = 3) writeonly buffer Coef {  // adamw.comp's; each slot's step size and decay are in Slots
    float scale;
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float eps;
    float bc2_rsqrt;
    uint skip;
} c;
layout(std430, binding = 4) buffer Scaler {
    float scale;
    uint good;
    uint overflows;
} ls;

const float SCALE_MIN = 1.0 / 16777216.0, SCALE_MAX = 16777216.0;  // TMM_LOSS_SCALE_MIN, _MAX

bool finite(float x) { return (floatBitsToUint(x) & 0x7f800000u) != 0x7f800000u; }

void main()
{
    float S = ls.scale;
    // 1 / S from the exponent's bits, exact on every device (S in [2^-24, 2^24])
    float inv = uintBitsToFloat((254u - ((floatBitsToUint(S) >> 23) & 0xffu)) << 23);
    float s = sumsq * inv * inv;
    float norm = sqrt(s);
    float scale = 1.0;
    if (h.max_norm > 0.0)
        scale = min(1.0, h.max_norm / (norm + 1e-6));
    uint skip = 0u;
    if (h.step == 0u)
        skip = 2u;  // tmm_optim_set_step was never called
    else if ((h.skip_nonfinite != 0u || h.scale_window != 0u) && !finite(s))
        skip = 1u;
    uint overflows = ls.overflows;
    if (h.scale_window != 0u && skip == 1u) {
        ls.scale = max(S * 0.5, SCALE_MIN);
        ls.good = 0u;
        ls.overflows = ++overflows;
    } else if (h.scale_window != 0u && skip == 0u) {
        uint good = ls.good + 1u;
        if (good >= h.scale_window) {
            ls.scale = min(S * 2.0, SCALE_MAX);
            good = 0u;
        }
        ls.good = good;
    }
    st.sumsq = s;
    st.grad_norm = norm;
    st.clip_scale = scale;
    st.skipped = skip;
    st.step = h.step;
    st.lr = h.lr;
    st.loss_scale = S;
    st.overflows = overflows;
    c.scale = scale * inv;
    c.beta1 = h.beta1;
    c.beta2 = h.beta2;
    c.one_minus_beta1 = h.one_minus_beta1;
    c.one_minus_beta2 = h.one_minus_beta2;
    c.eps = h.eps;
    c.bc2_rsqrt = h.bc2_rsqrt;
    c.skip = skip;
}
