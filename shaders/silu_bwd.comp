#version 450
// Fused bias + SiLU backward: a = x + b (recomputed), s = sigmoid(a),
// da = dy * (s + a * s * (1 - s)). One invocation per element; da may alias dy.
#include "silu.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DA { float da[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_dy, base_da; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint c = i % p.d;
    da[p.base_da + i] = dy[p.base_dy + i] * silu_grad(x[p.base_x + i] + b[c]);
}
