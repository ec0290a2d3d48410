// Shared by matmul_reg.comp and matmul_tiled.comp (see src/ops/matmul.c).
//   C_b[m, n] (+)= sum_k op(A_b)[m, k] * op(B_b)[k, n] + bias[n],  b = gl_WorkGroupID.z
// A is stored [m, k] row-major, or [k, m] with TRANS_A; B [k, n], or [n, k]
// with TRANS_B; consecutive stored rows are lda, ldb, ldc elements apart (the
// host passes the packed row length unless it works on a block of a larger
// matrix). Batch b of an operand starts at element base + b * stride of
// its binding; the host binds at most maxStorageBufferRange bytes per operand
// (splitting the batch over dispatches when needed) and passes the element
// offset of batch 0 inside the bound range as base_*.
// B may hold 16-bit values (B_FORMAT): two per 32-bit word, the lower index
// in the low half; its base, strides and ldb then count 16-bit values. They
// are widened to fp32 (exactly) as they are loaded; the sums stay fp32.
// All indices fit in 32 bits: each bound range is below 4 GiB.
// EPILOGUE: a bias and an activation as C is stored; binding 2 is that bias
// (not added to C); HAS_BIAS and ACCUMULATE are off.
//   1, 2 (a gradient, in place): C[m, n] = sum_k ... * act'(C[m, n] + bias[n]),
//        act SiLU (1) or GELU (2); C holds the activation's input less its
//        bias on entry.
//   3, 4 (a forward): C[m, n] = sum_k ..., and Z[m, n] = act(C[m, n] + bias[n]),
//        act SiLU (3) or GELU (4), as silu_fwd.comp and gelu_fwd.comp compute
//        it; Z (binding 4, otherwise a dummy) is laid out as C, from base_z.
#include "gelu.glsl"
#include "silu.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const bool TRANS_A = false;
layout(constant_id = 4) const bool TRANS_B = false;
layout(constant_id = 5) const bool HAS_BIAS = false;   // otherwise binding 2 is a dummy
layout(constant_id = 6) const bool ACCUMULATE = false; // C += ... instead of C = ...
layout(constant_id = 8) const uint B_FORMAT = 0u;      // B: 0 fp32, 1 fp16, 2 bf16
layout(constant_id = 9) const uint EPILOGUE = 0u;      // 0 none, 1 silu', 2 gelu', 3 silu, 4 gelu
const bool EPI_GRAD = EPILOGUE == 1u || EPILOGUE == 2u;
const bool EPI_ACT = EPILOGUE == 3u || EPILOGUE == 4u;

layout(std430, binding = 0) readonly buffer A1 { float a1[]; };
layout(std430, binding = 1) readonly buffer B1 { float b1[]; };
layout(std430, binding = 1) readonly buffer B16 { uint b16[]; };
layout(std430, binding = 2) readonly buffer Bias1 { float bias1[]; };
layout(std430, binding = 3) buffer C1 { float c1[]; };
layout(std430, binding = 4) writeonly buffer Z1 { float z1[]; };

layout(push_constant) uniform Push {
    uint m, n, k;
    uint stride_a, stride_b, stride_c;        // elements between batches
    uint base_a, base_b, base_c, base_bias, base_z;   // element offset of batch 0
    uint lda, ldb, ldc;                       // elements between stored rows
} p;

// From the low 16 bits of h.
float widen16(uint h) { return B_FORMAT == 1u ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16); }

// Element i of B's binding.
float load_b(uint i)
{
    if (B_FORMAT == 0u)
        return b1[i];
    uint w = b16[i >> 1];
    return widen16((i & 1u) != 0u ? w >> 16 : w);
}

// The gradient epilogue's factor at an activation input a (before its bias).
float epilogue_grad(float a, float bias)
{
    return EPILOGUE == 1u ? silu_grad(a + bias) : gelu_grad(a + bias);
}

// The forward epilogue's activation of a + bias.
float epilogue_act(float a, float bias)
{
    float x = a + bias, g;
    return EPILOGUE == 3u ? x / (1.0 + exp(-x)) : x * phi_cdf(x, g);
}

// C[row, col] of the current batch from the accumulated sum: adds the bias
// and, when accumulating, the old value; or applies the epilogue.
void store_c(uint cbase, uint row, uint col, float sum)
{
    uint i = cbase + row * p.ldc + col;
    float v = sum;
    if (EPI_GRAD)
        v *= epilogue_grad(c1[i], bias1[p.base_bias + col]);
    if (EPI_ACT)
        z1[i - p.base_c + p.base_z] = epilogue_act(sum, bias1[p.base_bias + col]);
    if (HAS_BIAS)
        v += bias1[p.base_bias + col];
    if (ACCUMULATE)
        v += c1[i];
    c1[i] = v;
}
