#version 450
// One invocation: from the sum of squares of the gradients and the host's
// per-step block, the gradient norm and clip factor (PyTorch's
// clip_grad_norm_: min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0),
// written to the host-visible stats and, with the step's AdamW coefficients,
// to the device block that adamw.comp reads.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer SumSq { float sumsq; };
layout(std430, binding = 1) readonly buffer Hyper {
    uint step;
    float lr;
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float eps;
    float max_norm;
    float step_size;
    float bc2_rsqrt;
    float decay_factor;
    uint skip_nonfinite;
} h;
layout(std430, binding = 2) writeonly buffer Stats {
    float sumsq;
    float grad_norm;
    float clip_scale;
    uint skipped;
    uint step;
    float lr;
} st;
layout(std430, binding = 3) writeonly buffer Coef {
    float scale;
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float eps;
    float step_size;
    float bc2_rsqrt;
    float decay_factor;
    uint skip;
} c;

bool finite(float x) { return (floatBitsToUint(x) & 0x7f800000u) != 0x7f800000u; }

void main()
{
    float s = sumsq;
    float norm = sqrt(s);
    float scale = 1.0;
    if (h.max_norm > 0.0)
        scale = min(1.0, h.max_norm / (norm + 1e-6));
    uint skip = 0u;
    if (h.step == 0u)
        skip = 2u;  // tmm_optim_set_step was never called
    else if (h.skip_nonfinite != 0u && !finite(s))
        skip = 1u;
    st.sumsq = s;
    st.grad_norm = norm;
    st.clip_scale = scale;
    st.skipped = skip;
    st.step = h.step;
    st.lr = h.lr;
    c.scale = scale;
    c.beta1 = h.beta1;
    c.beta2 = h.beta2;
    c.one_minus_beta1 = h.one_minus_beta1;
    c.one_minus_beta2 = h.one_minus_beta2;
    c.eps = h.eps;
    c.step_size = h.step_size;
    c.bc2_rsqrt = h.bc2_rsqrt;
    c.decay_factor = h.decay_factor;
    c.skip = skip;
}
