#version 450
// Causal attention, NAIVE: row softmax of the scores in place over the keys
// s0 <= s <= t (s0 = 0, or t+1-W clipped at 0 with a window; P = 0 for s < s0),
// and lse. One invocation per (b, h, t): x = t, y = b * H + h. At most 3 (t+1)
// loop iterations: the host limits n to TMM_ATTENTION_NAIVE_MAX_N.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) buffer Sb { float sv[]; };
layout(push_constant) uniform Push {
    uint n, d, H;         // length, channels, heads
    uint lo, hi;          // unused by the naive kernels
    uint row0, nrows;     // unused by the naive kernels
    uint window;          // W (1 <= W < n): keys t-W < s <= t; 0: full causal attention
    uint pbase;           // element offset of P in the saved binding
    float scale;          // 1/sqrt(dh)
} p;

void main()
{
    const uint t = gl_GlobalInvocationID.x, bh = gl_GlobalInvocationID.y;
    if (t >= p.n)
        return;
    const uint row = p.pbase + (bh * p.n + t) * p.n;
    const uint s0 = p.window != 0u && t + 1u > p.window ? t + 1u - p.window : 0u;
    float m = sv[row + s0];
    for (uint s = s0 + 1u; s <= t; s++)
        m = max(m, sv[row + s]);
    float l = 0.0;
    for (uint s = s0; s <= t; s++) {
        const float e = exp(sv[row + s] - m);
        sv[row + s] = e;
        l += e;
    }
    const float inv = 1.0 / l;
    for (uint s = 0u; s <= t; s++)
        sv[row + s] = s < s0 ? 0.0 : sv[row + s] * inv;
    sv[bh * p.n + t] = m + log(l);
}
