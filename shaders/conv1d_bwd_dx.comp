#version 450
// Causal depthwise conv1d, backward, input gradient. One invocation per
// (row gr = row0 + lr at position t = gr mod n, column c):
//   dx[gr, c] = sum_{j<K, t+K-1-j < n} w[c*K + j] g[gr + K-1-j, c],
// g = dy, or with act dy * silu'(pre) with pre recomputed from x as
// conv1d_fwd.comp does (silu'(a) = s + a s (1 - s), s = sigmoid(a)).
// x is bound from global row x_row0 (K-1 rows before row0 where there are),
// dy from row0; both reach K-1 rows past the last row. At most K (K + 1) <= 72
// loop iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) writeonly buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint rows, C, n, K, act, row0, x_row0, base_x, base_dy, base_dx; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.C)
        return;
    uint lr = i / p.C, c = i - lr * p.C;
    uint gr = p.row0 + lr, t = gr % p.n;
    float acc = 0.0;
    for (uint j = 0u; j < p.K; j++) {
        uint ahead = p.K - 1u - j;
        if (t + ahead >= p.n)
            continue;
        uint r2 = gr + ahead, t2 = t + ahead;
        float g = dy[p.base_dy + (r2 - p.row0) * p.C + c];
        if (p.act != 0u) {
            float pre = bias[c];
            for (uint q = 0u; q < p.K; q++) {
                uint back = p.K - 1u - q;
                if (back <= t2)
                    pre += w[c * p.K + q] * x[p.base_x + (r2 - back - p.x_row0) * p.C + c];
            }
            float s = 1.0 / (1.0 + exp(-pre));
            g *= fma(pre * s, 1.0 - s, s);
        }
        acc += w[c * p.K + j] * g;
    }
    dx[p.base_dx + i] = acc;
}
