#version 450
// RMSNorm statistics of rows split into chunks: one invocation per row adds
// the chunks' sums of squares in chunk order and writes
// rstd[r] = 1 / sqrt(ss / d + eps). nchunk <= TMM_MAX_LOOP (the host checks).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) writeonly buffer Rstd { float rstd[]; };
layout(push_constant) uniform Push {
    uint rows, d, nchunk, base_p, base_r;
    float eps;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint b = p.base_p + r * p.nchunk;
    float ss = 0.0;
    for (uint s = 0; s < p.nchunk; s++)
        ss += part[b + s];
    rstd[p.base_r + r] = 1.0 / sqrt(ss / float(p.d) + p.eps);
}
