#version 450
// LayerNorm of a few short rows in one dispatch (a decode step's): one
// invocation per row computes mean[r] and rstd[r] as layernorm_stats does
// with one chunk (the chunk's mean, then M2), then writes
// y[r, c] = (x[r, c] - mean) * rstd * gamma[c] + beta[c] as layernorm_apply
// does; 3 d <= TMM_MAX_LOOP. y may alias x (a row is read before it is written).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) writeonly buffer Mean { float mean[]; };
layout(std430, binding = 4) writeonly buffer Rstd { float rstd[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint rows, d, base_x, base_m, base_r, base_y;
    float eps;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint b = p.base_x + r * p.d, o = p.base_y + r * p.d;
    float sum = 0.0;
    for (uint c = 0; c < p.d; c++)
        sum += x[b + c];
    float m = sum / float(p.d);
    float m2 = 0.0;
    for (uint c = 0; c < p.d; c++) {
        float t = x[b + c] - m;
        m2 = fma(t, t, m2);
    }
    float s = 1.0 / sqrt(m2 / float(p.d) + p.eps);
    mean[p.base_m + r] = m;
    rstd[p.base_r + r] = s;
    for (uint c = 0; c < p.d; c++)
        y[o + c] = fma((x[b + c] - m) * s, gamma[c], beta[c]);
}
