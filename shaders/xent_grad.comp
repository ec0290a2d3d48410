#version 450
// Softmax cross-entropy gradient of the mean loss, in place over the logits:
//   logits[r, j] = (exp(logits[r, j] - lse[r]) - [j == target[r]]) * scale * S
// (scale = 1 / denominator; S the loss scale, loss_scale[base_s] when
// has_loss_scale, else 1), and 0 for rows whose target is negative or
// >= vocab. One invocation per element.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Targets { int targets[]; };
layout(std430, binding = 2) readonly buffer Lse { float lse[]; };
layout(std430, binding = 3) readonly buffer LossScale { float loss_scale[]; };
layout(push_constant) uniform Push {
    uint n, vocab, base_x, base_t, base_lse;
    float scale;
    uint has_loss_scale, base_s;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.vocab, j = i - r * p.vocab;
    int t = targets[p.base_t + r];
    float g = 0.0;
    if (t >= 0 && uint(t) < p.vocab) {
        g = exp(x[p.base_x + i] - lse[p.base_lse + r]);
        if (j == uint(t))
            g -= 1.0;
        g *= p.scale;
        if (p.has_loss_scale != 0u)
            g *= loss_scale[p.base_s];
    }
    x[p.base_x + i] = g;
}
