#version 450
// Shared-memory tiled matmul for GPUs: a workgroup of TS x TS invocations
// computes a TILE x TILE tile of C (TILE = TS * PER), each invocation PER x PER
// outputs strided by TS (rows ty + TS i, columns tx + TS j), so that
// neighbouring invocations read neighbouring words of shared memory. K
// advances in steps of BK; each step stages a TILE x BK slice of A and a
// BK x TILE slice of B in shared memory, loaded along the operand's
// contiguous axis (coalesced) and zero-filled past the edges. Rows are padded
// by one word to avoid bank conflicts on the transposing stores. The host
// chooses TS (the workgroup is TS x TS x 1), PER and BK from the device's
// limits (tmm_matmul_tile_for, src/ops/matmul.c): 2 BK (TILE + 1) floats of shared memory.
#extension GL_EXT_control_flow_attributes : require
#include "matmul_common.glsl"

layout(constant_id = 10) const uint PER = 4u;   // outputs per invocation per axis
layout(constant_id = 11) const uint BK = 16u;  // k per step
const uint TS = gl_WorkGroupSize.x;            // invocations per axis
const uint TILE = TS * PER;                    // outputs per axis per workgroup
const uint LOADS = (TILE * BK + TS * TS - 1u) / (TS * TS); // elements each invocation stages per operand

shared float As[BK][TILE + 1];   // As[kk][row]
shared float Bs[BK][TILE + 1];   // Bs[kk][col]

void main()
{
    const uint M = p.m, N = p.n, K = p.k;
    const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    const uint tid = ty * TS + tx;
    const uint row0 = gl_WorkGroupID.y * TILE, col0 = gl_WorkGroupID.x * TILE;
    const uint batch = gl_WorkGroupID.z;
    const uint abase = p.base_a + batch * p.stride_a;
    const uint bbase = p.base_b + batch * p.stride_b;
    const uint cbase = p.base_c + batch * p.stride_c;

    float acc[PER][PER];
    [[unroll]] for (uint i = 0; i < PER; i++)
        [[unroll]] for (uint j = 0; j < PER; j++)
            acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < K; k0 += BK) {
        // TILE x BK of A and BK x TILE of B, element e = tid + TS^2 q of each
        [[unroll]] for (uint q = 0; q < LOADS; q++) {
            const uint e = tid + TS * TS * q;
            uint row, kk;
            if (TRANS_A) { kk = e / TILE; row = e % TILE; }   // along m
            else         { row = e / BK; kk = e % BK; }       // along k
            uint gr = row0 + row, gk = k0 + kk;
            float v = 0.0;
            if (e < TILE * BK && gr < M && gk < K)
                v = a1[abase + (TRANS_A ? gk * p.lda + gr : gr * p.lda + gk)];
            if (e < TILE * BK)
                As[kk][row] = v;
        }
        [[unroll]] for (uint q = 0; q < LOADS; q++) {
            const uint e = tid + TS * TS * q;
            uint col, kk;
            if (TRANS_B) { col = e / BK; kk = e % BK; }       // along k
            else         { kk = e / TILE; col = e % TILE; }   // along n
            uint gc = col0 + col, gk = k0 + kk;
            float v = 0.0;
            if (e < TILE * BK && gc < N && gk < K)
                v = load_b(bbase + (TRANS_B ? gc * p.ldb + gk : gk * p.ldb + gc));
            if (e < TILE * BK)
                Bs[kk][col] = v;
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk++) {
            float av[PER], bv[PER];
            [[unroll]] for (uint i = 0; i < PER; i++)
                av[i] = As[kk][ty + TS * i];
            [[unroll]] for (uint j = 0; j < PER; j++)
                bv[j] = Bs[kk][tx + TS * j];
            [[unroll]] for (uint i = 0; i < PER; i++)
                [[unroll]] for (uint j = 0; j < PER; j++)
                    acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier();
    }

    [[unroll]] for (uint i = 0; i < PER; i++)
        [[unroll]] for (uint j = 0; j < PER; j++) {
            uint r = row0 + ty + TS * i, c = col0 + tx + TS * j;
            if (r < M && c < N)
                store_c(cbase, r, c, acc[i][j]);
        }
}
