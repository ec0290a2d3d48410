#version 450
// Causal depthwise conv1d, decoding window from a prompt x [batch, n, C]:
// win[b, j, c] = x[b, L - (K-1) + j, c] with L = len[b], 0 where that
// position is negative or >= n. One invocation per (b, j, c), no loop.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Len { uint len[]; };
layout(std430, binding = 2) writeonly buffer Win { float win[]; };
layout(push_constant) uniform Push { uint batch, n, C, K, base_x, base_len, base_win; } p;

void main()
{
    uint nw = p.K - 1u;
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.batch * nw * p.C)
        return;
    uint b = i / (nw * p.C), rem = i - b * nw * p.C;
    uint j = rem / p.C, c = rem - j * p.C;
    uint q = min(len[p.base_len + b], p.n + nw) + j;   // the position plus K-1 (no wrap-around)
    bool in_range = q >= nw && q - nw < p.n;
    win[p.base_win + i] = in_range ? x[p.base_x + (b * p.n + q - nw) * p.C + c] : 0.0;
}
