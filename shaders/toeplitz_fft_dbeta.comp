#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): dbeta, summed
// in the real domain straight from gy [B, n, d]:
//   dbeta[g, t] = sum_{b, c in g} gy[b, t, c]
// One pass adds the terms j = b*dg + (c - g*dg) in [j0, j1) (j1 - j0 <=
// TMM_MAX_LOOP; b counted from the binding's first batch) in increasing j;
// the first pass writes, later ones add: a fixed order. Invocation x is t,
// workgroup y the group g.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(std430, binding = 0) readonly buffer GY { float gy[]; };
layout(std430, binding = 1) buffer O { float o[]; };

layout(push_constant) uniform Push {
    uint n, d, dg;
    uint j0, j1, accumulate, base_gy, base_o;
} p;

void main()
{
    const uint t = gl_GlobalInvocationID.x, g = gl_WorkGroupID.y;
    if (t >= p.n)
        return;
    const uint at = p.base_o + g * p.n + t;
    float acc = p.accumulate != 0u ? o[at] : 0.0;
    for (uint j = p.j0; j < p.j1; j++) {
        const uint b = j / p.dg, c = g * p.dg + j % p.dg;
        acc += gy[p.base_gy + (b * p.n + t) * p.d + c];
    }
    o[at] = acc;
}
