#version 450
// Causal attention backward, MEMORY_EFFICIENT, dk and dv (src/ops/attention.h):
// one invocation per (b, s, h) key row with queries in this pass,
// x = (s - row0) * H + h, y = b; recomputes P[t,s] and dS[t,s] for the queries
// of the pass and adds dv += P dout_t, dk += scale dS q_t. Full: t in
// [max(lo, s), min(hi, n)), the pass that contains s writes, later ones add.
// Window W: the queries whose window holds s are t = s + j, j < W; the pass
// covers j in [lo, hi) (t < n), the first pass writes. hi - lo <=
// TMM_MAX_LOOP; fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Gb { float dout[]; };
layout(std430, binding = 4) readonly buffer Lb { float lse[]; };
layout(std430, binding = 5) readonly buffer Db { float delta[]; };
layout(std430, binding = 6) buffer DKb { float dk[]; };
layout(std430, binding = 7) buffer DVb { float dv[]; };
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
    const uint h = idx % p.H, s = p.row0 + idx / p.H, b = gl_GlobalInvocationID.y;
    const uint krow = (b * p.n + s) * p.d + h * DH;
    float kv[DH], vv[DH], ak[DH], av[DH];
    [[unroll]] for (uint c = 0; c < DH; c++) {
        kv[c] = k[krow + c] * p.scale;
        vv[c] = v[krow + c];
        ak[c] = 0.0;
        av[c] = 0.0;
    }
    const uint qbase = b * p.n * p.d + h * DH, lbase = (b * p.H + h) * p.n;
    // queries of this pass [tbeg, tend); add: earlier passes held queries of this row
    uint tbeg = max(p.lo, s), tend = min(p.hi, p.n);
    bool add = s < p.lo;
    if (p.window != 0u) {
        tbeg = s + p.lo;
        tend = min(s + p.hi, p.n);
        add = p.lo > 0u;
    }
    for (uint t = tbeg; t < tend; t++) {
        const uint row = qbase + t * p.d;
        float sc = 0.0, dp = 0.0;
        [[unroll]] for (uint c = 0; c < DH; c++) {
            sc = fma(q[row + c], kv[c], sc);
            dp = fma(dout[row + c], vv[c], dp);
        }
        const float pr = exp(sc - lse[lbase + t]);
        const float ds = pr * (dp - delta[lbase + t]);
        [[unroll]] for (uint c = 0; c < DH; c++) {
            av[c] = fma(pr, dout[row + c], av[c]);
            ak[c] = fma(ds, q[row + c], ak[c]);
        }
    }
    [[unroll]] for (uint c = 0; c < DH; c++) {
        dk[krow + c] = (add ? dk[krow + c] : 0.0) + p.scale * ak[c];
        dv[krow + c] = (add ? dv[krow + c] : 0.0) + av[c];
    }
}
