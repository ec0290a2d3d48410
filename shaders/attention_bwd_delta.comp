#version 450
// Causal attention backward (src/ops/attention.h): Delta[b,h,t] = sum_c dout * o
// over the head's channels; one invocation per (b, t, h), x = t * H + h, y = b.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Ob { float o[]; };
layout(std430, binding = 1) readonly buffer Gb { float dout[]; };
layout(std430, binding = 2) writeonly buffer Db { float delta[]; };
layout(push_constant) uniform Push {
    uint n, d, H;         // length, channels, heads
    uint lo, hi;          // this pass: positions [lo, hi), or with a window offsets [lo, hi) into it
    uint row0, nrows;     // rows (positions) this dispatch computes
    uint window;          // W (1 <= W < n): keys t-W < s <= t; 0: full causal attention
    uint pbase;           // element offset of P in the saved binding (naive)
    float scale;          // 1/sqrt(dh)
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.nrows * p.H)
        return;
    const uint h = idx % p.H, t = p.row0 + idx / p.H, b = gl_GlobalInvocationID.y;
    const uint row = (b * p.n + t) * p.d + h * DH;
    float acc = 0.0;
    [[unroll]] for (uint c = 0; c < DH; c++)
        acc = fma(dout[row + c], o[row + c], acc);
    delta[(b * p.H + h) * p.n + t] = acc;
}
