#version 450
// Embedding forward for rows of h and one vocab range [v0, v0 + vcount) of E:
// h[i, c] = E[tok[i] - v0, c] when tok[i] is in the range; a token >= vocab
// gets a zero row (in the pass with zero_oob set), so nothing is read out of
// bounds. One invocation per element of h.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, binding = 0) readonly buffer Tok { uint tok[]; };
layout(std430, binding = 1) readonly buffer E { float e[]; };
layout(std430, binding = 2) writeonly buffer H { float h[]; };
layout(push_constant) uniform Push {
    uint n;         // elements of h in this dispatch: rows * d
    uint d;
    uint v0;        // first vocab row bound in E
    uint vcount;    // vocab rows bound in E
    uint vocab;
    uint zero_oob;  // write zero rows for tokens >= vocab
    uint base_tok, base_e, base_h;
} p;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n)
        return;
    uint r = i / p.d, c = i - r * p.d;
    uint t = tok[p.base_tok + r];
    if (t >= p.v0 && t - p.v0 < p.vcount)
        h[p.base_h + i] = e[p.base_e + (t - p.v0) * p.d + c];
    else if (p.zero_oob != 0u && t >= p.vocab)
        h[p.base_h + i] = 0.0;
}
