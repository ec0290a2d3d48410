#version 450
// Causal attention backward, NAIVE: dS[b,h,t,s] = P[t,s] (dout_t . v_s -
// dout_t . o_t) for s <= t (and s > t - W with a window), 0 elsewhere, into
// scratch [B, H, n, n].
// x = s, y = t, z = b * H + h.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Pb { float pm[]; };
layout(std430, binding = 1) readonly buffer Vb { float v[]; };
layout(std430, binding = 2) readonly buffer Ob { float o[]; };
layout(std430, binding = 3) readonly buffer Gb { float dout[]; };
layout(std430, binding = 4) writeonly buffer DSb { float ds[]; };
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
    const uint e = (bh * p.n + t) * p.n + s;
    float r = 0.0;
    if (s <= t && (p.window == 0u || s + p.window > t)) {
        const uint trow = (b * p.n + t) * p.d + h * DH, srow = (b * p.n + s) * p.d + h * DH;
        float dp = 0.0, dl = 0.0;
        [[unroll]] for (uint c = 0; c < DH; c++) {
            dp = fma(dout[trow + c], v[srow + c], dp);
            dl = fma(dout[trow + c], o[trow + c], dl);
        }
        r = pm[p.pbase + e] * (dp - dl);
    }
    ds[e] = r;
}
