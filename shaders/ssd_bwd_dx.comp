#version 450
// SSD backward (src/ops/ssd.h), dxs: for position t of chunk j (t0 = jQ,
// last = min(n, t0 + Q) - 1) and channel q of head h, with M the forward's
// masked quadratic form and G_{j+1} = dL/dSp_{j+1} (zero for the last chunk):
//   dxs[b,t,hP+q] = D_h dy_t[q] + sum_{t <= t' <= last} M[t',t] dy_t'[q]
//                   + dt_t exp(cs_last - cs_t) (G_{j+1} Bt_t)[q]
// (= D dy_t + dt_t dS_t Bt_t; dt_t exp(cs_last - cs_t) from ssd_cumsum). One invocation per block of BK rows t of a
// chunk by BK channels q: x = (j*RB + rb)*nPB + pb, y = h, z = b. Loops:
// Q + N + BK iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u; // rows and channels per invocation
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer Gb { float dy[]; };
layout(std430, binding = 2) readonly buffer Mb { float m[]; };
layout(std430, binding = 3) readonly buffer CSb { float cs[]; };
layout(std430, binding = 4) readonly buffer GNb { float gn[]; };
layout(std430, binding = 5) readonly buffer Db { float dpar[]; };
layout(std430, binding = 6) writeonly buffer DXb { float dx[]; };
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
    const uint xb = p.base[0] + b * p.n * p.cx, gb = p.base[1] + b * p.n * p.ldy + h * p.P;
    uint tr[BK], qq[BK]; // rows and channels, clamped for loading
    float acc[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        tr[i] = min(r0 + i, t1 - 1u);
        qq[i] = min(q0 + i, p.P - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            acc[i][k] = 0.0;
    }
    // inside the chunk: M[t', t] is zero for t' < t
    const uint mb = p.base[2] + bh * p.n * p.Q - t0;
    for (uint s = r0; s < t1; s++) {
        float mv[BK], gv[BK];
        [[unroll]] for (uint i = 0; i < BK; i++) {
            mv[i] = m[mb + s * p.Q + tr[i]];
            gv[i] = dy[gb + s * p.ldy + qq[i]];
        }
        [[unroll]] for (uint i = 0; i < BK; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                acc[i][k] = fma(mv[i], gv[k], acc[i][k]);
    }
    // the gradient of the state after the chunk
    if (j + 1u < p.NC) {
        const uint csb = p.base[3] + 4u * bh * p.n, nb = p.base[4] + (bh * p.NC + j) * p.P * p.N;
        const uint bcol = p.nh * p.P;
        float f[BK];
        [[unroll]] for (uint i = 0; i < BK; i++)
            f[i] = cs[csb + 4u * tr[i] + 2u];
        for (uint c = 0; c < p.N; c++) {
            float bv[BK], nv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                bv[i] = f[i] * xbc[xb + tr[i] * p.cx + bcol + c];
                nv[i] = gn[nb + qq[i] * p.N + c];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    acc[i][k] = fma(bv[i], nv[k], acc[i][k]);
        }
    }
    float outv[BK][BK]; // a copy for the stores (indexed by a loop variable: keeps acc in registers)
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = acc[i][k];
    const float dh = dpar[p.base[5] + h];
    const uint rows = min(BK, t1 - r0);
    [[dont_unroll]] for (uint i = 0; i < rows; i++) {
        const uint t = r0 + i, gr = gb + t * p.ldy, xr = p.base[6] + (b * p.n + t) * p.cx + h * p.P;
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (q0 + k < p.P)
                dx[xr + q0 + k] = fma(dh, dy[gr + q0 + k], outv[i][k]);
    }
}
