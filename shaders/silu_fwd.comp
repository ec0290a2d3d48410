#version 450
// Fused bias + SiLU: a = x[r, c] + b[c], y = a * sigmoid(a) = a / (1 + exp(-a)).
// One invocation per element; y may alias x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint c = i % p.d;
    float a = x[p.base_x + i] + b[c];
    y[p.base_y + i] = a / (1.0 + exp(-a));
}
