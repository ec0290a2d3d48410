#version 450
// Decoding, Hyena (src/ops/decode.c, tmm_op_hyena_conv_step): the three
// short causal convolutions of one step and the first gate, in one dispatch.
// One invocation per (sequence b, channel c). For each part q < 3, with
// x = u[q, b, c] the input at position P = pos[b] and win[q, b, j, c] (j <
// K-1) the input at P - (K-1) + j (0 when negative):
//   y_q = bias[q d + c] + sum_{j<K-1} w[q d + c, j] win[q, b, j, c] + w[q d + c, K-1] x
// (conv1d_step.comp's terms and order), then the window shifts by one
// (negative positions written as 0). Writes u[0, b, c] = y_0 and
// u[2, b, c] = y_2 y_1 (Hyena's v ⊙ x1, gate_mul_fwd.comp's product);
// u[1] keeps its input. Every part is read before it is written.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer U { float u[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 4) buffer Win { float win[]; };
layout(push_constant) uniform Push { uint batch, d, K, base_u, base_w, base_b, base_pos, base_win; } p;

// Part q's conv output at (b, c), its window shifted.
float conv(uint q, uint b, uint c, uint P)
{
    const uint nw = p.K - 1u, ch = q * p.d + c, wrow = p.base_w + ch * p.K;
    const uint at = p.base_win + (q * p.batch + b) * nw * p.d + c;
    float v[8];
    for (uint j = 0u; j < nw; j++)
        v[j] = j + P >= nw ? win[at + j * p.d] : 0.0;
    v[nw] = u[p.base_u + (q * p.batch + b) * p.d + c];
    float acc = bias[p.base_b + ch];
    for (uint j = 0u; j < nw; j++)
        if (j + P >= nw)
            acc += w[wrow + j] * v[j];
    acc += w[wrow + nw] * v[nw];
    for (uint j = 0u; j < nw; j++)
        win[at + j * p.d] = v[j + 1u];
    return acc;
}

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.batch * p.d)
        return;
    const uint b = i / p.d, c = i - b * p.d, P = pos[p.base_pos + b];
    const float y0 = conv(0u, b, c, P), y1 = conv(1u, b, c, P), y2 = conv(2u, b, c, P);
    u[p.base_u + b * p.d + c] = y0;
    u[p.base_u + (2u * p.batch + b) * p.d + c] = y2 * y1;
}
