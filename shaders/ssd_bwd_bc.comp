#version 450
// SSD backward (src/ops/ssd.h), per head the vectors whose sums over the
// heads are dBt and dCt, less their s = t terms: for position t of chunk j
// (t0 = jQ, last = min(n, t0 + Q) - 1) and state column c, with K the
// decayed products off the diagonal (ssd_bwd_scores), G_{j+1} = dL/dSp_{j+1}
// (zero for the last chunk) and Sp_j the state before the chunk (zero for
// the first):
//   w'[b,h,t,c] = sum_{t < t' <= last} K[t',t] Ct_t'[c] + exp(cs_last - cs_t) (G_{j+1}ᵀ xs_t)[c]
//   z'[b,h,t,c] = sum_{t0 <= s < t} K[t,s] dt_s Bt_s[c] + exp(cs_t) (Sp_jᵀ dy_t)[c]
// (dS_tᵀ xs_t = w' + (dy_t·xs_t) Ct_t, S_tᵀ dy_t = z' + (dy_t·xs_t) dt_t Bt_t)
// w', z' [B, nh, n, N]. One invocation per block of BK rows t of a chunk by BK
// columns c: x = (j*RB + rb)*nNB + nb, y = h, z = b (nNB = ceil(N/BK)).
// Loops: 2 Q + 2 P + 2 BK iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u; // rows and columns per invocation
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer Gb { float dy[]; };
layout(std430, binding = 2) readonly buffer Kb { float kk[]; };
layout(std430, binding = 3) readonly buffer CSb { float cs[]; };
layout(std430, binding = 4) readonly buffer DTb { float dt[]; };
layout(std430, binding = 5) readonly buffer GNb { float gn[]; };
layout(std430, binding = 6) readonly buffer Sb { float sp[]; };
layout(std430, binding = 7) writeonly buffer Wb { float w[]; };
layout(std430, binding = 8) writeonly buffer Zb { float z[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint RB = (p.Q + BK - 1u) / BK, nNB = (p.N + BK - 1u) / BK;
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (idx >= p.NC * RB * nNB)
        return;
    const uint nb = idx % nNB, rb = (idx / nNB) % RB, j = idx / (nNB * RB), bh = b * p.nh + h;
    const uint t0 = j * p.Q, t1 = min(p.n, t0 + p.Q), r0 = t0 + rb * BK, c0 = nb * BK;
    if (r0 >= t1)
        return;
    const uint xb = p.base[0] + b * p.n * p.cx, gb = p.base[1] + b * p.n * p.ldy + h * p.P;
    const uint xcol = h * p.P, bcol = p.nh * p.P, ccol = bcol + p.N;
    const uint kb = p.base[2] + bh * p.n * p.Q - t0, csb = p.base[3] + 4u * bh * p.n;
    uint tr[BK], cc[BK]; // rows and columns, clamped for loading
    float acc[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        tr[i] = min(r0 + i, t1 - 1u);
        cc[i] = min(c0 + i, p.N - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            acc[i][k] = 0.0;
    }
    const uint rows = min(BK, t1 - r0), ob = (bh * p.n + r0) * p.N + c0;

    // w': K[t', t] is zero for t' <= t
    for (uint s = r0; s < t1; s++) {
        float kv[BK], cv[BK];
        [[unroll]] for (uint i = 0; i < BK; i++) {
            kv[i] = kk[kb + s * p.Q + tr[i]];
            cv[i] = xbc[xb + s * p.cx + ccol + cc[i]];
        }
        [[unroll]] for (uint i = 0; i < BK; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                acc[i][k] = fma(kv[i], cv[k], acc[i][k]);
    }
    if (j + 1u < p.NC) {
        const uint gnb = p.base[5] + (bh * p.NC + j) * p.P * p.N;
        const float lh = cs[csb + 4u * (t1 - 1u)], ll = cs[csb + 4u * (t1 - 1u) + 1u];
        float f[BK];
        [[unroll]] for (uint i = 0; i < BK; i++)
            f[i] = exp(min(0.0, (lh - cs[csb + 4u * tr[i]]) + (ll - cs[csb + 4u * tr[i] + 1u])));
        for (uint q = 0; q < p.P; q++) {
            float xv[BK], nv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                xv[i] = f[i] * xbc[xb + tr[i] * p.cx + xcol + q];
                nv[i] = gn[gnb + q * p.N + cc[i]];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    acc[i][k] = fma(xv[i], nv[k], acc[i][k]);
        }
    }
    float outv[BK][BK]; // a copy for the stores (indexed by a loop variable: keeps acc in registers)
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = acc[i][k];
    [[dont_unroll]] for (uint i = 0; i < rows; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (c0 + k < p.N)
                w[p.base[7] + ob + i * p.N + k] = outv[i][k];

    // z': K[t, s] is zero for s >= t
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            acc[i][k] = 0.0;
    const uint s1 = min(t1, r0 + BK);
    for (uint s = t0; s < s1; s++) {
        const float d = dt[p.base[4] + (b * p.n + s) * p.nh + h];
        float kv[BK], bv[BK];
        [[unroll]] for (uint i = 0; i < BK; i++) {
            kv[i] = d * kk[kb + tr[i] * p.Q + s];
            bv[i] = xbc[xb + s * p.cx + bcol + cc[i]];
        }
        [[unroll]] for (uint i = 0; i < BK; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                acc[i][k] = fma(kv[i], bv[k], acc[i][k]);
    }
    if (j > 0u) {
        const uint spb = p.base[6] + (bh * p.NC + j) * p.P * p.N;
        float e[BK];
        [[unroll]] for (uint i = 0; i < BK; i++)
            e[i] = cs[csb + 4u * tr[i] + 3u];
        for (uint q = 0; q < p.P; q++) {
            float gv[BK], sv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                gv[i] = e[i] * dy[gb + tr[i] * p.ldy + q];
                sv[i] = sp[spb + q * p.N + cc[i]];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    acc[i][k] = fma(gv[i], sv[k], acc[i][k]);
        }
    }
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = acc[i][k];
    [[dont_unroll]] for (uint i = 0; i < rows; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (c0 + k < p.N)
                z[p.base[8] + ob + i * p.N + k] = outv[i][k];
}
