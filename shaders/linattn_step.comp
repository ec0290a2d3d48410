#version 450
// Linear attention, one decoding step (src/ops/linear_attention.h): one
// invocation per (h, b), x = h, y = b. With fq = f(q_b), fk = f(k_b) of head h:
//   z += fk, den = fq·z + eps            (first loop)
//   S[c1][:] += fk[c1] v_b, num = Sᵀ fq  (per block of CB channels)
//   y_b = num / den                      (S and z updated in place)
// Loops: D + nb * D iterations (nb = ceil(D / CB); the loops over a block are
// unrolled).
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // channels per block
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) buffer Sb { float S[]; };
layout(std430, binding = 4) buffer Zb { float z[]; };
layout(std430, binding = 5) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // unused, channels, heads, channels per head
    uint chunk, nchunk, nb; // unused, unused, blocks of CB channels per head
    uint lo, hi;           // unused here
    float eps;             // denominator epsilon
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }

void main()
{
    const uint h = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (h >= p.H)
        return;
    const uint D = p.D, bh = b * p.H + h, row = b * p.d + h * D;
    float den = 0.0;
    for (uint c1 = 0; c1 < D; c1++) {
        const float zc = z[bh * D + c1] + phi(k[row + c1]);
        z[bh * D + c1] = zc;
        den = fma(phi(q[row + c1]), zc, den);
    }
    den += p.eps;
    for (uint blk = 0; blk < p.nb; blk++) {
        uint cc[CB]; // the block's channels, clamped to D - 1 past the end
        float vs[CB], num[CB];
        [[unroll]] for (uint i = 0; i < CB; i++) {
            cc[i] = min(blk * CB + i, D - 1u);
            vs[i] = v[row + cc[i]];
            num[i] = 0.0;
        }
        for (uint c1 = 0; c1 < D; c1++) {
            const float fk = phi(k[row + c1]), fq = phi(q[row + c1]);
            const uint at = (bh * D + c1) * D;
            [[unroll]] for (uint i = 0; i < CB; i++) {
                const float s = fma(fk, vs[i], S[at + cc[i]]);
                if (blk * CB + i < D)
                    S[at + cc[i]] = s;
                num[i] = fma(fq, s, num[i]);
            }
        }
        [[unroll]] for (uint i = 0; i < CB; i++)
            if (blk * CB + i < D)
                y[row + cc[i]] = num[i] / den;
    }
}
