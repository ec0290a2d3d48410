#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): dbeta from the
// packed (zero-padded, row-major [B*d, N]) copy of gy, in the real domain:
//   dbeta[g, t] = sum_j gy_row[b*d + c][t],  j = b*dg + (c - g*dg).
// One pass adds j in [j0, j1) (j1 - j0 <= TMM_MAX_LOOP) in increasing j; the
// first pass writes, later ones add: a fixed order. Invocation i is (g, t).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer R { float r[]; };
layout(std430, binding = 1) buffer O { float o[]; };
layout(push_constant) uniform Push {
    uint total;  // G*n
    uint N, n, d, dg;
    uint grow0, j0, j1, accumulate, base_o;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint g = i / p.n, t = i % p.n;
    const uint at = p.base_o + i;
    float acc = p.accumulate != 0u ? o[at] : 0.0;
    for (uint j = p.j0; j < p.j1; j++) {
        const uint b = j / p.dg, c = g * p.dg + j % p.dg;
        acc += r[(p.grow0 + b * p.d + c) * p.N + t];
    }
    o[at] = acc;
}
