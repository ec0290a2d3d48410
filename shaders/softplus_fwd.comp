#version 450
// Softplus with optional bias: a = x[r, c] + b[c] (b when has_b),
// y = max(a, 0) + log1p(exp(-|a|)). One invocation per element; y may alias x.
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

// softplus(a) = max(a, 0) + log1p(e), e = exp(-|a|) in (0, 1]; log1p(e) =
// log(w) e / (w - 1), w = 1 + e (exact where w rounds to 1: e).
float softplus(float a)
{
    float e = exp_acc(-abs(a), 0.0), w = 1.0 + e;
    float l = w == 1.0 ? e : log(w) * (e / (w - 1.0));
    return max(a, 0.0) + l;
}

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    float a = x[p.base_x + i];
    if (p.has_b != 0u)
        a += b[i % p.d];
    y[p.base_y + i] = softplus(a);
}
