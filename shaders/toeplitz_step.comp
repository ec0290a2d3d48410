#version 450
// Decoding: the causal Toeplitz output of one new position per sequence, and
// that position's input stored in the cache (src/ops/decode.c). With
// t = pos[b], g the group of channel c, and the inputs u[s] = cache[b, s, :]
// for s < t, u[t] = x[b, :]:
//   part[j, b, c] = sum_{a<K} sum_{s in chunk j, s<=t} w[g, a, t-s] * u[s, c-(K-1)+a]
//   cache[b, t, c] = x[b, c]                      (by the invocations of chunk 0)
// Chunk j holds positions [j*chunk, (j+1)*chunk); chunk * K <= TMM_MAX_LOOP
// keeps every invocation under llvmpipe's loop cap (loop_limit.glsl). No
// invocation reads row t of the cache, so writing it here races with nothing.
// With one chunk (nchunks 1) the invocation writes y[b, c] = part + beta[g, t]
// itself: the whole step in one dispatch, without barriers (which cost more
// than a dispatch on llvmpipe); else toeplitz_step_sum.comp adds the chunks in
// order and beta. Channels below group g's first count as zero. The cache
// binding covers sequences seq0 .. seq0 + nseq - 1. VEC (K = 1; d, the group
// width and the bases multiples of 4): an invocation takes 4 neighbouring
// channels as a vec4, one weight read for four products. gated: y[b, c] is
// multiplied by gate[b, c] (Hyena's output gate; toeplitz_step_sum.comp
// applies it past one chunk).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint VEC = 0u;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 2) buffer Cache { float cache[]; };
layout(std430, binding = 2) buffer Cache4 { vec4 cache4[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) readonly buffer Beta { float beta[]; };
layout(std430, binding = 5) writeonly buffer Part { float part[]; };
layout(std430, binding = 6) writeonly buffer Y { float y[]; };
layout(std430, binding = 7) readonly buffer Gate { float gate[]; };
layout(push_constant) uniform Push {
    uint nseq, batch, n, d, group_channels, taps, chunk, nchunks, seq0, base_x, base_cache, base_y, gated, base_gate;
} p;

// The step's output at (sb, c) from its sum: + beta, times the gate.
void put(uint sb, uint c, float v)
{
    const uint at = sb * p.d + c;
    y[p.base_y + at] = p.gated != 0u ? v * gate[p.base_gate + at] : v;
}

// VEC: channels c .. c+3 of one group, K = 1.
void main_vec4()
{
    uint i = gl_GlobalInvocationID.x, d4 = p.d / 4u;
    uint per_chunk = p.nseq * d4;
    if (i >= per_chunk * p.nchunks)
        return;
    uint j = i / per_chunk, b = (i % per_chunk) / d4, c = 4u * (i % d4), sb = p.seq0 + b;
    uint t = pos[sb];
    uint g = c / p.group_channels;
    uint crow = (p.base_cache + b * p.n * p.d + c) / 4u, xrow = (p.base_x + sb * p.d + c) / 4u;
    uint s0 = j * p.chunk, s1 = min(s0 + p.chunk, t);
    uint wrow = g * p.n + t;
    vec4 acc = vec4(0.0);
    for (uint s = s0; s < s1; s++)
        acc += w[wrow - s] * cache4[crow + s * d4];
    vec4 xv = x4[xrow];
    if (t / p.chunk == j)
        acc += w[wrow - t] * xv;
    if (j == 0u)
        cache4[crow + t * d4] = xv;
    for (uint k = 0u; k < 4u; k++) {
        if (p.nchunks == 1u)
            put(sb, c + k, acc[k] + beta[g * p.n + t]);
        else
            part[(j * p.batch + sb) * p.d + c + k] = acc[k];
    }
}

void main()
{
    if (VEC != 0u) {
        main_vec4();
        return;
    }
    uint i = gl_GlobalInvocationID.x;
    uint per_chunk = p.nseq * p.d;
    if (i >= per_chunk * p.nchunks)
        return;
    uint j = i / per_chunk, b = (i % per_chunk) / p.d, c = i % p.d, sb = p.seq0 + b;
    uint t = pos[sb];
    uint g = c / p.group_channels;
    uint crow = p.base_cache + b * p.n * p.d, xrow = p.base_x + sb * p.d;
    uint s0 = j * p.chunk, s1 = min(s0 + p.chunk, t);
    float acc = 0.0;
    for (uint a = 0u; a < p.taps; a++) {
        int ci = int(c) - int(p.taps - 1u) + int(a);
        if (ci < int(g * p.group_channels))
            continue;
        uint wrow = (g * p.taps + a) * p.n + t;
        for (uint s = s0; s < s1; s++)
            acc += w[wrow - s] * cache[crow + s * p.d + uint(ci)];
        if (t / p.chunk == j)
            acc += w[wrow - t] * x[xrow + uint(ci)];
    }
    if (j == 0u)
        cache[crow + t * p.d + c] = x[xrow + c];
    if (p.nchunks == 1u)
        put(sb, c, acc + beta[g * p.n + t]);
    else
        part[(j * p.batch + sb) * p.d + c] = acc;
}
