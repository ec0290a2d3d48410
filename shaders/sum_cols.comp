#version 450
// x is [rows, cols]. out[s * cols + c] = sum of x[r, c] for r in
// [s*seg, min(rows, (s+1)*seg)), rows in order; one invocation per (c, s).
// The host keeps seg <= TMM_MAX_LOOP (loop_limit.glsl). x starts at element
// base_x of its binding and out at base_o, rows of both ld elements apart:
// cols may be a block of columns of wider matrices (the host splits what
// does not fit one binding over dispatches).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint rows; uint cols; uint seg; uint nseg; uint base_x; uint base_o; uint ld; } p;

void main()
{
    uint c = gl_GlobalInvocationID.x;
    uint s = gl_GlobalInvocationID.y;
    if (c >= p.cols || s >= p.nseg)
        return;
    uint end = min(p.rows, (s + 1) * p.seg);
    float acc = 0.0;
    for (uint r = s * p.seg; r < end; r++)
        acc += x[p.base_x + r * p.ld + c];
    o[p.base_o + s * p.ld + c] = acc;
}
