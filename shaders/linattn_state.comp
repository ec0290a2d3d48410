#version 450
// Linear attention, the decoding state after a prefill (src/ops/linear_attention.h):
// S[b,h] = sum_{s < len[b]} fk_s v_sᵀ, z[b,h] = sum_{s < len[b]} fk_s (len[b]
// above n counts as n). One invocation per row c1 of S and block of CB
// columns (x = c1*nb + blk, y = h, z = b); block 0 also sums z[c1]. A pass
// adds the positions of [lo, min(hi, len[b])) in increasing s to what the
// previous pass left (lo > 0) or to zero (lo = 0), and writes the sums.
// hi - lo <= TMM_MAX_LOOP (loop_limit.glsl); fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // columns per invocation
layout(std430, binding = 0) readonly buffer Lb { uint len[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) buffer Sb { float S[]; };
layout(std430, binding = 4) buffer Zb { float z[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // length, channels, heads, channels per head
    uint chunk, nchunk, nb; // unused, unused, blocks of CB channels per head
    uint lo, hi;           // positions of this pass
    float eps;             // unused here
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }

void main()
{
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    const uint D = p.D;
    if (idx >= D * p.nb)
        return;
    const uint c1 = idx / p.nb, blk = idx % p.nb, bh = b * p.H + h;
    const uint srow = (bh * D + c1) * D, zat = bh * D + c1;
    uint cc[CB]; // the block's columns, clamped to D - 1 past the end (computed, not stored)
    float acc[CB], accz = 0.0;
    [[unroll]] for (uint i = 0; i < CB; i++) {
        cc[i] = min(blk * CB + i, D - 1u);
        acc[i] = p.lo > 0u ? S[srow + cc[i]] : 0.0;
    }
    if (p.lo > 0u)
        accz = z[zat];
    const uint end = min(p.hi, min(len[b], p.n));
    const uint krow = b * p.n * p.d + h * D;
    for (uint s = p.lo; s < end; s++) {
        const uint row = krow + s * p.d;
        const float f = phi(k[row + c1]);
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = fma(f, v[row + cc[i]], acc[i]);
        accz += f;
    }
    [[unroll]] for (uint i = 0; i < CB; i++)
        if (blk * CB + i < D)
            S[srow + cc[i]] = acc[i];
    if (blk == 0u)
        z[zat] = accz;
}
