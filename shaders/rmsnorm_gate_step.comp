#version 450
// Decoding, Mamba 2 (src/ops/decode.c, tmm_op_rmsnorm_gate_step): its gate
// and RMSNorm of a few rows in one dispatch, one invocation per row r:
//   a[c] = x[r, c] * silu(z[r, c])            (gate_silu_fwd.comp's arithmetic)
//   rstd[r] = 1 / sqrt(sum_c a[c]^2 / d + eps), y[r, c] = a[c] * rstd[r] * g[c]
// (rmsnorm_row.comp's), a kept in y between the two loops; 2 d <=
// TMM_MAX_LOOP. y may alias x.
#include "loop_limit.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Z { float z[]; };
layout(std430, binding = 2) readonly buffer G { float g[]; };
layout(std430, binding = 3) writeonly buffer Rstd { float rstd[]; };
layout(std430, binding = 4) buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint rows, d, base_x, base_z, base_g, base_r, base_y;
    float eps;
} p;

void main()
{
    uint r = gl_GlobalInvocationID.x;
    if (r >= p.rows)
        return;
    uint b = p.base_x + r * p.d, bz = p.base_z + r * p.d, o = p.base_y + r * p.d;
    float ss = 0.0;
    for (uint c = 0; c < p.d; c++) {
        float zv = z[bz + c];
        float v = x[b + c] * (zv / (1.0 + exp(-zv)));
        ss = fma(v, v, ss);
        y[o + c] = v;
    }
    float s = 1.0 / sqrt(ss / float(p.d) + p.eps);
    rstd[p.base_r + r] = s;
    for (uint c = 0; c < p.d; c++)
        y[o + c] = y[o + c] * s * g[p.base_g + c];
}
