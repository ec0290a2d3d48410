#version 450
// FFT path of the causal Toeplitz op (src/ops/toeplitz_fft.c): crops `rows`
// rows row0 .. of the real FFT buffer to n and scatters them to global rows
// grow0 .. of a destination, adding beta of the row's group when asked.
// Global row g is (b, c) = (g / d, g % d) of activations [B, n, d] (dw
// [G*K, n]: d = 1). Invocation x is a row (consecutive invocations write
// consecutive channels), workgroup y a block of TB positions.
//   y[base_y + (b - bbase)*n*d + t*d + c] = r[(row0 + row)*N + t] (+ beta[(c/dg)*n + t])
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

const uint TB = 16u;

layout(std430, binding = 0) readonly buffer R { float r[]; };
layout(std430, binding = 1) readonly buffer Beta { float beta[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint N, n, rows;
    uint grow0, d, row0;  // global row of row 0, channels per batch, first row read
    uint bbase;           // batch at the start of y's binding
    uint dg, add_beta, base_beta, base_y;
} p;

void main()
{
    const uint row = gl_GlobalInvocationID.x;
    if (row >= p.rows)
        return;
    const uint t0 = gl_WorkGroupID.y * TB;
    const uint g = p.grow0 + row, b = g / p.d, c = g % p.d;
    const uint src = (p.row0 + row) * p.N, dst = p.base_y + (b - p.bbase) * p.n * p.d + c;
    const uint brow = p.base_beta + (c / p.dg) * p.n;
    [[unroll]] for (uint j = 0; j < TB; j++) {
        const uint t = t0 + j;
        if (t < p.n)
            y[dst + t * p.d] = r[src + t] + (p.add_beta != 0u ? beta[brow + t] : 0.0);
    }
}
