#version 450
// Linear attention, the decoding state after a prefill (src/ops/linear_attention.h):
// S[b,h] = sum_{s < len[b]} fk_s v_sᵀ, z[b,h] = sum_{s < len[b]} fk_s (len[b]
// above n counts as n). One invocation per state element (e, h, b): e < D*D
// is S[c1][c2] (e = c1*D + c2), e = D*D + c1 is z[c1]. A pass adds the
// positions of [lo, min(hi, len[b])) in increasing s to what the previous
// pass left (lo > 0) or to zero (lo = 0), and writes the sum.
// hi - lo <= TMM_MAX_LOOP (loop_limit.glsl); fixed order: deterministic.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // unused here
layout(std430, binding = 0) readonly buffer Lb { uint len[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) buffer Sb { float S[]; };
layout(std430, binding = 4) buffer Zb { float z[]; };
layout(push_constant) uniform Push {
    uint n, d, H, D;       // length, channels, heads, channels per head
    uint chunk, nchunk, nb; // unused here
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
    const uint at = isz ? bh * D + c1 : bh * D * D + e;
    float acc = 0.0;
    if (p.lo > 0u)
        acc = isz ? z[at] : S[at];
    const uint end = min(p.hi, min(len[b], p.n));
    const uint krow = b * p.n * p.d + h * D;
    for (uint s = p.lo; s < end; s++) {
        const uint row = krow + s * p.d;
        acc = fma(phi(k[row + c1]), isz ? 1.0 : v[row + c2], acc);
    }
    if (isz)
        z[at] = acc;
    else
        S[at] = acc;
}
