#version 450
// y[r, c] = (x[r, c] - mean[r]) * rstd[r] * gamma[c] + beta[c], one
// invocation per element. y may alias x (each invocation reads its element
// before writing it).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) readonly buffer Mean { float mean[]; };
layout(std430, binding = 4) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_m, base_r, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.d, c = i - r * p.d;
    float xhat = (x[p.base_x + i] - mean[p.base_m + r]) * rstd[p.base_r + r];
    y[p.base_y + i] = fma(xhat, gamma[c], beta[c]);
}
