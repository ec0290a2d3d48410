#version 450
// Linear attention forward, the chunk states (src/ops/linear_attention.h):
// Sc[b,h,j] = S_t and zc[b,h,j] = z_t at the last position t of chunk j. One
// invocation per state element (e, h, b): e < D*D is S[c1][c2] (e = c1*D + c2),
// e = D*D + c1 is z[c1]. It adds f(k_s[c1]) v_s[c2] (or f(k_s[c1])) for s in
// [lo, hi) in increasing s and writes its running sum at each chunk end and at
// hi, into the slot of the chunk of that position; a pass with lo > 0 starts
// from the slot of position lo - 1, where the previous pass stopped.
// hi - lo <= TMM_MAX_LOOP (loop_limit.glsl); fixed order: deterministic.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // unused here
layout(std430, binding = 0) readonly buffer Kb { float k[]; };
layout(std430, binding = 1) readonly buffer Vb { float v[]; };
layout(std430, binding = 2) buffer Sb { float sc[]; };
layout(std430, binding = 3) buffer Zb { float zc[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // length, channels, heads, channels per head
    uint chunk, nchunk, nb; // C, NC = ceil(n / C), blocks of CB channels per head
    uint lo, hi;           // positions of this pass
    float eps;             // unused here
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }

void main()
{
    const uint e = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    const uint D = p.D;
    if (e >= D * D + D)
        return;
    const bool isz = e >= D * D;
    const uint c1 = isz ? e - D * D : e / D, c2 = isz ? 0u : e % D;
    const uint bh = b * p.H + h;
    // element of slot j: sbase + j * stride
    const uint stride = isz ? D : D * D;
    const uint sbase = bh * p.nchunk * stride + (isz ? c1 : e);
    float acc = 0.0;
    if (p.lo > 0u) {
        const uint at = sbase + ((p.lo - 1u) / p.chunk) * stride;
        acc = isz ? zc[at] : sc[at];
    }
    const uint krow = b * p.n * p.d + h * D;
    for (uint s = p.lo; s < p.hi; s++) {
        const uint row = krow + s * p.d;
        acc = fma(phi(k[row + c1]), isz ? 1.0 : v[row + c2], acc);
        if ((s + 1u) % p.chunk == 0u || s + 1u == p.hi) {
            const uint at = sbase + (s / p.chunk) * stride;
            if (isz)
                zc[at] = acc;
            else
                sc[at] = acc;
        }
    }
}
