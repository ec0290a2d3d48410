#version 450
// Decoding attention step, first pass (src/ops/attention_step.h): for the
// query q[b] at t = pos[b], the positions attended, lo_b .. t with
// lo_b = max(0, t+1-W) (W = 0: lo_b = 0), are cut into chunks of `chunk`
// positions; chunk j, positions [lo_b + j chunk, min(lo_b + (j+1) chunk, t+1)),
// read from slots s mod C of the caches, gives per head h (online softmax,
// scores S_s = scale q_h . k_h[s]):
//   m = max_s S_s,  l = sum_s exp(S_s - m),  a[c] = sum_s exp(S_s - m) v_h[s][c]
// stored as the record (m, l, a[0..dh)) at part[((j B + b) H + h) (dh+2)]; an
// empty chunk stores (-3e38, 0, 0). With one chunk (direct != 0) the
// normalized output a / l goes to o[b, h dh + c] instead.
// attention_step_combine.comp merges the chunks in order. With write != 0
// the invocation whose chunk holds t first stores its head's channels of
// the new key and value rows k[b], v[b] in slot t mod C of the caches (the
// cache write of attention_step_write.comp; no other invocation reads that
// slot, and this one reads it after its own writes).
// One invocation per (j, b, h): x = ((j nseq) + b - seq0) H + h, for the
// sequences seq0 .. seq0 + nseq - 1 whose caches are bound. chunk <=
// TMM_MAX_LOOP (loop_limit.glsl) loop iterations; fixed order: deterministic.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint DH = 1u; // channels per head (dh = d/H)
layout(std430, binding = 0) readonly buffer Pos { uint pos[]; };
layout(std430, binding = 1) readonly buffer Qb { float q[]; };
layout(std430, binding = 2) buffer KCb { float kc[]; };
layout(std430, binding = 3) buffer VCb { float vc[]; };
layout(std430, binding = 4) writeonly buffer Outb { float outp[]; };
layout(std430, binding = 5) readonly buffer Kb { float k[]; };
layout(std430, binding = 6) readonly buffer Vb { float v[]; };
layout(push_constant) uniform Push {
    uint nseq, seq0, batch;      // sequences of this dispatch, the first, B
    uint cap, d, H, window;      // C, channels, heads, W (0: all positions up to t)
    uint chunk, nchunks, direct; // positions per chunk, chunks, 1: one chunk, write o
    uint base_pos, base_q;       // first element of pos and q (sequence 0)
    uint base_kc, base_vc;       // first element of the caches' bindings (sequence seq0)
    uint base_out;               // first element of part (or o) in its binding
    float scale;                 // 1/sqrt(dh)
    uint write, base_k, base_v;  // 1: store k[b], v[b] at slot t mod C first; their first elements
} p;

void main()
{
    const uint idx = gl_GlobalInvocationID.x;
    if (idx >= p.nchunks * p.nseq * p.H)
        return;
    const uint h = idx % p.H, bl = (idx / p.H) % p.nseq, j = idx / (p.H * p.nseq);
    const uint b = p.seq0 + bl;
    const uint t = pos[p.base_pos + b];
    const uint lo = p.window != 0u && t + 1u > p.window ? t + 1u - p.window : 0u;
    const uint s0 = lo + j * p.chunk, s1 = min(s0 + p.chunk, t + 1u);
    float m = -3.0e38, l = 0.0;
    float acc[DH];
    [[unroll]] for (uint c = 0; c < DH; c++)
        acc[c] = 0.0;
    if (p.write != 0u && s0 <= t && t < s1) {
        const uint at = (bl * p.cap + t % p.cap) * p.d + h * DH, from = b * p.d + h * DH;
        [[unroll]] for (uint c = 0; c < DH; c++) {
            kc[p.base_kc + at + c] = k[p.base_k + from + c];
            vc[p.base_vc + at + c] = v[p.base_v + from + c];
        }
    }
    if (s0 < s1) {
        float qv[DH];
        const uint qrow = p.base_q + b * p.d + h * DH;
        [[unroll]] for (uint c = 0; c < DH; c++)
            qv[c] = q[qrow + c] * p.scale;
        const uint kbase = bl * p.cap * p.d + h * DH;
        uint slot = s0 % p.cap;
        for (uint s = s0; s < s1; s++) {
            const uint row = kbase + slot * p.d;
            float sc = 0.0;
            [[unroll]] for (uint c = 0; c < DH; c++)
                sc = fma(qv[c], kc[p.base_kc + row + c], sc);
            if (sc > m) {
                const float corr = exp(m - sc);
                l *= corr;
                [[unroll]] for (uint c = 0; c < DH; c++)
                    acc[c] *= corr;
                m = sc;
            }
            const float e = exp(sc - m);
            l += e;
            [[unroll]] for (uint c = 0; c < DH; c++)
                acc[c] = fma(e, vc[p.base_vc + row + c], acc[c]);
            slot = slot + 1u == p.cap ? 0u : slot + 1u;
        }
    }
    if (p.direct != 0u) {
        const float inv = 1.0 / l;
        const uint orow = p.base_out + b * p.d + h * DH;
        [[unroll]] for (uint c = 0; c < DH; c++)
            outp[orow + c] = acc[c] * inv;
        return;
    }
    const uint rec = p.base_out + ((j * p.batch + b) * p.H + h) * (DH + 2u);
    outp[rec] = m;
    outp[rec + 1u] = l;
    [[unroll]] for (uint c = 0; c < DH; c++)
        outp[rec + 2u + c] = acc[c];
}
