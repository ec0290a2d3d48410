#version 450
// LayerNorm backward in one dispatch, for rows of d <= 1024 (one chunk): a
// workgroup of `seg` invocations (seg = TMM_NN_COL_SEG) takes segment s of
// `seg` rows, which it reads once. With g = dy * gamma and
// xhat = (x - mean) * rstd:
//   1. invocation t sums columns t, t + seg, ... over the segment's rows in
//      order: dy * xhat (dgamma) and dy (dbeta), to og[c], ob[c] with direct
//      (one segment in all; added with accumulate), else to
//      og[(seg0 + s) d + c], ob[...] for tmm_op_sum_cols;
//   2. after a barrier (dx may alias dy, which step 1 reads), invocation t
//      takes row t of the segment: its sums of g and g * xhat in column
//      order, then dx = rstd * (g - (sum_g + xhat * sum_gx) / d), or with
//      add_dx dx += that (a residual's gradient; dx then does not alias dy).
// The sums are those of layernorm_bwd_params and layernorm_bwd_rows, in the
// same order. Loop iterations per invocation: at most 1024 (columns) + 2048 (row).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer DY { float dy[]; };
layout(std430, binding = 2) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 3) readonly buffer Mean { float mean[]; };
layout(std430, binding = 4) readonly buffer Rstd { float rstd[]; };
layout(std430, binding = 5) buffer OG { float og[]; };
layout(std430, binding = 6) buffer OB { float ob[]; };
layout(std430, binding = 7) buffer DX { float dx[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg0, direct, accumulate, add_dx;
    uint base_x, base_dy, base_m, base_r, base_dx;
} p;

void main()
{
    const uint seg = gl_WorkGroupSize.x, s = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
    const uint r0 = s * seg, r1 = min(p.rows, r0 + seg);
    for (uint c = t; c < p.d; c += seg) {
        float sg = 0.0, sb = 0.0;
        for (uint r = r0; r < r1; r++) {
            float g = dy[p.base_dy + r * p.d + c];
            float xhat = (x[p.base_x + r * p.d + c] - mean[p.base_m + r]) * rstd[p.base_r + r];
            sg = fma(g, xhat, sg);
            sb += g;
        }
        if (p.direct != 0u) {
            og[c] = p.accumulate != 0u ? og[c] + sg : sg;
            ob[c] = p.accumulate != 0u ? ob[c] + sb : sb;
        } else {
            og[(p.seg0 + s) * p.d + c] = sg;
            ob[(p.seg0 + s) * p.d + c] = sb;
        }
    }
    barrier();
    const uint r = r0 + t;
    if (r >= r1)
        return;
    const uint bx = p.base_x + r * p.d, bdy = p.base_dy + r * p.d, bdx = p.base_dx + r * p.d;
    const float m = mean[p.base_m + r], rs = rstd[p.base_r + r];
    float sg = 0.0, sgx = 0.0;
    for (uint c = 0; c < p.d; c++) {
        float g = dy[bdy + c] * gamma[c];
        float xhat = (x[bx + c] - m) * rs;
        sg += g;
        sgx = fma(g, xhat, sgx);
    }
    const float inv_d = 1.0 / float(p.d);
    sg *= inv_d;
    sgx *= inv_d;
    for (uint c = 0; c < p.d; c++) {
        float xhat = (x[bx + c] - m) * rs;
        float g = dy[bdy + c] * gamma[c];
        float v = rs * (g - fma(xhat, sgx, sg));
        dx[bdx + c] = p.add_dx != 0u ? dx[bdx + c] + v : v;
    }
}
