#version 450
// Linear attention backward, dk and dv (src/ops/linear_attention.h): one
// invocation per (b, s, h, block of CB channels), x = (s*H + h)*nb + blk,
// y = b; j = s / C, t0 = jC, t1 = min(n, t0 + C), R = Sb[j+1], r = zb[j+1]
// (zero for the last chunk), scores W[t, s - t0] = fq_t·fk_s and
// U[t, s - t0] = dy_t·v_s, da_t = dy_t / den_t:
//   dfk = R v_s + r + sum_{s <= t < t1} fq_t (U[t, s - t0] / den_t + db_t)
//   dv_s = Rᵀ fk_s + sum_{s <= t < t1} W[t, s - t0] da_t
//   dk_s = dfk * f'(k_s)                            (the block's channels)
// Loops: D + C iterations (the loops over the block are unrolled); fixed
// order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // channels per invocation
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Gb { float dy[]; };
layout(std430, binding = 4) readonly buffer Nb { float den_in[]; };
layout(std430, binding = 5) readonly buffer DBb { float db_in[]; };
layout(std430, binding = 6) readonly buffer Sb { float sb[]; };
layout(std430, binding = 7) readonly buffer Zb { float zb[]; };
layout(std430, binding = 8) readonly buffer Wb { float w[]; };
layout(std430, binding = 9) readonly buffer Ub { float u[]; };
layout(std430, binding = 10) writeonly buffer DKb { float dk[]; };
layout(std430, binding = 11) writeonly buffer DVb { float dv[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // length, channels, heads, channels per head
    uint chunk, nchunk, nb; // C, NC = ceil(n / C), blocks of CB channels per head
    uint lo, hi;           // unused here
    float eps;             // unused here
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }
float dphi(float x) { return x > 0.0 ? 1.0 : exp(x); }

void main()
{
    const uint idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.n * p.H * p.nb)
        return;
    const uint D = p.D, blk = idx % p.nb, h = (idx / p.nb) % p.H, s = idx / p.nb / p.H, bh = b * p.H + h;
    const uint j = s / p.chunk, t0 = j * p.chunk, t1 = min(p.n, t0 + p.chunk);
    const uint base = b * p.n * p.d + h * D, row = base + s * p.d;
    uint cc[CB]; // the block's channels, clamped to D - 1 past the end (computed, not stored)
    float ak[CB], av[CB];
    [[unroll]] for (uint i = 0; i < CB; i++) {
        cc[i] = min(blk * CB + i, D - 1u);
        ak[i] = 0.0;
        av[i] = 0.0;
    }
    if (j + 1u < p.nchunk) {
        const uint rs = (bh * p.nchunk + j + 1u) * D * D, rz = (bh * p.nchunk + j + 1u) * D;
        [[unroll]] for (uint i = 0; i < CB; i++)
            ak[i] = zb[rz + cc[i]];
        for (uint c = 0; c < D; c++) {
            const float vc = v[row + c], fc = phi(k[row + c]);
            [[unroll]] for (uint i = 0; i < CB; i++) {
                ak[i] = fma(sb[rs + cc[i] * D + c], vc, ak[i]);
                av[i] = fma(sb[rs + c * D + cc[i]], fc, av[i]);
            }
        }
    }
    for (uint t = s; t < t1; t++) {
        const uint qt = base + t * p.d, st = (bh * p.n + t) * p.chunk + s - t0;
        const float den = den_in[bh * p.n + t];
        const float coef = u[st] / den + db_in[bh * p.n + t], ws = w[st] / den;
        [[unroll]] for (uint i = 0; i < CB; i++) {
            ak[i] = fma(coef, phi(q[qt + cc[i]]), ak[i]);
            av[i] = fma(ws, dy[qt + cc[i]], av[i]);
        }
    }
    [[unroll]] for (uint i = 0; i < CB; i++)
        if (blk * CB + i < D) {
            dk[row + cc[i]] = ak[i] * dphi(k[row + cc[i]]);
            dv[row + cc[i]] = av[i];
        }
}
