#version 450
// Decoding: a norm and the linear layer after it in one dispatch, for the few
// rows of one step (src/ops/decode.c):
//   y[r, o] = act( sum_i xn[r, i] * W[o, i] + bias[o] )      r < ROWS, W [out, in]
// with xn = LayerNorm (NORM 1: (x - mean) * rstd * gamma + beta, rstd =
// 1 / sqrt(mean of (x - mean)^2 + eps)) or RMSNorm (NORM 2: x * rstd * gamma,
// rstd = 1 / sqrt(mean of x^2 + eps)) of row r of x. Every workgroup
// computes the rows' statistics itself (each invocation a strided part, added
// in a fixed tree; the rows are short), then each invocation one output as
// decode_linear.comp does, normalizing x as it reads it. VEC: in and the
// bases multiples of 4. ACT as in decode_linear.comp. Per invocation
// 2 ceil(in / WG) + in (in / 4 with VEC) + 12 loop iterations, which the host
// keeps within TMM_MAX_LOOP.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint VEC = 0u;
layout(constant_id = 4) const uint ROWS = 1u;
layout(constant_id = 5) const uint ACT = 0u;
layout(constant_id = 6) const uint NORM = 1u;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 1) readonly buffer Gamma4 { vec4 gamma4[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 2) readonly buffer Beta4 { vec4 beta4[]; };
layout(std430, binding = 3) readonly buffer Wt { float w[]; };
layout(std430, binding = 3) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 4) readonly buffer Bias { float bias[]; };
layout(std430, binding = 5) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push { uint in_, out_, has_bias, base_x, base_y; float eps; } p;

#include "gelu.glsl"

const uint WG = gl_WorkGroupSize.x;  // a power of two, at most MAX_WG
const uint MAX_WG = 64u, MAX_ROWS = 8u;
shared float red[MAX_ROWS * MAX_WG];

// The sum over the workgroup of v[r] for every row: red[r * WG] afterwards.
void reduce_rows(float v[ROWS], uint i)
{
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        red[r * WG + i] = v[r];
    barrier();
    for (uint h = WG / 2u; h > 0u; h >>= 1u) {
        if (i < h)
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                red[r * WG + i] += red[r * WG + i + h];
        barrier();
    }
}

void main()
{
    const uint i = gl_LocalInvocationID.x, o = gl_GlobalInvocationID.x, n = p.in_;
    float mean[ROWS], rstd[ROWS], part[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        part[r] = 0.0;
    if (NORM == 1u) {
        for (uint c = i; c < n; c += WG)
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                part[r] += x[p.base_x + r * n + c];
        reduce_rows(part, i);
    }
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
        mean[r] = NORM == 1u ? red[r * WG] / float(n) : 0.0;
        part[r] = 0.0;
    }
    barrier();
    for (uint c = i; c < n; c += WG)
        [[unroll]] for (uint r = 0u; r < ROWS; r++) {
            float t = x[p.base_x + r * n + c] - mean[r];
            part[r] = fma(t, t, part[r]);
        }
    reduce_rows(part, i);
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        rstd[r] = 1.0 / sqrt(red[r * WG] / float(n) + p.eps);
    if (o >= p.out_)
        return;

    float acc[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        acc[r] = 0.0;
    if (VEC != 0u) {
        const uint n4 = n / 4u, wrow = o * n4;
        for (uint c = 0u; c < n4; c++) {
            vec4 wv = w4[wrow + c], g = gamma4[c], b = NORM == 1u ? beta4[c] : vec4(0.0);
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                acc[r] += dot(fma((x4[p.base_x / 4u + r * n4 + c] - mean[r]) * rstd[r], g, b), wv);
        }
    } else {
        const uint wrow = o * n;
        for (uint c = 0u; c < n; c++) {
            float wv = w[wrow + c], g = gamma[c], b = NORM == 1u ? beta[c] : 0.0;
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                acc[r] += fma((x[p.base_x + r * n + c] - mean[r]) * rstd[r], g, b) * wv;
        }
    }
    const float b = p.has_bias != 0u ? bias[o] : 0.0;
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
        float v = acc[r] + b;
        uint at = p.base_y + r * p.out_ + o;
        if (ACT == 1u) {
            y[at] = v / (1.0 + exp(-v));
        } else if (ACT == 2u) {
            float g;
            y[at] = v * phi_cdf(v, g);
        } else {
            y[at] = v;
        }
    }
}
