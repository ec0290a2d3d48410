#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): crops `rows`
// rows row0 .. of the real FFT buffer to n and scatters them to global rows
// grow0 .. of a destination, adding beta of the row's group when asked.
// Global row g is (b, c) = (g / d, g % d) of activations [B, n, d] (dw
// [G*K, n]: d = 1). Invocation i is (t, row) = (i / rows, i % rows):
// consecutive invocations write consecutive channels.
//   y[base_y + (b - bbase)*n*d + t*d + c] = r[(row0 + row)*N + t] (+ beta[(c/dg)*n + t])
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(std430, binding = 0) readonly buffer R { float r[]; };
layout(std430, binding = 1) readonly buffer Beta { float beta[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint total;           // rows * n
    uint N, n, rows;
    uint grow0, d, row0;  // global row of row 0, channels per batch, first row read
    uint bbase;           // batch at the start of y's binding
    uint dg, add_beta, base_beta, base_y;
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint t = i / p.rows, row = i % p.rows;
    const uint g = p.grow0 + row, b = g / p.d, c = g % p.d;
    float v = r[(p.row0 + row) * p.N + t];
    if (p.add_beta != 0u)
        v += beta[p.base_beta + (c / p.dg) * p.n + t];
    y[p.base_y + ((b - p.bbase) * p.n + t) * p.d + c] = v;
}
