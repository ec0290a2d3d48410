#version 450
// Linear attention backward, the reverse chunk states (src/ops/linear_attention.h):
// Sb[b,h,j] = sum_{t >= jC} fq_t da_tᵀ and zb[b,h,j] = sum_{t >= jC} fq_t db_t,
// da_t = dy_t / den_t. One invocation per state element (e, h, b): e < D*D is
// [c1][c2] (e = c1*D + c2), e = D*D + c1 is zb[c1]. It adds the terms of
// t in [lo, hi) in decreasing t and writes its running sum at each chunk start
// and at lo, into the slot of the chunk of that position; a pass with hi < n
// starts from the slot of position hi, where the previous pass stopped.
// hi - lo <= TMM_MAX_LOOP (loop_limit.glsl); fixed order: deterministic.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint CB = 16u; // unused here
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
    const uint e = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    const uint D = p.D;
    if (e >= D * D + D)
        return;
    const bool isz = e >= D * D;
    const uint c1 = isz ? e - D * D : e / D, c2 = isz ? 0u : e % D;
    const uint bh = b * p.H + h;
    const uint stride = isz ? D : D * D;
    const uint sbase = bh * p.nchunk * stride + (isz ? c1 : e);
    float acc = 0.0;
    if (p.hi < p.n) {
        const uint at = sbase + (p.hi / p.chunk) * stride;
        acc = isz ? zb[at] : sb[at];
    }
    const uint qrow = b * p.n * p.d + h * D;
    for (uint t = p.hi; t > p.lo;) {
        t--;
        const uint row = qrow + t * p.d;
        const float g = isz ? db_in[bh * p.n + t] : dy[row + c2] / den_in[bh * p.n + t];
        acc = fma(phi(q[row + c1]), g, acc);
        if (t % p.chunk == 0u || t == p.lo) {
            const uint at = sbase + (t / p.chunk) * stride;
            if (isz)
                zb[at] = acc;
            else
                sb[at] = acc;
        }
    }
}
