#version 450
// Causal Toeplitz mixing, direct forward, shared-memory tiles for GPUs
// (src/ops/toeplitz.c; the register-blocked variant for CPU devices is
// toeplitz_fwd.comp):
//   y[b, t, c] = beta[g, t] + sum_{a<K} sum_{s<=t} w[g, a, t-s] * u[b, s, c-(K-1)+a]
// (input channels below group g's first count as zero)
//
// A product with the lower-triangular Toeplitz matrix T[t][s] = w[t-s], done
// as a tiled matmul whose A tiles are read from w by index. A workgroup of
// 16 x 16 invocations computes a tile of BT = 64 positions t0.. times BC = 64
// channels of one group (batch b = gl_WorkGroupID.z); each invocation 4 x 4
// outputs strided by 16 (positions ty + 16 i, channels tx + 16 j). Per step
// of BS = 16 source positions s0.. it stages in shared memory the u rows
// (BC + K - 1 channels, zero outside the group) and, per tap, the BT + BS - 1
// lags of w the step needs (zero below 0 and from n on: the diagonal tile's
// upper triangle multiplies by zero, no masks). Steps run from the pass's
// first position to the tile's last: tiles above the diagonal are skipped.
// Tile number gl_WorkGroupID.x: t-tile tb0 + x / ncb, channel tile x % ncb.
//
// Passes: one dispatch adds the terms with s in [lo, hi) (multiples of BS,
// hi - lo <= BS * TMM_MAX_LOOP: lavapipe's loop cap, loop_limit.glsl; all
// other loops unroll). The first pass writes beta + its terms, later passes
// add theirs; each output sums its terms in a fixed order.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;   // taps
const uint TS = 16u;                         // invocations per axis (the host uses 16 x 16 x 1)
const uint BT = 64u;                         // positions per tile
const uint BC = 64u;                         // channels per tile
const uint BS = 16u;                         // source positions per step
const uint PT = BT / TS, PC = BC / TS;       // outputs per invocation, per axis
const uint NU = BC + K - 1u;                 // input channels a tile reads
const uint NW = BT + BS - 1u;                // lags of w a step needs
const uint NLU = (BS * NU + TS * TS - 1u) / (TS * TS);   // staging loads per invocation
const uint NLW = (K * NW + TS * TS - 1u) / (TS * TS);

layout(std430, binding = 0) readonly buffer U { float u[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint n, d, dg, nbg;        // length, channels, channels per group, channel tiles per group
    uint ncb;                  // channel tiles in all (groups * nbg)
    uint tb0, ntb;             // first t-tile of this pass, t-tiles in it
    uint lo, hi;               // source positions of this pass
    uint accumulate;           // 0: y = beta + terms; 1: y += terms
    uint base_u, base_w, base_beta, base_y;  // element offsets in the bindings
} p;

shared float us[BS * NU];   // us[jj * NU + m]: u[s0 + jj, c0 - (K-1) + m]
shared float ws[K * NW];    // ws[a * NW + q]: w[g, a, t0 - s0 - (BS-1) + q]

void main()
{
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * TS + tx;
    const uint tile = gl_WorkGroupID.x;
    const uint cb = tile % p.ncb;
    const uint t0 = (p.tb0 + tile / p.ncb) * BT;
    const uint g = cb / p.nbg;
    const uint cin = (cb % p.nbg) * BC;   // first channel, within the group
    const uint c0 = g * p.dg + cin;       // first output channel
    const uint b = gl_WorkGroupID.z;
    const uint ubase = p.base_u + b * p.n * p.d;
    const uint wbase = p.base_w + g * K * p.n;

    float acc[PT][PC];
    [[unroll]] for (uint i = 0; i < PT; i++)
        [[unroll]] for (uint j = 0; j < PC; j++)
            acc[i][j] = 0.0;

    const uint send = min(p.hi, t0 + BT);
    for (uint s0 = p.lo; s0 < send; s0 += BS) {
        [[unroll]] for (uint e = 0; e < NLU; e++) {
            const uint idx = tid + e * TS * TS;
            if (idx < BS * NU) {
                const uint s = s0 + idx / NU;
                const int ch = int(c0 + idx % NU) - int(K - 1u);
                us[idx] = s < p.n && ch >= int(g * p.dg) && ch < int(p.d) ? u[ubase + s * p.d + uint(ch)] : 0.0;
            }
        }
        const int lag0 = int(t0) - int(s0) - int(BS - 1u);
        [[unroll]] for (uint e = 0; e < NLW; e++) {
            const uint idx = tid + e * TS * TS;
            if (idx < K * NW) {
                const int lag = lag0 + int(idx % NW);
                ws[idx] = lag >= 0 && lag < int(p.n) ? w[wbase + (idx / NW) * p.n + uint(lag)] : 0.0;
            }
        }
        barrier();
        [[unroll]] for (uint jj = 0; jj < BS; jj++)
            [[unroll]] for (uint a = 0; a < K; a++) {
                float wv[PT], uv[PC];
                [[unroll]] for (uint i = 0; i < PT; i++)
                    wv[i] = ws[a * NW + ty + TS * i + BS - 1u - jj];
                [[unroll]] for (uint j = 0; j < PC; j++)
                    uv[j] = us[jj * NU + tx + TS * j + a];
                [[unroll]] for (uint i = 0; i < PT; i++)
                    [[unroll]] for (uint j = 0; j < PC; j++)
                        acc[i][j] = fma(wv[i], uv[j], acc[i][j]);
            }
        barrier();
    }

    [[unroll]] for (uint i = 0; i < PT; i++) {
        const uint t = t0 + ty + TS * i;
        if (t < p.n) {
            const float bias = beta[p.base_beta + g * p.n + t];
            [[unroll]] for (uint j = 0; j < PC; j++) {
                const uint row = p.base_y + (b * p.n + t) * p.d + c0 + tx + TS * j;
                if (cin + tx + TS * j < p.dg)
                    y[row] = (p.accumulate != 0u ? y[row] : bias) + acc[i][j];
            }
        }
    }
}
