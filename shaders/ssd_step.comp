#version 450
// SSD decoding (src/ops/ssd.h), one step: for row b, head h and channel q,
// with A = -exp(A_log_h), d = dt[b,h] and x = xs[b, hP+q]:
//   S[b,h,q,c] <- exp(d A) S[b,h,q,c] + d x Bt_b[c]   (in place)
//   y[b, hP+q] = sum_c S[b,h,q,c] Ct_b[c] + D_h x
// One invocation per (q, h, b): x = q, y = h, z = b. Loops: N iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer DTb { float dt[]; };
layout(std430, binding = 2) readonly buffer ALb { float alog[]; };
layout(std430, binding = 3) readonly buffer Db { float dpar[]; };
layout(std430, binding = 4) buffer Sb { float S[]; };
layout(std430, binding = 5) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint q = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (q >= p.P)
        return;
    const float d = dt[p.base[1] + b * p.nh + h], decay = exp(min(0.0, d * -exp(alog[p.base[2] + h])));
    const uint xr = p.base[0] + b * p.cx, bcol = xr + p.nh * p.P, ccol = bcol + p.N;
    const float x = xbc[xr + h * p.P + q], dx = d * x;
    const uint sb = p.base[4] + ((b * p.nh + h) * p.P + q) * p.N;
    float acc = 0.0;
    for (uint c = 0; c < p.N; c++) {
        const float s = fma(decay, S[sb + c], dx * xbc[bcol + c]);
        S[sb + c] = s;
        acc = fma(s, xbc[ccol + c], acc);
    }
    y[p.base[5] + b * p.ldy + h * p.P + q] = fma(dpar[p.base[3] + h], x, acc);
}
