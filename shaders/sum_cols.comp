#version 450
// out[c] = sum over r of x[r, c], rows in order; one invocation per column.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint rows; uint cols; } p;

void main()
{
    uint c = gl_GlobalInvocationID.x;
    if (c >= p.cols)
        return;
    float s = 0.0;
    for (uint r = 0; r < p.rows; r++)
        s += x[r * p.cols + c];
    o[c] = s;
}
