// SiLU's derivative, shared by the SiLU kernels and the matmul's gradient epilogue.
#ifndef SILU_GLSL
#define SILU_GLSL

// silu'(a) = s + a s (1 - s), s = sigmoid(a)
float silu_grad(float a)
{
    float s = 1.0 / (1.0 + exp(-a));
    return fma(a * s, 1.0 - s, s);
}
#endif
