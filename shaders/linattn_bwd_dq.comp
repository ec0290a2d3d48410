#version 450
// Linear attention backward, dq and db (src/ops/linear_attention.h): one
// invocation per (b, t, h) row, x = t * H + h, y = b; j = t / C, den = b_t
// from saved. It recomputes y_t as the forward does, then
//   da = dy_t / den, db = -(dy_t·y_t) / den  (db is written for the dk/dv pass)
//   dfq = Sc[j-1] da + zc[j-1] db + sum_{jC <= s <= t} fk_s (v_s·da + db)
//   dq_t = dfq * f'(q_t).
// Loops: 2 (D + C) iterations at most (the other channel loops are unrolled);
// fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint D = 1u; // channels per head
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Sb { float sc[]; };
layout(std430, binding = 4) readonly buffer Zb { float zc[]; };
layout(std430, binding = 5) readonly buffer Nb { float den_in[]; };
layout(std430, binding = 6) readonly buffer Gb { float dy[]; };
layout(std430, binding = 7) writeonly buffer DQb { float dq[]; };
layout(std430, binding = 8) writeonly buffer DBb { float db_out[]; };
layout(push_constant) uniform Push {
    uint n, d, H;      // length, channels, heads
    uint chunk, nchunk; // C, NC = ceil(n / C)
    uint lo, hi;       // unused here
    float eps;         // unused here (den includes it)
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }
float dphi(float x) { return x > 0.0 ? 1.0 : exp(x); }

void main()
{
    const uint idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.n * p.H)
        return;
    const uint h = idx % p.H, t = idx / p.H, bh = b * p.H + h;
    const uint j = t / p.chunk, t0 = j * p.chunk;
    const uint base = b * p.n * p.d + h * D, row = base + t * p.d;
    const uint sb = (bh * p.nchunk + j - 1u) * D * D, zb = (bh * p.nchunk + j - 1u) * D; // used for j > 0
    const float den = den_in[bh * p.n + t];
    float fq[D], da[D], acc[D];
    [[unroll]] for (uint c = 0; c < D; c++) {
        fq[c] = phi(q[row + c]);
        da[c] = dy[row + c] / den;
        acc[c] = 0.0;
    }
    // y_t * den, as in the forward (acc holds the numerator for now)
    if (j > 0u)
        for (uint c1 = 0; c1 < D; c1++) {
            const float f = phi(q[row + c1]);
            [[unroll]] for (uint c2 = 0; c2 < D; c2++)
                acc[c2] = fma(f, sc[sb + c1 * D + c2], acc[c2]);
        }
    for (uint s = t0; s <= t; s++) {
        const uint ks = base + s * p.d;
        float w = 0.0;
        [[unroll]] for (uint c = 0; c < D; c++)
            w = fma(fq[c], phi(k[ks + c]), w);
        [[unroll]] for (uint c = 0; c < D; c++)
            acc[c] = fma(w, v[ks + c], acc[c]);
    }
    float dyy = 0.0;
    [[unroll]] for (uint c = 0; c < D; c++)
        dyy = fma(dy[row + c], acc[c] / den, dyy);
    const float db = -dyy / den;
    db_out[bh * p.n + t] = db;
    // dfq
    [[unroll]] for (uint c = 0; c < D; c++)
        acc[c] = 0.0;
    if (j > 0u) {
        [[unroll]] for (uint c = 0; c < D; c++)
            acc[c] = db * zc[zb + c];
        for (uint c2 = 0; c2 < D; c2++) {
            const float a = dy[row + c2] / den;
            [[unroll]] for (uint c1 = 0; c1 < D; c1++)
                acc[c1] = fma(sc[sb + c1 * D + c2], a, acc[c1]);
        }
    }
    for (uint s = t0; s <= t; s++) {
        const uint ks = base + s * p.d;
        float coef = db;
        [[unroll]] for (uint c = 0; c < D; c++)
            coef = fma(v[ks + c], da[c], coef);
        [[unroll]] for (uint c = 0; c < D; c++)
            acc[c] = fma(coef, phi(k[ks + c]), acc[c]);
    }
    [[unroll]] for (uint c = 0; c < D; c++)
        dq[row + c] = acc[c] * dphi(q[row + c]);
}
