// The exact GELU's Gaussian CDF and derivative, shared by the GELU kernels, the
// decode step's fused linear and the matmul's gradient epilogue.
#ifndef GELU_GLSL
#define GELU_GLSL
#include "exp_acc.glsl"

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

// gelu'(a) = Phi(a) + a exp(-a^2 / 2) / sqrt(2 pi)
float gelu_grad(float a)
{
    float g, c = phi_cdf(a, g);
    return fma(a * 0.39894228, g, c);
}
#endif
