#version 450
// Cooperative-matrix matmul for GPUs (tensor cores): the product of
// matmul_common.glsl with A rounded to fp16 and B in fp16 (B_FORMAT 1: exact),
// the products summed in fp32 by the device's matrix units. Written with
// GL_NV_cooperative_matrix: Debian 12's glslang 11.13 does not know
// GL_KHR_cooperative_matrix. Devices that take VK_KHR_cooperative_matrix run
// this module rewritten (runtime/spirv_coopmat.c), which reads each matrix
// type's use from the multiply-adds: A (CM x CK), B (CK x CN) and C (CM x CN)
// must stay distinct types (docs/gpu.md).
//
// A workgroup of WM x WN subgroups computes a BM x BN tile of C
// (BM = WM RM CM, BN = WN RN CN); subgroup (sm, sn) holds RM x RN accumulators
// of CM x CN. k advances in steps of BK = 2 CK: each step stages a BM x BK
// slice of A and a BK x BN slice of B in shared memory as fp16, loaded along
// the operand's contiguous axis and zero-filled past the edges, so edge tiles
// need no special case. The accumulators go through shared memory to
// store_c, which writes only the elements inside C (bias, accumulation).
// CM, CN, CK are a shape the device reports for fp16 x fp16 + fp32 at
// subgroup scope (src/ops/matmul_coopmat.c); the workgroup is
// WM WN gl_SubgroupSize invocations (local_size_x).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "matmul_common.glsl"

layout(constant_id = 10) const uint CM = 16u;
layout(constant_id = 11) const uint CN = 16u;
layout(constant_id = 12) const uint CK = 16u;
layout(constant_id = 13) const uint WM = 2u;  // subgroups along m
layout(constant_id = 14) const uint WN = 2u;  // subgroups along n
const uint RM = 2u, RN = 2u;                  // accumulators per subgroup along m and n
const uint BM = WM * RM * CM, BN = WN * RN * CN, BK = 2u * CK;
const uint THREADS = gl_WorkGroupSize.x;
// Row strides in shared memory: padded by 8 halves (16 bytes, the alignment
// cooperative loads want) against bank conflicts.
const uint SA = BK + 8u, SB = BN + 8u, SC = BN + 4u;

shared float16_t As[BM * SA];  // As[row * SA + kk]
shared float16_t Bs[BK * SB];  // Bs[kk * SB + col]
shared float Cs[BM * SC];      // Cs[row * SC + col]

void main()
{
    const uint M = p.m, N = p.n, K = p.k, tid = gl_LocalInvocationID.x;
    const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN, batch = gl_WorkGroupID.z;
    const uint abase = p.base_a + batch * p.stride_a;
    const uint bbase = p.base_b + batch * p.stride_b;
    const uint cbase = p.base_c + batch * p.stride_c;
    const uint sm = gl_SubgroupID / WN, sn = gl_SubgroupID % WN;

    fcoopmatNV<32, gl_ScopeSubgroup, CM, CN> acc[RM][RN];
    [[unroll]] for (uint i = 0; i < RM; i++)
        [[unroll]] for (uint j = 0; j < RN; j++)
            acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, CM, CN>(0.0);

    for (uint k0 = 0; k0 < K; k0 += BK) {
        for (uint e = tid; e < BM * BK; e += THREADS) {
            uint row, kk;
            if (TRANS_A) { kk = e / BM; row = e % BM; }   // along m
            else         { row = e / BK; kk = e % BK; }   // along k
            const uint gr = row0 + row, gk = k0 + kk;
            float v = 0.0;
            if (gr < M && gk < K)
                v = a1[abase + (TRANS_A ? gk * p.lda + gr : gr * p.lda + gk)];
            As[row * SA + kk] = float16_t(v);
        }
        for (uint e = tid; e < BK * BN; e += THREADS) {
            uint col, kk;
            if (TRANS_B) { col = e / BK; kk = e % BK; }   // along k
            else         { kk = e / BN; col = e % BN; }   // along n
            const uint gc = col0 + col, gk = k0 + kk;
            float v = 0.0;
            if (gc < N && gk < K)
                v = load_b(bbase + (TRANS_B ? gc * p.ldb + gk : gk * p.ldb + gc));
            Bs[kk * SB + col] = float16_t(v);
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk += CK) {
            fcoopmatNV<16, gl_ScopeSubgroup, CM, CK> fa[RM];
            fcoopmatNV<16, gl_ScopeSubgroup, CK, CN> fb[RN];
            [[unroll]] for (uint i = 0; i < RM; i++)
                coopMatLoadNV(fa[i], As, ((sm * RM + i) * CM) * SA + kk, SA, false);
            [[unroll]] for (uint j = 0; j < RN; j++)
                coopMatLoadNV(fb[j], Bs, kk * SB + (sn * RN + j) * CN, SB, false);
            [[unroll]] for (uint i = 0; i < RM; i++)
                [[unroll]] for (uint j = 0; j < RN; j++)
                    acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
        }
        barrier();
    }

    [[unroll]] for (uint i = 0; i < RM; i++)
        [[unroll]] for (uint j = 0; j < RN; j++)
            coopMatStoreNV(acc[i][j], Cs, ((sm * RM + i) * CM) * SC + (sn * RN + j) * CN, SC, false);
    barrier();
    for (uint e = tid; e < BM * BN; e += THREADS) {
        const uint r = e / BN, c = e % BN;
        if (row0 + r < M && col0 + c < N)
            store_c(cbase, row0 + r, col0 + c, Cs[r * SC + c]);
    }
}
