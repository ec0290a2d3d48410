#version 450
// out[j] = x[j*chunk] + x[j*chunk + 1] + ... (up to n), summed left to right,
// one invocation per chunk: no shared memory, no atomics, a fixed order.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint n; uint chunk; uint count; } p;

void main()
{
    uint j = gl_GlobalInvocationID.x;
    if (j >= p.count)
        return;
    uint begin = j * p.chunk;
    uint end = min(p.n, begin + p.chunk);
    float s = 0.0;
    for (uint i = begin; i < end; i++)
        s += x[i];
    o[j] = s;
}
