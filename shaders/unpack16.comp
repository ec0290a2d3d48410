#version 450
// y[j] = x's 16-bit value j (fp16 for format 0, bf16 for 1) as fp32: exact.
#include "half_convert.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform Push { uint n; uint format; } p;

uint to32(uint h) { return p.format == 0u ? f16_to_f32(h) : bf16_to_f32(h); }

void main()
{
    uint i = gl_GlobalInvocationID.x, j = 2u * i;
    if (j >= p.n)
        return;
    uint w = x[i];
    y[j] = to32(w & 0xffffu);
    if (j + 1u < p.n)
        y[j + 1u] = to32(w >> 16);
}
