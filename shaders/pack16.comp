#version 450
// y[i] = the 16-bit forms of x[2i] (low half) and x[2i+1] (high half; 0 past
// the end): fp16 (format 0) or bf16 (format 1).
#include "half_convert.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform Push { uint n; uint format; } p;

uint to16(uint f) { return p.format == 0u ? f32_to_f16(f) : f32_to_bf16(f); }

void main()
{
    uint i = gl_GlobalInvocationID.x, j = 2u * i;
    if (j >= p.n)
        return;
    uint lo = to16(x[j]), hi = j + 1u < p.n ? to16(x[j + 1u]) : 0u;
    y[i] = lo | (hi << 16);
}
