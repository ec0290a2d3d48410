#version 450
// Decoding attention step, combine pass (src/ops/attention_step.h): merges
// groups of `group` consecutive chunk records (m, l, a[dh]) of
// attention_step_part.comp, in order:
//   M = max_j m_j,  L = sum_j l_j exp(m_j - M),  A = sum_j a_j exp(m_j - M)
// (computed online). Records are [count][B][H] of dh+2 floats. Group k of
// records [k group, min((k+1) group, nin)) gives record k of the output, or,
// when this is the last pass (final != 0), o[b, h dh + c] = A[c] / L.
// One invocation per (k, b, h): x = (k B + b) H + h. group <= TMM_MAX_LOOP
// loop iterations; fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Srcb { float src[]; };
layout(std430, binding = 1) writeonly buffer Dstb { float dst[]; };
layout(push_constant) uniform Push {
    uint batch, d, H;       // B, channels, heads
    uint nin, nout, group;  // records in (per (b, h)), records out, records per group
    uint final;             // 1: write o [B, d]
    uint base_src, base_dst; // first element of the records (or o) in their bindings
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.nout * p.batch * p.H)
        return;
    const uint bh = idx % (p.batch * p.H), k = idx / (p.batch * p.H);
    const uint rsize = DH + 2u, stride = p.batch * p.H * rsize;
    const uint j0 = k * p.group, j1 = min(j0 + p.group, p.nin);
    float m = -3.0e38, l = 0.0;
    float acc[DH];
    [[unroll]] for (uint c = 0; c < DH; c++)
        acc[c] = 0.0;
    for (uint j = j0; j < j1; j++) {
        const uint rec = p.base_src + j * stride + bh * rsize;
        const float mj = src[rec];
        if (mj > m) {
            const float corr = exp(m - mj);
            l *= corr;
            [[unroll]] for (uint c = 0; c < DH; c++)
                acc[c] *= corr;
            m = mj;
        }
        const float e = exp(mj - m);
        l = fma(src[rec + 1u], e, l);
        [[unroll]] for (uint c = 0; c < DH; c++)
            acc[c] = fma(src[rec + 2u + c], e, acc[c]);
    }
    if (p.final != 0u) {
        const float inv = 1.0 / l;
        const uint b = bh / p.H, h = bh % p.H;
        const uint orow = p.base_dst + b * p.d + h * DH;
        [[unroll]] for (uint c = 0; c < DH; c++)
            dst[orow + c] = acc[c] * inv;
        return;
    }
    const uint rec = p.base_dst + k * stride + bh * rsize;
    dst[rec] = m;
    dst[rec + 1u] = l;
    [[unroll]] for (uint c = 0; c < DH; c++)
        dst[rec + 2u + c] = acc[c];
}
