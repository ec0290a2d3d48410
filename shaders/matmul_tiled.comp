#version 450
// Shared-memory tiled matmul for GPUs: a workgroup of 16 x 16 invocations
// computes a 64 x 64 tile of C, each invocation 4 x 4 outputs strided by 16
// (rows ty + 16 i, columns tx + 16 j), so that neighbouring invocations read
// neighbouring words of shared memory. K advances in steps of BK = 16; each
// step stages a 64 x 16 slice of A and a 16 x 64 slice of B in shared memory,
// loaded along the operand's contiguous axis (coalesced) and zero-filled past
// the edges. Rows are padded by one word to avoid bank conflicts on the
// transposing stores. The host must use a 16 x 16 x 1 workgroup.
#extension GL_EXT_control_flow_attributes : require
#include "matmul_common.glsl"

#define TS 16          // invocations per axis
#define TILE 64        // outputs per axis per workgroup
#define BK 16
#define PER (TILE / TS)

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
        // 64 x 16 of A and 16 x 64 of B: 1024 elements each, 4 per invocation.
        [[unroll]] for (uint q = 0; q < 4; q++) {
            uint row, kk;
            if (TRANS_A) { kk = tid / TILE + 4 * q; row = tid % TILE; }   // along m
            else         { row = tid / BK + 16 * q; kk = tid % BK; }      // along k
            uint gr = row0 + row, gk = k0 + kk;
            float v = 0.0;
            if (gr < M && gk < K)
                v = a1[abase + (TRANS_A ? gk * p.lda + gr : gr * p.lda + gk)];
            As[kk][row] = v;
        }
        [[unroll]] for (uint q = 0; q < 4; q++) {
            uint col, kk;
            if (TRANS_B) { col = tid / BK + 16 * q; kk = tid % BK; }      // along k
            else         { kk = tid / TILE + 4 * q; col = tid % TILE; }   // along n
            uint gc = col0 + col, gk = k0 + kk;
            float v = 0.0;
            if (gc < N && gk < K)
                v = load_b(bbase + (TRANS_B ? gc * p.ldb + gk : gk * p.ldb + gc));
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
