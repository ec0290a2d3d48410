#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): copies rows of
// a strided source into zero-padded rows of length N of the real FFT buffer.
// Invocation i is element (row, t) of rows*N with
//   hi = i / (N*rdiv), t = (i % (N*rdiv)) / rdiv, lo = i % rdiv, row = hi*rdiv + lo,
// so that for activations [B, n, d] (rdiv = d) consecutive invocations read
// consecutive channels. r[(row0 + row)*N + t] = t < n ? x[base_x + hi*s_hi + lo*s_lo + t*s_t] : 0.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer R { float r[]; };
layout(push_constant) uniform Push {
    uint total;            // rows * N
    uint N, n, rdiv;       // padded length, valid length, rows per block
    uint s_hi, s_lo, s_t;  // source strides (floats)
    uint base_x, row0;     // element offset of the source in its binding; first row written
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint blk = p.N * p.rdiv;
    const uint hi = i / blk, rem = i % blk;
    const uint t = rem / p.rdiv, lo = rem % p.rdiv;
    float v = 0.0;
    if (t < p.n)
        v = x[p.base_x + hi * p.s_hi + lo * p.s_lo + t * p.s_t];
    r[(p.row0 + hi * p.rdiv + lo) * p.N + t] = v;
}
