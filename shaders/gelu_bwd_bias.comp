#version 450
// GELU backward, bias gradient over rows. One invocation per (segment s of
// at most `seg` rows, column c): the sum over the segment's rows, in order,
// of dy * gelu'(x + b) (computed as gelu_bwd.comp does). With direct set (one
// segment in all) it goes to db[c] (added with accumulate); otherwise to
// db[(seg0 + s) d + c] for tmm_op_sum_cols.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DB { float db[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg, nseg, seg0, direct, accumulate, has_b, base_x, base_dy;
} p;

#include "gelu.glsl"


void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float acc = 0.0;
    for (uint r = r0; r < r1; r++) {
        float a = x[p.base_x + r * p.d + c];
        if (p.has_b != 0u)
            a += b[c];
        acc += dy[p.base_dy + r * p.d + c] * gelu_grad(a);
    }
    if (p.direct != 0u)
        db[c] = p.accumulate != 0u ? db[c] + acc : acc;
    else
        db[(p.seg0 + s) * p.d + c] = acc;
}
