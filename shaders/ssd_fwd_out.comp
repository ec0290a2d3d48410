#version 450
// SSD forward (src/ops/ssd.h), the outputs: for position t of chunk j
// (t0 = jQ) and channel q of head h,
//   y[b,t,hP+q] = sum_{t0 <= s <= t} M[t,s] xs_s[q] + exp(cs_t) (Sp_j Ct_t)[q] + D_h xs_t[q]
// (no state term for j = 0: Sp_0 = 0). One invocation per block of BK rows
// t of a chunk by BK channels q: x = (j*RB + rb)*nPB + pb, y = h, z = b
// (RB = ceil(Q/BK), nPB = ceil(P/BK)). Loops: Q + N + BK iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u; // rows and channels per invocation
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer Mb { float m[]; };
layout(std430, binding = 2) readonly buffer CSb { float cs[]; };
layout(std430, binding = 3) readonly buffer Sb { float sp[]; };
layout(std430, binding = 4) readonly buffer Db { float dpar[]; };
layout(std430, binding = 5) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint RB = (p.Q + BK - 1u) / BK, nPB = (p.P + BK - 1u) / BK;
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (idx >= p.NC * RB * nPB)
        return;
    const uint pb = idx % nPB, rb = (idx / nPB) % RB, j = idx / (nPB * RB), bh = b * p.nh + h;
    const uint t0 = j * p.Q, t1 = min(p.n, t0 + p.Q), r0 = t0 + rb * BK, q0 = pb * BK;
    if (r0 >= t1)
        return;
    const uint xb = p.base[0] + b * p.n * p.cx, xcol = h * p.P, ccol = p.nh * p.P + p.N;
    uint tr[BK], qq[BK]; // rows and channels, clamped for loading
    float acc[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        tr[i] = min(r0 + i, t1 - 1u);
        qq[i] = min(q0 + i, p.P - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            acc[i][k] = 0.0;
    }
    // inside the chunk: M is zero above the diagonal
    const uint mb = p.base[1] + bh * p.n * p.Q - t0, s1 = min(t1, r0 + BK);
    for (uint s = t0; s < s1; s++) {
        float mv[BK], xv[BK];
        [[unroll]] for (uint i = 0; i < BK; i++) {
            mv[i] = m[mb + tr[i] * p.Q + s];
            xv[i] = xbc[xb + s * p.cx + xcol + qq[i]];
        }
        [[unroll]] for (uint i = 0; i < BK; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                acc[i][k] = fma(mv[i], xv[k], acc[i][k]);
    }
    // the state before the chunk
    if (j > 0u) {
        const uint csb = p.base[2] + 4u * bh * p.n, sb = p.base[3] + (bh * p.NC + j) * p.P * p.N;
        float e[BK];
        [[unroll]] for (uint i = 0; i < BK; i++)
            e[i] = cs[csb + 4u * tr[i] + 3u];
        for (uint c = 0; c < p.N; c++) {
            float cv[BK], sv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                cv[i] = e[i] * xbc[xb + tr[i] * p.cx + ccol + c];
                sv[i] = sp[sb + qq[i] * p.N + c];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    acc[i][k] = fma(cv[i], sv[k], acc[i][k]);
        }
    }
    float outv[BK][BK]; // a copy for the stores (indexed by a loop variable: keeps acc in registers)
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = acc[i][k];
    const float dh = dpar[p.base[4] + h];
    const uint rows = min(BK, t1 - r0);
    [[dont_unroll]] for (uint i = 0; i < rows; i++) {
        const uint t = r0 + i, xr = xb + t * p.cx + xcol, yr = p.base[5] + (b * p.n + t) * p.ldy + h * p.P;
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (q0 + k < p.P)
                y[yr + q0 + k] = fma(dh, xbc[xr + q0 + k], outv[i][k]);
    }
}
