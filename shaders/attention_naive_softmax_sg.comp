#version 450
// Causal attention, NAIVE, for GPUs: attention_naive_softmax with one
// workgroup per (b, h, t) row (x = t, y = b * H + h), its invocations striding
// over the keys s0 <= s <= t and the row's max and sum reduced by
// workgroup_reduce.glsl; the same results (the sum in another order). Each
// invocation loops at most 3 ceil((t+1) / workgroup size) times: the host
// limits n to TMM_ATTENTION_NAIVE_MAX_N.
#include "workgroup_reduce.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
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
    const uint t = gl_WorkGroupID.x, bh = gl_WorkGroupID.y, step = gl_WorkGroupSize.x;
    if (t >= p.n)
        return; // the whole workgroup: no barrier is left unmatched
    const uint row = p.pbase + (bh * p.n + t) * p.n;
    const uint s0 = p.window != 0u && t + 1u > p.window ? t + 1u - p.window : 0u;
    float m = uintBitsToFloat(0xff800000u); // -inf: an invocation without keys
    for (uint s = s0 + gl_LocalInvocationID.x; s <= t; s += step)
        m = max(m, sv[row + s]);
    m = workgroup_max(m);
    float l = 0.0;
    for (uint s = s0 + gl_LocalInvocationID.x; s <= t; s += step) {
        const float e = exp(sv[row + s] - m);
        sv[row + s] = e;
        l += e;
    }
    l = workgroup_sum(l);
    const float inv = 1.0 / l;
    for (uint s = gl_LocalInvocationID.x; s <= t; s += step)
        sv[row + s] = s < s0 ? 0.0 : sv[row + s] * inv;
    if (gl_LocalInvocationID.x == 0u)
        sv[bh * p.n + t] = m + log(l);
}
