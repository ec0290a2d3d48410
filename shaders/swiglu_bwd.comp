#version 450
// SwiGLU backward, one invocation per (row r, column j < f), with a, b the
// gate and up values of gu and s = sigmoid(a):
//   dgu[r, j]     = dy * b * silu'(a),  silu'(a) = s + a s (1 - s)
//   dgu[r, f + j] = dy * silu(a),       silu(a) = a s
// dgu may alias gu (each invocation reads both its inputs before writing).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer GU { float gu[]; };
layout(std430, binding = 1) readonly buffer DY { float dy[]; };
layout(std430, binding = 2) buffer DGU { float dgu[]; };
layout(push_constant) uniform Push { uint n, f, base_gu, base_dy, base_dgu; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.f, j = i - r * p.f;
    uint at = p.base_gu + 2u * r * p.f + j;
    float a = gu[at], b = gu[at + p.f], g = dy[p.base_dy + i];
    float s = 1.0 / (1.0 + exp(-a));
    float as = a * s;
    uint o = p.base_dgu + 2u * r * p.f + j;
    dgu[o] = g * b * fma(as, 1.0 - s, s);
    dgu[o + p.f] = g * as;
}
