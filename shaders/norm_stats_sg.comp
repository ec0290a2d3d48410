#version 450
// LayerNorm and RMSNorm statistics for GPUs: one workgroup per row, its
// invocations striding over the row's columns, partial sums reduced by
// workgroup_reduce.glsl (subgroup arithmetic, then across the workgroup's
// subgroups in shared memory). The sums' order differs from layernorm_stats /
// rmsnorm_stats, the formulas do not:
//   KIND 0 (LayerNorm): mean = sum x / d, M2 = sum (x - mean)^2,
//                       mean[r], rstd[r] = 1 / sqrt(M2 / d + eps)
//   KIND 1 (RMSNorm):   rstd[r] = 1 / sqrt(sum x^2 / d + eps)
// Rows: gl_WorkGroupID.x + 65535 gl_WorkGroupID.y. Each invocation loops
// ceil(d / workgroup size) <= TMM_MAX_LOOP times per pass (the host checks).
#include "workgroup_reduce.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint KIND = 0u;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Mean { float mean[]; };
layout(std430, binding = 2) writeonly buffer Rstd { float rstd[]; };
layout(push_constant) uniform Push { uint rows, d, base_x, base_m, base_r; float eps; } p;

void main()
{
    const uint r = gl_WorkGroupID.x + 65535u * gl_WorkGroupID.y;
    if (r >= p.rows)
        return; // the whole workgroup: no barrier is left unmatched
    const uint b = p.base_x + r * p.d, step = gl_WorkGroupSize.x;
    float s = 0.0;
    for (uint c = gl_LocalInvocationID.x; c < p.d; c += step) {
        float v = x[b + c];
        s = KIND == 0u ? s + v : fma(v, v, s);
    }
    s = workgroup_sum(s);
    if (KIND == 1u) {
        if (gl_LocalInvocationID.x == 0u)
            rstd[p.base_r + r] = 1.0 / sqrt(s / float(p.d) + p.eps);
        return;
    }
    const float m = s / float(p.d);
    float m2 = 0.0;
    for (uint c = gl_LocalInvocationID.x; c < p.d; c += step) {
        float t = x[b + c] - m;
        m2 = fma(t, t, m2);
    }
    m2 = workgroup_sum(m2);
    if (gl_LocalInvocationID.x == 0u) {
        mean[p.base_m + r] = m;
        rstd[p.base_r + r] = 1.0 / sqrt(m2 / float(p.d) + p.eps);
    }
}
