#version 450
// Gate, SiLU, backward, s = sigmoid(z): da = dy * z s (when has_da),
// dz = dy * a * (s + z s (1 - s)) (when has_dz). One invocation per element,
// reading all its inputs before writing: da and dz may each alias one of
// a, z, dy.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) buffer Z { float z[]; };
layout(std430, binding = 2) buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DA { float da[]; };
layout(std430, binding = 4) buffer DZ { float dz[]; };
layout(push_constant) uniform Push { uint n, has_da, has_dz, base_a, base_z, base_dy, base_da, base_dz; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float g = dy[p.base_dy + i], av = a[p.base_a + i], zv = z[p.base_z + i];
    float s = 1.0 / (1.0 + exp(-zv));
    float zs = zv * s;
    if (p.has_da != 0u)
        da[p.base_da + i] = g * zs;
    if (p.has_dz != 0u)
        dz[p.base_dz + i] = g * av * fma(zs, 1.0 - s, s);
}
