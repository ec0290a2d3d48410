#version 450
// RMSNorm backward, input gradient, one invocation per element:
//   dx = rstd * (dy * g - xhat * sums[r] / d),  xhat = x * rstd,
// sums[r] = sum_c dy * g * xhat over the row. dx may alias dy (each
// invocation reads its element before writing it).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer G { float g[]; };
layout(std430, binding = 3) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 4) readonly buffer Sums { float sums[]; };
layout(std430, binding = 5) buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_dy, base_r, base_s, base_dx; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.d, c = i - r * p.d;
    float rs = rstd[p.base_r + r];
    float xhat = x[p.base_x + i] * rs;
    float m = sums[p.base_s + r] / float(p.d);
    dx[p.base_dx + i] = rs * fma(-xhat, m, dy[p.base_dy + i] * g[c]);
}
