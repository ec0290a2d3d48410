#version 450
// Causal depthwise conv1d, backward, input gradient. One invocation per
// (row gr = row0 + lr at position t = gr mod n, column c):
//   dx[gr, c] = sum_{j<K, t+K-1-j < n} w[c*K + j] g[gr + K-1-j, c],
// g = dy, or dy silu'(pre) from conv1d_bwd_act.comp. g is bound from row0
// and reaches K-1 rows past the last row. K <= 8: at most 8 iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer W { float w[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) writeonly buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint rows, C, n, K, row0, base_g, base_dx; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.C)
        return;
    uint lr = i / p.C, c = i - lr * p.C;
    uint t = (p.row0 + lr) % p.n;
    float acc = 0.0;
    for (uint j = 0u; j < p.K; j++) {
        uint ahead = p.K - 1u - j;
        if (t + ahead < p.n)
            acc += w[c * p.K + j] * g[p.base_g + (lr + ahead) * p.C + c];
    }
    dx[p.base_dx + i] = acc;
}
