#version 450
// Linear attention backward, the reverse chunk states (src/ops/linear_attention.h):
// Sb[b,h,j] = sum_{t >= jC} fq_t da_tᵀ and zb[b,h,j] = sum_{t >= jC} fq_t db_t,
// da_t = dy_t / den_t. One invocation per row c1 and block of CB columns
// (x = c1*nb + blk, y = h, z = b); block 0 also sums zb[c1]. It adds the terms
// of t in [lo, hi) in decreasing t and writes its running sums at each chunk
// start and at lo, into the slot of the chunk of that position; a pass with
// hi < n starts from the slot of position hi, where the previous pass stopped.
// hi - lo <= TMM_MAX_LOOP (loop_limit.glsl); fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // columns per invocation
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Gb { float dy[]; };
layout(std430, binding = 2) readonly buffer Nb { float den_in[]; };
layout(std430, binding = 3) readonly buffer DBb { float db_in[]; };
layout(std430, binding = 4) buffer Sb { float sb[]; };
layout(std430, binding = 5) buffer Zb { float zb[]; };
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
    const uint sbase = bh * p.nchunk * D * D + c1 * D, zbase = bh * p.nchunk * D + c1;
    uint cc[CB]; // the block's columns, clamped to D - 1 past the end (computed, not stored)
    float acc[CB], accz = 0.0;
    [[unroll]] for (uint i = 0; i < CB; i++) {
        cc[i] = min(blk * CB + i, D - 1u);
        acc[i] = 0.0;
    }
    if (p.hi < p.n) {
        const uint j = p.hi / p.chunk;
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = sb[sbase + j * D * D + cc[i]];
        accz = zb[zbase + j * D];
    }
    const uint qrow = b * p.n * p.d + h * D;
    for (uint t = p.hi; t > p.lo;) {
        t--;
        const uint row = qrow + t * p.d;
        const float f = phi(q[row + c1]), fd = f / den_in[bh * p.n + t];
        [[unroll]] for (uint i = 0; i < CB; i++)
            acc[i] = fma(fd, dy[row + cc[i]], acc[i]);
        accz = fma(f, db_in[bh * p.n + t], accz);
        if (t % p.chunk == 0u || t == p.lo) {
            const uint j = t / p.chunk;
            [[unroll]] for (uint i = 0; i < CB; i++)
                if (blk * CB + i < D)
                    sb[sbase + j * D * D + cc[i]] = acc[i];
            if (blk == 0u)
                zb[zbase + j * D] = accz;
        }
    }
}
