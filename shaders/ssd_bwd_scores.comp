#version 450
// SSD backward (src/ops/ssd.h), the decayed products of the output
// gradients and the inputs inside each chunk, per head, off the diagonal:
//   K[b,h,t,i] = exp(cs_t - cs_s) (dy_t·xs_s)   (head h's P channels)
// for s = t0 + i < t, 0 for s >= t (the s = t terms are added back where
// they do not cancel: ssd_bwd_rows, ssd_bwd_bcsum). One invocation per block of BK rows t by
// BK columns i of one chunk: x = (j*RB + rb)*RB + sb, y = h, z = b
// (RB = ceil(Q / BK)). Loops: P + BK iterations.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint BK = 8u; // rows and columns per invocation
layout(std430, binding = 0) readonly buffer Xb { float xbc[]; };
layout(std430, binding = 1) readonly buffer Gb { float dy[]; };
layout(std430, binding = 2) readonly buffer CSb { float cs[]; };
layout(std430, binding = 3) writeonly buffer Kb { float kk[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint RB = (p.Q + BK - 1u) / BK;
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (idx >= p.NC * RB * RB)
        return;
    const uint sb = idx % RB, rb = (idx / RB) % RB, j = idx / (RB * RB), bh = b * p.nh + h;
    const uint t0 = j * p.Q, t1 = min(p.n, t0 + p.Q), r0 = t0 + rb * BK, s0 = t0 + sb * BK;
    if (r0 >= t1)
        return;
    const uint xb = p.base[0] + b * p.n * p.cx + h * p.P, gb = p.base[1] + b * p.n * p.ldy + h * p.P;
    uint tr[BK], sc[BK]; // rows and columns, clamped to the chunk for loading
    float g[BK][BK];
    [[unroll]] for (uint i = 0; i < BK; i++) {
        tr[i] = min(r0 + i, t1 - 1u);
        sc[i] = min(s0 + i, t1 - 1u);
        [[unroll]] for (uint k = 0; k < BK; k++)
            g[i][k] = 0.0;
    }
    const bool live = s0 < t1 && s0 < r0 + BK - 1u; // some s < t
    if (live) {
        for (uint q = 0; q < p.P; q++) {
            float gv[BK], xv[BK];
            [[unroll]] for (uint i = 0; i < BK; i++) {
                gv[i] = dy[gb + tr[i] * p.ldy + q];
                xv[i] = xbc[xb + sc[i] * p.cx + q];
            }
            [[unroll]] for (uint i = 0; i < BK; i++)
                [[unroll]] for (uint k = 0; k < BK; k++)
                    g[i][k] = fma(gv[i], xv[k], g[i][k]);
        }
        const uint csb = p.base[2] + 4u * bh * p.n;
        float rh[BK], rl[BK], ch[BK], cl[BK];
        [[unroll]] for (uint i = 0; i < BK; i++) {
            rh[i] = cs[csb + 4u * tr[i]];
            rl[i] = cs[csb + 4u * tr[i] + 1u];
            ch[i] = cs[csb + 4u * sc[i]];
            cl[i] = cs[csb + 4u * sc[i] + 1u];
        }
        [[unroll]] for (uint i = 0; i < BK; i++)
            [[unroll]] for (uint k = 0; k < BK; k++)
                g[i][k] = s0 + k < r0 + i ? exp(min(0.0, (rh[i] - ch[k]) + (rl[i] - cl[k]))) * g[i][k] : 0.0;
    }
    float outv[BK][BK]; // a copy for the stores (indexed by a loop variable: keeps acc in registers)
    [[unroll]] for (uint i = 0; i < BK; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            outv[i][k] = g[i][k];
    const uint rows = min(BK, t1 - r0), i0 = sb * BK, kr = p.base[3] + (bh * p.n + r0) * p.Q + i0;
    [[dont_unroll]] for (uint i = 0; i < rows; i++)
        [[unroll]] for (uint k = 0; k < BK; k++)
            if (i0 + k < p.Q)
                kk[kr + i * p.Q + k] = outv[i][k];
}
