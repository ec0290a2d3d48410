#version 450
// Causal depthwise conv1d, backward, weight and bias gradients over rows.
// One invocation per (segment s of at most `seg` rows, column c), rows in
// order, with g = dy (or dy silu'(pre) from conv1d_bwd_act.comp):
//   sums of g x[gr - (K-1-j), c] (taps j < K, 0 before the sequence's
//   start) and of g.
// The taps' inputs slide: xv[7 - back] holds x[gr - back] (0 before the
// sequence's start), one new load per row; sums are kept per back = K-1-j
// for all 8 slots (constant indices keep them in registers) and the first
// K written. With direct set (one segment in all) they go to dw[c*K + j]
// and db[c] (added with accumulate); otherwise to dw[(seg0 + s) C K + c K +
// j] and db[(seg0 + s) C + c], partial sums for tmm_op_sum_cols. x is bound
// from global row x_row0, g from row0. Per row at most 1 + 3 * 8 = 25 loop
// iterations: the host keeps seg * 25 within TMM_MAX_LOOP (seg = 128).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) buffer DW { float dw[]; };
layout(std430, binding = 3) buffer DB { float db[]; };
layout(push_constant) uniform Push {
    uint rows, C, n, K, row0, x_row0, base_x, base_g, seg, nseg, seg0, direct, accumulate;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.C)
        return;
    uint s = i / p.C, c = i - s * p.C;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float xv[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float accb = 0.0;
    // the window before the segment's first row: x[gr0 - back] for 1 <= back < K within the sequence
    uint gr0 = p.row0 + r0, t0 = gr0 % p.n;
    for (uint back = 1u; back < 8u; back++)
        if (back < p.K && back <= t0)
            xv[7u - back] = x[p.base_x + (gr0 - back - p.x_row0) * p.C + c];
    for (uint lr = r0; lr < r1; lr++) {
        uint gr = p.row0 + lr;
        if (lr > r0) {
            if (gr % p.n == 0u) {
                for (uint q = 0u; q < 7u; q++)
                    xv[q] = 0.0;
            } else {
                for (uint q = 0u; q < 7u; q++)
                    xv[q] = xv[q + 1u];
            }
        }
        xv[7] = x[p.base_x + (gr - p.x_row0) * p.C + c];
        float gv = g[p.base_g + lr * p.C + c];
        for (uint back = 0u; back < 8u; back++)
            acc[back] += gv * xv[7u - back];
        accb += gv;
    }
    if (p.direct != 0u) {
        for (uint j = 0u; j < p.K; j++) {
            float v = acc[p.K - 1u - j];
            dw[c * p.K + j] = p.accumulate != 0u ? dw[c * p.K + j] + v : v;
        }
        db[c] = p.accumulate != 0u ? db[c] + accb : accb;
    } else {
        for (uint j = 0u; j < p.K; j++)
            dw[(p.seg0 + s) * p.C * p.K + c * p.K + j] = acc[p.K - 1u - j];
        db[(p.seg0 + s) * p.C + c] = accb;
    }
}
