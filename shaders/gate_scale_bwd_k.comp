#version 450
// Gate, per-column scale, backward, scale gradient over rows. One invocation
// per (segment s of at most `seg` rows, column c): the sum over the
// segment's rows, in order, of dy * a. With direct set (one segment in all)
// it goes to dk[c] (added with accumulate); otherwise to
// dk[(seg0 + s) d + c] for tmm_op_sum_cols.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) buffer DK { float dk[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg, nseg, seg0, direct, accumulate, base_a, base_dy;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float acc = 0.0;
    for (uint r = r0; r < r1; r++)
        acc += dy[p.base_dy + r * p.d + c] * a[p.base_a + r * p.d + c];
    if (p.direct != 0u)
        dk[c] = p.accumulate != 0u ? dk[c] + acc : acc;
    else
        dk[(p.seg0 + s) * p.d + c] = acc;
}
