#version 450
// RMSNorm statistics. One invocation per (row r, chunk s) of at most `chunk`
// columns (chunk <= TMM_MAX_LOOP): ss = sum over the chunk of x^2 in column
// order. With one chunk per row it writes rstd[r] = 1 / sqrt(ss / d + eps)
// directly; otherwise part[r nchunk + s] = ss for rmsnorm_combine.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Part { float part[]; };
layout(std430, binding = 2) writeonly buffer Rstd { float rstd[]; };
layout(push_constant) uniform Push {
    uint rows, d, chunk, nchunk;
    uint base_x, base_p, base_r;
    float eps;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.nchunk)
        return;
    uint r = i / p.nchunk, s = i - r * p.nchunk;
    uint b = p.base_x + r * p.d + s * p.chunk;
    uint n = min(p.d - s * p.chunk, p.chunk);
    float ss = 0.0;
    for (uint c = 0; c < n; c++) {
        float v = x[b + c];
        ss = fma(v, v, ss);
    }
    if (p.nchunk == 1u)
        rstd[p.base_r + r] = 1.0 / sqrt(ss / float(p.d) + p.eps);
    else
        part[p.base_p + i] = ss;
}
