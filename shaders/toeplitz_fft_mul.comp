#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): the spectral
// product per channel row (complex rows of M = N/2+1 numbers, as vec2), for
// the output rows of one chunk: output row l is global row r0 + l = (b, c).
//   forward (CONJ = 0): O[b,c] = sum_a W[g(c), a] * X[b, c-(K-1)+a]      (channels outside g(c): none)
//   du      (CONJ = 1): O[b,c] = sum_a conj(W[g(c), a]) * X[b, e],  e = c+(K-1)-a in g(c)
// Rows: global row r of X at xrow0 + r - r0 + h (the chunk's rows with a
// halo of h = K-1 rows on each side), W at wrow0 + g*K + a, O at l. Output
// rows past the last global row are written as zero (the inverse transforms
// them). Invocation x is k, workgroup y the row l; K <= 16 iterations, unrolled.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;
layout(constant_id = 4) const uint CONJ = 0u;

layout(std430, binding = 0) readonly buffer C { vec2 cin[]; };
layout(std430, binding = 1) writeonly buffer O { vec2 cout_[]; };

layout(push_constant) uniform Push {
    uint M, d, dg;
    uint nrows, r0;    // global rows, global row of output row 0
    uint xrow0, wrow0; // buffer row of the chunk's first (halo) row, of W's first row
} p;

vec2 cmul(vec2 a, vec2 b) { return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }

void main()
{
    const uint k = gl_GlobalInvocationID.x, l = gl_WorkGroupID.y;
    if (k >= p.M)
        return;
    const uint g = p.r0 + l;
    vec2 acc = vec2(0.0);
    if (g < p.nrows) {
        const uint c = g % p.d;
        // X row of channel ch of this batch: (g - c + ch) - r0 + h = l + h - c + ch
        const uint xl = p.xrow0 + l + (K - 1u) - c;
        [[unroll]] for (uint a = 0u; a < K; a++) {
            if (CONJ == 0u) {
                const int ch = int(c) - int(K - 1u) + int(a);
                if (ch >= int(c - c % p.dg)) {   // inside c's group
                    const vec2 wv = cin[(p.wrow0 + (c / p.dg) * K + a) * p.M + k];
                    const vec2 xv = cin[(xl + uint(ch)) * p.M + k];
                    acc += cmul(wv, xv);
                }
            } else {
                const uint e = c + (K - 1u) - a;
                if (e < c - c % p.dg + p.dg) {   // inside c's group
                    const vec2 wv = cin[(p.wrow0 + (c / p.dg) * K + a) * p.M + k];
                    const vec2 xv = cin[(xl + e) * p.M + k];
                    acc += cmul(vec2(wv.x, -wv.y), xv);
                }
            }
        }
    }
    cout_[l * p.M + k] = acc;
}
