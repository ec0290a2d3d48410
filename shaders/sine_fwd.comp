#version 450
// Sine layer: y[r, c] = sin(omega[c] (x[r, c] + cb[c])). One invocation per
// element; y may alias x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Omega { float omega[]; };
layout(std430, binding = 2) readonly buffer CB { float cb[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint c = i % p.d;
    y[p.base_y + i] = sin(omega[c] * (x[p.base_x + i] + cb[c]));
}
