#version 450
// Softmax cross-entropy, pass 1. One invocation per (row r, chunk s) of at
// most `chunk` logits (2 * chunk <= TMM_MAX_LOOP iterations):
//   part[3 (r nchunk + s) + 0] = m, the chunk's largest logit
//   part[...              + 1] = sum over the chunk of exp(logit - m)
//   part[...              + 2] = index (within the row) of the first m, as a float
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Part { float part[]; };
layout(push_constant) uniform Push { uint rows, vocab, chunk, nchunk, base_x, base_p; } p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.nchunk)
        return;
    uint r = i / p.nchunk, s = i - r * p.nchunk;
    uint j0 = s * p.chunk;
    uint n = min(p.vocab - j0, p.chunk);
    uint b = p.base_x + r * p.vocab + j0;
    float m = x[b];
    uint am = 0u;
    for (uint j = 1u; j < n; j++) {
        float v = x[b + j];
        if (v > m) {
            m = v;
            am = j;
        }
    }
    float sum = 0.0;
    for (uint j = 0u; j < n; j++)
        sum += exp(x[b + j] - m);
    uint o = p.base_p + 3u * i;
    part[o] = m;
    part[o + 1u] = sum;
    part[o + 2u] = float(j0 + am);
}
