#version 450
// Causal depthwise conv1d, one decoding step. One invocation per (sequence
// b, column c); x[b, c] is the input at position P = pos[b]; win[b, j, c]
// (j < K-1) the input at position P - (K-1) + j, read as 0 when that is
// negative. y = bias + sum_{j<K-1} w[c,j] win[b,j,c] + w[c,K-1] x[b,c]
// (terms in conv1d_fwd.comp's order, silu with act), then the window shifts
// by one (negative positions written as 0). y may alias x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 4) buffer Win { float win[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint batch, C, K, act, base_x, base_pos, base_win, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.batch * p.C)
        return;
    uint b = i / p.C, c = i - b * p.C;
    uint P = pos[p.base_pos + b], nw = p.K - 1u;
    uint at = p.base_win + b * nw * p.C + c;
    float v[8];
    for (uint j = 0u; j < nw; j++)
        v[j] = j + P >= nw ? win[at + j * p.C] : 0.0;
    v[nw] = x[p.base_x + i];
    float acc = bias[c];
    for (uint j = 0u; j < nw; j++)
        if (j + P >= nw)
            acc += w[c * p.K + j] * v[j];
    acc += w[c * p.K + nw] * v[nw];
    for (uint j = 0u; j < nw; j++)
        win[at + j * p.C] = v[j + 1u];
    y[p.base_y + i] = p.act != 0u ? acc / (1.0 + exp(-acc)) : acc;
}
