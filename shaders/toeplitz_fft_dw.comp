#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): the spectrum
// of dw, summed in the frequency domain before one inverse:
//   DW[g, a][k] = sum_{b, c in g} conj(U[b, c-(K-1)+a][k]) * GY[b, c][k]   (c-(K-1)+a >= 0)
// over the rows of one chunk: local rows l in [l0, l1) (l1 - l0 <=
// TMM_MAX_LOOP) are global rows r0 + l = (b, c), those of other groups
// skipped. Rows: GY of l at grow0 + l + h, U of global row r at urow0 + r -
// r0 + h (h = K-1: the chunk's halo). Chunks and passes add in increasing
// row order, the first writing, later ones adding: a fixed order.
// Invocation i is (g*K + a, k) = (i / M, i % M).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(std430, binding = 0) readonly buffer C { vec2 cin[]; };
layout(std430, binding = 1) buffer O { vec2 o[]; };

layout(push_constant) uniform Push {
    uint total;  // G*K*M
    uint M, d, dg, K;
    uint r0, urow0, grow0;
    uint l0, l1, accumulate;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint ga = i / p.M, k = i % p.M;
    const uint g = ga / p.K, a = ga % p.K, h = p.K - 1u;
    const uint at = ga * p.M + k;
    vec2 acc = p.accumulate != 0u ? o[at] : vec2(0.0);
    for (uint l = p.l0; l < p.l1; l++) {
        const uint c = (p.r0 + l) % p.d;
        // channel c - h + a of the same batch: row l + h - h + a - ... = l + a
        if (c / p.dg == g && c + a >= h) {
            const vec2 uv = cin[(p.urow0 + l + a) * p.M + k];
            const vec2 gv = cin[(p.grow0 + l + h) * p.M + k];
            acc += vec2(uv.x * gv.x + uv.y * gv.y, uv.x * gv.y - uv.y * gv.x);
        }
    }
    o[at] = acc;
}
