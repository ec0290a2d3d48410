#version 450
// x[i] = value
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) writeonly buffer X { float x[]; };
layout(push_constant) uniform Push { uint n; float value; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n)
        x[i] = p.value;
}
