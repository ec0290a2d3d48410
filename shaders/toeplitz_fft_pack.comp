#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): copies `rows`
// consecutive global rows grow0 .. of a source into zero-padded rows of
// length N of the real FFT buffer, rows row0 .. . Global row g is (b, c) =
// (g / d, g % d) of activations [B, n, d] (w [G*K, n]: d = 1); rows outside
// [0, nrows) and positions t >= n are written as zero. Invocation i is
// (t, row) = (i / rows, i % rows): consecutive invocations read consecutive
// channels.
//   r[(row0 + row)*N + t] = x[base_x + (b - bbase)*n*d + t*d + c]
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer R { float r[]; };

layout(push_constant) uniform Push {
    uint total;        // rows * N
    uint N, n, rows;   // padded length, valid length, rows written
    int grow0;         // global row of row 0 (negative: a halo below row 0)
    uint nrows, d;     // global rows, channels per batch
    uint bbase;        // batch at the start of the binding
    uint base_x, row0; // element offset of batch bbase in the binding; first row written
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.total)
        return;
    const uint t = i / p.rows, row = i % p.rows;
    const int g = p.grow0 + int(row);
    float v = 0.0;
    if (t < p.n && g >= 0 && uint(g) < p.nrows) {
        const uint b = uint(g) / p.d, c = uint(g) % p.d;
        v = x[p.base_x + ((b - p.bbase) * p.n + t) * p.d + c];
    }
    r[(p.row0 + row) * p.N + t] = v;
}
