#version 450
// Decoding attention (src/ops/attention_step.h): stores each sequence's new
// key and value rows in the slot of its position in the cache of capacity C:
//   kcache[b, pos[b] mod C, c] = k[b, c],  vcache[b, pos[b] mod C, c] = v[b, c]
// for the sequences b = seq0 .. seq0 + nseq - 1 of this dispatch (the caches
// are bound from sequence seq0), c < d; x = (b - seq0) * d + c.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer Kb { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) writeonly buffer KCb { float kc[]; };
layout(std430, binding = 4) writeonly buffer VCb { float vc[]; };
layout(push_constant) uniform Push {
    uint nseq, seq0, d, cap;      // sequences of this dispatch, the first, channels, C
    uint base_pos, base_k, base_v; // first element of pos, k, v in their bindings (sequence 0)
    uint base_kc, base_vc;        // first element of the caches' bindings (sequence seq0)
} p;

void main()
{
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseq * p.d)
        return;
    const uint bl = i / p.d, c = i % p.d, b = p.seq0 + bl;
    const uint slot = pos[p.base_pos + b] % p.cap;
    const uint at = (bl * p.cap + slot) * p.d + c;
    kc[p.base_kc + at] = k[p.base_k + b * p.d + c];
    vc[p.base_vc + at] = v[p.base_v + b * p.d + c];
}
