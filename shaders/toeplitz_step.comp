#version 450
// Decoding: the causal Toeplitz output of one new position per sequence, and
// that position's input stored in the cache, in one dispatch
// (src/ops/decode.c). With t = pos[b], g the group of channel c, and the
// inputs u[s] = cache[b, s, :] for s < t, u[t] = x[b, :]:
//   y[b, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * u[s, c-(K-1)+a]
//   cache[b, t, c] = x[b, c]
// Channels below group g's first count as zero. A workgroup holds CW
// consecutive channels (x: neighbouring invocations read neighbouring floats)
// of one sequence times SP slices (y): slice j sums the positions s = j
// (mod SP) in order, and the slices are added in a fixed tree (the same
// result on every run). No invocation reads row t of the cache, so writing it
// here races with nothing. Per invocation K * ceil(n / SP) <= TMM_MAX_LOOP
// iterations (the host checks). The cache binding covers sequences
// seq0 .. seq0 + nseq - 1; workgroup (x, b) covers channels x * CW ...
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Cache { float cache[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) readonly buffer Beta { float beta[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint n, d, group_channels, taps, seq0, base_x, base_cache, base_y;
} p;

const uint CW = gl_WorkGroupSize.x, SP = gl_WorkGroupSize.y; // SP a power of two
shared float part[gl_WorkGroupSize.x * gl_WorkGroupSize.y];

void main()
{
    uint cl = gl_LocalInvocationID.x, j = gl_LocalInvocationID.y;
    uint c = gl_WorkGroupID.x * CW + cl, b = gl_WorkGroupID.y, sb = p.seq0 + b;
    bool live = c < p.d;
    uint t = pos[sb];
    uint g = c / p.group_channels;
    uint crow = p.base_cache + b * p.n * p.d, xrow = p.base_x + sb * p.d;
    float acc = 0.0;
    for (uint a = 0u; live && a < p.taps; a++) {
        int ci = int(c) - int(p.taps - 1u) + int(a);
        if (ci < int(g * p.group_channels))
            continue;
        uint wrow = (g * p.taps + a) * p.n + t;
        for (uint s = j; s < t; s += SP)
            acc += w[wrow - s] * cache[crow + s * p.d + uint(ci)];
        if (j == t % SP)
            acc += w[wrow - t] * x[xrow + uint(ci)];
    }
    part[j * CW + cl] = acc;
    barrier();
    for (uint h = SP / 2u; h > 0u; h >>= 1u) {
        if (j < h)
            part[j * CW + cl] += part[(j + h) * CW + cl];
        barrier();
    }
    if (j == 0u && live) {
        y[p.base_y + sb * p.d + c] = part[cl] + beta[g * p.n + t];
        cache[crow + t * p.d + c] = x[xrow + c];
    }
}
