#version 450
// SSD backward (src/ops/ssd.h), the decays' gradient, a reverse scan inside
// each chunk j (t0 = jQ, last = min(n, t0 + Q) - 1): with red[b,h,t] =
// (u_t, q_t, g_t) (ssd_bwd_finish), rd the rows of <G_{j+1}, Sp_{j+1}>
// (ssd_bwd_sdot) and A = -exp(A_log_h),
//   da_t = sum_q rd[b,h,j,q] + sum_{t <= r <= last} q_r    (= dL/da_t)
//   ddt[b,t,h] = u_t + A da_t
//   part[b,h,j] = (sum_t dt_t da_t, sum_t g_t)              (the parameters' partial sums)
// One invocation per (j, h, b): x = j, y = h, z = b. Loops: P + Q iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer ALb { float alog[]; };
layout(std430, binding = 1) readonly buffer DTb { float dt[]; };
layout(std430, binding = 2) readonly buffer Rb { float red[]; };
layout(std430, binding = 3) readonly buffer RDb { float rd[]; };
layout(std430, binding = 4) writeonly buffer PTb { float part[]; };
layout(std430, binding = 5) writeonly buffer DDb { float ddt[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (j >= p.NC)
        return;
    const float A = -exp(alog[p.base[0] + h]);
    const uint bh = b * p.nh + h, rb = p.base[2] + 3u * bh * p.n, t0 = j * p.Q, t1 = min(p.n, t0 + p.Q);
    const uint db = p.base[3] + (bh * p.NC + j) * p.P;
    float da = 0.0, sa = 0.0, sd = 0.0;
    for (uint q = 0; q < p.P; q++)
        da += rd[db + q];
    for (uint t = t1; t > t0;) {
        t--;
        const uint row = b * p.n + t;
        da += red[rb + 3u * t + 1u];
        ddt[p.base[5] + row * p.nh + h] = fma(A, da, red[rb + 3u * t]);
        sa = fma(dt[p.base[1] + row * p.nh + h], da, sa);
        sd += red[rb + 3u * t + 2u];
    }
    const uint pt = p.base[4] + 2u * (bh * p.NC + j);
    part[pt] = sa;
    part[pt + 1u] = sd;
}
