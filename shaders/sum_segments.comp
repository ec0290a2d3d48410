#version 450
// x is [rows, cols]. out[r * nseg + s] = sum of x[r, s*seg .. min(cols, (s+1)*seg)),
// left to right, one invocation per segment: a fixed order, no atomics.
// The host keeps seg <= TMM_MAX_LOOP (loop_limit.glsl). x starts at element
// base_x of its binding and out at base_o (the host splits work that does not
// fit one binding into row groups, or a long row into groups of segments).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { uint rows; uint cols; uint seg; uint nseg; uint base_x; uint base_o; uint ld; } p;

void main()
{
    uint j = gl_GlobalInvocationID.x;
    if (j >= p.rows * p.nseg)
        return;
    uint r = j / p.nseg, s = j % p.nseg;
    uint begin = s * p.seg;
    uint end = min(p.cols, begin + p.seg);
    uint base = p.base_x + r * p.cols;
    float acc = 0.0;
    for (uint c = begin; c < end; c++)
        acc += x[base + c];
    o[p.base_o + j] = acc;
}
