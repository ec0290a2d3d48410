#version 450
// Decoding: y[b, c] = beta[g, pos[b]] + sum over chunks j, in order, of
// part[j, b, c] (toeplitz_step.comp), times gate[b, c] when gated.
// nchunks <= TMM_MAX_LOOP (the host checks).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer Part { float part[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) readonly buffer Gate { float gate[]; };
layout(push_constant) uniform Push { uint batch, n, d, group_channels, nchunks, base_y, gated, base_gate; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.batch * p.d)
        return;
    uint b = i / p.d, c = i % p.d;
    uint t = pos[b];
    float acc = beta[(c / p.group_channels) * p.n + t];
    for (uint j = 0u; j < p.nchunks; j++)
        acc += part[j * p.batch * p.d + i];
    y[p.base_y + i] = p.gated != 0u ? acc * gate[p.base_gate + i] : acc;
}
