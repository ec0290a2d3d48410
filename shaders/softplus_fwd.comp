#version 450
// Softplus with optional bias: a = x[r, c] + b[c] (b when has_b),
// y = max(a, 0) + log1p(exp(-|a|)). One invocation per element; y may alias x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, has_b, base_x, base_y; } p;

#include "softplus.glsl"

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
