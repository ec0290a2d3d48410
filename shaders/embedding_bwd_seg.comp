#version 450
// Embedding backward, pass 1: partial sums of the long segments of the index
// (see src/ops/nn_embedding.c for its layout). One invocation per (segment s,
// channel c): part[s, c] = sum of dh[pos[j], c] over the segment's positions
// j, in order. Segments hold at most TMM_MAX_LOOP positions; the bounds are
// clamped so that a corrupt index cannot make a read out of range.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Index { uint idx[]; };
layout(std430, binding = 1) readonly buffer DH { float dh[]; };
layout(std430, binding = 2) writeonly buffer Part { float part[]; };
layout(push_constant) uniform Push { uint rows; uint d; uint smax; uint base_dh; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.smax * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    if (s >= idx[1])
        return;
    uint off_seg = 6u + 4u * p.rows;
    uint b = min(idx[off_seg + s], p.rows);
    uint e = min(min(idx[off_seg + p.smax + s], p.rows), b + TMM_MAX_LOOP);
    float acc = 0.0;
    for (uint j = b; j < e; j++)
        acc += dh[p.base_dh + min(idx[4u + j], p.rows - 1u) * p.d + c];
    part[i] = acc;
}
