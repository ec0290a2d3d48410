#version 450
// Causal Toeplitz mixing, direct forward (src/ops/toeplitz.c, src/ops/toeplitz.h):
//   y[b, t, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * u[b, s, c-(K-1)+a]
// with g the group of output channel c; input channels below the group's
// first channel count as zero (a head's window stays inside the head).
//
// Register-blocked, no shared memory (a shared-memory variant for GPUs would
// be another kernel): an invocation computes TT consecutive positions t0..
// times TC consecutive channels of one group (a group's last block may be
// partial; its extra lanes are computed on clamped indices and not stored)
// for batch b = gl_WorkGroupID.z. For each block of TT source positions it
// loads TT x (TC+K-1) values of u and a window of 2TT-1 lags of w per tap and
// makes TT*TT*TC*K fmas from registers. Invocation x is t-block
// tb0 + x / ncb, channel block x % ncb. Loads use clamped indices and masks
// select zero afterwards: no branches around loads.
//
// Passes: one dispatch adds the terms with s in [lo, hi), lo and hi multiples
// of TT, hi - lo <= TT * TMM_MAX_LOOP (loop_limit.glsl), so an invocation makes
// at most TMM_MAX_LOOP loop iterations (all inner loops are unrolled). The
// first pass writes beta + its terms, later passes add theirs. Every output
// sums its terms in increasing s, the same order on every run.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;   // taps
layout(constant_id = 4) const uint TC = 4u;  // channels per invocation
layout(constant_id = 5) const uint TT = 8u;  // positions per invocation
layout(constant_id = 6) const uint VEC = 0u; // bit 0: u rows as vec4, bit 1: w as vec4 (see below)
const uint NU = TC + K - 1u;                 // input channels an invocation reads
const uint NW = 2u * TT - 1u;                // lags of w a full block needs
// vec4 loads (the host sets the bits when the offsets line up): VU needs
// TC == 4 and every block's first channel and base_u a multiple of 4; VW
// needs n, base_w and TT multiples of 4. llvmpipe fetches SSBO data lane by
// lane in a loop with bounds checks, so loads, not fmas, bound these kernels;
// a vec4 load costs far less than four float loads (kernels ~2x faster).
const bool VU = (VEC & 1u) != 0u;
const bool VW = (VEC & 2u) != 0u;

layout(std430, binding = 0) readonly buffer U { float u[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(std430, binding = 0) readonly buffer U4 { vec4 u4[]; };
layout(std430, binding = 1) readonly buffer W4 { vec4 w4[]; };

layout(push_constant) uniform Push {
    uint n, d, dg, nbg;        // length, channels, channels per group, channel blocks per group
    uint ncb;                  // channel blocks in all (groups * nbg)
    uint tb0, ntb;             // first t-block of this pass, t-blocks in it
    uint lo, hi;               // source positions of this pass
    uint accumulate;           // 0: y = beta + terms; 1: y += terms
    uint base_u, base_w, base_beta, base_y;  // element offsets in the bindings
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.ntb * p.ncb)
        return;
    const uint cb = idx % p.ncb;
    const uint t0 = (p.tb0 + idx / p.ncb) * TT;
    const uint g = cb / p.nbg;
    const uint cin = (cb % p.nbg) * TC;   // first channel, within the group
    const uint c0 = g * p.dg + cin;       // first output channel
    const uint b = gl_WorkGroupID.z;
    const uint ubase = p.base_u + b * p.n * p.d;
    const uint wbase = p.base_w + g * K * p.n;
    const uint nm1 = p.n - 1u;

    // Input channel m of the block is c0 - (K-1) + m. Only m < K-1 can fall
    // below the group's first channel (zero); past d-1 only for lanes that are
    // not stored (clamped).
    uint uch[NU];
    bool uok[NU];
    [[unroll]] for (uint m = 0; m < NU; m++) {
        int ci = int(c0 + m) - int(K - 1u);
        uok[m] = ci >= int(g * p.dg);
        uch[m] = uint(clamp(ci, 0, int(p.d) - 1));
    }

    float acc[TT][TC];
    [[unroll]] for (uint i = 0; i < TT; i++)
        [[unroll]] for (uint c = 0; c < TC; c++)
            acc[i][c] = 0.0;

    // Full blocks: s0 + TT <= t0, so every lag t - s is in [1, n) for the
    // positions that are stored (larger lags, of positions past n-1, clamped).
    const uint send = min(p.hi, t0);
    for (uint s0 = p.lo; s0 < send; s0 += TT) {
        float uv[TT][NU];
        [[unroll]] for (uint j = 0; j < TT; j++) {
            const uint row = ubase + (s0 + j) * p.d;
            [[unroll]] for (uint m = 0; m < NU; m++) {
                if (VU && m >= K - 1u) {
                    if (m == K - 1u) {
                        const vec4 v = u4[(row + c0) >> 2];
                        uv[j][m] = v.x; uv[j][m + 1u] = v.y; uv[j][m + 2u] = v.z; uv[j][m + 3u] = v.w;
                    }
                } else {
                    const float v = u[row + uch[m]];   // loaded unconditionally, masked after
                    uv[j][m] = (m + 1u < K && !uok[m]) ? 0.0 : v;
                }
            }
        }
        const uint lag0 = t0 - s0 - (TT - 1u);
        [[unroll]] for (uint a = 0; a < K; a++) {
            float wv[NW];
            const uint wrow = wbase + a * p.n;
            if (VW) {
                // lags lag0-1 .. lag0+2TT-2 from TT/2 aligned vec4 (lag0 - 1 = t0 - s0 - TT);
                // clamped to the row's last vec4, which only positions past n-1 reach
                const uint v0 = (wrow + lag0 - 1u) >> 2, vlast = ((wrow + p.n) >> 2) - 1u;
                [[unroll]] for (uint e = 0; e < TT / 2u; e++) {
                    const vec4 v = w4[min(v0 + e, vlast)];
                    if (e > 0u)
                        wv[4u * e - 1u] = v.x;
                    wv[4u * e] = v.y; wv[4u * e + 1u] = v.z; wv[4u * e + 2u] = v.w;
                }
            } else {
                [[unroll]] for (uint q = 0; q < NW; q++)
                    wv[q] = w[wrow + min(lag0 + q, nm1)];
            }
            [[unroll]] for (uint i = 0; i < TT; i++)
                [[unroll]] for (uint j = 0; j < TT; j++)
                    [[unroll]] for (uint c = 0; c < TC; c++)
                        acc[i][c] = fma(wv[i + TT - 1u - j], uv[j][c + a], acc[i][c]);
        }
    }

    // Diagonal block s0 = t0: lag i - j, terms with j <= i only.
    if (t0 >= p.lo && t0 < p.hi) {
        float uv[TT][NU];
        [[unroll]] for (uint j = 0; j < TT; j++) {
            const uint row = ubase + min(t0 + j, nm1) * p.d;
            [[unroll]] for (uint m = 0; m < NU; m++)
            {
                const float v = u[row + uch[m]];   // loaded unconditionally, masked after
                uv[j][m] = (m + 1u < K && !uok[m]) ? 0.0 : v;
            }
        }
        [[unroll]] for (uint a = 0; a < K; a++) {
            float wd[TT];
            [[unroll]] for (uint q = 0; q < TT; q++)
                wd[q] = w[wbase + a * p.n + min(q, nm1)];
            // constant bounds, so that every loop unrolls; j <= i folds away
            [[unroll]] for (uint i = 0; i < TT; i++)
                [[unroll]] for (uint j = 0; j < TT; j++)
                    [[unroll]] for (uint c = 0; c < TC; c++)
                        if (j <= i)
                            acc[i][c] = fma(wd[i - j], uv[j][c + a], acc[i][c]);
        }
    }

    [[unroll]] for (uint i = 0; i < TT; i++) {
        const uint t = t0 + i;
        if (t >= p.n)
            break;
        const uint row = p.base_y + (b * p.n + t) * p.d + c0;
        const float bias = beta[p.base_beta + g * p.n + t];
        [[unroll]] for (uint c = 0; c < TC; c++)
            if (cin + c < p.dg)
                y[row + c] = (p.accumulate != 0u ? y[row + c] : bias) + acc[i][c];
    }
}
