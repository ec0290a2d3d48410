#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): copies `rows`
// consecutive global rows grow0 .. of a source into zero-padded rows of
// length N of the real FFT buffer, rows row0 .. . Global row g is (b, c) =
// (g / d, g % d) of activations [B, n, d] (w [G*K, n]: d = 1); rows outside
// [0, nrows) and positions t >= n are written as zero. Invocation x is a
// row (consecutive invocations read consecutive channels), workgroup y a
// block of TB positions (each invocation writes TB consecutive floats of its
// row; the divisions are done once per block).
//   r[(row0 + row)*N + t] = x[base_x + (b - bbase)*n*d + t*d + c]
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

const uint TB = 16u;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer R { float r[]; };

layout(push_constant) uniform Push {
    uint N, n, rows;   // padded length, valid length, rows written
    int grow0;         // global row of row 0 (negative: a halo below row 0)
    uint nrows, d;     // global rows, channels per batch
    uint bbase;        // batch at the start of the binding
    uint base_x, row0; // element offset of batch bbase in the binding; first row written
} p;

void main()
{
    const uint row = gl_GlobalInvocationID.x;
    if (row >= p.rows)
        return;
    const uint t0 = gl_WorkGroupID.y * TB;
    const int g = p.grow0 + int(row);
    const bool ok = g >= 0 && uint(g) < p.nrows;
    const uint b = ok ? uint(g) / p.d : p.bbase, c = ok ? uint(g) % p.d : 0u;
    const uint src = p.base_x + (b - p.bbase) * p.n * p.d + c;
    const uint dst = (p.row0 + row) * p.N;
    [[unroll]] for (uint j = 0; j < TB; j++) {
        const uint t = t0 + j;
        if (t < p.N)
            r[dst + t] = ok && t < p.n ? x[src + t * p.d] : 0.0;
    }
}
