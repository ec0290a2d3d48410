#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): crops rows of
// the real FFT buffer to n and scatters them to a strided destination, adding
// beta (per group of rdiv/dg channels) when asked. Invocation i is element
// (row, t) of rows*n with hi = i / (n*rdiv), t = (i % (n*rdiv)) / rdiv,
// lo = i % rdiv, row = hi*rdiv + lo (activations [B, n, d]: rdiv = d, so
// invocations write consecutive floats).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer R { float r[]; };
layout(std430, binding = 1) readonly buffer Beta { float beta[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint total;            // rows * n
    uint N, n, rdiv;
    uint s_hi, s_lo, s_t;  // destination strides (floats)
    uint row0;             // first row read
    uint dg, add_beta, base_beta, base_y;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint blk = p.n * p.rdiv;
    const uint hi = i / blk, rem = i % blk;
    const uint t = rem / p.rdiv, lo = rem % p.rdiv;
    float v = r[(p.row0 + hi * p.rdiv + lo) * p.N + t];
    if (p.add_beta != 0u)
        v += beta[p.base_beta + (lo / p.dg) * p.n + t];
    y[p.base_y + hi * p.s_hi + lo * p.s_lo + t * p.s_t] = v;
}
