#version 450
// GELU (exact) with optional bias: a = x[r, c] + b[c] (b when has_b),
// y = a Phi(a), Phi(a) = erfc(-a / sqrt 2) / 2. One invocation per element;
// y may alias x. erfc: Numerical Recipes' erfcc (relative error < 1.2e-7),
// its exp(-z^2 + poly) from z^2 = a^2 / 2 split exactly by fma and a
// Cody-Waite range reduction, so the tails keep their relative accuracy.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
layout(push_constant) uniform Push { uint n, d, has_b, base_x, base_y; } p;

// exp(hi + lo) for |lo| small: 2^k exp(r), r = hi - k ln2 + lo (ln2 in two parts).
float exp_acc(float hi, float lo)
{
    float k = clamp(round(hi * 1.44269504), -150.0, 128.0);
    float r = fma(-k, 0.693359375, hi);
    r = fma(-k, -2.12194440e-4, r) + lo;
    return ldexp(exp(r), int(k));
}

// Phi(a) = erfc(-a / sqrt 2) / 2, and the Gaussian term exp(-a^2 / 2) in g.
// Beyond |a| = 20 both are 1 or 0 in float; the clamp keeps a^2 finite.
float phi_cdf(float a, out float g)
{
    a = clamp(a, -20.0, 20.0);
    float a2 = a * a, a2lo = fma(a, a, -a2);   // a^2 = a2 + a2lo exactly (with a fused fma)
    float z = abs(a) * 0.70710678;
    float t = 1.0 / fma(0.5, z, 1.0);
    float poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
               + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    float h = 0.5 * t * exp_acc(-0.5 * a2, poly - 0.5 * a2lo);   // erfc(|a| / sqrt 2) / 2
    g = exp_acc(-0.5 * a2, -0.5 * a2lo);
    return a < 0.0 ? h : 1.0 - h;
}

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float a = x[p.base_x + i];
    if (p.has_b != 0u)
        a += b[i % p.d];
    float g;
    y[p.base_y + i] = a * phi_cdf(a, g);
}
