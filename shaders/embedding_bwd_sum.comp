#version 450
// Embedding backward, pass 2, for one vocab range [v0, v0 + vcount) of dE:
// one invocation per (distinct token k, channel c). A token with at most L
// positions sums dh over them in position order; a longer one sums the
// partial sums of its segments (pass 1) in order. Then dE[v, c] += sum.
// Every (v, c) is written by one invocation: no atomics.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Index { uint idx[]; };
layout(std430, binding = 1) readonly buffer DH { float dh[]; };
layout(std430, binding = 2) readonly buffer Part { float part[]; };
layout(std430, binding = 3) buffer DE { float de[]; };
layout(push_constant) uniform Push {
    uint rows, d, smax, kmax;
    uint v0, vcount, base_e, base_dh;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.kmax * p.d)
        return;
    uint k = i / p.d, c = i - k * p.d;
    if (k >= idx[0])
        return;
    uint v = idx[4u + p.rows + k];
    if (v < p.v0 || v - p.v0 >= p.vcount)
        return;
    uint off_tstart = 4u + 2u * p.rows, off_tseg = 5u + 3u * p.rows;
    uint s0 = min(idx[off_tseg + k], p.smax), s1 = min(min(idx[off_tseg + k + 1u], p.smax), s0 + TMM_MAX_LOOP);
    float acc = 0.0;
    if (s0 == s1) {
        uint b = min(idx[off_tstart + k], p.rows);
        uint e = min(min(idx[off_tstart + k + 1u], p.rows), b + TMM_MAX_LOOP);
        for (uint j = b; j < e; j++)
            acc += dh[p.base_dh + min(idx[4u + j], p.rows - 1u) * p.d + c];
    } else {
        for (uint s = s0; s < s1; s++)
            acc += part[s * p.d + c];
    }
    uint o = p.base_e + (v - p.v0) * p.d + c;
    de[o] = de[o] + acc;
}
