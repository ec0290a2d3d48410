#version 450
// SwiGLU: gu [rows, 2f] holds the gate a (columns 0..f-1) and the up
// projection b (columns f..2f-1); y[r, j] = silu(a) * b with
// silu(a) = a / (1 + exp(-a)). One invocation per output element.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer GU { float gu[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, f, base_gu, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.f, j = i - r * p.f;
    uint at = p.base_gu + 2u * r * p.f + j;
    float a = gu[at], b = gu[at + p.f];
    y[p.base_y + i] = a / (1.0 + exp(-a)) * b;
}
