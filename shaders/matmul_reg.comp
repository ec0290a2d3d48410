#version 450
// Register-blocked matmul for CPU devices (lavapipe): no shared memory and no
// barriers; each invocation computes a BM x BN block of C in registers, K
// unrolled by 4. Rows and columns past the edge are clamped to the last valid
// one for loading (no branches in the inner loop) and skipped when storing,
// so any m, n, k work. VEC (id 7) says which operands may be read as vec4
// (bit 0: A, bit 1: B) and whether C may be written as vec4 (bit 2): the host
// sets a bit when the base offset, batch stride and row stride of the operand
// are all multiples of 4 floats.
#extension GL_EXT_control_flow_attributes : require
#define BM 16
#define BN 16
#include "matmul_common.glsl"

layout(constant_id = 7) const uint VEC = 0u;
const bool VA = (VEC & 1u) != 0u;
const bool VB = (VEC & 2u) != 0u;
const bool VC = (VEC & 4u) != 0u;

layout(std430, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(std430, binding = 3) buffer C4 { vec4 c4[]; };

#ifndef BM
#endif
#ifndef BN
#endif

void main()
{
    const uint M = p.m, N = p.n, K = p.k;
#ifdef SWAP
    const uint m0 = gl_GlobalInvocationID.x * BM;
    const uint n0 = gl_GlobalInvocationID.y * BN;
#else
    const uint m0 = gl_GlobalInvocationID.y * BM;
    const uint n0 = gl_GlobalInvocationID.x * BN;
#endif
    if (m0 >= M || n0 >= N)
        return;
    const uint batch = gl_WorkGroupID.z;
    const uint abase = p.base_a + batch * p.stride_a;
    const uint bbase = p.base_b + batch * p.stride_b;
    const uint cbase = p.base_c + batch * p.stride_c;

    // Per-row (A) and per-column (B) start offsets, clamped at the edges.
    // Along the contiguous axis of a vec4 operand the clamp is per group of 4:
    // with the extent a multiple of 4, a group is either wholly in or out.
    uint ra[BM], cb[BN];
    [[unroll]] for (uint i = 0; i < BM; i++) {
        uint r = min(m0 + i, M - 1u);
        if (TRANS_A && VA)
            r = min(m0 + (i & ~3u), M - 4u) + (i & 3u);
        ra[i] = TRANS_A ? abase + r : abase + r * K;
    }
    [[unroll]] for (uint j = 0; j < BN; j++) {
        uint c = min(n0 + j, N - 1u);
        if (!TRANS_B && VB)
            c = min(n0 + (j & ~3u), N - 4u) + (j & 3u);
        cb[j] = TRANS_B ? bbase + c * K : bbase + c;
    }

    float acc[BM][BN];
    [[unroll]] for (uint i = 0; i < BM; i++)
        [[unroll]] for (uint j = 0; j < BN; j++)
            acc[i][j] = 0.0;

    uint k = 0;
    for (; k + 4u <= K; k += 4u) {
        float av[BM][4], bv[4][BN];
        // A: element (i, k + kk)
        if (!TRANS_A && VA) {
            [[unroll]] for (uint i = 0; i < BM; i++) {
                vec4 v = a4[(ra[i] + k) >> 2];
                av[i][0] = v.x; av[i][1] = v.y; av[i][2] = v.z; av[i][3] = v.w;
            }
        } else if (TRANS_A && VA) {
            [[unroll]] for (uint kk = 0; kk < 4; kk++)
                [[unroll]] for (uint i = 0; i < BM; i += 4) {
                    vec4 v = a4[(ra[i] + (k + kk) * M) >> 2];
                    av[i][kk] = v.x; av[i + 1][kk] = v.y; av[i + 2][kk] = v.z; av[i + 3][kk] = v.w;
                }
        } else {
            [[unroll]] for (uint kk = 0; kk < 4; kk++)
                [[unroll]] for (uint i = 0; i < BM; i++)
                    av[i][kk] = TRANS_A ? a1[ra[i] + (k + kk) * M] : a1[ra[i] + k + kk];
        }
        // B: element (k + kk, j)
        if (TRANS_B && VB) {
            [[unroll]] for (uint j = 0; j < BN; j++) {
                vec4 v = b4[(cb[j] + k) >> 2];
                bv[0][j] = v.x; bv[1][j] = v.y; bv[2][j] = v.z; bv[3][j] = v.w;
            }
        } else if (!TRANS_B && VB) {
            [[unroll]] for (uint kk = 0; kk < 4; kk++)
                [[unroll]] for (uint j = 0; j < BN; j += 4) {
                    vec4 v = b4[(cb[j] + (k + kk) * N) >> 2];
                    bv[kk][j] = v.x; bv[kk][j + 1] = v.y; bv[kk][j + 2] = v.z; bv[kk][j + 3] = v.w;
                }
        } else {
            [[unroll]] for (uint kk = 0; kk < 4; kk++)
                [[unroll]] for (uint j = 0; j < BN; j++)
                    bv[kk][j] = TRANS_B ? b1[cb[j] + k + kk] : b1[cb[j] + (k + kk) * N];
        }
        [[unroll]] for (uint i = 0; i < BM; i++)
            [[unroll]] for (uint j = 0; j < BN; j++)
                [[unroll]] for (uint kk = 0; kk < 4; kk++)
                    acc[i][j] = fma(av[i][kk], bv[kk][j], acc[i][j]);
    }
    // The last k % 4 steps (never with a vec4 operand whose rows run along k).
    for (; k < K; k++) {
        float av[BM], bv[BN];
        [[unroll]] for (uint i = 0; i < BM; i++)
            av[i] = TRANS_A ? a1[ra[i] + k * M] : a1[ra[i] + k];
        [[unroll]] for (uint j = 0; j < BN; j++)
            bv[j] = TRANS_B ? b1[cb[j] + k] : b1[cb[j] + k * N];
        [[unroll]] for (uint i = 0; i < BM; i++)
            [[unroll]] for (uint j = 0; j < BN; j++)
                acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }

    if (VC && m0 + BM <= M && n0 + BN <= N) {
        vec4 bias[BN / 4];
        [[unroll]] for (uint q = 0; q < BN / 4; q++)
            bias[q] = HAS_BIAS ? vec4(bias1[p.base_bias + n0 + 4 * q], bias1[p.base_bias + n0 + 4 * q + 1],
                                      bias1[p.base_bias + n0 + 4 * q + 2], bias1[p.base_bias + n0 + 4 * q + 3])
                               : vec4(0.0);
        [[unroll]] for (uint i = 0; i < BM; i++)
            [[unroll]] for (uint q = 0; q < BN / 4; q++) {
                uint idx = (cbase + (m0 + i) * N + n0 + 4 * q) >> 2;
                vec4 v = vec4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]);
                if (HAS_BIAS)
                    v += bias[q];
                if (ACCUMULATE)
                    v += c4[idx];
                c4[idx] = v;
            }
    } else {
        [[unroll]] for (uint i = 0; i < BM; i++)
            [[unroll]] for (uint j = 0; j < BN; j++)
                if (m0 + i < M && n0 + j < N)
                    store_c(cbase, m0 + i, n0 + j, acc[i][j]);
    }
}
