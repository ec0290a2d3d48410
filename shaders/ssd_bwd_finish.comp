#version 450
// SSD backward (src/ops/ssd.h), per position t: the sums over the heads
// (increasing h) of the per-head vectors w = dS_tᵀ xs_t and z = S_tᵀ dy_t
// (ssd_bwd_bc), and per head the scalars that the scan of the decays' gradient
// needs:
//   dBt_t[c] = sum_h dt_{t,h} w[h,t,c],  dCt_t[c] = sum_h z[h,t,c]    (lanes k < N)
//   u = Bt_t·w[h,t], r = Ct_t·z[h,t] (= dy_t·(y_t - D xs_t)), g = dy_t·xs_t
//   red[b,h,t] = (u, r - dt_{t,h} u, g)                              (lanes k = h < nh)
// One invocation per (k, t, b): x = t*K + k, K = max(N, nh), y = b. Loops:
// nh + 2 N + P iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer Gb { float dy[]; };
layout(std430, binding = 2) readonly buffer DTb { float dt[]; };
layout(std430, binding = 3) readonly buffer Wb { float w[]; };
layout(std430, binding = 4) readonly buffer Zb { float z[]; };
layout(std430, binding = 5) writeonly buffer DXb { float dx[]; };
layout(std430, binding = 6) writeonly buffer Rb { float red[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint K = max(p.N, p.nh), idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.n * K)
        return;
    const uint k = idx % K, t = idx / K, row = b * p.n + t;
    const uint xr = p.base[0] + row * p.cx, bcol = p.nh * p.P, ccol = bcol + p.N;
    const uint dtr = p.base[2] + row * p.nh;
    if (k < p.N) {
        float db = 0.0, dc = 0.0;
        for (uint h = 0; h < p.nh; h++) {
            const uint at = ((b * p.nh + h) * p.n + t) * p.N + k;
            db = fma(dt[dtr + h], w[p.base[3] + at], db);
            dc += z[p.base[4] + at];
        }
        const uint dr = p.base[5] + row * p.cx;
        dx[dr + bcol + k] = db;
        dx[dr + ccol + k] = dc;
    }
    if (k < p.nh) {
        const uint h = k, at = ((b * p.nh + h) * p.n + t) * p.N;
        float u = 0.0, r = 0.0, g = 0.0;
        for (uint c = 0; c < p.N; c++)
            u = fma(xbc[xr + bcol + c], w[p.base[3] + at + c], u);
        for (uint c = 0; c < p.N; c++)
            r = fma(xbc[xr + ccol + c], z[p.base[4] + at + c], r);
        const uint gr = p.base[1] + row * p.ldy + h * p.P;
        for (uint q = 0; q < p.P; q++)
            g = fma(dy[gr + q], xbc[xr + h * p.P + q], g);
        const uint ro = p.base[6] + 3u * ((b * p.nh + h) * p.n + t);
        red[ro] = u;
        red[ro + 1u] = r - dt[dtr + h] * u;
        red[ro + 2u] = g;
    }
}
