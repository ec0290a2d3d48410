#version 450
// Gate, per-column scale: y[r, c] = a[r, c] * k[c]. One invocation per
// element; y may alias a.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, base_a, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    y[p.base_y + i] = a[p.base_a + i] * k[i % p.d];
}
