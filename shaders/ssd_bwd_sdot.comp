#version 450
// SSD backward (src/ops/ssd.h), the gradient of a chunk's total decay
// through the state it passes on, by rows: for chunk j < NC - 1 and row q,
//   rd[b,h,j,q] = sum_c G_{j+1}[q,c] Sp_{j+1}[q,c]
// (G_{j+1} = dL/dSp_{j+1} from the reverse scan, Sp_{j+1} the state after
// chunk j); 0 for the last chunk. rd [B, nh, NC, P]. One invocation per
// (j, q, h, b): x = j*P + q, y = h, z = b. Loops: N iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer GNb { float gn[]; };
layout(std430, binding = 1) readonly buffer SPb { float sp[]; };
layout(std430, binding = 2) writeonly buffer Rb { float rd[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (idx >= p.NC * p.P)
        return;
    const uint q = idx % p.P, j = idx / p.P, bh = b * p.nh + h;
    float acc = 0.0;
    if (j + 1u < p.NC) {
        const uint g = p.base[0] + ((bh * p.NC + j) * p.P + q) * p.N, s = p.base[1] + ((bh * p.NC + j + 1u) * p.P + q) * p.N;
        for (uint c = 0; c < p.N; c++)
            acc = fma(gn[g + c], sp[s + c], acc);
    }
    rd[p.base[2] + (bh * p.NC + j) * p.P + q] = acc;
}
