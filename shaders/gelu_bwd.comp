#version 450
// GELU backward: a = x + b (recomputed; b when has_b),
// dx = dy gelu'(a), gelu'(a) = Phi(a) + a exp(-a^2 / 2) / sqrt(2 pi).
// One invocation per element; dx may alias dy or x. Phi as gelu_fwd.comp.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint n, d, has_b, base_x, base_dy, base_dx; } p;

#include "gelu.glsl"


void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float a = x[p.base_x + i];
    if (p.has_b != 0u)
        a += b[i % p.d];
    dx[p.base_dx + i] = dy[p.base_dy + i] * gelu_grad(a);
}
