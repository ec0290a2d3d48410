#version 450
// Causal Toeplitz mixing, direct backward to the parameters, shared-memory
// tiles for GPUs (src/ops/toeplitz.c; the register-blocked variant is
// toeplitz_dw.comp, whose partial-row layout this one shares): partial sums of
//   dw[g, a, k]  = sum_b sum_{c in g} sum_{t>=k} gy[b, t, c] * u[b, t-k, c-(K-1)+a]
//   dbeta[g, t]  = sum_b sum_{c in g} gy[b, t, c]
//
// Workgroup x = kb + nkb * (g + G * (slab + nslab * q)), batch b = z (b_first
// + z overall), 16 x 16 invocations: lags k0 = kb*BK .. k0+BK-1 (BK = 64) of
// group g, summed over the channel blocks [slab*ns, slab*ns + ns) of the
// group (BC = 16 channels each) and over the positions t of t-chunk q (ctb
// blocks of BS = 16 positions), t >= k. Per (t-block, channel block) it
// stages gy (BS x BC) and the u rows t0 - k0 - (BK-1) .. t0 - k0 + BS - 1
// (BC + K - 1 channels; zero below row 0 and channel 0, from n and d on: the
// terms with t < k multiply by zero). Invocation (tx, ty) adds, for channel
// ty of the block, the terms of lags k0 + tx + 16 i (i < 4) for every tap;
// at the end the 16 channel lanes are summed in shared memory, lane by lane.
// t-blocks start at the lag block's first position: no block lies wholly at
// t < k. Loop iterations per invocation: at most ctb * (ns + 1) <=
// TMM_MAX_LOOP (lavapipe's loop cap, loop_limit.glsl), kept so by the host;
// every other loop unrolls.
//
// Output: dwp[p * G*K*n + (g*K + a)*n + k] with p = (b*nslab + slab)*nq + q,
// every element of every partial row written (zero where the chunk holds no
// t >= k). Workgroups with kb == 0 also write the dbeta partials
// dbp[(b*nslab + slab) * G*n + g*n + t] for the t of their chunk. Sums run in
// a fixed order: t-blocks up, channel blocks up, positions, then lanes.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;   // taps
const uint TS = 16u;                         // invocations per axis (the host uses 16 x 16 x 1)
const uint BK = 64u;                         // lags per workgroup
const uint BC = 16u;                         // channels per block (one per lane ty)
const uint BS = 16u;                         // positions per t-block
const uint PK = BK / TS;                     // lags per invocation
const uint NU = BC + K - 1u;                 // input channels a block reads
const uint NR = BS + BK - 1u;                // rows of u a block reads
const uint NLU = (NR * NU + TS * TS - 1u) / (TS * TS);

layout(std430, binding = 0) readonly buffer U { float u[]; };
layout(std430, binding = 1) readonly buffer GY { float gy[]; };
layout(std430, binding = 2) writeonly buffer DWP { float dwp[]; };
layout(std430, binding = 3) writeonly buffer DBP { float dbp[]; };

layout(push_constant) uniform Push {
    uint n, d, dg, nbg;       // length, channels, channels per group, channel blocks per group
    uint groups, nkb;         // G, lag blocks
    uint ns, nslab;           // channel blocks per slab, slabs per group
    uint ctb, nq, ntb;        // t-blocks per chunk, chunks, t-blocks
    uint b_first;             // batch index of z = 0 (partial rows count from batch 0)
    uint base_u, base_gy, base_dwp, base_dbp;
} p;

shared float us[NR * NU];   // us[r * NU + m]: u[t0 - k0 - (BK-1) + r, c0 - (K-1) + m]
shared float gs[BS * BC];   // gs[jj * BC + c]: gy[t0 + jj, c0 + c]
shared float red[TS * BK];  // red[lane * BK + kk]: one tap's sums per channel lane

void main()
{
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * TS + tx;
    const uint idx = gl_WorkGroupID.x;
    const uint kb = idx % p.nkb;
    uint rest = idx / p.nkb;
    const uint g = rest % p.groups;
    rest /= p.groups;
    const uint slab = rest % p.nslab;
    const uint q = rest / p.nslab;
    const uint b = gl_WorkGroupID.z;
    const uint bg = p.b_first + b;   // batch index for the partial rows
    const uint k0 = kb * BK;
    const uint ubase = p.base_u + b * p.n * p.d;
    const uint gbase = p.base_gy + b * p.n * p.d;
    const uint cb_lo = slab * p.ns;
    const uint cb_hi = min(cb_lo + p.ns, p.nbg);
    const uint tb_hi = min(q * p.ctb + p.ctb, p.ntb);
    const bool sum_beta = kb == 0u && ty == 0u;   // lane (tx, 0) sums dbeta at t0 + tx

    float acc[K][PK];
    [[unroll]] for (uint a = 0; a < K; a++)
        [[unroll]] for (uint i = 0; i < PK; i++)
            acc[a][i] = 0.0;

    for (uint tb = max(q * p.ctb, k0 / BS); tb < tb_hi; tb++) {
        const uint t0 = tb * BS;
        float bsum = 0.0;
        for (uint cb = cb_lo; cb < cb_hi; cb++) {
            const uint cin = cb * BC, c0 = g * p.dg + cin;
            [[unroll]] for (uint e = 0; e < (BS * BC) / (TS * TS); e++) {
                const uint i = tid + e * TS * TS, t = t0 + i / BC, c = i % BC;
                gs[i] = t < p.n && cin + c < p.dg ? gy[gbase + t * p.d + c0 + c] : 0.0;
            }
            const int row0 = int(t0) - int(k0) - int(BK - 1u);
            [[unroll]] for (uint e = 0; e < NLU; e++) {
                const uint i = tid + e * TS * TS;
                if (i < NR * NU) {
                    const int row = row0 + int(i / NU), ch = int(c0 + i % NU) - int(K - 1u);
                    us[i] = row >= 0 && row < int(p.n) && ch >= int(g * p.dg) && ch < int(p.d)
                                ? u[ubase + uint(row) * p.d + uint(ch)] : 0.0;
                }
            }
            barrier();
            [[unroll]] for (uint jj = 0; jj < BS; jj++) {
                const float gv = gs[jj * BC + ty];
                // t - k = t0 + jj - (k0 + tx + 16 i): row jj + BK-1 - tx - 16 i
                [[unroll]] for (uint a = 0; a < K; a++)
                    [[unroll]] for (uint i = 0; i < PK; i++)
                        acc[a][i] = fma(gv, us[(jj + BK - 1u - tx - TS * i) * NU + ty + a], acc[a][i]);
            }
            if (sum_beta)
                [[unroll]] for (uint c = 0; c < BC; c++)
                    bsum += gs[tx * BC + c];
            barrier();
        }
        if (sum_beta && t0 + tx < p.n)
            dbp[p.base_dbp + (bg * p.nslab + slab) * (p.groups * p.n) + g * p.n + t0 + tx] = bsum;
    }

    const uint pr = (bg * p.nslab + slab) * p.nq + q;
    [[unroll]] for (uint a = 0; a < K; a++) {
        [[unroll]] for (uint i = 0; i < PK; i++)
            red[ty * BK + tx + TS * i] = acc[a][i];
        barrier();
        if (tid < BK && k0 + tid < p.n) {
            float s = 0.0;
            [[unroll]] for (uint l = 0; l < TS; l++)
                s += red[l * BK + tid];
            dwp[p.base_dwp + pr * (p.groups * K * p.n) + (g * K + a) * p.n + k0 + tid] = s;
        }
        barrier();
    }
}
