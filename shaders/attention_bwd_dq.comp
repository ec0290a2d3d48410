#version 450
// Causal attention backward, MEMORY_EFFICIENT, dq (src/ops/attention.h): one
// invocation per (b, t, h) row with keys in this pass, x = (t - row0) * H + h,
// y = b; recomputes P[t,s] = exp(S - lse) and dS = P (dout_t . v_s - Delta_t)
// for the keys of the pass (as attention_fwd.comp: s in [lo, min(hi, t+1)), or
// window offsets [lo, hi) clipped at 0) and adds scale * dS * k_s; the row's
// first pass with keys writes, later ones add. hi - lo <= TMM_MAX_LOOP; fixed
// order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Gb { float dout[]; };
layout(std430, binding = 4) readonly buffer Lb { float lse[]; };
layout(std430, binding = 5) readonly buffer Db { float delta[]; };
layout(std430, binding = 6) buffer DQb { float dq[]; };
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
    float qv[DH], gv[DH], acc[DH];
    [[unroll]] for (uint c = 0; c < DH; c++) {
        qv[c] = q[qrow + c] * p.scale;
        gv[c] = dout[qrow + c];
        acc[c] = 0.0;
    }
    const float L = lse[lrow], D = delta[lrow];
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
    const uint kbase = b * p.n * p.d + h * DH;
    for (uint s = sbeg; s < send; s++) {
        const uint row = kbase + s * p.d;
        float sc = 0.0, dp = 0.0;
        [[unroll]] for (uint c = 0; c < DH; c++) {
            sc = fma(qv[c], k[row + c], sc);
            dp = fma(gv[c], v[row + c], dp);
        }
        const float ds = exp(sc - L) * (dp - D);
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc[c] = fma(ds, k[row + c], acc[c]);
    }
    [[unroll]] for (uint c = 0; c < DH; c++)
        dq[qrow + c] = (cont ? dq[qrow + c] : 0.0) + p.scale * acc[c];
}
