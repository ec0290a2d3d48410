#version 450
// SSD (src/ops/ssd.h), the decays' cumulative sums inside each chunk: for
// position t of chunk j (t0 = jQ <= t < t1 = min(n, t0 + Q), last = t1 - 1)
// and head h,
//   cs_t = sum_{r = t0..t} dt_r A_h,  A_h = -exp(A_log_h)
// kept as a compensated pair (hi, lo) with hi + lo = the sum of the rounded
// terms up to rounding of lo (TwoSum), and the weights the kernels use:
//   cs[b,h,t] = (hi, lo, dt_t exp(cs_last - cs_t), exp(cs_t))   [B, nh, n, 4]
// (exponents hi/lo differences, clamped at 0 above). One invocation per
// (j, h, b): x = j, y = h, z = b. Loops: 2 Q iterations.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer DTb { float dt[]; };
layout(std430, binding = 1) readonly buffer ALb { float alog[]; };
layout(std430, binding = 2) buffer CSb { float cs[]; };
layout(push_constant) uniform Push {
    uint n, nh, P, N;         // positions per sequence, heads, head width, state size
    uint Q, NC, cx, ldy;      // chunk, chunks per sequence, row strides of xbc (nh P + 2N) and y (nh P)
    uint lo, hi, flags, nseq; // pass range, flags, sequences in this dispatch
    uint base[10];            // first float of each binding's view
} p;

void main()
{
    const uint j = gl_GlobalInvocationID.x, h = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (j >= p.NC || h >= p.nh)
        return;
    const float A = -exp(alog[p.base[1] + h]);
    const uint t0 = j * p.Q, t1 = min(p.n, t0 + p.Q);
    const uint ob = p.base[2] + 4u * ((b * p.nh + h) * p.n);
    precise float hi = 0.0, lo = 0.0;
    for (uint t = t0; t < t1; t++) {
        precise float a = dt[p.base[0] + (b * p.n + t) * p.nh + h] * A;
        precise float s = hi + a;
        precise float bb = s - hi;
        precise float e = (hi - (s - bb)) + (a - bb);
        hi = s;
        lo += e;
        cs[ob + 4u * t] = hi;
        cs[ob + 4u * t + 1u] = lo;
    }
    for (uint t = t0; t < t1; t++) {
        const float th = cs[ob + 4u * t], tl = cs[ob + 4u * t + 1u];
        cs[ob + 4u * t + 2u] = exp(min(0.0, (hi - th) + (lo - tl))) * dt[p.base[0] + (b * p.n + t) * p.nh + h];
        cs[ob + 4u * t + 3u] = exp(min(0.0, th + tl));
    }
}
