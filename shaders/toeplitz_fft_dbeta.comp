#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): dbeta from the
// packed (zero-padded, [rows, N]) gy rows of one chunk, in the real domain:
//   dbeta[g, t] += sum_{l in [l0, l1), group of (r0 + l) % d == g} r[(grow0 + l) * N + t]
// (l1 - l0 <= TMM_MAX_LOOP). Chunks and passes add in increasing row order,
// the first writing, later ones adding: a fixed order. Invocation i is (g, t).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(std430, binding = 0) readonly buffer R { float r[]; };
layout(std430, binding = 1) buffer O { float o[]; };

layout(push_constant) uniform Push {
    uint total;  // G*n
    uint N, n, d, dg;
    uint r0, grow0, l0, l1, accumulate, base_o;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint g = i / p.n, t = i % p.n;
    const uint at = p.base_o + i;
    float acc = p.accumulate != 0u ? o[at] : 0.0;
    for (uint l = p.l0; l < p.l1; l++)
        if (((p.r0 + l) % p.d) / p.dg == g)
            acc += r[(p.grow0 + l) * p.N + t];
    o[at] = acc;
}
