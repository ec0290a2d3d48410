#version 450
// LayerNorm backward, row sums. One invocation per (row r, chunk s) of at
// most `chunk` columns, with g = dy * gamma and xhat = (x - mean) * rstd:
//   out[(2 r) nchunk + s]     = sum over the chunk of g
//   out[(2 r + 1) nchunk + s] = sum over the chunk of g * xhat
// (with one chunk these are the row sums; otherwise tmm_op_sum_rows adds
// the chunks in order).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 3) readonly buffer Mean { float mean[]; };
layout(std430, binding = 4) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 5) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push {
    uint rows, d, chunk, nchunk;
    uint base_x, base_dy, base_m, base_r, base_o;
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
    float m = mean[p.base_m + r], rs = rstd[p.base_r + r];
    float sg = 0.0, sgx = 0.0;
    for (uint c = 0; c < n; c++) {
        float g = dy[bdy + c] * gamma[c0 + c];
        float xhat = (x[bx + c] - m) * rs;
        sg += g;
        sgx = fma(g, xhat, sgx);
    }
    o[p.base_o + 2u * r * p.nchunk + s] = sg;
    o[p.base_o + (2u * r + 1u) * p.nchunk + s] = sgx;
}
