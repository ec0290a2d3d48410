#version 450
// SSD backward (src/ops/ssd.h), the parameters' gradients: per head h, the
// sums over the sequences b and chunks j (increasing k = b*NC + j) of the
// partial sums part [B, nh, NC, 2] left by ssd_bwd_seq:
//   dA_log_h (+)= A_h sum_k part[b,h,j,0],  dD_h (+)= sum_k part[b,h,j,1]
// (flags bit 1: add to the gradients, else overwrite them). A pass covers
// k in [lo, hi), starting from acc [nh, 2] unless lo = 0, and writes the
// gradients when hi = nseq NC (nseq: all sequences), else its sums into
// acc. One invocation per head: x = h. Loops: hi - lo <= TMM_MAX_LOOP
// iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer ALb { float alog[]; };
layout(std430, binding = 1) readonly buffer PTb { float part[]; };
layout(std430, binding = 2) buffer ACb { float acc[]; };
layout(std430, binding = 3) buffer GAb { float dalog[]; };
layout(std430, binding = 4) buffer GDb { float dd[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in all
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint h = gl_GlobalInvocationID.x;
    if (h >= p.nh)
        return;
    const uint ab = p.base[2] + 2u * h;
    float sa = 0.0, sd = 0.0;
    if (p.lo > 0u) {
        sa = acc[ab];
        sd = acc[ab + 1u];
    }
    for (uint k = p.lo; k < p.hi; k++) {
        const uint b = k / p.NC, j = k % p.NC, pt = p.base[1] + 2u * ((b * p.nh + h) * p.NC + j);
        sa += part[pt];
        sd += part[pt + 1u];
    }
    if (p.hi < p.nseq * p.NC) {
        acc[ab] = sa;
        acc[ab + 1u] = sd;
        return;
    }
    const float ga = -exp(alog[p.base[0] + h]) * sa;
    const bool add = (p.flags & 2u) != 0u;
    const uint ga_at = p.base[3] + h, gd_at = p.base[4] + h;
    dalog[ga_at] = add ? dalog[ga_at] + ga : ga;
    dd[gd_at] = add ? dd[gd_at] + sd : sd;
}
