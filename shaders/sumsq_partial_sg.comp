#version 450
// sumsq_partial for GPUs: the same terms in the same order per invocation,
// then the workgroup's LANES sums added by workgroup_reduce.glsl into
// part[w*LANES]; the other LANES-1 slots get 0, so the partials keep
// sumsq_partial's layout and the host's final sum (a fixed order) is the same
// code for both kernels. TERMS <= TMM_MAX_LOOP (loop_limit.glsl).
//
// Mask: as sumsq_partial (one word per block of 2^shift floats; float i
// counts when its place in the block is below the word's low 16 bits).
#include "loop_limit.glsl"
#include "workgroup_reduce.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint TERMS = 64u;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 2) writeonly buffer Part { float part[]; };
layout(push_constant) uniform Push { uint n; uint shift; } p;

void main()
{
    const uint lanes = gl_WorkGroupSize.x, t = gl_LocalInvocationID.x, w = gl_WorkGroupID.x;
    const uint first = w * lanes * TERMS + t, lane_mask = (1u << p.shift) - 1u;
    float acc = 0.0;
    for (uint j = 0u; j < TERMS; j++) {
        uint i = first + j * lanes;
        if (i < p.n && (i & lane_mask) < (mask[i >> p.shift] & 0xffffu)) {
            float g = x[i];
            acc += g * g;
        }
    }
    acc = workgroup_sum(acc);
    part[w * lanes + t] = t == 0u ? acc : 0.0;
}
