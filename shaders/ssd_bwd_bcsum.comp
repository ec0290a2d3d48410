#version 450
// SSD backward (src/ops/ssd.h), dBt and dCt: per position t and state column
// c, the sums over the heads (increasing h) of dt_{t,h} w_t and z_t, put
// together from the off-diagonal vectors w', z' (ssd_bwd_bc) and their
// s = t terms (g = dy_t·xs_t from ssd_bwd_rows):
//   dBt_t[c] = sum_h dt_{t,h} (w'[h,t,c] + g_{t,h} Ct_t[c])
//   dCt_t[c] = sum_h (z'[h,t,c] + g_{t,h} dt_{t,h} Bt_t[c])
// written into dxbc's Bt and Ct columns. One invocation per (c, t, b):
// x = t*N + c, y = b. Loops: nh iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer DTb { float dt[]; };
layout(std430, binding = 2) readonly buffer Wb { float w[]; };
layout(std430, binding = 3) readonly buffer Zb { float z[]; };
layout(std430, binding = 4) readonly buffer Rb { float red[]; };
layout(std430, binding = 5) writeonly buffer DXb { float dx[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.n * p.N)
        return;
    const uint c = idx % p.N, t = idx / p.N, row = b * p.n + t;
    const uint bcol = p.nh * p.P + c, ccol = bcol + p.N, xr = p.base[0] + row * p.cx;
    const float bt = xbc[xr + bcol], ct = xbc[xr + ccol];
    float db = 0.0, dc = 0.0;
    for (uint h = 0; h < p.nh; h++) {
        const uint bh = b * p.nh + h, at = (bh * p.n + t) * p.N + c;
        const float d = dt[p.base[1] + row * p.nh + h], g = red[p.base[4] + 3u * (bh * p.n + t) + 2u];
        db = fma(d, fma(g, ct, w[p.base[2] + at]), db);
        dc += fma(g * d, bt, z[p.base[3] + at]);
    }
    const uint dr = p.base[5] + row * p.cx;
    dx[dr + bcol] = db;
    dx[dr + ccol] = dc;
}
