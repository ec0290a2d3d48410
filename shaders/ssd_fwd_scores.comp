#version 450
// SSD forward (src/ops/ssd.h), the masked quadratic form inside each chunk
// for every head:
//   M[b,h,t,i] = exp(cs_t - cs_s) dt_{s,h} (Ct_t·Bt_s)  for s = t0 + i <= t, 0 for s > t
// (t0 = jQ the first position of t's chunk j; cs_t - cs_s = (hi_t - hi_s) +
// (lo_t - lo_s), clamped at 0 above). One invocation per block of BK rows
// t by BK columns i of one chunk of one sequence: x = (j*RB + rb)*RB + sb,
// y = b, RB = ceil(Q / BK); the Ct·Bt dots are computed once for all heads.
// Blocks wholly above the diagonal write zeros. Loops: N + nh (BK + 1)
// iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u; // rows and columns per invocation
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer DTb { float dt[]; };
layout(std430, binding = 2) readonly buffer CSb { float cs[]; };
layout(std430, binding = 3) writeonly buffer Mb { float m[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint RB = (p.Q + BK - 1u) / BK, idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.NC * RB * RB)
        return;
    const uint sb = idx % RB, rb = (idx / RB) % RB, j = idx / (RB * RB);
    const uint t0 = j * p.Q, t1 = min(p.n, t0 + p.Q), r0 = t0 + rb * BK, s0 = t0 + sb * BK;
    if (r0 >= t1)
        return;
    const uint xb = p.base[0] + b * p.n * p.cx, bcol = p.nh * p.P, ccol = bcol + p.N;
    uint tr[BK], sc[BK]; // rows and columns, clamped to the chunk for loading
    float g[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        tr[i] = min(r0 + i, t1 - 1u);
        sc[i] = min(s0 + i, t1 - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            g[i][k] = 0.0;
    }
    const bool live = s0 < t1 && s0 <= r0 + BK - 1u; // some s <= t
    if (live)
        for (uint c = 0; c < p.N; c++) {
            float cv[BK], bv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                cv[i] = xbc[xb + tr[i] * p.cx + ccol + c];
                bv[i] = xbc[xb + sc[i] * p.cx + bcol + c];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    g[i][k] = fma(cv[i], bv[k], g[i][k]);
        }
    const uint rows = min(BK, t1 - r0), i0 = sb * BK;
    for (uint h = 0; h < p.nh; h++) {
        const uint bh = b * p.nh + h, csb = p.base[2] + 4u * bh * p.n;
        float mv[BK][BK];
        if (live) {
            float rh[BK], rl[BK], ch[BK], cl[BK], d[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                rh[i] = cs[csb + 4u * tr[i]];
                rl[i] = cs[csb + 4u * tr[i] + 1u];
                ch[i] = cs[csb + 4u * sc[i]];
                cl[i] = cs[csb + 4u * sc[i] + 1u];
                d[i] = dt[p.base[1] + (b * p.n + sc[i]) * p.nh + h];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    mv[i][k] = s0 + k <= r0 + i
                                   ? exp(min(0.0, (rh[i] - ch[k]) + (rl[i] - cl[k]))) * d[k] * g[i][k] : 0.0;
        } else {
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    mv[i][k] = 0.0;
        }
        const uint mrow = p.base[3] + (bh * p.n + r0) * p.Q + i0;
        [[dont_unroll]] for (uint i = 0; i < rows; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                if (i0 + k < p.Q)
                    m[mrow + i * p.Q + k] = mv[i][k];
    }
}
