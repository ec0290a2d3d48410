#version 450
// LayerNorm backward, parameter gradients over rows. One invocation per
// (segment s of at most `seg` rows, column c), rows in order:
//   sum over the segment of dy * xhat (dgamma) and of dy (dbeta),
// xhat = (x - mean) * rstd. With direct set (one segment in all) they go
// to og[c] and ob[c] (added to them with accumulate); otherwise to
// og[(seg0 + s) d + c] and ob[...], partial sums for tmm_op_sum_cols.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer Mean { float mean[]; };
layout(std430, binding = 3) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 4) buffer OG { float og[]; };
layout(std430, binding = 5) buffer OB { float ob[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg, nseg, seg0, direct, accumulate;
    uint base_x, base_dy, base_m, base_r;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float sg = 0.0, sb = 0.0;
    for (uint r = r0; r < r1; r++) {
        float g = dy[p.base_dy + r * p.d + c];
        float xhat = (x[p.base_x + r * p.d + c] - mean[p.base_m + r]) * rstd[p.base_r + r];
        sg = fma(g, xhat, sg);
        sb += g;
    }
    if (p.direct != 0u) {
        og[c] = p.accumulate != 0u ? og[c] + sg : sg;
        ob[c] = p.accumulate != 0u ? ob[c] + sb : sb;
    } else {
        og[(p.seg0 + s) * p.d + c] = sg;
        ob[(p.seg0 + s) * p.d + c] = sb;
    }
}
