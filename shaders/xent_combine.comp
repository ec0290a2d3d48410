#version 450
// Softmax cross-entropy, pass 2. One invocation per row combines the
// chunks of pass 1 in chunk order (nchunk <= TMM_MAX_LOOP / 2):
//   M = the largest chunk maximum (argmax: the first chunk's index that has it)
//   lse = M + log(sum_s part_sum[s] * exp(part_max[s] - M))
//   loss = lse - logits[r, target] for 0 <= target < vocab, else 0.
// Optional outputs (has_loss, has_argmax); without targets every row counts
// as ignored.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Part { float part[]; };
layout(std430, binding = 2) readonly buffer Targets { int targets[]; };
layout(std430, binding = 3) writeonly buffer Loss { float loss[]; };
layout(std430, binding = 4) writeonly buffer Lse { float lse[]; };
layout(std430, binding = 5) writeonly buffer Argmax { uint amax[]; };
layout(push_constant) uniform Push {
    uint rows, vocab, nchunk, has_targets, has_loss, has_argmax;
    uint base_x, base_p, base_t, base_l, base_lse, base_a;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint b = p.base_p + 3u * r * p.nchunk;
    float m = part[b];
    uint am = uint(part[b + 2u]);
    for (uint s = 1u; s < p.nchunk; s++) {
        float v = part[b + 3u * s];
        if (v > m) {
            m = v;
            am = uint(part[b + 3u * s + 2u]);
        }
    }
    float sum = 0.0;
    for (uint s = 0u; s < p.nchunk; s++)
        sum += part[b + 3u * s + 1u] * exp(part[b + 3u * s] - m);
    float l = m + log(sum);
    lse[p.base_lse + r] = l;
    if (p.has_loss != 0u) {
        int t = p.has_targets != 0u ? targets[p.base_t + r] : -1;
        loss[p.base_l + r] = (t >= 0 && uint(t) < p.vocab) ? l - x[p.base_x + r * p.vocab + uint(t)] : 0.0;
    }
    if (p.has_argmax != 0u)
        amax[p.base_a + r] = am;
}
