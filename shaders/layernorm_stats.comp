#version 450
// LayerNorm statistics. One invocation per (row r, chunk s) of at most
// `chunk` columns: the chunk's mean, then its M2 = sum (x - mean)^2 (two
// passes over the chunk, 2 * chunk <= TMM_MAX_LOOP iterations). With one
// chunk per row it writes mean[r] and rstd[r] = 1 / sqrt(M2 / d + eps)
// directly; otherwise part[2 (r nchunk + s) + {0, 1}] = (mean, M2) for
// layernorm_combine.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Part { float part[]; };
layout(std430, binding = 2) writeonly buffer Mean { float mean[]; };
layout(std430, binding = 3) writeonly buffer Rstd { float rstd[]; };
layout(push_constant) uniform Push {
    uint rows, d, chunk, nchunk;
    uint base_x, base_p, base_m, base_r;
    float eps;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.rows * p.nchunk)
        return;
    uint r = i / p.nchunk, s = i - r * p.nchunk;
    uint b = p.base_x + r * p.d + s * p.chunk;
    uint n = min(p.d - s * p.chunk, p.chunk);
    float sum = 0.0;
    for (uint c = 0; c < n; c++)
        sum += x[b + c];
    float m = sum / float(n);
    float m2 = 0.0;
    for (uint c = 0; c < n; c++) {
        float t = x[b + c] - m;
        m2 = fma(t, t, m2);
    }
    if (p.nchunk == 1u) {
        mean[p.base_m + r] = m;
        rstd[p.base_r + r] = 1.0 / sqrt(m2 / float(p.d) + p.eps);
    } else {
        part[p.base_p + 2u * i] = m;
        part[p.base_p + 2u * i + 1u] = m2;
    }
}
