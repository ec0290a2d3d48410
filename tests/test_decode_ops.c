/* Cached-decoding ops against their C reference: the one-position Toeplitz
 * step with its cache write at per-sequence positions, for flat, heads and
 * kernel-k shapes, positions at the start, inside and at the end of the
 * sequence, n past one chunk of the step kernel (TMM_STEP_CHUNK: the
 * second pass) and its vec4 path (groups of 4 channels, one tap). The step is also checked against row t of the full
 * forward op, with and without its output gate. The decode step's linear
 * layers: one (with its activation), several of the same rows in one
 * dispatch (with SwiGLU, RoPE, softplus) and their unfused path; Hyena's
 * short convolutions with its first gate; Mamba 2's gate and norm. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/decode_ops.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ref/ref.h"
#include "ref/ref_decode.h"
#include "ref/ref_llama.h"
#include "ref/ref_model_util.h"
#include "ref/ref_ssm_ops.h"
#include "ref/ref_toeplitz.h"

static tmm_buffer *uint_buffer(const uint32_t *v, size_t n)
{
    tmm_buffer *b = h_buffer(NULL, n);
    H_OK(tmm_buffer_write(b, 0, v, n * 4));
    return b;
}

/* gated: tmm_op_toeplitz_step_gate, y times a random gate [B, d]. */
static void run_step(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, uint64_t seed, bool gated)
{
    tmm_toeplitz_desc desc = { .batch = B, .n = n, .d = d, .groups = G, .taps = K };
    const size_t nc = (size_t)B * n * d, nw = (size_t)G * K * n, nb = (size_t)G * n, nx = (size_t)B * d;
    float *cache = h_floats(nc), *w = h_floats(nw), *beta = h_floats(nb), *x = h_floats(nx);
    h_rand(cache, nc, seed, -1, 1);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(beta, nb, seed + 2, -1, 1);
    h_rand(x, nx, seed + 3, -1, 1);
    uint32_t *pos = malloc(B * sizeof *pos);
    for (uint32_t b = 0; b < B; b++) /* the first, the last and positions between */
        pos[b] = b == 0 ? 0 : b == 1 ? n - 1 : (uint32_t)((seed * 7919 + b * 104729) % n);

    tmm_buffer *bc = h_buffer(cache, nc), *bw = h_buffer(w, nw), *bbeta = h_buffer(beta, nb), *bx = h_buffer(x, nx);
    tmm_buffer *bpos = uint_buffer(pos, B), *by = h_buffer(NULL, nx);
    tmm_buffer *scratch = h_buffer(NULL, tmm_op_toeplitz_step_scratch(&desc));
    float *gate = h_floats(nx);
    h_rand(gate, nx, seed + 4, -2, 2);
    tmm_buffer *bg = h_buffer(gate, nx);
    tmm_recorder *r = h_begin();
    if (gated)
        H_OK(tmm_op_toeplitz_step_gate(r, &desc, tmm_whole(bpos), tmm_whole(bx), tmm_whole(bc), tmm_whole(bw),
                                       tmm_whole(bbeta), tmm_whole(bg), tmm_whole(scratch), tmm_whole(by)));
    else
        H_OK(tmm_op_toeplitz_step(r, &desc, tmm_whole(bpos), tmm_whole(bx), tmm_whole(bc), tmm_whole(bw),
                                  tmm_whole(bbeta), tmm_whole(scratch), tmm_whole(by)));
    h_run(r);

    ref_cache_write(&desc, pos, x, cache);
    float *got_cache = h_floats(nc), *y = h_floats(nx), *ref_y = h_floats(nx);
    h_read(bc, got_cache, nc);
    cr_assert(memcmp(got_cache, cache, nc * 4) == 0, "toeplitz_step B %u n %u d %u: the cache differs", B, n, d);
    h_read(by, y, nx);
    ref_toeplitz_step(&desc, pos, cache, w, beta, ref_y);
    /* the same numbers as row pos[b] of the full forward over the cache */
    float *full = h_floats(nc);
    ref_toeplitz_forward(&desc, cache, w, beta, full);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t c = 0; c < d; c++) {
            const size_t i = (size_t)b * d + c;
            full[i] = full[((size_t)b * n + pos[b]) * d + c] * (gated ? gate[i] : 1.0f);
            ref_y[i] *= gated ? gate[i] : 1.0f;
        }
    h_compare(gated ? "toeplitz_step_gate" : "toeplitz_step", y, ref_y, nx, 1e-5, 1e-5);
    h_compare("step vs forward row", y, full, nx, 2e-5, 1e-5);

    tmm_buffer *all[] = { bc, bw, bbeta, bx, bpos, by, scratch, bg };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(cache), free(w), free(beta), free(x), free(pos), free(got_cache), free(y), free(ref_y), free(full);
    free(gate);
}

static void check_step(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, uint64_t seed)
{
    run_step(B, n, d, G, K, seed, false);
}

H_TEST(decode_ops, flat) { check_step(3, 13, 5, 1, 1, 1); }
H_TEST(decode_ops, one_position) { check_step(1, 1, 7, 1, 1, 2); }
H_TEST(decode_ops, heads) { check_step(4, 33, 12, 4, 1, 3); }
H_TEST(decode_ops, wide) { check_step(2, 70, 83, 1, 1, 7); }
/* groups of 4 channels, one tap: the kernel's vec4 path, in one and in several chunks */
H_TEST(decode_ops, vec4) { check_step(3, 45, 16, 2, 1, 8); }
H_TEST(decode_ops, vec4_long) { check_step(2, TMM_STEP_CHUNK + 41, 8, 1, 1, 9); }
H_TEST(decode_ops, kernel) { check_step(2, 20, 9, 1, 3, 4); }
H_TEST(decode_ops, heads_and_kernel) { check_step(3, 17, 8, 2, 2, 5); }
/* several chunks of the step kernel, a partial last one */
H_TEST(decode_ops, long_sequence) { check_step(3, 2 * TMM_STEP_CHUNK + 37, 6, 2, 2, 6); }
/* the output gate (Hyena's) in the step's one dispatch, its vec4 path and its second pass */
H_TEST(decode_ops, gate)
{
    run_step(3, 13, 5, 1, 1, 60, true);
    run_step(3, 45, 16, 2, 1, 61, true);
    run_step(2, TMM_STEP_CHUNK + 41, 8, 1, 1, 62, true);
    run_step(3, 2 * TMM_STEP_CHUNK + 37, 6, 2, 2, 63, true);
}

/* Hyena's three short convolutions and first gate in one dispatch, against
 * ref_hyena_conv_step (ref_conv1d_step per part): three steps from zeroed
 * windows at positions 0, 1, 2 (negative positions read as 0), then steps
 * inside the sequence, per-sequence positions, K = 3 and K = 1 (no window). */
static void check_hyena_conv(uint32_t B, uint32_t d, uint32_t K, uint64_t seed)
{
    const size_t nu = 3 * (size_t)B * d, nw = 3 * (size_t)d * K, nwin = 3 * (size_t)B * (K - 1) * d;
    float *u = h_floats(nu), *w = h_floats(nw), *bias = h_floats(3 * d), *win = h_floats(nwin ? nwin : 1);
    float *got = h_floats(nu), *got_win = h_floats(nwin ? nwin : 1);
    h_rand(w, nw, seed, -1, 1);
    h_rand(bias, 3 * d, seed + 1, -1, 1);
    tmm_buffer *bw = h_buffer(w, nw), *bb = h_buffer(bias, 3 * d), *bu = h_buffer(NULL, nu);
    tmm_buffer *bwin = h_buffer(NULL, nwin ? nwin : 1), *bpos = h_buffer(NULL, B);
    uint32_t pos[8];
    for (uint32_t step = 0; step < 6; step++) {
        for (uint32_t b = 0; b < B; b++)
            pos[b] = step < 3 ? step : step * 5 + b;
        h_rand(u, nu, seed + 10 + step, -1, 1);
        H_OK(tmm_buffer_write(bu, 0, u, nu * 4));
        H_OK(tmm_buffer_write(bpos, 0, pos, B * 4));
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_hyena_conv_step(r, tmm_whole(bu), tmm_whole(bw), tmm_whole(bb), tmm_whole(bpos), B, d, K,
                                    nwin ? tmm_whole(bwin) : (tmm_view){ 0 }));
        h_run(r);
        ref_hyena_conv_step(u, w, bias, pos, B, d, K, win);
        h_read(bu, got, nu);
        h_compare("hyena_conv_step x0", got, u, (size_t)B * d, 1e-6, 1e-6);
        h_compare("hyena_conv_step v x1", got + 2 * (size_t)B * d, u + 2 * (size_t)B * d, (size_t)B * d, 1e-6, 1e-6);
        if (nwin) {
            h_read(bwin, got_win, nwin);
            h_compare("hyena_conv_step window", got_win, win, nwin, 0, 0);
        }
    }
    tmm_buffer *all[] = { bw, bb, bu, bwin, bpos };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(u), free(w), free(bias), free(win), free(got), free(got_win);
}

H_TEST(decode_ops, hyena_conv_step)
{
    check_hyena_conv(3, 7, 3, 70);
    check_hyena_conv(1, 130, 3, 71);
    check_hyena_conv(2, 5, 1, 72);
}

H_TEST(decode_ops, bad_shapes_are_refused)
{
    tmm_toeplitz_desc desc = { .batch = 2, .n = 8, .d = 6, .groups = 4, .taps = 1 }; /* 4 groups do not divide 6 */
    tmm_buffer *b = h_buffer(NULL, 2 * 8 * 6);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_toeplitz_step(r, &desc, tmm_whole(b), tmm_whole(b), tmm_whole(b), tmm_whole(b), tmm_whole(b),
                                      tmm_whole(b), tmm_whole(b)),
                 TMM_ERR_INVALID_ARGUMENT);
    desc.groups = 2;
    tmm_buffer *small = h_buffer(NULL, 5);
    cr_assert_eq(tmm_op_toeplitz_step(r, &desc, tmm_whole(b), tmm_whole(b), tmm_whole(small), tmm_whole(b),
                                      tmm_whole(b), tmm_whole(b), tmm_whole(b)),
                 TMM_ERR_INVALID_ARGUMENT, "a cache of too few floats");
    h_run(r);
    tmm_buffer_destroy(b);
    tmm_buffer_destroy(small);
}

/* The decoding step's linear layer against the matmul reference: scalar and
 * vec4 paths, with and without bias and accumulation, and the fallback to the
 * matmul op for more rows than the kernel takes. */
static void check_linear(uint32_t rows, uint32_t in, uint32_t out, bool bias, bool accumulate, uint64_t seed)
{
    const size_t nx = (size_t)rows * in, nw = (size_t)out * in, ny = (size_t)rows * out;
    float *x = h_floats(nx), *w = h_floats(nw), *b = h_floats(out), *y = h_floats(ny), *ref = h_floats(ny);
    h_rand(x, nx, seed, -1, 1);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(b, out, seed + 2, -1, 1);
    h_rand(y, ny, seed + 3, -1, 1);
    memcpy(ref, y, ny * 4);
    tmm_buffer *bx = h_buffer(x, nx), *bw = h_buffer(w, nw), *bb = h_buffer(b, out), *by = h_buffer(y, ny);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_rows(r, tmm_whole(bx), rows, in, out, tmm_whole(bw),
                            bias ? tmm_whole(bb) : (tmm_view){ 0 }, tmm_whole(by), accumulate));
    h_run(r);
    h_read(by, y, ny);
    tmm_matmul_desc d = { .m = rows, .n = out, .k = in, .trans_b = true, .batch = 1, .accumulate = accumulate };
    ref_matmul(&d, x, w, bias ? b : NULL, ref);
    h_compare("linear_rows", y, ref, ny, 1e-5, 1e-5);
    tmm_buffer_destroy(bx), tmm_buffer_destroy(bw), tmm_buffer_destroy(bb), tmm_buffer_destroy(by);
    free(x), free(w), free(b), free(y), free(ref);
}

/* With the activation in the same dispatch: against the matmul reference
 * then SiLU or the exact GELU (the references of the MLP's own ops), on the
 * kernel's path and the matmul op's fallback. */
static void check_linear_act(uint32_t rows, uint32_t in, uint32_t out, tmm_row_act act, uint64_t seed)
{
    const size_t nx = (size_t)rows * in, nw = (size_t)out * in, ny = (size_t)rows * out;
    float *x = h_floats(nx), *w = h_floats(nw), *b = h_floats(out), *y = h_floats(ny), *ref = h_floats(ny);
    h_rand(x, nx, seed, -1, 1);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(b, out, seed + 2, -1, 1);
    tmm_buffer *bx = h_buffer(x, nx), *bw = h_buffer(w, nw), *bb = h_buffer(b, out), *by = h_buffer(NULL, ny);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_rows_act(r, tmm_whole(bx), rows, in, out, tmm_whole(bw), tmm_whole(bb), act, tmm_whole(by)));
    h_run(r);
    h_read(by, y, ny);
    tmm_matmul_desc d = { .m = rows, .n = out, .k = in, .trans_b = true, .batch = 1 };
    ref_matmul(&d, x, w, b, ref);
    for (size_t i = 0; i < ny; i++)
        ref[i] = (float)(act == TMM_ROW_ACT_SILU ? ref_silu(ref[i]) : ref_gelu(ref[i]));
    h_compare(act == TMM_ROW_ACT_SILU ? "linear_rows + silu" : "linear_rows + gelu", y, ref, ny, 2e-5, 2e-5);
    tmm_buffer_destroy(bx), tmm_buffer_destroy(bw), tmm_buffer_destroy(bb), tmm_buffer_destroy(by);
    free(x), free(w), free(b), free(y), free(ref);
}

H_TEST(decode_ops, linear_rows_act)
{
    check_linear_act(1, 12, 70, TMM_ROW_ACT_SILU, 20);    /* vec4 */
    check_linear_act(3, 5, 7, TMM_ROW_ACT_GELU, 21);      /* scalar */
    check_linear_act(8, 64, 33, TMM_ROW_ACT_GELU, 22);    /* the most rows the kernel takes */
    check_linear_act(9, 16, 10, TMM_ROW_ACT_SILU, 23);    /* more: the matmul op, then the activation's op */
    check_linear_act(2, 4100, 3, TMM_ROW_ACT_GELU, 24);   /* the matmul op */
    tmm_buffer *b = h_buffer(NULL, 64);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_linear_rows_act(r, tmm_whole(b), 1, 4, 4, tmm_whole(b), tmm_whole(b), (tmm_row_act)7,
                                        tmm_sub(b, 128, 16)), TMM_ERR_INVALID_ARGUMENT, "an unknown activation");
    h_run(r);
    tmm_buffer_destroy(b);
}

H_TEST(decode_ops, linear_rows)
{
    check_linear(1, 12, 70, true, false, 10);   /* vec4 */
    check_linear(3, 5, 7, false, true, 11);     /* scalar, accumulate */
    check_linear(8, 64, 33, true, true, 12);    /* the most rows the kernel takes */
    check_linear(9, 16, 10, true, false, 13);   /* more: the matmul op */
    check_linear(2, 4100, 3, false, false, 14); /* past one loop's reach without vec4: the matmul op */
    check_linear(2, 4104, 3, true, false, 15);  /* vec4 reach */
}

/* Several linear layers of the same rows (tmm_op_linear_rows_group) against
 * ref_linear_rows_group: in one dispatch when the groups' weights, biases and
 * outputs each share a buffer (here at odd float offsets, so the bases are
 * not multiples of 4 and the scalar path runs where in is), and through the
 * unfused path (each layer, then its activation's op) for more rows than
 * the kernel takes or views in separate buffers. */
typedef struct gspec {
    uint32_t out;
    tmm_row_act act;
    bool bias;
} gspec;

static void check_group(uint32_t rows, uint32_t in, const gspec *gs, uint32_t n, bool shared, uint64_t seed)
{
    const uint32_t dh = 6, npos = 40;
    size_t woff[TMM_ROW_GROUPS], boff[TMM_ROW_GROUPS], yoff[TMM_ROW_GROUPS], nw = 1, nb = 1, ny = 1, nt = 1;
    for (uint32_t i = 0; i < n; i++) {
        const size_t wr = gs[i].act == TMM_ROW_ACT_SWIGLU ? 2 * gs[i].out : gs[i].out;
        woff[i] = nw, boff[i] = nb, yoff[i] = ny;
        nw += wr * in + 1, nb += gs[i].out + 1, ny += (size_t)rows * gs[i].out + 1;
        nt = rows * wr > nt ? rows * wr : nt;
    }
    const size_t nx = (size_t)rows * in, ntab = tmm_rope_table_floats(npos, dh);
    float *x = h_floats(nx), *w = h_floats(nw), *b = h_floats(nb), *y = h_floats(ny), *ref = h_floats(ny);
    float *table = h_floats(ntab);
    uint32_t pos[16];
    h_rand(x, nx, seed, -1, 1);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(b, nb, seed + 2, -1, 1);
    for (uint32_t r = 0; r < rows; r++)
        pos[r] = (uint32_t)((r * 7 + seed) % npos);
    H_OK(tmm_rope_table(npos, dh, TMM_ROPE_BASE, table));
    tmm_buffer *bx = h_buffer(x, nx), *bw = h_buffer(w, nw), *bb = h_buffer(b, nb), *by = h_buffer(NULL, ny);
    tmm_buffer *bt = h_buffer(table, ntab), *bp = uint_buffer(pos, rows), *tmp = h_buffer(NULL, nt);
    tmm_buffer *own[3 * TMM_ROW_GROUPS] = { 0 };
    tmm_row_group g[TMM_ROW_GROUPS];
    ref_row_group rg[TMM_ROW_GROUPS];
    for (uint32_t i = 0; i < n; i++) {
        const size_t wr = gs[i].act == TMM_ROW_ACT_SWIGLU ? 2 * gs[i].out : gs[i].out, ni = (size_t)rows * gs[i].out;
        g[i] = (tmm_row_group){ tmm_sub(bw, woff[i] * 4, wr * in * 4), { 0 }, tmm_sub(by, yoff[i] * 4, ni * 4),
                                gs[i].out, gs[i].act };
        if (gs[i].bias)
            g[i].bias = tmm_sub(bb, boff[i] * 4, gs[i].out * 4);
        if (!shared) { /* the same values in buffers of their own */
            g[i].w = tmm_whole(own[3 * i] = h_buffer(w + woff[i], wr * in));
            g[i].y = tmm_whole(own[3 * i + 1] = h_buffer(NULL, ni));
            if (gs[i].bias)
                g[i].bias = tmm_whole(own[3 * i + 2] = h_buffer(b + boff[i], gs[i].out));
        }
        rg[i] = (ref_row_group){ w + woff[i], gs[i].bias ? b + boff[i] : NULL, ref + yoff[i], gs[i].out, gs[i].act };
    }
    const tmm_row_rope rope = { tmm_whole(bt), tmm_whole(bp), dh, npos };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_rows_group(r, tmm_whole(bx), rows, in, g, n, &rope, tmm_whole(tmp)));
    h_run(r);
    ref_linear_rows_group(x, rows, in, rg, n, pos, dh, npos);
    for (uint32_t i = 0; i < n; i++) {
        const size_t ni = (size_t)rows * gs[i].out;
        if (shared)
            h_read(by, y, ny);
        else
            h_read(own[3 * i + 1], y + yoff[i], ni);
        h_compare("linear_rows_group", y + yoff[i], ref + yoff[i], ni, 2e-5, 2e-5);
    }
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
        tmm_buffer_destroy(own[i]);
    tmm_buffer *all[] = { bx, bw, bb, by, bt, bp, tmp };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(x), free(w), free(b), free(y), free(ref), free(table);
}

H_TEST(decode_ops, linear_rows_group)
{
    const gspec qkv[3] = { { 12, TMM_ROW_ACT_ROPE, false }, { 12, TMM_ROW_ACT_ROPE, false },
                           { 12, TMM_ROW_ACT_NONE, true } };
    const gspec mamba[3] = { { 5, TMM_ROW_ACT_NONE, false }, { 9, TMM_ROW_ACT_NONE, true },
                             { 3, TMM_ROW_ACT_SOFTPLUS, true } };
    const gspec all[4] = { { 7, TMM_ROW_ACT_SWIGLU, false }, { 18, TMM_ROW_ACT_ROPE, false },
                           { 70, TMM_ROW_ACT_SOFTPLUS, false }, { 3, TMM_ROW_ACT_NONE, true } };
    check_group(1, 12, qkv, 3, true, 30);    /* odd bases: scalar */
    check_group(2, 5, mamba, 3, true, 31);   /* scalar */
    check_group(8, 33, all, 4, true, 32);    /* the most rows the kernel takes */
    check_group(9, 16, all, 4, true, 33);    /* more: the unfused path */
    check_group(3, 20, all, 4, false, 34);   /* separate buffers: the unfused path */
    check_group(1, 4100, mamba, 3, true, 35); /* past one loop's reach: the unfused path (matmul) */
}

/* The vec4 path: weights and outputs at aligned offsets of one buffer. */
H_TEST(decode_ops, linear_rows_group_vec4)
{
    const uint32_t rows = 2, in = 16, out = 12, dh = 6, npos = 40;
    float *x = h_floats(rows * in), *w = h_floats(3 * 64 * in), *table = h_floats(tmm_rope_table_floats(npos, dh));
    float *y = h_floats(3 * 64), *ref = h_floats(3 * 64);
    h_rand(x, rows * in, 40, -1, 1);
    h_rand(w, 3 * 64 * in, 41, -1, 1);
    H_OK(tmm_rope_table(npos, dh, TMM_ROPE_BASE, table));
    const uint32_t pos[2] = { 0, 39 };
    tmm_buffer *bx = h_buffer(x, rows * in), *bw = h_buffer(w, 3 * 64 * in), *by = h_buffer(NULL, 3 * 64);
    tmm_buffer *bt = h_buffer(table, tmm_rope_table_floats(npos, dh)), *bp = uint_buffer(pos, rows);
    tmm_row_group g[3];
    ref_row_group rg[3];
    for (uint32_t i = 0; i < 3; i++) {
        const tmm_row_act act = i < 2 ? TMM_ROW_ACT_ROPE : TMM_ROW_ACT_SWIGLU;
        const uint32_t o = act == TMM_ROW_ACT_SWIGLU ? out / 2 : out;
        g[i] = (tmm_row_group){ tmm_sub(bw, i * 64 * in * 4, 2 * o * in * 4), { 0 }, tmm_sub(by, i * 64 * 4,
                                rows * o * 4), o, act };
        rg[i] = (ref_row_group){ w + i * 64 * in, NULL, ref + i * 64, o, act };
    }
    const tmm_row_rope rope = { tmm_whole(bt), tmm_whole(bp), dh, npos };
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_linear_rows_group(r, tmm_whole(bx), rows, in, g, 3, &rope, (tmm_view){ 0 }));
    h_run(r);
    h_read(by, y, 3 * 64);
    ref_linear_rows_group(x, rows, in, rg, 3, pos, dh, npos);
    for (uint32_t i = 0; i < 3; i++)
        h_compare("linear_rows_group vec4", y + i * 64, ref + i * 64, rows * g[i].out, 2e-5, 2e-5);
    tmm_buffer *all[] = { bx, bw, by, bt, bp };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(x), free(w), free(table), free(y), free(ref);
}

H_TEST(decode_ops, linear_rows_group_refuses)
{
    tmm_buffer *b = h_buffer(NULL, 256);
    const tmm_view v = tmm_sub(b, 0, 256), y = tmm_sub(b, 512, 256);
    const tmm_row_group swiglu_bias = { v, v, y, 2, TMM_ROW_ACT_SWIGLU }, gelu = { v, { 0 }, y, 2, TMM_ROW_ACT_GELU };
    const tmm_row_group rope = { v, { 0 }, y, 6, TMM_ROW_ACT_ROPE }, five[5] = { gelu, gelu, gelu, gelu, gelu };
    const tmm_row_rope odd = { v, v, 3, 4 };
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_linear_rows_group(r, v, 1, 4, &swiglu_bias, 1, NULL, v), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_linear_rows_group(r, v, 1, 4, &gelu, 1, NULL, v), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_linear_rows_group(r, v, 1, 4, &rope, 1, NULL, v), TMM_ERR_INVALID_ARGUMENT, "no rope");
    cr_assert_eq(tmm_op_linear_rows_group(r, v, 1, 4, &rope, 1, &odd, v), TMM_ERR_INVALID_ARGUMENT, "odd dh");
    cr_assert_eq(tmm_op_linear_rows_group(r, v, 1, 4, five, 5, NULL, v), TMM_ERR_INVALID_ARGUMENT, "5 groups");
    h_run(r);
    tmm_buffer_destroy(b);
}

/* Mamba 2's gate and norm in one dispatch against ref_gate_silu_fwd then
 * ref_rmsnorm_fwd_d: in place (y = x) and not, and the unfused path for more
 * rows than the norm's row kernel takes. */
static void check_gate_norm(uint32_t rows, uint32_t d, bool in_place, uint64_t seed)
{
    const size_t n = (size_t)rows * d;
    float *x = h_floats(n), *z = h_floats(n), *g = h_floats(d), *y = h_floats(n), *rstd = h_floats(rows);
    float *a = h_floats(n), *ref = h_floats(n), *ref_rstd = h_floats(rows);
    h_rand(x, n, seed, -2, 2);
    h_rand(z, n, seed + 1, -3, 3);
    h_rand(g, d, seed + 2, 0.5f, 1.5f);
    tmm_buffer *bx = h_buffer(x, n), *bz = h_buffer(z, n), *bg = h_buffer(g, d), *by = h_buffer(NULL, n);
    tmm_buffer *br = h_buffer(NULL, rows), *bs = h_buffer(NULL, tmm_op_rmsnorm_forward_scratch(rows, d) + 1);
    tmm_buffer *out = in_place ? bx : by;
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_rmsnorm_gate_step(r, tmm_whole(bx), tmm_whole(bz), tmm_whole(bg), rows, d, 1e-5f, tmm_whole(bs),
                                  tmm_whole(br), tmm_whole(out)));
    h_run(r);
    ref_gate_silu_fwd(x, z, n, a);
    double *ad = malloc(n * sizeof *ad), *gd = malloc(d * sizeof *gd), *yd = malloc(n * sizeof *yd);
    double *rd = malloc(rows * sizeof *rd);
    for (size_t i = 0; i < n; i++)
        ad[i] = a[i];
    for (size_t i = 0; i < d; i++)
        gd[i] = g[i];
    ref_rmsnorm_fwd_d(ad, gd, rows, d, 1e-5, yd, rd);
    for (size_t i = 0; i < n; i++)
        ref[i] = (float)yd[i];
    for (size_t i = 0; i < rows; i++)
        ref_rstd[i] = (float)rd[i];
    h_read(out, y, n);
    h_read(br, rstd, rows);
    h_compare("rmsnorm_gate_step", y, ref, n, 1e-5, 1e-5);
    h_compare("rmsnorm_gate_step rstd", rstd, ref_rstd, rows, 1e-5, 1e-5);
    tmm_buffer *all[] = { bx, bz, bg, by, br, bs };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(x), free(z), free(g), free(y), free(rstd), free(a), free(ref), free(ref_rstd);
    free(ad), free(gd), free(yd), free(rd);
}

H_TEST(decode_ops, rmsnorm_gate_step)
{
    check_gate_norm(1, 256, true, 80);
    check_gate_norm(3, 7, false, 81);
    check_gate_norm(70, 5, true, 82); /* more rows than the row kernel takes: the unfused path */
}
