#version 450
// RoPE, "rotate half", one invocation per (row r, head h, pair i < half),
// half = dh / 2: with c0 = h dh + i, c1 = c0 + half and (cs, sn) the table's
// cos and sin of theta = t * base^(-2i/dh) at table[2 (t half + i) + {0, 1}]:
//   y[c0] = x[c0] cs - x[c1] sn,  y[c1] = x[c0] sn + x[c1] cs
// (sn negated with inverse: the backward). The position t is (row0 + r) mod
// npos (mode 0, rows [B, n, d]) or pos[r] (mode 1); a position >= npos gives
// a zero pair (the table is never read out of range). y may alias x (each
// invocation reads its pair before writing it).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { float table[]; };
layout(std430, binding = 2) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 3) buffer Y { float y[]; };
layout(push_constant) uniform Push {
    uint rows, d, half_dh, npos, row0, mode, inverse;
    uint base_x, base_p, base_y;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    uint pairs = p.d / 2u;
    if (i >= p.rows * pairs)
        return;
    uint r = i / pairs, k = i - r * pairs;
    uint h = k / p.half_dh, j = k - h * p.half_dh;
    uint c0 = r * p.d + 2u * h * p.half_dh + j, c1 = c0 + p.half_dh;
    uint t = p.mode == 0u ? (p.row0 + r) % p.npos : pos[p.base_p + r];
    float x0 = x[p.base_x + c0], x1 = x[p.base_x + c1];
    float y0 = 0.0, y1 = 0.0;
    if (t < p.npos) {
        uint at = 2u * (t * p.half_dh + j);
        float cs = table[at], sn = table[at + 1u];
        if (p.inverse != 0u)
            sn = -sn;
        y0 = x0 * cs - x1 * sn;
        y1 = x0 * sn + x1 * cs;
    }
    y[p.base_y + c0] = y0;
    y[p.base_y + c1] = y1;
}
