#version 450
// Linear attention, the intra-chunk scores (src/ops/linear_attention.h):
//   W[b,h,t,i] = a_t·b_s over the D channels of head h, s = jC + i <= t, j = t / C
// with a, b = f(q), f(k) (PHI = 1: the forward's scores) or dy, v (PHI = 0:
// the backward's). Entries with s > t are not written. One invocation per
// (t, i, h, b): x = t*C + i, y = h, z = b. Loops: D iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // unused here (the block width of the row kernels)
layout(constant_id = 4) const uint PHI = 1u; // 1: f applied to both operands
layout(std430, binding = 0) readonly buffer Ab { float a[]; };
layout(std430, binding = 1) readonly buffer Bb { float bm[]; };
layout(std430, binding = 2) writeonly buffer Wb { float w[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // length, channels, heads, channels per head
    uint chunk, nchunk, nb; // C, NC = ceil(n / C), blocks of CB channels per head
    uint lo, hi;           // unused here
    float eps;             // unused here
} p;

float phi(float x) { return PHI != 0u ? (x > 0.0 ? x + 1.0 : exp(x)) : x; }

void main()
{
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (idx >= p.n * p.chunk)
        return;
    const uint t = idx / p.chunk, i = idx % p.chunk, s = (t / p.chunk) * p.chunk + i;
    if (s > t)
        return;
    const uint base = b * p.n * p.d + h * p.D, at = base + t * p.d, bs = base + s * p.d;
    float acc = 0.0;
    for (uint c = 0; c < p.D; c++)
        acc = fma(phi(a[at + c]), phi(bm[bs + c]), acc);
    w[((b * p.H + h) * p.n + t) * p.chunk + i] = acc;
}
