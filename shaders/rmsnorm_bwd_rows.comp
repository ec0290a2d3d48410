#version 450
// RMSNorm backward, row sums. One invocation per (row r, chunk s) of at most
// `chunk` columns: out[r nchunk + s] = sum over the chunk of
// (dy * g) * (x * rstd), in column order (with one chunk this is the row sum;
// otherwise tmm_op_sum_rows adds the chunks in order).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer G { float g[]; };
layout(std430, binding = 3) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 4) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push {
    uint rows, d, chunk, nchunk;
    uint base_x, base_dy, base_r, base_o;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.nchunk)
        return;
    uint r = i / p.nchunk, s = i - r * p.nchunk;
    uint c0 = s * p.chunk;
    uint n = min(p.d - c0, p.chunk);
    uint bx = p.base_x + r * p.d + c0, bdy = p.base_dy + r * p.d + c0;
    float rs = rstd[p.base_r + r];
    float sum = 0.0;
    for (uint c = 0; c < n; c++)
        sum = fma(dy[bdy + c] * g[c0 + c], x[bx + c] * rs, sum);
    o[p.base_o + i] = sum;
}
