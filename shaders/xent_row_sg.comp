#version 450
// Softmax cross-entropy for GPUs, passes 1 and 2 of xent_partial and
// xent_combine in one: one workgroup per row, its invocations striding over
// the row's logits; max, argmax and the sum of exponentials reduced by
// workgroup_reduce.glsl. The same results as the two passes (sums in
// another order):
//   m = the row's largest logit, argmax its first index,
//   lse = m + log(sum exp(logit - m)), loss = lse - logits[target] (0 for an
//   ignored target). Rows: gl_WorkGroupID.x + 65535 gl_WorkGroupID.y; each
// invocation loops ceil(vocab / workgroup size) <= TMM_MAX_LOOP times a pass.
#include "workgroup_reduce.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Targets { int targets[]; };
layout(std430, binding = 2) writeonly buffer Loss { float loss[]; };
layout(std430, binding = 3) writeonly buffer Lse { float lse[]; };
layout(std430, binding = 4) writeonly buffer Argmax { uint amax[]; };
layout(push_constant) uniform Push {
    uint rows, vocab, has_targets, has_loss, has_argmax;
    uint base_x, base_t, base_l, base_lse, base_a;
} p;

void main()
{
    const uint r = gl_WorkGroupID.x + 65535u * gl_WorkGroupID.y;
    if (r >= p.rows)
        return; // the whole workgroup
    const uint b = p.base_x + r * p.vocab, step = gl_WorkGroupSize.x;
    float m = uintBitsToFloat(0xff800000u); // -inf: an invocation without logits
    uint am = 0xffffffffu;
    for (uint j = gl_LocalInvocationID.x; j < p.vocab; j += step) {
        float v = x[b + j];
        if (v > m || am == 0xffffffffu) {
            m = v;
            am = j;
        }
    }
    const float gm = workgroup_max(m);
    const uint first = workgroup_min(m == gm ? am : 0xffffffffu);
    float sum = 0.0;
    for (uint j = gl_LocalInvocationID.x; j < p.vocab; j += step)
        sum += exp(x[b + j] - gm);
    sum = workgroup_sum(sum);
    if (gl_LocalInvocationID.x != 0u)
        return;
    const float l = gm + log(sum);
    lse[p.base_lse + r] = l;
    if (p.has_loss != 0u) {
        int t = p.has_targets != 0u ? targets[p.base_t + r] : -1;
        loss[p.base_l + r] = (t >= 0 && uint(t) < p.vocab) ? l - x[b + uint(t)] : 0.0;
    }
    if (p.has_argmax != 0u)
        amax[p.base_a + r] = first;
}
