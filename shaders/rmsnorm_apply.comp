#version 450
// y[r, c] = x[r, c] * rstd[r] * g[c], one invocation per element. y may
// alias x (each invocation reads its element before writing it).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_r, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.d, c = i - r * p.d;
    y[p.base_y + i] = x[p.base_x + i] * rstd[p.base_r + r] * g[c];
}
