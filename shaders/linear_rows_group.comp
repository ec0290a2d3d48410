#version 450
// Decoding: up to 4 linear layers that read the same few rows x [ROWS, in],
// in one dispatch (src/ops/decode.c, tmm_op_linear_rows_group). Group
// g = gl_WorkGroupID.y has its weights W [out, in] from base_w[g] in binding
// 1, its output y [ROWS, out] from base_y[g] in binding 3, an optional bias
// from base_b[g] in binding 2 (mode[g] bit 4) and an activation (mode[g] & 15):
//   0 none      y[r, o] = x[r] . W[o] + b[o]
//   3 swiglu    W [2 out, in]: y[r, o] = silu(a) u, a = x[r] . W[o],
//               u = x[r] . W[out + o] (swiglu_fwd.comp's arithmetic)
//   4 rope      y = RoPE(x Wᵀ) at position pos[r] (rope.comp's mode 1: the
//               pairs c0 = h dh + j, c1 = c0 + half_dh of each head h)
//   5 softplus  y[r, o] = softplus(x[r] . W[o] + b[o]) (softplus_fwd.comp's)
// One invocation per output (swiglu: per output from its two weight rows;
// rope: per channel pair) computes all ROWS rows, so every weight is read
// once per step. VEC: in and every base of x and W a multiple of 4, read as
// vec4. The host keeps the dot products' loops (two per invocation for
// swiglu and rope) within TMM_MAX_LOOP iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint VEC = 0u;
layout(constant_id = 4) const uint ROWS = 1u;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 4) readonly buffer Table { float table[]; };
layout(std430, binding = 5) readonly buffer Pos { uint pos[]; };
layout(push_constant) uniform Push {
    uvec4 outs, base_w, base_b, base_y, mode;
    uint in_, base_x, half_dh, npos, base_pos;
} p;

#include "softplus.glsl"

// acc[r] = x[r] . W[row] for the weight row starting at element wrow.
void dots(uint wrow, out float acc[ROWS])
{
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        acc[r] = 0.0;
    if (VEC != 0u) {
        const uint n4 = p.in_ / 4u, w0 = wrow / 4u;
        for (uint i = 0u; i < n4; i++) {
            vec4 wv = w4[w0 + i];
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                acc[r] += dot(x4[(p.base_x + r * p.in_) / 4u + i], wv);
        }
    } else {
        for (uint i = 0u; i < p.in_; i++) {
            float wv = w[wrow + i];
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
                acc[r] += x[p.base_x + r * p.in_ + i] * wv;
        }
    }
}

void main()
{
    const uint g = gl_WorkGroupID.y, k = gl_GlobalInvocationID.x;
    const uint act = p.mode[g] & 15u, out_ = p.outs[g], yb = p.base_y[g];
    if (k >= (act == 4u ? out_ / 2u : out_))
        return;
    float a[ROWS], u[ROWS];
    if (act == 4u) {
        const uint h = k / p.half_dh, j = k - h * p.half_dh, c0 = 2u * h * p.half_dh + j, c1 = c0 + p.half_dh;
        dots(p.base_w[g] + c0 * p.in_, a);
        dots(p.base_w[g] + c1 * p.in_, u);
        [[unroll]] for (uint r = 0u; r < ROWS; r++) {
            const uint t = pos[p.base_pos + r];
            float y0 = 0.0, y1 = 0.0;
            if (t < p.npos) {
                const uint at = 2u * (t * p.half_dh + j);
                const float cs = table[at], sn = table[at + 1u];
                y0 = a[r] * cs - u[r] * sn;
                y1 = a[r] * sn + u[r] * cs;
            }
            y[yb + r * out_ + c0] = y0;
            y[yb + r * out_ + c1] = y1;
        }
        return;
    }
    dots(p.base_w[g] + k * p.in_, a);
    if (act == 3u) {
        dots(p.base_w[g] + (out_ + k) * p.in_, u);
        [[unroll]] for (uint r = 0u; r < ROWS; r++)
            y[yb + r * out_ + k] = a[r] / (1.0 + exp(-a[r])) * u[r];
        return;
    }
    const float b = (p.mode[g] & 16u) != 0u ? bias[p.base_b[g] + k] : 0.0;
    if (act == 5u) { // a branch, not a select: softplus only where it is asked for
        [[unroll]] for (uint r = 0u; r < ROWS; r++)
            y[yb + r * out_ + k] = softplus(a[r] + b);
        return;
    }
    [[unroll]] for (uint r = 0u; r < ROWS; r++)
        y[yb + r * out_ + k] = a[r] + b;
}
