#version 450
// SSD (src/ops/ssd.h), each chunk's own contribution to the state passed on
// (chunk j: positions t0 = jQ <= s < t1 = min(n, t0 + Q), last = t1 - 1):
//   MODE 0 (forward):  out[b,h,j] = sum_s exp(cs_last - cs_s) dt_s xs_s Bt_sᵀ   (P x N)
//   MODE 1 (backward): out[b,h,j] = sum_s exp(cs_s) dy_s Ct_sᵀ                  (P x N)
// (the weights from ssd_cumsum). out [B, nh, NC, P, N]. One invocation per block of BK rows p by BK columns
// c of one chunk: x = (j*nPB + pb)*nNB + nb, y = h, z = b (nPB = ceil(P/BK),
// nNB = ceil(N/BK)). Loops: Q + BK iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u;   // rows and columns per invocation
layout(constant_id = 4) const uint MODE = 0u; // 0: forward, 1: backward
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer Gb { float dy[]; }; // MODE 1 only
layout(std430, binding = 2) readonly buffer CSb { float cs[]; };
layout(std430, binding = 3) writeonly buffer Ob { float o[]; };
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
    if (idx >= p.NC * nPB * nNB)
        return;
    const uint nb = idx % nNB, pb = (idx / nNB) % nPB, j = idx / (nNB * nPB), bh = b * p.nh + h;
    const uint t0 = j * p.Q, t1 = min(p.n, t0 + p.Q), p0 = pb * BK, c0 = nb * BK;
    const uint csb = p.base[2] + 4u * bh * p.n;
    const uint col = MODE == 0u ? p.nh * p.P : p.nh * p.P + p.N; // Bt or Ct
    uint pp[BK], cc[BK]; // rows and columns, clamped for loading
    float acc[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        pp[i] = min(p0 + i, p.P - 1u);
        cc[i] = min(c0 + i, p.N - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            acc[i][k] = 0.0;
    }
    for (uint s = t0; s < t1; s++) {
        const uint xr = p.base[0] + (b * p.n + s) * p.cx;
        float xv[BK], yv[BK];
        if (MODE == 0u) {
            const float w = cs[csb + 4u * s + 2u];
            [[unroll]] for (uint i = 0; i < BK; i++)
                xv[i] = w * xbc[xr + h * p.P + pp[i]];
        } else {
            const float w = cs[csb + 4u * s + 3u];
            const uint gr = p.base[1] + (b * p.n + s) * p.ldy + h * p.P;
            [[unroll]] for (uint i = 0; i < BK; i++)
                xv[i] = w * dy[gr + pp[i]];
        }
        [[unroll]] for (uint k = 0; k < BK; k++)
            yv[k] = xbc[xr + col + cc[k]];
        [[unroll]] for (uint i = 0; i < BK; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                acc[i][k] = fma(xv[i], yv[k], acc[i][k]);
    }
    float outv[BK][BK]; // a copy for the stores (indexed by a loop variable: keeps acc in registers)
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = acc[i][k];
    const uint rows = min(BK, p.P - p0), ob = p.base[3] + ((bh * p.NC + j) * p.P + p0) * p.N + c0;
    [[dont_unroll]] for (uint i = 0; i < rows; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (c0 + k < p.N)
                o[ob + i * p.N + k] = outv[i][k];
}
