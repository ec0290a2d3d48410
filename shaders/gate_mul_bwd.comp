#version 450
// Gate, product, backward: da = dy * b (when has_da), db = dy * a (when
// has_db). One invocation per element, reading all its inputs before
// writing: da and db may each alias one of a, b, dy.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) buffer B { float b[]; };
layout(std430, binding = 2) buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DA { float da[]; };
layout(std430, binding = 4) buffer DB { float db[]; };
layout(push_constant) uniform Push { uint n, has_da, has_db, base_a, base_b, base_dy, base_da, base_db; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float g = dy[p.base_dy + i], av = a[p.base_a + i], bv = b[p.base_b + i];
    if (p.has_da != 0u)
        da[p.base_da + i] = g * bv;
    if (p.has_db != 0u)
        db[p.base_db + i] = g * av;
}
