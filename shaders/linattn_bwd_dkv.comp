#version 450
// Linear attention backward, dk and dv (src/ops/linear_attention.h): one
// invocation per (b, s, h) row, x = s * H + h, y = b; j = s / C, chunk end
// t1 = min(n, (j+1) C), R = Sb[j+1], r = zb[j+1] (zero for the last chunk):
//   dfk = R v_s + r + sum_{s <= t < t1} fq_t (da_t·v_s + db_t)
//   dv_s = Rᵀ fk_s + sum_{s <= t < t1} (fq_t·fk_s) da_t
//   dk_s = dfk * f'(k_s),  da_t = dy_t / den_t.
// Loops: 2 D + C iterations at most (the other channel loops are unrolled);
// fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint D = 1u; // channels per head
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) readonly buffer Gb { float dy[]; };
layout(std430, binding = 4) readonly buffer Nb { float den_in[]; };
layout(std430, binding = 5) readonly buffer DBb { float db_in[]; };
layout(std430, binding = 6) readonly buffer Sb { float sb[]; };
layout(std430, binding = 7) readonly buffer Zb { float zb[]; };
layout(std430, binding = 8) writeonly buffer DKb { float dk[]; };
layout(std430, binding = 9) writeonly buffer DVb { float dv[]; };
layout(push_constant) uniform Push {
    uint n, d, H;      // length, channels, heads
    uint chunk, nchunk; // C, NC = ceil(n / C)
    uint lo, hi;       // unused here
    float eps;         // unused here
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }
float dphi(float x) { return x > 0.0 ? 1.0 : exp(x); }

void main()
{
    const uint idx = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (idx >= p.n * p.H)
        return;
    const uint h = idx % p.H, s = idx / p.H, bh = b * p.H + h;
    const uint j = s / p.chunk, t1 = min(p.n, (j + 1u) * p.chunk);
    const uint base = b * p.n * p.d + h * D, row = base + s * p.d;
    float fk[D], vs[D], ak[D], av[D];
    [[unroll]] for (uint c = 0; c < D; c++) {
        fk[c] = phi(k[row + c]);
        vs[c] = v[row + c];
        ak[c] = 0.0;
        av[c] = 0.0;
    }
    if (j + 1u < p.nchunk) {
        const uint rs = (bh * p.nchunk + j + 1u) * D * D, rz = (bh * p.nchunk + j + 1u) * D;
        [[unroll]] for (uint c = 0; c < D; c++)
            ak[c] = zb[rz + c];
        for (uint c2 = 0; c2 < D; c2++) {
            const float x = v[row + c2];
            [[unroll]] for (uint c1 = 0; c1 < D; c1++)
                ak[c1] = fma(sb[rs + c1 * D + c2], x, ak[c1]);
        }
        for (uint c1 = 0; c1 < D; c1++) {
            const float f = phi(k[row + c1]);
            [[unroll]] for (uint c2 = 0; c2 < D; c2++)
                av[c2] = fma(sb[rs + c1 * D + c2], f, av[c2]);
        }
    }
    for (uint t = s; t < t1; t++) {
        const uint qt = base + t * p.d;
        const float den = den_in[bh * p.n + t];
        float coef = db_in[bh * p.n + t], w = 0.0;
        [[unroll]] for (uint c = 0; c < D; c++) {
            const float f = phi(q[qt + c]);
            coef = fma(dy[qt + c] / den, vs[c], coef);
            w = fma(f, fk[c], w);
        }
        [[unroll]] for (uint c = 0; c < D; c++) {
            ak[c] = fma(coef, phi(q[qt + c]), ak[c]);
            av[c] = fma(w, dy[qt + c] / den, av[c]);
        }
    }
    [[unroll]] for (uint c = 0; c < D; c++) {
        dk[row + c] = ak[c] * dphi(k[row + c]);
        dv[row + c] = av[c];
    }
}
