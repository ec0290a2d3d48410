#version 450
// Sine layer backward, input gradient: u = x + cb, g = dy cos(omega u),
// dx = g omega. One invocation per element; dx may alias dy or x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Omega { float omega[]; };
layout(std430, binding = 2) readonly buffer CB { float cb[]; };
layout(std430, binding = 3) buffer DY { float dy[]; };
layout(std430, binding = 4) buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_dy, base_dx; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint c = i % p.d;
    float w = omega[c];
    float g = dy[p.base_dy + i] * cos(w * (x[p.base_x + i] + cb[c]));
    dx[p.base_dx + i] = g * w;
}
