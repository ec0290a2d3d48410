#version 450
// Gate, SiLU: y = a * silu(z), silu(z) = z / (1 + exp(-z)). One invocation
// per element; y may alias a or z.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) buffer Z { float z[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, base_a, base_z, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float zv = z[p.base_z + i];
    y[p.base_y + i] = a[p.base_a + i] * (zv / (1.0 + exp(-zv)));
}
