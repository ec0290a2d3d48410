#version 450
// The autoencoder's unroll (src/ops/autoenc_ops.h): the vector h_b of each
// sequence (row src_row of its n_src rows of h [B * n_src, d]) becomes n rows
// of d/2: u[b, i, j] = h_b[(i + j) mod d]. One invocation per element of u.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer H { float h[]; };
layout(std430, binding = 1) writeonly buffer U { float u[]; };
layout(push_constant) uniform Push { uint total, n, d, n_src, src_row; } p;

void main()
{
    uint idx = gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (idx >= p.total)
        return;
    uint half_d = p.d / 2u;
    uint j = idx % half_d;
    uint row = idx / half_d;
    uint i = row % p.n;
    uint b = row / p.n;
    uint c = (i % p.d + j) % p.d;
    u[idx] = h[(b * p.n_src + p.src_row) * p.d + c];
}
