#version 450
// Partial sums of squares of the masked floats of a chunk of an arena, for the
// global gradient norm. Workgroup w (LANES invocations) covers the floats
// [w*LANES*TERMS, (w+1)*LANES*TERMS); invocation t sums x[i]^2 for
// i = w*LANES*TERMS + t + j*LANES, j = 0..TERMS-1 in order (neighbouring
// invocations read neighbouring floats) and writes part[w*LANES + t]: a fixed
// order, no atomics. TERMS <= TMM_MAX_LOOP (loop_limit.glsl).
//
// Mask: one word per block of 2^shift floats (the block containing chunk
// float i is mask[i >> shift]); float i counts when its place in the block is
// below the word's low 16 bits (0 for frozen tensors and padding blocks).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint TERMS = 64u;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Mask { uint mask[]; };
layout(std430, binding = 2) writeonly buffer Part { float part[]; };
layout(push_constant) uniform Push { uint n; uint shift; } p;

void main()
{
    uint lanes = gl_WorkGroupSize.x;
    uint t = gl_LocalInvocationID.x;
    uint w = gl_WorkGroupID.x;
    uint first = w * lanes * TERMS + t;
    uint lane_mask = (1u << p.shift) - 1u;
    float acc = 0.0;
    for (uint j = 0u; j < TERMS; j++) {
        uint i = first + j * lanes;
        if (i < p.n && (i & lane_mask) < (mask[i >> p.shift] & 0xffffu)) {
            float g = x[i];
            acc += g * g;
        }
    }
    part[w * lanes + t] = acc;
}
