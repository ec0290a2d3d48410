#version 450
// Causal depthwise conv1d, forward. Rows are positions of sequences of n
// (global row gr is position t = gr mod n); one invocation per (row, c):
//   pre = bias[c] + sum_{j<K, K-1-j <= t} w[c*K + j] x[gr - (K-1-j), c]
//   y = pre, or silu(pre) with act.
// This dispatch computes rows row0 .. row0+rows-1; x is bound from global
// row x_row0 (up to K-1 rows before row0). K <= 8: at most 8 iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint rows, C, n, K, act, row0, x_row0, base_x, base_y; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.C)
        return;
    uint lr = i / p.C, c = i - lr * p.C;
    uint gr = p.row0 + lr, t = gr % p.n;
    float acc = bias[c];
    for (uint j = 0u; j < p.K; j++) {
        uint back = p.K - 1u - j;
        if (back <= t)
            acc += w[c * p.K + j] * x[p.base_x + (gr - back - p.x_row0) * p.C + c];
    }
    y[p.base_y + i] = p.act != 0u ? acc / (1.0 + exp(-acc)) : acc;
}
