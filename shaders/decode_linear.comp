#version 450
// Decoding: a linear layer for the few rows of one step (src/ops/decode.c):
//   y[r, o] (+)= sum_i x[r, i] * W[o, i] + bias[o]      r < ROWS, W [out, in]
// One invocation per output o computes all ROWS rows, so every weight is read
// once per step (a matmul kernel would block rows that do not exist). With
// VEC (in and every base a multiple of 4) x and W are read as vec4. The host
// keeps in (in vec4 steps with VEC) within TMM_MAX_LOOP iterations. ACT 1, 2:
// y = SiLU or GELU of x W^T + bias (never accumulated), as silu_fwd and
// gelu_fwd compute them.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint VEC = 0u;
layout(constant_id = 4) const uint ROWS = 1u;
layout(constant_id = 5) const uint ACT = 0u;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint in_, out_, has_bias, accumulate, base_x, base_w, base_y; } p;

#include "gelu.glsl"

void main()
{
    const uint o = gl_GlobalInvocationID.x;
    if (o >= p.out_)
        return;
    float acc[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        acc[r] = 0.0;
    if (VEC != 0u) {
        const uint n4 = p.in_ / 4u, wrow = (p.base_w + o * p.in_) / 4u;
        for (uint i = 0u; i < n4; i++) {
            vec4 wv = w4[wrow + i];
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                acc[r] += dot(x4[(p.base_x + r * p.in_) / 4u + i], wv);
        }
    } else {
        const uint wrow = p.base_w + o * p.in_;
        for (uint i = 0u; i < p.in_; i++) {
            float wv = w[wrow + i];
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                acc[r] += x[p.base_x + r * p.in_ + i] * wv;
        }
    }
    const float b = p.has_bias != 0u ? bias[o] : 0.0;
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
        uint at = p.base_y + r * p.out_ + o;
        if (ACT == 1u) {
            float v = acc[r] + b;
            y[at] = v / (1.0 + exp(-v));
        } else if (ACT == 2u) {
            float v = acc[r] + b, g;
            y[at] = v * phi_cdf(v, g);
        } else {
            y[at] = (p.accumulate != 0u ? y[at] : 0.0) + acc[r] + b;
        }
    }
}
