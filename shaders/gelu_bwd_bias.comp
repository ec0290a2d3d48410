#version 450
// GELU backward, bias gradient over rows. One invocation per (segment s of
// at most `seg` rows, column c): the sum over the segment's rows, in order,
// of dy * gelu'(x + b) (computed as gelu_bwd.comp does). With direct set (one
// segment in all) it goes to db[c] (added with accumulate); otherwise to
// db[(seg0 + s) d + c] for tmm_op_sum_cols.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DB { float db[]; };
layout(push_constant) uniform Push {
    uint rows, d, seg, nseg, seg0, direct, accumulate, has_b, base_x, base_dy;
} p;

// exp(hi + lo) for hi + lo <= 0, |lo| < 2, to about 1e-7 relative: 2^k exp(r),
// r = hi - k ln2 + lo (ln2 in two parts, Cody-Waite), exp(r) by its Taylor
// series to r^7 (|r| <= 0.35). `precise` keeps the compiler from
// reassociating the reduction (llvmpipe's exp(x) alone loses |x| 2^-24).
// 0 below -87 (float underflow).
float exp_acc(float hi, float lo)
{
    if (hi + lo < -87.0)
        return 0.0;
    float k = round((hi + lo) * 1.44269504);
    precise float r = ((hi - k * 0.693359375) + k * 2.12194440e-4) + lo;
    precise float e = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0
                    + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    return ldexp(e, int(k));
}

// Phi(a) = erfc(-a / sqrt 2) / 2, and the Gaussian term exp(-a^2 / 2) in g.
// erfc(z), z = |a| / sqrt 2: Numerical Recipes' erfcc, t exp(-z^2 + poly(t)),
// t = 1 / (1 + z/2), relative error < 1.2e-7 for all z >= 0; z^2 = a^2 / 2
// is carried exactly as ah^2 + (2 ah al + al^2) with a = ah + al split at 12
// bits (fma is not fused on llvmpipe). Beyond |a| = 20 both are 1 or 0 in
// float; the clamp keeps a^2 finite.
float phi_cdf(float a, out float g)
{
    a = clamp(a, -20.0, 20.0);
    float ah = uintBitsToFloat(floatBitsToUint(a) & 0xfffff000u);
    precise float al = a - ah;
    precise float hi = -0.5 * (ah * ah), lo = -(ah * al) - 0.5 * (al * al);
    float z = abs(a) * 0.70710678;
    float t = 1.0 / fma(0.5, z, 1.0);
    float poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
               + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    float h = 0.5 * t * exp_acc(hi, lo + poly);   // erfc(|a| / sqrt 2) / 2
    g = exp_acc(hi, lo);
    return a < 0.0 ? h : 1.0 - h;
}

float gelu_grad(float a)
{
    float g, c = phi_cdf(a, g);
    return fma(a * 0.39894228, g, c);
}

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseg * p.d)
        return;
    uint s = i / p.d, c = i - s * p.d;
    uint r0 = s * p.seg, r1 = min(p.rows, r0 + p.seg);
    float acc = 0.0;
    for (uint r = r0; r < r1; r++) {
        float a = x[p.base_x + r * p.d + c];
        if (p.has_b != 0u)
            a += b[c];
        acc += dy[p.base_dy + r * p.d + c] * gelu_grad(a);
    }
    if (p.direct != 0u)
        db[c] = p.accumulate != 0u ? db[c] + acc : acc;
    else
        db[(p.seg0 + s) * p.d + c] = acc;
}
