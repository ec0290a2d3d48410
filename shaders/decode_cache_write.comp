#version 450
// Decoding: stores each sequence's new row in its cache (src/ops/decode.c):
//   cache[b, pos[b], c] = x[b, c]     for b < nseq, c < d
// pos holds the position of every sequence of the whole batch; this dispatch
// covers sequences seq0 .. seq0 + nseq - 1.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Cache { float cache[]; };
layout(push_constant) uniform Push { uint nseq, n, d, seq0, base_x, base_cache; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.nseq * p.d)
        return;
    uint b = i / p.d, c = i % p.d;
    uint t = pos[p.seq0 + b];
    cache[p.base_cache + (b * p.n + t) * p.d + c] = x[p.base_x + i];
}
