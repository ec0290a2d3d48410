#version 450
// LayerNorm statistics of rows split into chunks: one invocation per row
// combines the chunks' (mean, M2) in chunk order (Chan et al.'s pairwise
// update) and writes mean[r] and rstd[r] = 1 / sqrt(M2 / d + eps).
// nchunk <= TMM_MAX_LOOP (the host checks).
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Part { float part[]; };
layout(std430, binding = 1) writeonly buffer Mean { float mean[]; };
layout(std430, binding = 2) writeonly buffer Rstd { float rstd[]; };
layout(push_constant) uniform Push {
    uint rows, d, chunk, nchunk;
    uint base_p, base_m, base_r;
    float eps;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint b = p.base_p + 2u * r * p.nchunk;
    float n = 0.0, m = 0.0, m2 = 0.0;
    for (uint s = 0; s < p.nchunk; s++) {
        float nb = float(min(p.d - s * p.chunk, p.chunk));
        float mb = part[b + 2u * s], m2b = part[b + 2u * s + 1u];
        float nt = n + nb;
        float delta = mb - m;
        m += delta * (nb / nt);
        m2 += m2b + delta * delta * (n * nb / nt);
        n = nt;
    }
    mean[p.base_m + r] = m;
    rstd[p.base_r + r] = 1.0 / sqrt(m2 / float(p.d) + p.eps);
}
