#version 450
// Distilled decoding (src/ops/tz_ssm.c): the Toeplitz layer's output at one
// new position t = pos[b] per sequence, from an exact head of m lags and a
// state-space tail. For channel c of group g and each tap a (input channel
// ci = c-(K-1)+a, skipped below the group's first channel):
//   y[b, c] = beta[g, t] + sum_a ( sum_{k<=min(m-1,t)} w[g, a, k] * u[t-k, ci]
//                                  + sum_j Re(res_j * z_j) )
// with u[t] = x[b, ci] and u[s < t] = cache[b, s, ci], where z_j holds
// sum_{s<=t-m} pole_j^(t-m-s) * u[s, ci]; then z_j <- pole_j * z_j + u[t+1-m, ci]
// (when t+1 >= m) prepares position t+1, and cache[b, t, c] = x[b, c].
// Modes are vec4 (pole re, pole im, res re, res im) [G, K, M]; states vec2
// [B, d, K, M]. Per invocation K * (m - 1 + M) <= TMM_MAX_LOOP iterations
// (the host checks). The cache binding covers sequences seq0 .. seq0+nseq-1.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) buffer Cache { float cache[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) readonly buffer Beta { float beta[]; };
layout(std430, binding = 5) readonly buffer Modes { vec4 modes[]; };
layout(std430, binding = 6) buffer State { vec2 state[]; };
layout(std430, binding = 7) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint nseq, n, d, group_channels, taps, head, nmodes, seq0, base_x, base_cache, base_y;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseq * p.d)
        return;
    uint b = i / p.d, c = i % p.d, sb = p.seq0 + b;
    uint t = pos[sb];
    uint g = c / p.group_channels;
    uint crow = p.base_cache + b * p.n * p.d, xrow = p.base_x + sb * p.d;
    bool feed = t + 1u >= p.head;
    float acc = beta[g * p.n + t];
    for (uint a = 0u; a < p.taps; a++) {
        int ci = int(c) - int(p.taps - 1u) + int(a);
        if (ci < int(g * p.group_channels))
            continue;
        uint wrow = (g * p.taps + a) * p.n;
        float u = x[xrow + uint(ci)];
        acc += w[wrow] * u;
        uint kmax = min(p.head - 1u, t);
        for (uint k = 1u; k <= kmax; k++)
            acc += w[wrow + k] * cache[crow + (t - k) * p.d + uint(ci)];
        float next = p.head == 1u ? u : feed ? cache[crow + (t + 1u - p.head) * p.d + uint(ci)] : 0.0;
        uint mrow = (g * p.taps + a) * p.nmodes, zrow = ((sb * p.d + c) * p.taps + a) * p.nmodes;
        for (uint j = 0u; j < p.nmodes; j++) {
            vec4 md = modes[mrow + j];
            vec2 z = state[zrow + j];
            acc += md.z * z.x - md.w * z.y;
            if (feed)
                state[zrow + j] = vec2(md.x * z.x - md.y * z.y + next, md.x * z.y + md.y * z.x);
        }
    }
    cache[crow + t * p.d + c] = x[xrow + c];
    y[p.base_y + sb * p.d + c] = acc;
}
