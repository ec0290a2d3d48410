#version 450
// Sine layer backward, parameter gradients over rows. One invocation per
// (segment s of at most `seg` rows, column c), rows in order, with
// u = x + cb and g = dy cos(omega u): the sums of g u (domega) and of
// g omega (dc). With direct set (one segment in all) they go to od[c] and
// oc[c] (added with accumulate); otherwise to od[(seg0 + s) d + c] and
// oc[...], partial sums for tmm_op_sum_cols.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Omega { float omega[]; };
layout(std430, binding = 2) readonly buffer CB { float cb[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) buffer OD { float od[]; };
layout(std430, binding = 5) buffer OC { float oc[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg, nseg, seg0, direct, accumulate, base_x, base_dy;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float w = omega[c], bc = cb[c];
    float sw = 0.0, sc = 0.0;
    for (uint r = r0; r < r1; r++) {
        float u = x[p.base_x + r * p.d + c] + bc;
        float g = dy[p.base_dy + r * p.d + c] * cos(w * u);
        sw += g * u;
        sc += g * w;
    }
    if (p.direct != 0u) {
        od[c] = p.accumulate != 0u ? od[c] + sw : sw;
        oc[c] = p.accumulate != 0u ? oc[c] + sc : sc;
    } else {
        od[(p.seg0 + s) * p.d + c] = sw;
        oc[(p.seg0 + s) * p.d + c] = sc;
    }
}
