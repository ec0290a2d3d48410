#version 450
// Causal attention backward, NAIVE: dk_s = scale sum_{t>=s} dS[t,s] q_t and
// dv_s = sum_{t>=s} P[t,s] dout_t. One invocation per (b, s, h): x = s * H + h,
// y = b.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Pb { float pm[]; };
layout(std430, binding = 1) readonly buffer DSb { float ds[]; };
layout(std430, binding = 2) readonly buffer Qb { float q[]; };
layout(std430, binding = 3) readonly buffer Gb { float dout[]; };
layout(std430, binding = 4) writeonly buffer DKb { float dk[]; };
layout(std430, binding = 5) writeonly buffer DVb { float dv[]; };
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
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.n * p.H)
        return;
    const uint h = idx % p.H, s = idx / p.H, b = gl_GlobalInvocationID.y;
    const uint mbase = (b * p.H + h) * p.n * p.n + s;
    const uint base = b * p.n * p.d + h * DH;
    float ak[DH], av[DH];
    [[unroll]] for (uint c = 0; c < DH; c++) {
        ak[c] = 0.0;
        av[c] = 0.0;
    }
    for (uint t = s; t < p.n; t++) {
        const float w = ds[mbase + t * p.n], pr = pm[p.pbase + mbase + t * p.n];
        [[unroll]] for (uint c = 0; c < DH; c++) {
            ak[c] = fma(w, q[base + t * p.d + c], ak[c]);
            av[c] = fma(pr, dout[base + t * p.d + c], av[c]);
        }
    }
    [[unroll]] for (uint c = 0; c < DH; c++) {
        dk[base + s * p.d + c] = p.scale * ak[c];
        dv[base + s * p.d + c] = av[c];
    }
}
