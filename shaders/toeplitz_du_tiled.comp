#version 450
// Causal Toeplitz mixing, direct backward to the input, shared-memory tiles
// for GPUs (src/ops/toeplitz.c; the register-blocked variant is
// toeplitz_du.comp):
//   du[b, s, c'] = sum_{a<K} sum_{t>=s} w[g, a, t-s] * gy[b, t, c],  c = c' + (K-1) - a
// with g the group of c', over the c inside g (an anti-causal correlation:
// the product with Tᵀ). Laid out like
// toeplitz_fwd_tiled.comp: a 16 x 16 workgroup computes BT = 64 positions
// s0.. times BC = 64 input channels of one group, each invocation 4 x 4
// (positions ty + 16 i, channels tx + 16 j); per step of BS = 16 positions
// t0.. it stages the gy rows (channels c0 .. c0 + BC + K - 2, zero past the
// group's last channel and from n on) and per tap the BT + BS - 1 lags of w the step needs (zero
// below 0 and from n on). Steps run from the tile's first position on: the
// upper triangle of Tᵀ is skipped. Tile gl_WorkGroupID.x: s-tile
// tb0 + x / ncb, channel tile x % ncb.
//
// Passes: one dispatch adds the terms with t in [lo, hi) (multiples of BS,
// hi - lo <= BS * TMM_MAX_LOOP: lavapipe's loop cap, loop_limit.glsl); the
// host runs them from the last chunk of t to the first, the first pass
// writing, later ones adding. Each output sums its terms in a fixed order.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;        // taps
const uint TS = 16u;                              // invocations per axis (the host uses 16 x 16 x 1)
const uint BT = 64u;                              // positions per tile
const uint BC = 64u;                              // channels per tile
const uint BS = 16u;                              // positions t per step
const uint PT = BT / TS, PC = BC / TS;
const uint NU = BC + K - 1u;                      // output channels a tile reads
const uint NW = BT + BS - 1u;                     // lags of w a step needs
const uint NLU = (BS * NU + TS * TS - 1u) / (TS * TS);
const uint NLW = (K * NW + TS * TS - 1u) / (TS * TS);

layout(std430, binding = 0) readonly buffer GY { float gy[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) buffer DU { float du[]; };

layout(push_constant) uniform Push {
    uint n, d, dg, nbg;   // length, channels, channels per group, channel tiles per group
    uint ncb;             // channel tiles in all
    uint tb0, ntb;        // first s-tile of this pass, s-tiles in it
    uint lo, hi;          // positions t of this pass
    uint accumulate;      // 0: du = terms; 1: du += terms
    uint base_gy, base_w, base_du;
} p;

shared float gs[BS * NU];       // gs[jj * NU + m]: gy[t0 + jj, c0 + m]
shared float ws[K * NW];        // ws[a * NW + q]: w[g, a, t0 - s0 - (BT-1) + q]

void main()
{
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * TS + tx;
    const uint tile = gl_WorkGroupID.x;
    const uint cb = tile % p.ncb;
    const uint s0 = (p.tb0 + tile / p.ncb) * BT;
    const uint g = cb / p.nbg;
    const uint cin = (cb % p.nbg) * BC;   // first input channel, within the group
    const uint c0 = g * p.dg + cin;       // first input channel
    const uint b = gl_WorkGroupID.z;
    const uint gbase = p.base_gy + b * p.n * p.d;

    const uint gend = (g + 1u) * p.dg;   // the group's channels end here
    float acc[PT][PC];
    [[unroll]] for (uint i = 0; i < PT; i++)
        [[unroll]] for (uint j = 0; j < PC; j++)
            acc[i][j] = 0.0;

    const uint tend = min(p.hi, p.n);
    for (uint t0 = max(p.lo, s0); t0 < tend; t0 += BS) {
        [[unroll]] for (uint e = 0; e < NLU; e++) {
            const uint idx = tid + e * TS * TS;
            if (idx < BS * NU) {
                const uint t = t0 + idx / NU, c = c0 + idx % NU;
                gs[idx] = t < p.n && c < gend ? gy[gbase + t * p.d + c] : 0.0;
            }
        }
        const int lag0 = int(t0) - int(s0) - int(BT - 1u);
        [[unroll]] for (uint e = 0; e < NLW; e++) {
            const uint idx = tid + e * TS * TS;
            if (idx < K * NW) {
                const uint row = g * K + idx / NW;
                const int lag = lag0 + int(idx % NW);
                ws[idx] = lag >= 0 && lag < int(p.n) ? w[p.base_w + row * p.n + uint(lag)] : 0.0;
            }
        }
        barrier();
        [[unroll]] for (uint jj = 0; jj < BS; jj++)
            [[unroll]] for (uint a = 0; a < K; a++) {
                float uv[PC];
                [[unroll]] for (uint j = 0; j < PC; j++)
                    uv[j] = gs[jj * NU + tx + TS * j + K - 1u - a];
                [[unroll]] for (uint i = 0; i < PT; i++) {
                    // lag t - s = t0 + jj - (s0 + ty + 16 i)
                    const uint q = jj + BT - 1u - ty - TS * i;
                    [[unroll]] for (uint j = 0; j < PC; j++)
                        acc[i][j] = fma(ws[a * NW + q], uv[j], acc[i][j]);
                }
            }
        barrier();
    }

    [[unroll]] for (uint i = 0; i < PT; i++) {
        const uint s = s0 + ty + TS * i;
        if (s < p.n) {
            [[unroll]] for (uint j = 0; j < PC; j++) {
                const uint row = p.base_du + (b * p.n + s) * p.d + c0 + tx + TS * j;
                if (cin + tx + TS * j < p.dg)
                    du[row] = (p.accumulate != 0u ? du[row] : 0.0) + acc[i][j];
            }
        }
    }
}
