#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): the spectrum
// of dw, summed in the frequency domain before one inverse:
//   DW[g, a][k] = sum_{b, c in g} conj(U[b, c-(K-1)+a][k]) * GY[b, c][k]   (c-(K-1)+a in g)
// over the rows of one chunk whose output rows are global rows r0 ..: one
// pass takes the global rows [r0 + l0, r0 + l1) (l1 - l0 <= TMM_MAX_LOOP)
// and visits only those of group g (per batch, one contiguous run). Rows: GY
// of local row l at grow0 + l + h, U of channel c-h+a of the same batch at
// urow0 + l + a (h = K-1: the chunk's halo). Chunks and passes add in
// increasing row order, the first writing, later ones adding: a fixed order.
// Invocation x is k, workgroup y the w row g*K + a.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(std430, binding = 0) readonly buffer C { vec2 cin[]; };
layout(std430, binding = 1) buffer O { vec2 o[]; };

layout(push_constant) uniform Push {
    uint M, d, dg, K;
    uint r0, urow0, grow0;
    uint l0, l1, accumulate;
} p;

void main()
{
    const uint k = gl_GlobalInvocationID.x, ga = gl_WorkGroupID.y;
    if (k >= p.M)
        return;
    const uint g = ga / p.K, a = ga % p.K, h = p.K - 1u;
    const uint at = ga * p.M + k;
    vec2 acc = p.accumulate != 0u ? o[at] : vec2(0.0);
    const uint lo = p.r0 + p.l0, hi = p.r0 + p.l1;
    for (uint b = lo / p.d; b * p.d < hi; b++) {
        // the group's channels of batch b, from the first whose input channel
        // c-h+a is inside the group (c >= g*dg + h - a)
        const uint first = b * p.d + g * p.dg + h - a;
        for (uint row = max(lo, first); row < min(hi, b * p.d + g * p.dg + p.dg); row++) {
            const uint l = row - p.r0;
            const vec2 uv = cin[(p.urow0 + l + a) * p.M + k];
            const vec2 gv = cin[(p.grow0 + l + h) * p.M + k];
            acc += vec2(uv.x * gv.x + uv.y * gv.y, uv.x * gv.y - uv.y * gv.x);
        }
    }
    o[at] = acc;
}
