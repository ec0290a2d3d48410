#version 450
// Causal Toeplitz mixing, direct backward to the parameters: partial sums of
//   dw[g, a, k]  = sum_b sum_{c in g} sum_{t>=k} gy[b, t, c] * u[b, t-k, c-(K-1)+a]
//   dbeta[g, t]  = sum_b sum_{c in g} gy[b, t, c]
// (src/ops/toeplitz.c adds the partial rows up with the deterministic column sums).
//
// Invocation x = kb + nkb * (g + G * (slab + nslab * q)), batch b = z (b_first + z
// overall): lags k0 = kb*TT .. k0+TT-1 of group g, summed over the channel
// blocks [slab*ns, slab*ns + ns) of the group (TC channels each) and over the
// positions t of t-chunk q (ctb blocks of TT positions), t >= k. Register
// blocked, no shared memory: per block of TT positions and TC channels it
// loads TT x TC of gy and (2TT-1) x (TC+K-1) of u and makes TT*TT*TC*K fmas.
// Loop iterations per invocation: at most ctb * (ns + 1) <= TMM_MAX_LOOP
// (lavapipe's loop cap, loop_limit.glsl), kept so by the host; every other
// loop is unrolled.
//
// Output: dwp[p * G*K*n + (g*K + a)*n + k] with p = (b*nslab + slab)*nq + q,
// every element of every partial row written (zero where the chunk holds no
// t >= k). Invocations with kb == 0 also write the dbeta partials
// dbp[(b*nslab + slab) * G*n + g*n + t] for the t of their chunk. Sums run in
// a fixed order: t-blocks up, channel blocks up, then j, c (unrolled).
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const uint K = 1u;   // taps
layout(constant_id = 4) const uint TC = 4u;  // channels per block
layout(constant_id = 5) const uint TT = 8u;  // lags per invocation = positions per block
layout(constant_id = 6) const uint VEC = 0u; // bit 0: rows of u and gy as vec4
const uint NU = TC + K - 1u;                 // input channels a block reads
const uint NR = 2u * TT - 1u;                // rows of u a block reads
// vec4 loads as in toeplitz_fwd.comp: VR needs TC == 4 and the channels per
// group, d, base_u and base_gy multiples of 4.
const bool VR = (VEC & 1u) != 0u;

layout(std430, binding = 0) readonly buffer U { float u[]; };
layout(std430, binding = 1) readonly buffer GY { float gy[]; };
layout(std430, binding = 2) writeonly buffer DWP { float dwp[]; };
layout(std430, binding = 3) writeonly buffer DBP { float dbp[]; };
layout(std430, binding = 0) readonly buffer U4 { vec4 u4[]; };
layout(std430, binding = 1) readonly buffer GY4 { vec4 gy4[]; };

layout(push_constant) uniform Push {
    uint n, d, dg, nbg;       // length, channels, channels per group, channel blocks per group
    uint groups, nkb;         // G, lag blocks
    uint ns, nslab;           // channel blocks per slab, slabs per group
    uint ctb, nq, ntb;        // t-blocks per chunk, chunks, t-blocks
    uint b_first;             // batch index of z = 0 (partial rows count from batch 0)
    uint base_u, base_gy, base_dwp, base_dbp;
} p;

float acc[K][TT];
float bsum[TT];

// Adds one block: positions t0.., the channel block starting at channel c0
// (cin within the group). DIAG: t0 == k0, terms with t >= k only. Loads use
// clamped indices and masks select zero afterwards: no branches around loads.
void block(uint ubase, uint gbase, uint t0, uint k0, uint c0, uint cin, const bool DIAG)
{
    const uint nm1 = p.n - 1u;
    float gv[TT][TC];
    [[unroll]] for (uint j = 0; j < TT; j++) {
        const bool rok = t0 + j < p.n;   // rows past n-1 read as zero
        const uint row = gbase + min(t0 + j, nm1) * p.d + c0;
        [[unroll]] for (uint c = 0; c < TC; c++) {
            if (VR) {
                if (c == 0u) {
                    const vec4 v = gy4[row >> 2];
                    gv[j][c] = rok ? v.x : 0.0;
                    gv[j][c + 1u] = rok ? v.y : 0.0;
                    gv[j][c + 2u] = rok ? v.z : 0.0;
                    gv[j][c + 3u] = rok ? v.w : 0.0;
                }
            } else {
                // channels past the group's end (a partial block) read as zero
                const float v = gy[row + min(c, p.d - 1u - c0)];
                gv[j][c] = (rok && cin + c < p.dg) ? v : 0.0;
            }
        }
        [[unroll]] for (uint c = 0; c < TC; c++)
            bsum[j] += gv[j][c];
    }
    // u row r is position t0 - k0 - (TT-1) + r, i.e. (t0 + j) - (k0 + kk) at
    // r = j - kk + TT-1 (rows r < TT-1 of a diagonal block are not used);
    // input channel m is c0 - (K-1) + m, zero below the group's first channel
    float uv[NR][NU];
    [[unroll]] for (uint r = 0; r < NR; r++) {
        const uint row = ubase + min(t0 - k0 + r - (TT - 1u), nm1) * p.d;
        [[unroll]] for (uint m = 0; m < NU; m++) {
            if (VR && m + 1u >= K) {
                if (m + 1u == K) {
                    const vec4 v = u4[(row + c0) >> 2];
                    uv[r][m] = v.x;
                    uv[r][m + 1u] = v.y;
                    uv[r][m + 2u] = v.z;
                    uv[r][m + 3u] = v.w;
                }
            } else {
                const int ci = int(c0 + m) - int(K - 1u);
                const float v = u[row + uint(clamp(ci, 0, int(p.d) - 1))];
                uv[r][m] = (m + 1u < K && ci < int(c0 - cin)) ? 0.0 : v;   // c0 - cin: the group's first channel
            }
        }
    }
    // constant bounds, so that every loop unrolls; kk <= j folds away
    [[unroll]] for (uint j = 0; j < TT; j++)
        [[unroll]] for (uint kk = 0; kk < TT; kk++)
            [[unroll]] for (uint c = 0; c < TC; c++)
                [[unroll]] for (uint a = 0; a < K; a++)
                    if (!DIAG || kk <= j)
                        acc[a][kk] = fma(gv[j][c], uv[j + TT - 1u - kk][c + a], acc[a][kk]);
}

void store_bsum(uint bg, uint slab, uint g, uint t0)
{
    const uint o = p.base_dbp + (bg * p.nslab + slab) * (p.groups * p.n) + g * p.n + t0;
    [[unroll]] for (uint j = 0; j < TT; j++)
        if (t0 + j < p.n)
            dbp[o + j] = bsum[j];
}

void main()
{
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.nkb * p.groups * p.nslab * p.nq)
        return;
    const uint kb = idx % p.nkb;
    uint rest = idx / p.nkb;
    const uint g = rest % p.groups;
    rest /= p.groups;
    const uint slab = rest % p.nslab;
    const uint q = rest / p.nslab;
    const uint b = gl_WorkGroupID.z;
    const uint bg = p.b_first + b;   // batch index for the partial rows
    const uint k0 = kb * TT;
    const uint ubase = p.base_u + b * p.n * p.d;
    const uint gbase = p.base_gy + b * p.n * p.d;
    const uint cb_lo = slab * p.ns;
    const uint cb_hi = min(cb_lo + p.ns, p.nbg);
    const uint tb_lo = q * p.ctb;
    const uint tb_hi = min(tb_lo + p.ctb, p.ntb);

    [[unroll]] for (uint a = 0; a < K; a++)
        [[unroll]] for (uint kk = 0; kk < TT; kk++)
            acc[a][kk] = 0.0;

    // t-blocks of the chunk at or after the lag block (t >= k); the first is
    // the diagonal block when it lies in the chunk
    uint tb = max(tb_lo, kb);
    if (tb == kb && tb < tb_hi) {
        [[unroll]] for (uint j = 0; j < TT; j++)
            bsum[j] = 0.0;
        for (uint cb = cb_lo; cb < cb_hi; cb++)
            block(ubase, gbase, tb * TT, k0, g * p.dg + cb * TC, cb * TC, true);
        if (kb == 0u)
            store_bsum(bg, slab, g, tb * TT);
        tb++;
    }
    for (; tb < tb_hi; tb++) {
        [[unroll]] for (uint j = 0; j < TT; j++)
            bsum[j] = 0.0;
        for (uint cb = cb_lo; cb < cb_hi; cb++)
            block(ubase, gbase, tb * TT, k0, g * p.dg + cb * TC, cb * TC, false);
        if (kb == 0u)
            store_bsum(bg, slab, g, tb * TT);
    }

    const uint pr = (bg * p.nslab + slab) * p.nq + q;
    [[unroll]] for (uint a = 0; a < K; a++) {
        const uint o = p.base_dwp + pr * (p.groups * K * p.n) + (g * K + a) * p.n + k0;
        [[unroll]] for (uint kk = 0; kk < TT; kk++)
            if (k0 + kk < p.n)
                dwp[o + kk] = acc[a][kk];
    }
}
