#version 450
// Register-blocked matmul for CPU devices (lavapipe): no shared memory and no
// barriers; each invocation computes a BM x BN block of C, K unrolled by KU,
// with each accumulator updated KU times in a row (llvmpipe keeps most of
// them on the stack, so this halves the spill traffic). Rows and columns
// past the edge are clamped to the last valid one for loading (no branches
// in the inner loop) and skipped when storing, so any m, n, k work.
//
// FLAGS (id 7), set by src/ops/matmul.c:
//   bit 0, 1: A, B may be read as vec4 (base offset, batch stride and row
//             stride all multiples of 4 elements; a 16-bit B as uvec2)
//   bit 2:    C (and Z) may be accessed as vec4 (same condition)
//   bit 3:    16 x 16 blocks instead of 8 x 8. On llvmpipe every load from a
//             divergent address is a loop over the SIMD lanes, so the larger
//             block is about twice as fast, but takes LLVM ~10x longer to
//             compile; the host picks it for large matmuls.
// Workgroup: 8 x 4 x 1 (any size works; the host sizes the dispatch from it).
#extension GL_EXT_control_flow_attributes : require
#include "matmul_common.glsl"

layout(constant_id = 7) const uint FLAGS = 0u;
const bool VA = (FLAGS & 1u) != 0u;
const bool VB = (FLAGS & 2u) != 0u;
const bool VC = (FLAGS & 4u) != 0u;
const bool BIG = (FLAGS & 8u) != 0u;

// vec4 views of the bindings of matmul_common.glsl
layout(std430, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(std430, binding = 1) readonly buffer B2 { uvec2 b2[]; };
layout(std430, binding = 3) buffer C4 { vec4 c4[]; };
layout(std430, binding = 4) writeonly buffer Z4 { vec4 z4[]; };

// B's elements i .. i + 3 (i a multiple of 4).
vec4 load_b4(uint i)
{
    if (B_FORMAT == 0u)
        return b4[i >> 2];
    uvec2 w = b2[i >> 2];
    return vec4(widen16(w.x), widen16(w.x >> 16), widen16(w.y), widen16(w.y >> 16));
}

// Loops over these unroll fully once the pipeline is specialized; arrays are
// sized for the larger block and the unused part is optimized away.
const uint BM = BIG ? 16u : 8u;
const uint BN = BIG ? 16u : 8u;
#define BMAX 16
#define KU 4

void main()
{
    const uint M = p.m, N = p.n, K = p.k, LDA = p.lda, LDB = p.ldb, LDC = p.ldc;
    const uint m0 = gl_GlobalInvocationID.y * BM;
    const uint n0 = gl_GlobalInvocationID.x * BN;
    const uint batch = gl_WorkGroupID.z;
    const uint abase = p.base_a + batch * p.stride_a;
    const uint bbase = p.base_b + batch * p.stride_b;
    const uint cbase = p.base_c + batch * p.stride_c;

    // Offsets of A's rows and B's columns, clamped at the edges. Along the
    // contiguous axis of a vec4 operand the clamp is per group of 4: with the
    // extent a multiple of 4, a group is either wholly inside or outside.
    uint ra[BMAX], cb[BMAX];
    [[unroll]] for (uint i = 0; i < BM; i++) {
        uint r = min(m0 + i, M - 1u);
        if (TRANS_A && VA)
            r = min(m0 + (i & ~3u), M - 4u) + (i & 3u);
        ra[i] = TRANS_A ? abase + r : abase + r * LDA;
    }
    [[unroll]] for (uint j = 0; j < BN; j++) {
        uint c = min(n0 + j, N - 1u);
        if (!TRANS_B && VB)
            c = min(n0 + (j & ~3u), N - 4u) + (j & 3u);
        cb[j] = TRANS_B ? bbase + c * LDB : bbase + c;
    }

    float acc[BMAX][BMAX];
    [[unroll]] for (uint i = 0; i < BM; i++)
        [[unroll]] for (uint j = 0; j < BN; j++)
            acc[i][j] = 0.0;

    uint k = 0;
    for (; k + KU <= K; k += KU) {
        float av[BMAX][KU], bv[KU][BMAX];   // A(m0 + i, k + kk), B(k + kk, n0 + j)
        if (!TRANS_A && VA) {
            [[unroll]] for (uint i = 0; i < BM; i++)
                [[unroll]] for (uint kq = 0; kq < KU; kq += 4) {
                    vec4 v = a4[(ra[i] + k + kq) >> 2];
                    av[i][kq] = v.x; av[i][kq + 1] = v.y; av[i][kq + 2] = v.z; av[i][kq + 3] = v.w;
                }
        } else if (TRANS_A && VA) {
            [[unroll]] for (uint kk = 0; kk < KU; kk++)
                [[unroll]] for (uint i = 0; i < BM; i += 4) {
                    vec4 v = a4[(ra[i] + (k + kk) * LDA) >> 2];
                    av[i][kk] = v.x; av[i + 1][kk] = v.y; av[i + 2][kk] = v.z; av[i + 3][kk] = v.w;
                }
        } else {
            [[unroll]] for (uint i = 0; i < BM; i++)
                [[unroll]] for (uint kk = 0; kk < KU; kk++)
                    av[i][kk] = TRANS_A ? a1[ra[i] + (k + kk) * LDA] : a1[ra[i] + k + kk];
        }
        if (TRANS_B && VB) {
            [[unroll]] for (uint j = 0; j < BN; j++)
                [[unroll]] for (uint kq = 0; kq < KU; kq += 4) {
                    vec4 v = load_b4(cb[j] + k + kq);
                    bv[kq][j] = v.x; bv[kq + 1][j] = v.y; bv[kq + 2][j] = v.z; bv[kq + 3][j] = v.w;
                }
        } else if (!TRANS_B && VB) {
            [[unroll]] for (uint kk = 0; kk < KU; kk++)
                [[unroll]] for (uint j = 0; j < BN; j += 4) {
                    vec4 v = load_b4(cb[j] + (k + kk) * LDB);
                    bv[kk][j] = v.x; bv[kk][j + 1] = v.y; bv[kk][j + 2] = v.z; bv[kk][j + 3] = v.w;
                }
        } else {
            [[unroll]] for (uint kk = 0; kk < KU; kk++)
                [[unroll]] for (uint j = 0; j < BN; j++)
                    bv[kk][j] = load_b(TRANS_B ? cb[j] + k + kk : cb[j] + (k + kk) * LDB);
        }
        // kk innermost: each accumulator is loaded and stored once per KU steps
        [[unroll]] for (uint i = 0; i < BM; i++)
            [[unroll]] for (uint j = 0; j < BN; j++)
                [[unroll]] for (uint kk = 0; kk < KU; kk++)
                    acc[i][j] = fma(av[i][kk], bv[kk][j], acc[i][j]);
    }
    // The last K % KU steps (never with a vec4 operand whose rows run along k).
    for (; k < K; k++) {
        float av[BMAX], bv[BMAX];
        [[unroll]] for (uint i = 0; i < BM; i++)
            av[i] = TRANS_A ? a1[ra[i] + k * LDA] : a1[ra[i] + k];
        [[unroll]] for (uint j = 0; j < BN; j++)
            bv[j] = load_b(TRANS_B ? cb[j] + k : cb[j] + k * LDB);
        [[unroll]] for (uint i = 0; i < BM; i++)
            [[unroll]] for (uint j = 0; j < BN; j++)
                acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }

    // The stores are not unrolled: on llvmpipe every access to a buffer is a
    // loop over the SIMD lanes, and one copy of that per output (three with
    // bias and accumulation) takes LLVM seconds to compile, for little gain.
    float outv[BMAX][BMAX];
    [[unroll]] for (uint i = 0; i < BM; i++)
        [[unroll]] for (uint j = 0; j < BN; j++)
            outv[i][j] = acc[i][j];
    const uint rows = m0 < M ? min(M - m0, BM) : 0u, cols = n0 < N ? min(N - n0, BN) : 0u;
    if (VC && cols == BN) {
        vec4 bias[BMAX / 4];
        [[unroll]] for (uint q = 0; q < BN / 4; q++) {
            uint b = p.base_bias + n0 + 4 * q;
            bias[q] = HAS_BIAS || EPILOGUE != 0u ? vec4(bias1[b], bias1[b + 1], bias1[b + 2], bias1[b + 3])
                                                 : vec4(0.0);
        }
        [[dont_unroll]] for (uint i = 0; i < rows; i++)
            [[unroll]] for (uint q = 0; q < BN / 4; q++) {
                uint idx = (cbase + (m0 + i) * LDC + n0 + 4 * q) >> 2;
                vec4 v = vec4(outv[i][4 * q], outv[i][4 * q + 1], outv[i][4 * q + 2], outv[i][4 * q + 3]);
                if (EPI_ACT)
                    z4[idx - p.base_c / 4u + p.base_z / 4u] =
                        vec4(epilogue_act(v.x, bias[q].x), epilogue_act(v.y, bias[q].y),
                             epilogue_act(v.z, bias[q].z), epilogue_act(v.w, bias[q].w));
                if (EPI_GRAD) {
                    vec4 a = c4[idx];
                    v *= vec4(epilogue_grad(a.x, bias[q].x), epilogue_grad(a.y, bias[q].y),
                              epilogue_grad(a.z, bias[q].z), epilogue_grad(a.w, bias[q].w));
                }
                if (HAS_BIAS)
                    v += bias[q];
                if (ACCUMULATE)
                    v += c4[idx];
                c4[idx] = v;
            }
    } else {
        [[dont_unroll]] for (uint i = 0; i < rows; i++)
            [[dont_unroll]] for (uint j = 0; j < cols; j++)
                store_c(cbase, m0 + i, n0 + j, outv[i][j]);
    }
}
