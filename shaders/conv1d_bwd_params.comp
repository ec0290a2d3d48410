#version 450
// Causal depthwise conv1d, backward, weight and bias gradients over rows.
// One invocation per (segment s of at most `seg` rows, column c), rows in
// order, with g = dy (or dy * silu'(pre), pre recomputed as conv1d_fwd.comp):
//   sums of g x[gr - (K-1-j), c] (taps j < K, 0 before the sequence's
//   start) and of g.
// With direct set (one segment in all) they go to dw[c*K + j] and db[c]
// (added with accumulate); otherwise to dw[(seg0 + s) C K + c K + j] and
// db[(seg0 + s) C + c], partial sums for tmm_op_sum_cols. x is bound from
// global row x_row0, dy from row0. Per row 1 + 3K <= 25 loop iterations:
// the host keeps seg * 25 within TMM_MAX_LOOP (seg = 128).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) buffer DW { float dw[]; };
layout(std430, binding = 5) buffer DB { float db[]; };
layout(push_constant) uniform Push {
    uint rows, C, n, K, act, row0, x_row0, base_x, base_dy, seg, nseg, seg0, direct, accumulate;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.C)
        return;
    uint s = i / p.C, c = i - s * p.C;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    float accb = 0.0;
    for (uint lr = r0; lr < r1; lr++) {
        uint gr = p.row0 + lr, t = gr % p.n;
        float xv[8];
        for (uint j = 0u; j < p.K; j++) {
            uint back = p.K - 1u - j;
            xv[j] = back <= t ? x[p.base_x + (gr - back - p.x_row0) * p.C + c] : 0.0;
        }
        float g = dy[p.base_dy + lr * p.C + c];
        if (p.act != 0u) {
            float pre = bias[c];
            for (uint j = 0u; j < p.K; j++)
                if (p.K - 1u - j <= t)
                    pre += w[c * p.K + j] * xv[j];
            float sg = 1.0 / (1.0 + exp(-pre));
            g *= fma(pre * sg, 1.0 - sg, sg);
        }
        for (uint j = 0u; j < p.K; j++)
            acc[j] += g * xv[j];
        accb += g;
    }
    if (p.direct != 0u) {
        for (uint j = 0u; j < p.K; j++)
            dw[c * p.K + j] = p.accumulate != 0u ? dw[c * p.K + j] + acc[j] : acc[j];
        db[c] = p.accumulate != 0u ? db[c] + accb : accb;
    } else {
        for (uint j = 0u; j < p.K; j++)
            dw[(p.seg0 + s) * p.C * p.K + c * p.K + j] = acc[j];
        db[(p.seg0 + s) * p.C + c] = accb;
    }
}
