#version 450
// Gate, per-column scale, backward, input gradient: da[r, c] = dy[r, c] * k[c].
// One invocation per element; da may alias dy (or a, which it does not read).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) buffer DY { float dy[]; };
layout(std430, binding = 2) buffer DA { float da[]; };
layout(push_constant) uniform Push { uint n, d, base_dy, base_da; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    da[p.base_da + i] = dy[p.base_dy + i] * k[i % p.d];
}
