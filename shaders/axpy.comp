#version 450
// y[i] += a * x[i]
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n; float a; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n)
        y[i] = fma(p.a, x[i], y[i]);
}
