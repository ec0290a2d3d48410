#version 450
// x is [rows, cols]. out[s * cols + c] = sum of x[r, c] for r in
// [s*seg, min(rows, (s+1)*seg)), rows in order; one invocation per (c, s).
// The host keeps seg <= TMM_MAX_LOOP (loop_limit.glsl).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint rows; uint cols; uint seg; uint nseg; } p;

void main()
{
    uint c = gl_GlobalInvocationID.x;
    uint s = gl_GlobalInvocationID.y;
    if (c >= p.cols || s >= p.nseg)
        return;
    uint end = min(p.rows, (s + 1) * p.seg);
    float acc = 0.0;
    for (uint r = s * p.seg; r < end; r++)
        acc += x[r * p.cols + c];
    o[s * p.cols + c] = acc;
}
