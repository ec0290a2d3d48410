#version 450
// RMSNorm of a few short rows in one dispatch (a decode step's): one
// invocation per row computes rstd[r] = 1 / sqrt(sum x^2 / d + eps) as
// rmsnorm_stats does with one chunk, then writes y[r, c] = x[r, c] * rstd *
// g[c] as rmsnorm_apply does; 2 d <= TMM_MAX_LOOP. y may alias x.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) writeonly buffer Rstd { float rstd[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint rows, d, base_x, base_r, base_y;
    float eps;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint b = p.base_x + r * p.d, o = p.base_y + r * p.d;
    float ss = 0.0;
    for (uint c = 0; c < p.d; c++) {
        float v = x[b + c];
        ss = fma(v, v, ss);
    }
    float s = 1.0 / sqrt(ss / float(p.d) + p.eps);
    rstd[p.base_r + r] = s;
    for (uint c = 0; c < p.d; c++)
        y[o + c] = x[b + c] * s * g[c];
}
