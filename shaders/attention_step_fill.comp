#version 450
// Decoding attention (src/ops/attention_step.h): after a prefill of len[b]
// positions, copies the last positions that fit a cache of capacity C from the
// full k, v [B, n, d] into their slots:
//   kcache[b, s mod C, c] = k[b, s, c] (and v) for s in [max(0, L - C), L),
//   L = min(len[b], n)
// for the sequences b = seq0 .. seq0 + nseq - 1 of this dispatch (k, v and
// the caches bound from sequence seq0). x = j * d + c with s = max(0, L - C) + j,
// j < min(C, n); y = b - seq0. Other slots are left as they are.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Len { uint len[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) writeonly buffer KCb { float kc[]; };
layout(std430, binding = 4) writeonly buffer VCb { float vc[]; };
layout(push_constant) uniform Push {
    uint n, d, cap, seq0, span;    // length of k and v, channels, C, first sequence, min(C, n)
    uint base_len, base_k, base_v; // first element of len (sequence 0), of k and v (sequence seq0)
    uint base_kc, base_vc;         // first element of the caches' bindings (sequence seq0)
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x, bl = gl_GlobalInvocationID.y;
    if (i >= p.span * p.d)
        return;
    const uint j = i / p.d, c = i % p.d;
    const uint L = min(len[p.base_len + p.seq0 + bl], p.n);
    const uint s = (L > p.cap ? L - p.cap : 0u) + j;
    if (s >= L)
        return;
    const uint src = (bl * p.n + s) * p.d + c, dst = (bl * p.cap + s % p.cap) * p.d + c;
    kc[p.base_kc + dst] = k[p.base_k + src];
    vc[p.base_vc + dst] = v[p.base_v + src];
}
