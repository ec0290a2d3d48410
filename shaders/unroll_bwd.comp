#version 450
// The unroll's backward (src/ops/autoenc_ops.h), positions [i0, i1) of du
// [B, n, d/2] in one pass: dh[b, src_row, c] (+)= sum over i of
// du[b, i, (c - i) mod d] where (c - i) mod d < d/2, i ascending (a fixed
// order). One invocation per element of dh [B * n_src, d]; with `first` the
// pass writes every row (0 outside src_row), later passes add to src_row's
// only. i1 - i0 <= TMM_MAX_LOOP (llvmpipe's loop cap).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer DU { float du[]; };
layout(std430, binding = 1) buffer DH { float dh[]; };
layout(push_constant) uniform Push { uint total, n, d, n_src, src_row, i0, i1, first; } p;

void main()
{
    uint idx = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (idx >= p.total)
        return;
    uint c = idx % p.d;
    uint row = idx / p.d;
    uint t = row % p.n_src;
    uint b = row / p.n_src;
    if (t != p.src_row) {
        if (p.first != 0u)
            dh[idx] = 0.0;
        return;
    }
    uint half_d = p.d / 2u;
    float s = 0.0;
    uint count = min(p.i1 - p.i0, TMM_MAX_LOOP);
    for (uint k = 0u; k < count; k++) {
        uint i = p.i0 + k;
        uint j = (c + p.d - i % p.d) % p.d;
        if (j < half_d)
            s += du[(b * p.n + i) * half_d + j];
    }
    dh[idx] = p.first != 0u ? s : dh[idx] + s;
}
