#version 450
// Softplus backward: a = x + b (recomputed; b when has_b), dx = dy sigmoid(a).
// One invocation per element; dx may alias dy or x.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer DY { float dy[]; };
layout(std430, binding = 3) buffer DX { float dx[]; };
layout(push_constant) uniform Push { uint n, d, has_b, base_x, base_dy, base_dx; } p;

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

// sigmoid(a) without overflow: 1 / (1 + e) for a >= 0, e / (1 + e) below, e = exp(-|a|).
float sigmoid(float a)
{
    float e = exp_acc(-abs(a), 0.0);
    return (a >= 0.0 ? 1.0 : e) / (1.0 + e);
}

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float a = x[p.base_x + i];
    if (p.has_b != 0u)
        a += b[i % p.d];
    dx[p.base_dx + i] = dy[p.base_dy + i] * sigmoid(a);
}
