#version 450
// RMSNorm backward in one dispatch, for rows of d <= 1024 (one chunk): a
// workgroup of `seg` invocations (seg = TMM_NN_COL_SEG) takes segment s of
// `seg` rows, which it reads once. With xhat = x * rstd:
//   1. invocation t sums columns t, t + seg, ... over the segment's rows in
//      order: dy * xhat, to og[c] with direct (one segment in all; added with
//      accumulate), else to og[(seg0 + s) d + c] for tmm_op_sum_cols;
//   2. after a barrier (dx may alias dy, which step 1 reads), invocation t
//      takes row t of the segment: its sum of dy * g * xhat in column order,
//      then dx = rstd * (dy * g - xhat * sum / d), or with add_dx dx += that
//      (a residual's gradient; dx then does not alias dy).
// The sums are those of rmsnorm_bwd_params and rmsnorm_bwd_rows, in the same
// order. Loop iterations per invocation: at most 1024 (columns) + 2048 (row).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer G { float g[]; };
layout(std430, binding = 3) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 4) buffer OG { float og[]; };
layout(std430, binding = 5) buffer DX { float dx[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg0, direct, accumulate, add_dx;
    uint base_x, base_dy, base_r, base_dx;
} p;

void main()
{
    const uint seg = gl_WorkGroupSize.x, s = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    const uint r0 = s * seg, r1 = min(p.rows, r0 + seg);
    for (uint c = t; c < p.d; c += seg) {
        float sum = 0.0;
        for (uint r = r0; r < r1; r++)
            sum = fma(dy[p.base_dy + r * p.d + c], x[p.base_x + r * p.d + c] * rstd[p.base_r + r], sum);
        if (p.direct != 0u)
            og[c] = p.accumulate != 0u ? og[c] + sum : sum;
        else
            og[(p.seg0 + s) * p.d + c] = sum;
    }
    barrier();
    const uint r = r0 + t;
    if (r >= r1)
        return;
    const uint bx = p.base_x + r * p.d, bdy = p.base_dy + r * p.d, bdx = p.base_dx + r * p.d;
    const float rs = rstd[p.base_r + r];
    float sum = 0.0;
    for (uint c = 0; c < p.d; c++)
        sum = fma(dy[bdy + c] * g[c], x[bx + c] * rs, sum);
    const float m = sum / float(p.d);
    for (uint c = 0; c < p.d; c++) {
        float xhat = x[bx + c] * rs;
        float v = rs * fma(-xhat, m, dy[bdy + c] * g[c]);
        dx[bdx + c] = p.add_dx != 0u ? dx[bdx + c] + v : v;
    }
}
