#version 450
// Decoding: the causal Toeplitz output of one new position per sequence, from
// the cached inputs (src/ops/decode.c). With t = pos[b] and g the group of c:
//   part[j, b, c] = sum_{a<K} sum_{s in chunk j, s<=t} w[g, a, t-s] * cache[b, s, c-(K-1)+a]
// Chunk j holds positions [j*chunk, (j+1)*chunk); chunk * K <= TMM_MAX_LOOP
// keeps every invocation under llvmpipe's loop cap (loop_limit.glsl), and the
// chunks spread a long sum over many invocations. toeplitz_step_sum.comp adds
// the chunks in order and beta. Channels below group g's first count as zero.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer Cache { float cache[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 3) writeonly buffer Part { float part[]; };
layout(push_constant) uniform Push {
    uint nseq, batch, n, d, group_channels, taps, chunk, seq0, base_cache;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    uint per_chunk = p.nseq * p.d;
    if (i >= per_chunk * ((p.n + p.chunk - 1u) / p.chunk))
        return;
    uint j = i / per_chunk, b = (i % per_chunk) / p.d, c = i % p.d;
    uint t = pos[p.seq0 + b];
    uint g = c / p.group_channels;
    uint s0 = j * p.chunk, s1 = min(s0 + p.chunk, t + 1u);
    float acc = 0.0;
    for (uint a = 0u; a < p.taps; a++) {
        int ci = int(c) - int(p.taps - 1u) + int(a);
        if (ci < int(g * p.group_channels))
            continue;
        uint wrow = (g * p.taps + a) * p.n + t;
        uint crow = p.base_cache + b * p.n * p.d + uint(ci);
        for (uint s = s0; s < s1; s++)
            acc += w[wrow - s] * cache[crow + s * p.d];
    }
    part[(j * p.batch + p.seq0 + b) * p.d + c] = acc;
}
