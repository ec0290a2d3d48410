#version 450
// RMSNorm backward, gain gradient over rows. One invocation per (segment s of
// at most `seg` rows, column c), rows in order: the segment's sum of
// dy * (x * rstd). With direct set (one segment in all) it goes to og[c]
// (added to it with accumulate); otherwise to og[(seg0 + s) d + c], partial
// sums for tmm_op_sum_cols. seg <= TMM_MAX_LOOP.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 3) buffer OG { float og[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg, nseg, seg0, direct, accumulate;
    uint base_x, base_dy, base_r;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float sum = 0.0;
    for (uint r = r0; r < r1; r++)
        sum = fma(dy[p.base_dy + r * p.d + c], x[p.base_x + r * p.d + c] * rstd[p.base_r + r], sum);
    if (p.direct != 0u)
        og[c] = p.accumulate != 0u ? og[c] + sum : sum;
    else
        og[(p.seg0 + s) * p.d + c] = sum;
}
