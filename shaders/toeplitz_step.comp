#version 450
// Decoding: the causal Toeplitz output of one new position per sequence, and
// that position's input stored in the cache, in one dispatch
// (src/ops/decode.c). With t = pos[b], g the group of channel c, and the
// inputs u[s] = cache[b, s, :] for s < t, u[t] = x[b, :]:
//   y[b, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * u[s, c-(K-1)+a]
//   cache[b, t, c] = x[b, c]
// Channels below group g's first count as zero. One workgroup per (b, c):
// invocation i sums the positions s = i (mod WG) in order, and the workgroup
// adds the WG parts in a fixed tree (the same result on every run). No
// invocation reads row t of the cache, so writing it here races with nothing.
// Per invocation K * ceil(n / WG) <= TMM_MAX_LOOP iterations (the host
// checks). The cache binding covers sequences seq0 .. seq0 + nseq - 1.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
const uint WG = gl_WorkGroupSize.x; // a power of two (the host's TMM_STEP_WG)
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Cache { float cache[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) readonly buffer Beta { float beta[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint nseq, n, d, group_channels, taps, seq0, base_x, base_cache, base_y;
} p;

shared float part[WG];

void main()
{
    uint i = gl_LocalInvocationID.x;
    uint b = gl_WorkGroupID.x / p.d, c = gl_WorkGroupID.x % p.d, sb = p.seq0 + b;
    uint t = pos[sb];
    uint g = c / p.group_channels;
    uint crow = p.base_cache + b * p.n * p.d, xrow = p.base_x + sb * p.d;
    float acc = 0.0;
    for (uint a = 0u; a < p.taps; a++) {
        int ci = int(c) - int(p.taps - 1u) + int(a);
        if (ci < int(g * p.group_channels))
            continue;
        uint wrow = (g * p.taps + a) * p.n + t;
        for (uint s = i; s < t; s += WG)
            acc += w[wrow - s] * cache[crow + s * p.d + uint(ci)];
        if (i == t % WG)
            acc += w[wrow - t] * x[xrow + uint(ci)];
    }
    part[i] = acc;
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1u) {
        if (i < h)
            part[i] += part[i + h];
        barrier();
    }
    if (i == 0u) {
        y[p.base_y + sb * p.d + c] = part[0] + beta[g * p.n + t];
        cache[crow + t * p.d + c] = x[xrow + c];
    }
}
