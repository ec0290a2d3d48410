#version 450
// Linear attention forward, the chunk states (src/ops/linear_attention.h):
// Sc[b,h,j] = S_t and zc[b,h,j] = z_t at the last position t of chunk j. One
// invocation per row c1 of the state and block of CB columns (x = c1*nb + blk,
// y = h, z = b); block 0 also sums z[c1]. It adds f(k_s[c1]) v_s[c2] (and
// f(k_s[c1])) for s in [lo, hi) in increasing s and writes its running sums
// at each chunk end and at hi, into the slot of the chunk of that position; a
// pass with lo > 0 starts from the slot of position lo - 1, where the previous
// pass stopped. hi - lo <= TMM_MAX_LOOP (loop_limit.glsl); fixed order:
// deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // columns per invocation
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
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    const uint D = p.D;
    if (idx >= D * p.nb)
        return;
    const uint c1 = idx / p.nb, blk = idx % p.nb, bh = b * p.H + h;
    // slot j: S row c1 at sbase + j*D*D, z[c1] at zbase + j*D
    const uint sbase = bh * p.nchunk * D * D + c1 * D, zbase = bh * p.nchunk * D + c1;
    uint cc[CB]; // the block's columns, clamped to D - 1 past the end (computed, not stored)
    float acc[CB], accz = 0.0;
    [[unroll]] for (uint i = 0; i < CB; i++) {
        cc[i] = min(blk * CB + i, D - 1u);
        acc[i] = 0.0;
    }
    if (p.lo > 0u) {
        const uint j = (p.lo - 1u) / p.chunk;
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = sc[sbase + j * D * D + cc[i]];
        accz = zc[zbase + j * D];
    }
    const uint krow = b * p.n * p.d + h * D;
    for (uint s = p.lo; s < p.hi; s++) {
        const uint row = krow + s * p.d;
        const float f = phi(k[row + c1]);
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = fma(f, v[row + cc[i]], acc[i]);
        accz += f;
        if ((s + 1u) % p.chunk == 0u || s + 1u == p.hi) {
            const uint j = s / p.chunk;
            [[unroll]] for (uint i = 0; i < CB; i++)
                if (blk * CB + i < D)
                    sc[sbase + j * D * D + cc[i]] = acc[i];
            if (blk == 0u)
                zc[zbase + j * D] = accz;
        }
    }
}
