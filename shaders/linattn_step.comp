#version 450
// Linear attention, one decoding step (src/ops/linear_attention.h): one
// invocation per (h, b), x = h, y = b. With fq = f(q_b), fk = f(k_b) of head h:
//   S[c1][:] += fk[c1] v_b,  z[c1] += fk[c1]   (in place)
//   y_b = Sᵀ fq / (fq·z + eps)                 (with the updated S, z)
// Loops: D iterations (the loops over c2 are unrolled).
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint D = 1u; // channels per head
layout(std430, binding = 0) readonly buffer Qb { float q[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) buffer Sb { float S[]; };
layout(std430, binding = 4) buffer Zb { float z[]; };
layout(std430, binding = 5) writeonly buffer Yb { float y[]; };
layout(push_constant) uniform Push {
    uint n, d, H;      // unused, channels, heads
    uint chunk, nchunk; // unused here
    uint lo, hi;       // unused here
    float eps;         // denominator epsilon
} p;

float phi(float x) { return x > 0.0 ? x + 1.0 : exp(x); }

void main()
{
    const uint h = gl_GlobalInvocationID.x, b = gl_GlobalInvocationID.y;
    if (h >= p.H)
        return;
    const uint bh = b * p.H + h, row = b * p.d + h * D;
    float vs[D], num[D];
    [[unroll]] for (uint c = 0; c < D; c++) {
        vs[c] = v[row + c];
        num[c] = 0.0;
    }
    float den = 0.0;
    for (uint c1 = 0; c1 < D; c1++) {
        const float fk = phi(k[row + c1]), fq = phi(q[row + c1]);
        const uint at = (bh * D + c1) * D;
        [[unroll]] for (uint c2 = 0; c2 < D; c2++) {
            const float s = fma(fk, vs[c2], S[at + c2]);
            S[at + c2] = s;
            num[c2] = fma(fq, s, num[c2]);
        }
        const float zc = z[bh * D + c1] + fk;
        z[bh * D + c1] = zc;
        den = fma(fq, zc, den);
    }
    den += p.eps;
    [[unroll]] for (uint c = 0; c < D; c++)
        y[row + c] = num[c] / den;
}
