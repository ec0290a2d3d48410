#version 450
// Causal attention forward, MEMORY_EFFICIENT (src/ops/attention.h): online
// softmax over the keys of one pass: s in [lo, min(hi, t+1)) (full), or with
// a window W the offsets [lo, hi) of the window t-W+1 .. t, i.e. s in
// [t+1-W+lo, t+1-W+hi) clipped at 0, so no key outside the window is read.
// One invocation per (b, t, h) row, x = (t - row0) * H + h, y = b. Between
// passes the state is kept normalized: o holds acc / l and lse holds
// m + log(l), so a later pass continues from m = lse, l = 1, acc = o.
// hi - lo <= TMM_MAX_LOOP (loop_limit.glsl): at most that many loop iterations
// per invocation (the channel loops are unrolled). Terms are added in
// increasing s: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) buffer Ob { float o[]; };
layout(std430, binding = 4) buffer Lb { float lse[]; };
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
    const uint qrow = (b * p.n + t) * p.d + h * DH;
    const uint lrow = (b * p.H + h) * p.n + t;
    float qv[DH], acc[DH];
    [[unroll]] for (uint c = 0; c < DH; c++)
        qv[c] = q[qrow + c] * p.scale;
    // keys of this pass [sbeg, send); cont: earlier passes held keys of this row
    uint sbeg = p.lo, send = min(p.hi, t + 1u);
    bool cont = p.lo > 0u;
    if (p.window != 0u) {
        const uint a = t + 1u;
        sbeg = a + p.lo > p.window ? a + p.lo - p.window : 0u;
        send = a + p.hi > p.window ? a + p.hi - p.window : 0u;
        cont = p.lo > 0u && a + p.lo > p.window;
    }
    if (sbeg >= send)
        return; // no keys in this pass (the host does not dispatch such rows)
    float m = -3.0e38, l = 0.0;
    if (cont) {
        m = lse[lrow];
        l = 1.0;
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc[c] = o[qrow + c];
    } else {
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc[c] = 0.0;
    }
    const uint kbase = b * p.n * p.d + h * DH;
    for (uint s = sbeg; s < send; s++) {
        const uint row = kbase + s * p.d;
        float sc = 0.0;
        [[unroll]] for (uint c = 0; c < DH; c++)
            sc = fma(qv[c], k[row + c], sc);
        if (sc > m) {
            const float corr = exp(m - sc);
            l *= corr;
            [[unroll]] for (uint c = 0; c < DH; c++)
                acc[c] *= corr;
            m = sc;
        }
        const float e = exp(sc - m);
        l += e;
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc[c] = fma(e, v[row + c], acc[c]);
    }
    const float inv = 1.0 / l;
    [[unroll]] for (uint c = 0; c < DH; c++)
        o[qrow + c] = acc[c] * inv;
    lse[lrow] = m + log(l);
}
