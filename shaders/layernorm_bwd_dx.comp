#version 450
// LayerNorm backward, input gradient, one invocation per element:
//   dx = rstd * (g - (sum_g + xhat * sum_gx) / d),  g = dy * gamma,
//   xhat = (x - mean) * rstd, with the row sums at sums[2 r], sums[2 r + 1].
// dx may alias dy (each invocation reads its element before writing it).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 3) readonly buffer Mean { float mean[]; };
layout(std430, binding = 4) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 5) readonly buffer Sums { float sums[]; };
layout(std430, binding = 6) buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint n, d, base_x, base_dy, base_m, base_r, base_s, base_dx; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.d, c = i - r * p.d;
    float rs = rstd[p.base_r + r];
    float xhat = (x[p.base_x + i] - mean[p.base_m + r]) * rs;
    float g = dy[p.base_dy + i] * gamma[c];
    float inv_d = 1.0 / float(p.d);
    float sg = sums[p.base_s + 2u * r] * inv_d, sgx = sums[p.base_s + 2u * r + 1u] * inv_d;
    dx[p.base_dx + i] = rs * (g - fma(xhat, sgx, sg));
}
