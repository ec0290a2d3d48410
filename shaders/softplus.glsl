// Softplus of one float, as softplus_fwd.comp computes it (also used by
// linear_rows_group.comp).
#ifndef SOFTPLUS_GLSL
#define SOFTPLUS_GLSL
#include "exp_acc.glsl"

// softplus(a) = max(a, 0) + log1p(e), e = exp(-|a|) in (0, 1]; log1p(e) =
// 2 atanh(s) = 2 (s + s^3/3 + ... + s^15/15), s = e / (2 + e) <= 1/3
// (relative error < 2e-9 before rounding; llvmpipe's log is only accurate
// to about 2^-21 absolute near 1).
float softplus(float a)
{
    float e = exp_acc(-abs(a), 0.0);
    precise float s = e / (2.0 + e), s2 = s * s;
    precise float l = 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (1.0 / 5.0 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0
                    + s2 * (1.0 / 11.0 + s2 * (1.0 / 13.0 + s2 * (1.0 / 15.0))))))));
    return max(a, 0.0) + l;
}
#endif
