#version 450
// Causal attention backward, NAIVE: dq_t = scale sum_{s<=t} dS[t,s] k_s. One
// invocation per (b, t, h): x = t * H + h, y = b.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer DSb { float ds[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) writeonly buffer DQb { float dq[]; };
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
    const uint h = idx % p.H, t = idx / p.H, b = gl_GlobalInvocationID.y;
    const uint drow = ((b * p.H + h) * p.n + t) * p.n;
    const uint kbase = b * p.n * p.d + h * DH;
    float acc[DH];
    [[unroll]] for (uint c = 0; c < DH; c++)
        acc[c] = 0.0;
    for (uint s = 0u; s <= t; s++) {
        const float w = ds[drow + s];
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc[c] = fma(w, k[kbase + s * p.d + c], acc[c]);
    }
    [[unroll]] for (uint c = 0; c < DH; c++)
        dq[(b * p.n + t) * p.d + h * DH + c] = p.scale * acc[c];
}
