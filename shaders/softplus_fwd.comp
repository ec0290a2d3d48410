#version 450
// Softplus with optional bias: a = x[r, c] + b[c] (b when has_b),
// y = max(a, 0) + log1p(exp(-|a|)). One invocation per element; y may alias x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, has_b, base_x, base_y; } p;

#include "exp_acc.glsl"

// softplus(a) = max(a, 0) + log1p(e), e = exp(-|a|) in (0, 1]; log1p(e) =
// 2 atanh(s) = 2 (s + s^3/3 + ... + s^15/15), s = e / (2 + e) <= 1/3
// (relative error < 2e-9 before rounding; llvmpipe's log is only accurate
// to about 2^-21 absolute near 1).
float softplus(float a)
{
    float e = exp_acc(-abs(a), 0.0);
    precise float s = e / (2.0 + e), s2 = s * s;
    precise float l = 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0
                    + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0))))))));
    return max(a, 0.0) + l;
}

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float a = x[p.base_x + i];
    if (p.has_b != 0u)
        a += b[i % p.d];
    y[p.base_y + i] = softplus(a);
}
