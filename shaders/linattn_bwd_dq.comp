#version 450
// Linear attention backward, dq and db (src/ops/linear_attention.h): one
// invocation per (b, t, h, block of CB channels), x = (t*H + h)*nb + blk,
// y = b; j = t / C, t0 = jC, den = b_t from saved, y_t recomputed by the
// forward kernel, U[t, s - t0] = dy_t·v_s:
//   da = dy_t / den, db = -(dy_t·y_t) / den        (block 0 writes db)
//   dfq = Sc[j-1] da + zc[j-1] db + sum_{t0 <= s <= t} fk_s (U[t, s - t0] / den + db)
//   dq_t = dfq * f'(q_t)                          (the block's channels)
// Loops: 2 D + C iterations (the loops over the block are unrolled); fixed
// order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // channels per invocation
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Yb { float y[]; };
layout(std430, binding = 3) readonly buffer Gb { float dy[]; };
layout(std430, binding = 4) readonly buffer Sb { float sc[]; };
layout(std430, binding = 5) readonly buffer Zb { float zc[]; };
layout(std430, binding = 6) readonly buffer Nb { float den_in[]; };
layout(std430, binding = 7) readonly buffer Ub { float u[]; };
layout(std430, binding = 8) writeonly buffer DQb { float dq[]; };
layout(std430, binding = 9) writeonly buffer DBb { float db_out[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // length, channels, heads, channels per head
    uint chunk, nchunk, nb; // C, NC = ceil(n / C), blocks of CB channels per head
    uint lo, hi;           // unused here
    float eps;             // unused here (den includes it)
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }
float dphi(float x) { return x > 0.0 ? 1.0 : exp(x); }

void main()
{
    const uint idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.n * p.H * p.nb)
        return;
    const uint D = p.D, blk = idx % p.nb, h = (idx / p.nb) % p.H, t = idx / p.nb / p.H, bh = b * p.H + h;
    const uint j = t / p.chunk, t0 = j * p.chunk;
    const uint base = b * p.n * p.d + h * D, row = base + t * p.d;
    const float den = den_in[bh * p.n + t];
    float dyy = 0.0;
    for (uint c = 0; c < D; c++)
        dyy = fma(dy[row + c], y[row + c], dyy);
    const float db = -dyy / den;
    uint cc[CB]; // the block's channels, clamped to D - 1 past the end (computed, not stored)
    float acc[CB];
    [[unroll]] for (uint i = 0; i < CB; i++) {
        cc[i] = min(blk * CB + i, D - 1u);
        acc[i] = 0.0;
    }
    if (j > 0u) {
        const uint sb = (bh * p.nchunk + j - 1u) * D * D, zb = (bh * p.nchunk + j - 1u) * D;
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = db * zc[zb + cc[i]];
        for (uint c2 = 0; c2 < D; c2++) {
            const float a = dy[row + c2] / den;
            [[unroll]] for (uint i = 0; i < CB; i++)
                acc[i] = fma(sc[sb + cc[i] * D + c2], a, acc[i]);
        }
    }
    const uint urow = (bh * p.n + t) * p.chunk - t0;
    for (uint s = t0; s <= t; s++) {
        const float coef = u[urow + s] / den + db;
        const uint ks = base + s * p.d;
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = fma(coef, phi(k[ks + cc[i]]), acc[i]);
    }
    [[unroll]] for (uint i = 0; i < CB; i++)
        if (blk * CB + i < D)
            dq[row + cc[i]] = acc[i] * dphi(q[row + cc[i]]);
    if (blk == 0u)
        db_out[bh * p.n + t] = db;
}
