#version 450
// AdamW (torch.optim.AdamW) on a chunk of the parameter arena, one invocation
// per float; gradients are scaled by the clip factor on the fly (the gradient
// arena is not modified). Floats outside trainable tensors (mask, see
// sumsq_partial.comp) are neither read nor written. Bits 16-23 of a mask
// word: the tensor's slot, its (rate, weight decay) pair (train/optim.h), whose
// step size and decay factor this step the host wrote to Slots. The other
// per-step values come from the device block written by clip_finish.comp.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer Param { float param[]; };
layout(std430, binding = 1) readonly buffer Grad { float grad[]; };
layout(std430, binding = 2) buffer M { float m[]; };
layout(std430, binding = 3) buffer V { float v[]; };
layout(std430, binding = 4) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 5) readonly buffer Coef {
    float scale;
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float eps;
    float bc2_rsqrt;
    uint skip;
} c;
layout(std430, binding = 6) readonly buffer Slots { vec2 slot[]; };  // (step size, decay factor)
layout(push_constant) uniform Push { uint n; uint shift; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n || c.skip != 0u)
        return;
    uint word = mask[i >> p.shift];
    if ((i & ((1u << p.shift) - 1u)) >= (word & 0xffffu))
        return;
    float g = grad[i] * c.scale;
    float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    float vi = c.beta2 * v[i] + c.one_minus_beta2 * (g * g);
    float denom = sqrt(vi) * c.bc2_rsqrt + c.eps;
    vec2 k = slot[(word >> 16) & 0xffu];
    float pi = param[i] * k.y;  // 1 exactly for tensors that do not decay
    param[i] = pi - k.x * (mi / denom);
    m[i] = mi;
    v[i] = vi;
}
