#version 450
// y[i] = x[i]
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n)
        y[i] = x[i];
}
