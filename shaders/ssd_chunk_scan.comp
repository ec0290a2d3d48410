#version 450
// SSD (src/ops/ssd.h), the scan of the states over the chunks: for each
// element e of the P x N states of (b, h), in the order of the chunks
// (flags bit 0 clear: j increasing, the forward; set: decreasing, the
// backward), with decay_j = exp(cs at chunk j's last position) (the
// chunk's total decay, from ssd_cumsum):
//   io[j] <- run;  run <- decay_j run + (io[j] as it was)
// so that the forward turns each chunk's own state into the state before
// it (Sp_j) and the backward each chunk's dL/dSp contribution into the
// gradient of the state after it (G_{j+1}). A pass covers chunks [lo, hi)
// and starts from carry (from zero at the first chunk of its direction);
// it leaves run in carry: after the forward's last pass the state after
// position n - 1. io [B, nh, NC, P*N], carry [B, nh, P*N]. One invocation per
// (e, h, b): x = e, y = h, z = b. Loops: hi - lo <= TMM_MAX_LOOP iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer CSb { float cs[]; };
layout(std430, binding = 1) buffer IOb { float io[]; };
layout(std430, binding = 2) buffer CAb { float carry[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

float decay(uint csb, uint j)
{
    const uint last = min(p.n, (j + 1u) * p.Q) - 1u;
    return cs[csb + 4u * last + 3u];
}

void main()
{
    const uint PN = p.P * p.N, e = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (e >= PN)
        return;
    const uint bh = b * p.nh + h, csb = p.base[0] + 4u * bh * p.n, at = p.base[1] + bh * p.NC * PN + e;
    const uint ca = p.base[2] + bh * PN + e;
    const bool rev = (p.flags & 1u) != 0u;
    float run = (rev ? p.hi < p.NC : p.lo > 0u) ? carry[ca] : 0.0;
    if (!rev) {
        for (uint j = p.lo; j < p.hi; j++) {
            const float own = io[at + j * PN];
            io[at + j * PN] = run;
            run = fma(decay(csb, j), run, own);
        }
    } else {
        for (uint j = p.hi; j > p.lo;) {
            j--;
            const float own = io[at + j * PN];
            io[at + j * PN] = run;
            run = fma(decay(csb, j), run, own);
        }
    }
    carry[ca] = run;
}
