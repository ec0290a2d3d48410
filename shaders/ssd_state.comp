#version 450
// SSD decoding (src/ops/ssd.h), the state after a prompt: with L =
// min(len[b], n), l = L - 1 the last position, j = l / Q its chunk
// (t0 = jQ), Sp_j the state before the chunk (ssd_chunk_scan; zero for j = 0):
//   S[b,h] = exp(cs_l) Sp_j + sum_{t0 <= s <= l} exp(cs_l - cs_s) dt_s xs_s Bt_sᵀ
// and zero for L = 0. S [B, nh, P, N]. One invocation per block of BK rows
// p by BK columns c: x = pb*nNB + nb, y = h, z = b. Loops: Q + BK iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u; // rows and columns per invocation
layout(std430, binding = 0) readonly buffer Lb { uint len[]; };
layout(std430, binding = 1) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 2) readonly buffer DTb { float dt[]; };
layout(std430, binding = 3) readonly buffer CSb { float cs[]; };
layout(std430, binding = 4) readonly buffer SPb { float sp[]; };
layout(std430, binding = 5) writeonly buffer Sb { float S[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint nPB = (p.P + BK - 1u) / BK, nNB = (p.N + BK - 1u) / BK;
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (idx >= nPB * nNB)
        return;
    const uint nb = idx % nNB, pb = idx / nNB, bh = b * p.nh + h, p0 = pb * BK, c0 = nb * BK;
    const uint L = min(len[p.base[0] + b], p.n);
    uint pp[BK], cc[BK]; // rows and columns, clamped for loading
    float acc[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        pp[i] = min(p0 + i, p.P - 1u);
        cc[i] = min(c0 + i, p.N - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            acc[i][k] = 0.0;
    }
    if (L > 0u) {
        const uint l = L - 1u, j = l / p.Q, t0 = j * p.Q, csb = p.base[3] + 4u * bh * p.n;
        const float lh = cs[csb + 4u * l], ll = cs[csb + 4u * l + 1u];
        if (j > 0u) {
            const float e = exp(min(0.0, lh + ll));
            const uint sb = p.base[4] + (bh * p.NC + j) * p.P * p.N;
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    acc[i][k] = e * sp[sb + pp[i] * p.N + cc[k]];
        }
        const uint bcol = p.nh * p.P;
        for (uint s = t0; s <= l; s++) {
            const uint xr = p.base[1] + (b * p.n + s) * p.cx;
            const float wt = exp(min(0.0, (lh - cs[csb + 4u * s]) + (ll - cs[csb + 4u * s + 1u])))
                             * dt[p.base[2] + (b * p.n + s) * p.nh + h];
            float xv[BK], bv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                xv[i] = wt * xbc[xr + h * p.P + pp[i]];
                bv[i] = xbc[xr + bcol + cc[i]];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    acc[i][k] = fma(xv[i], bv[k], acc[i][k]);
        }
    }
    float outv[BK][BK]; // a copy for the stores (indexed by a loop variable: keeps acc in registers)
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = acc[i][k];
    const uint rows = min(BK, p.P - p0), ob = p.base[5] + (bh * p.P + p0) * p.N + c0;
    [[dont_unroll]] for (uint i = 0; i < rows; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (c0 + k < p.N)
                S[ob + i * p.N + k] = outv[i][k];
}
