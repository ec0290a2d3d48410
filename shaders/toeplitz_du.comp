#version 450
// Causal Toeplitz mixing, direct backward to the input (src/ops/toeplitz.c):
//   du[b, s, c'] = sum_{a<K} sum_{t>=s} w[g, a, t-s] * gy[b, t, c],  c = c' + (K-1) - a
// with g the group of c', over the c inside g (a head's window stays inside
// the head) (an anti-causal correlation). Laid out like toeplitz_fwd.comp: an
// invocation computes TT consecutive positions s0.. times TC consecutive
// input channels of one group for batch b = gl_WorkGroupID.z, loading per
// block of TT positions t a TT x (TC+K-1) tile of gy and 2TT-1 lags of w per
// tap. Invocation x is s-block tb0 + x / ncb, channel block x % ncb.
//
// Passes: one dispatch adds the terms with t in [lo, hi) (hi - lo <= TT *
// TMM_MAX_LOOP: lavapipe's loop cap, loop_limit.glsl); the host runs them
// from the last chunk of t to the first, the first pass writing, later ones
// adding. Each output sums its terms in a fixed order on every run.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;        // taps
layout(constant_id = 4) const uint TC = 4u;       // channels per invocation
layout(constant_id = 5) const uint TT = 8u;       // positions per invocation
layout(constant_id = 6) const uint VEC = 0u;      // bit 0: gy rows as vec4, bit 1: w as vec4
const uint NU = TC + K - 1u;                      // output channels an invocation reads
const uint NW = 2u * TT - 1u;                     // lags of w a full block needs
// vec4 loads as in toeplitz_fwd.comp: VG needs TC == 4 and the block's first
// channel and base_gy multiples of 4; VW needs n, base_w and TT multiples of 4.
const bool VG = (VEC & 1u) != 0u;
const bool VW = (VEC & 2u) != 0u;

layout(std430, binding = 0) readonly buffer GY { float gy[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer DU { float du[]; };
layout(std430, binding = 0) readonly buffer GY4 { vec4 gy4[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };

// Row t of the block's gy tile: output channels c0 + m, m < NU; zero when
// the row is past n-1 (rok false) or the channel past the group's last.
void load_row(inout float gv[NU], uint row, uint c0, bool rok, uint gch[NU], bool gok[NU])
{
    [[unroll]] for (uint m = 0; m < NU; m++) {
        if (VG && m < TC) {
            if (m == 0u) {
                const vec4 v = gy4[(row + c0) >> 2];
                gv[m] = rok ? v.x : 0.0;
                gv[m + 1u] = rok ? v.y : 0.0;
                gv[m + 2u] = rok ? v.z : 0.0;
                gv[m + 3u] = rok ? v.w : 0.0;
            }
        } else {
            const float v = gy[row + gch[m]];   // loaded unconditionally, masked after
            gv[m] = rok && gok[m] ? v : 0.0;
        }
    }
}

layout(push_constant) uniform Push {
    uint n, d, dg, nbg;   // length, channels, channels per group, channel blocks per group
    uint ncb;             // channel blocks in all
    uint tb0, ntb;        // first s-block of this pass, s-blocks in it
    uint lo, hi;          // positions t of this pass
    uint accumulate;      // 0: du = terms; 1: du += terms
    uint base_gy, base_w, base_du;
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.ntb * p.ncb)
        return;
    const uint cb = idx % p.ncb;
    const uint s0 = (p.tb0 + idx / p.ncb) * TT;
    const uint g = cb / p.nbg;
    const uint cin = (cb % p.nbg) * TC;   // first input channel, within the group
    const uint c0 = g * p.dg + cin;       // first input channel
    const uint b = gl_WorkGroupID.z;
    const uint gbase = p.base_gy + b * p.n * p.d;
    const uint nm1 = p.n - 1u;

    // Output channel m of the block is c0 + m; lane c with tap a reads
    // m = c + (K-1) - a. Past the group's last channel it is absent: zero
    // (with K = 1 only lanes that are not stored get there). Loads use
    // clamped indices and masks select zero afterwards: no branches around
    // loads.
    uint gch[NU];
    bool gok[NU];
    [[unroll]] for (uint m = 0; m < NU; m++) {
        gok[m] = K == 1u || c0 + m < (g + 1u) * p.dg;
        gch[m] = min(c0 + m, p.d - 1u);
    }
    uint wrow[K];
    [[unroll]] for (uint a = 0; a < K; a++)
        wrow[a] = p.base_w + (g * K + a) * p.n;

    float acc[TT][TC];
    [[unroll]] for (uint i = 0; i < TT; i++)
        [[unroll]] for (uint c = 0; c < TC; c++)
            acc[i][c] = 0.0;

    // Diagonal block t0 = s0: lag j - i, terms with j >= i only.
    if (s0 >= p.lo && s0 < p.hi) {
        float gv[TT][NU];
        [[unroll]] for (uint j = 0; j < TT; j++)
            load_row(gv[j], gbase + min(s0 + j, nm1) * p.d, c0, s0 + j < p.n, gch, gok);
        [[unroll]] for (uint a = 0; a < K; a++) {
            float wd[TT];
            [[unroll]] for (uint q = 0; q < TT; q++)
                wd[q] = w[wrow[a] + min(q, nm1)];
            // constant bounds, so that every loop unrolls; j >= i folds away
            [[unroll]] for (uint i = 0; i < TT; i++)
                [[unroll]] for (uint j = 0; j < TT; j++)
                    [[unroll]] for (uint c = 0; c < TC; c++)
                        if (j >= i)
                            acc[i][c] = fma(wd[j - i], gv[j][c + K - 1u - a], acc[i][c]);
        }
    }

    // Full blocks t0 >= s0 + TT: lag t0 - s0 + j - i in [1, n) for rows t < n;
    // rows past n-1 (the last block) read as zero.
    const uint tend = min(p.hi, p.n);
    for (uint t0 = max(p.lo, s0 + TT); t0 < tend; t0 += TT) {
        float gv[TT][NU];
        [[unroll]] for (uint j = 0; j < TT; j++)
            load_row(gv[j], gbase + min(t0 + j, nm1) * p.d, c0, t0 + j < p.n, gch, gok);
        const uint lag0 = t0 - s0 - (TT - 1u);
        [[unroll]] for (uint a = 0; a < K; a++) {
            float wv[NW];
            if (VW) {
                // lags lag0-1 .. lag0+2TT-2 from TT/2 aligned vec4, clamped to the
                // row's last vec4 (reached only for rows t past n-1, which are zero)
                const uint v0 = (wrow[a] + lag0 - 1u) >> 2, vlast = ((wrow[a] + p.n) >> 2) - 1u;
                [[unroll]] for (uint e = 0; e < TT / 2u; e++) {
                    const vec4 v = w4[min(v0 + e, vlast)];
                    if (e > 0u)
                        wv[4u * e - 1u] = v.x;
                    wv[4u * e] = v.y; wv[4u * e + 1u] = v.z; wv[4u * e + 2u] = v.w;
                }
            } else {
                [[unroll]] for (uint q = 0; q < NW; q++)
                    wv[q] = w[wrow[a] + min(lag0 + q, nm1)];
            }
            [[unroll]] for (uint i = 0; i < TT; i++)
                [[unroll]] for (uint j = 0; j < TT; j++)
                    [[unroll]] for (uint c = 0; c < TC; c++)
                        acc[i][c] = fma(wv[j + TT - 1u - i], gv[j][c + K - 1u - a], acc[i][c]);
        }
    }

    [[unroll]] for (uint i = 0; i < TT; i++) {
        const uint s = s0 + i;
        if (s >= p.n)
            break;
        const uint row = p.base_du + (b * p.n + s) * p.d + c0;
        [[unroll]] for (uint c = 0; c < TC; c++)
            if (cin + c < p.dg)
                du[row + c] = (p.accumulate != 0u ? du[row + c] : 0.0) + acc[i][c];
    }
}
