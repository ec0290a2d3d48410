// Accurate exp for the activations (GELU, softplus): shared by their kernels.
#ifndef EXP_ACC_GLSL
#define EXP_ACC_GLSL
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
#endif
