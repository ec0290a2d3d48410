#version 450
// Causal depthwise conv1d, backward through the SiLU: one invocation per
// (row gr = row0 + lr at position t = gr mod n, column c), with pre
// recomputed as conv1d_fwd.comp does:
//   g[gr, c] = dy[gr, c] silu'(pre),  silu'(a) = s + a s (1 - s), s = sigmoid(a).
// The dx and parameter kernels then read g once per tap instead of
// recomputing pre per tap. x is bound from global row x_row0 (up to K-1 rows
// before row0). K <= 8: at most 8 iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) writeonly buffer G { float g[]; };
layout(push_constant) uniform Push { uint rows, C, n, K, row0, x_row0, base_x, base_dy, base_g; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.C)
        return;
    uint lr = i / p.C, c = i - lr * p.C;
    uint gr = p.row0 + lr, t = gr % p.n;
    float pre = bias[c];
    for (uint j = 0u; j < p.K; j++) {
        uint back = p.K - 1u - j;
        if (back <= t)
            pre += w[c * p.K + j] * x[p.base_x + (gr - back - p.x_row0) * p.C + c];
    }
    float s = 1.0 / (1.0 + exp(-pre));
    g[p.base_g + i] = dy[p.base_dy + i] * fma(pre * s, 1.0 - s, s);
}
