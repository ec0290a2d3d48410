#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): the spectrum
// of dw, summed in the frequency domain before one inverse:
//   DW[g, a][k] = sum_{j} conj(U[b, c-(K-1)+a][k]) * GY[b, c][k],
//   j = b*dg + (c - g*dg) over the batch and the group's channels (c-(K-1)+a >= 0).
// One pass adds the terms j in [j0, j1) (j1 - j0 <= TMM_MAX_LOOP) in
// increasing j; the first pass writes, later ones add: a fixed order.
// Invocation i is (g*K + a, k) = (i / M, i % M).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer C { vec2 cin[]; };
layout(std430, binding = 1) buffer O { vec2 o[]; };
layout(push_constant) uniform Push {
    uint total;  // G*K*M
    uint M, d, dg, K;
    uint urow0, grow0, orow0;
    uint j0, j1, accumulate;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint ga = i / p.M, k = i % p.M;
    const uint g = ga / p.K, a = ga % p.K;
    const uint at = (p.orow0 + ga) * p.M + k;
    vec2 acc = p.accumulate != 0u ? o[at] : vec2(0.0);
    for (uint j = p.j0; j < p.j1; j++) {
        const uint b = j / p.dg, c = g * p.dg + j % p.dg;
        const int ch = int(c) - int(p.K - 1u) + int(a);
        if (ch >= 0) {
            const vec2 uv = cin[(p.urow0 + b * p.d + uint(ch)) * p.M + k];
            const vec2 gv = cin[(p.grow0 + b * p.d + c) * p.M + k];
            acc += vec2(uv.x * gv.x + uv.y * gv.y, uv.x * gv.y - uv.y * gv.x);
        }
    }
    o[at] = acc;
}
