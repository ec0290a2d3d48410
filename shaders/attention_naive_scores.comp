#version 450
// Causal attention, NAIVE (src/ops/attention.h), checking implementation:
// S[b,h,t,s] = scale q_t . k_s for s <= t (and s > t - W with a window), 0
// elsewhere, written to P's place in saved ([B, H, n, n] at pbase). x = s,
// y = t, z = b * H + h.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) writeonly buffer Sb { float sv[]; };
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
    const uint s = gl_GlobalInvocationID.x, t = gl_GlobalInvocationID.y, bh = gl_GlobalInvocationID.z;
    if (s >= p.n)
        return;
    const uint b = bh / p.H, h = bh % p.H;
    float acc = 0.0;
    if (s <= t && (p.window == 0u || s + p.window > t)) {
        const uint qrow = (b * p.n + t) * p.d + h * DH, krow = (b * p.n + s) * p.d + h * DH;
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc = fma(q[qrow + c], k[krow + c], acc);
        acc *= p.scale;
    }
    sv[p.pbase + (bh * p.n + t) * p.n + s] = acc;
}
