#version 450
// Distilled decoding (src/ops/tz_ssm.c): the states after a prefill of len[b]
// positions, from the cached inputs: for sequence b, channel c, tap a (input
// channel ci = c-(K-1)+a; zero below the group's first channel) and mode j,
//   z_j = sum_{s <= len[b]-m} pole_j^(len[b]-m-s) * cache[b, s, ci]
// by Horner's rule (z <- pole * z + u) over positions [s0, s1) of this pass,
// continuing the state the previous pass left (first: from zero). The host
// splits the positions into passes of at most TMM_MAX_LOOP.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Len { uint len[]; };
layout(std430, binding = 1) readonly buffer Cache { float cache[]; };
layout(std430, binding = 2) readonly buffer Modes { vec4 modes[]; };
layout(std430, binding = 3) buffer State { vec2 state[]; };
layout(push_constant) uniform Push {
    uint nseq, n, d, group_channels, taps, head, nmodes, seq0, base_cache, s0, s1, first;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseq * p.d * p.taps * p.nmodes)
        return;
    uint j = i % p.nmodes, rest = i / p.nmodes;
    uint a = rest % p.taps;
    rest /= p.taps;
    uint c = rest % p.d, b = rest / p.d, sb = p.seq0 + b;
    uint g = c / p.group_channels;
    uint zi = ((sb * p.d + c) * p.taps + a) * p.nmodes + j;
    int ci = int(c) - int(p.taps - 1u) + int(a);
    vec2 z = p.first != 0u ? vec2(0.0) : state[zi];
    if (ci >= int(g * p.group_channels)) {
        vec4 md = modes[(g * p.taps + a) * p.nmodes + j];
        uint end = len[sb] + 1u > p.head ? len[sb] + 1u - p.head : 0u; /* positions < end are summed */
        uint crow = p.base_cache + b * p.n * p.d + uint(ci);
        for (uint s = p.s0; s < min(p.s1, end); s++) {
            float u = cache[crow + s * p.d];
            z = vec2(md.x * z.x - md.y * z.y + u, md.x * z.y + md.y * z.x);
        }
    }
    state[zi] = z;
}
