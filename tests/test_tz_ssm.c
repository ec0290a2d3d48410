/* Distilled decoding ops (ops/tz_ssm_ops.h) against their C reference: the
 * state-space step (exact head, modes, state update, cache write) and the
 * states after a prefill, on flat, heads and kernel-k shapes, heads longer
 * than the position, positions at both ends, and prefills longer than one
 * pass (TMM_MAX_LOOP positions). Then the whole path: a prefill of P
 * positions followed by steps equals, row by row, the Toeplitz forward with
 * the realized vector ŵ (head exact, tail Σ Re(res·pole^j)). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"
#include "ops/tz_ssm_ops.h"
#include "ref/ref.h"
#include "ref/ref_decode.h"
#include "ref/ref_toeplitz.h"

static tmm_buffer *uint_buffer(const uint32_t *v, size_t n)
{
    tmm_buffer *b = h_buffer(NULL, n);
    H_OK(tmm_buffer_write(b, 0, v, n * 4));
    return b;
}

/* Modes [G, K, M] of stable poles (moduli below 0.98), real and complex,
 * with some padding modes (all zero). */
static float *make_modes(uint32_t G, uint32_t K, uint32_t M, uint64_t seed)
{
    const size_t count = (size_t)G * K * M;
    float *md = h_floats(count * 4), *r = h_floats(count * 4);
    h_rand(r, count * 4, seed, -1, 1);
    for (size_t i = 0; i < count; i++) {
        const double rho = 0.5 + 0.48 * fabs(r[4 * i]), th = i % 3 == 0 ? 0.0 : 3.0 * r[4 * i + 1];
        md[4 * i] = (float)(rho * cos(th)), md[4 * i + 1] = (float)(rho * sin(th));
        md[4 * i + 2] = r[4 * i + 2], md[4 * i + 3] = i % 3 == 0 ? 0.0f : r[4 * i + 3];
        if (M > 2 && i % M == M - 1)
            memset(md + 4 * i, 0, 4 * sizeof *md);
    }
    free(r);
    return md;
}

static void check_step(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, uint32_t head, uint32_t M,
                       uint64_t seed)
{
    const tmm_tz_ssm_desc desc = { { .batch = B, .n = n, .d = d, .groups = G, .taps = K }, head, M };
    const size_t nc = (size_t)B * n * d, nw = (size_t)G * K * n, nb = (size_t)G * n, nx = (size_t)B * d;
    const size_t nm = (size_t)G * K * M * 4, ns = tmm_tz_ssm_state_floats(&desc);
    float *cache = h_floats(nc), *w = h_floats(nw), *beta = h_floats(nb), *x = h_floats(nx);
    float *modes = make_modes(G, K, M, seed + 4), *state = h_floats(ns);
    h_rand(cache, nc, seed, -1, 1);
    h_rand(w, nw, seed + 1, -1, 1);
    h_rand(beta, nb, seed + 2, -1, 1);
    h_rand(x, nx, seed + 3, -1, 1);
    h_rand(state, ns, seed + 5, -1, 1);
    uint32_t *pos = malloc(B * sizeof *pos);
    for (uint32_t b = 0; b < B; b++) /* the first, the last, one inside the head, others */
        pos[b] = b == 0 ? 0 : b == 1 ? n - 1 : b == 2 ? (head > 1 ? head - 2 : 0) : (uint32_t)((seed * 7919 + b * 104729) % n);

    tmm_buffer *bc = h_buffer(cache, nc), *bw = h_buffer(w, nw), *bbeta = h_buffer(beta, nb), *bx = h_buffer(x, nx);
    tmm_buffer *bm = h_buffer(modes, nm), *bs = h_buffer(state, ns), *bpos = uint_buffer(pos, B), *by = h_buffer(NULL, nx);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_tz_ssm_step(r, &desc, tmm_whole(bpos), tmm_whole(bx), tmm_whole(bc), tmm_whole(bw), tmm_whole(bbeta),
                            tmm_whole(bm), tmm_whole(bs), tmm_whole(by)));
    h_run(r);
    float *y = h_floats(nx), *ref_y = h_floats(nx), *got_state = h_floats(ns), *got_cache = h_floats(nc);
    ref_tz_ssm_step(&desc, pos, x, cache, w, beta, modes, state, ref_y);
    h_read(by, y, nx);
    h_compare("tz_ssm_step y", y, ref_y, nx, 1e-5, 1e-5);
    h_read(bs, got_state, ns);
    h_compare("tz_ssm_step state", got_state, state, ns, 1e-5, 1e-5);
    h_read(bc, got_cache, nc);
    cr_assert(memcmp(got_cache, cache, nc * 4) == 0, "tz_ssm_step: the cache differs");

    tmm_buffer *all[] = { bc, bw, bbeta, bx, bm, bs, bpos, by };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(cache), free(w), free(beta), free(x), free(modes), free(state), free(pos);
    free(y), free(ref_y), free(got_state), free(got_cache);
}

H_TEST(tz_ssm, step_flat) { check_step(3, 13, 5, 1, 1, 1, 3, 1); }
H_TEST(tz_ssm, step_heads_long_head) { check_step(4, 33, 12, 4, 1, 6, 5, 2); }
H_TEST(tz_ssm, step_kernel) { check_step(3, 20, 9, 1, 3, 2, 4, 3); }
H_TEST(tz_ssm, step_heads_and_kernel) { check_step(5, 17, 8, 2, 2, 5, 1, 4); }
H_TEST(tz_ssm, step_one_position) { check_step(3, 1, 7, 1, 1, 1, 2, 5); }

static void check_prefill(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, uint32_t head, uint32_t M,
                          uint64_t seed)
{
    const tmm_tz_ssm_desc desc = { { .batch = B, .n = n, .d = d, .groups = G, .taps = K }, head, M };
    const size_t nc = (size_t)B * n * d, nm = (size_t)G * K * M * 4, ns = tmm_tz_ssm_state_floats(&desc);
    float *cache = h_floats(nc), *modes = make_modes(G, K, M, seed + 1), *state = h_floats(ns), *got = h_floats(ns);
    h_rand(cache, nc, seed, -1, 1);
    h_rand(got, ns, seed + 2, -1, 1); /* the op must not read what was there */
    uint32_t *len = malloc(B * sizeof *len);
    for (uint32_t b = 0; b < B; b++) /* one position, all of them, shorter than the head, others */
        len[b] = b == 0 ? 1 : b == 1 ? n : b == 2 ? (head > 1 ? head - 1 : 1) : 1 + (uint32_t)((seed * 7919 + b * 104729) % n);
    tmm_buffer *bc = h_buffer(cache, nc), *bm = h_buffer(modes, nm), *bs = h_buffer(got, ns), *bl = uint_buffer(len, B);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_tz_ssm_prefill(r, &desc, tmm_whole(bl), tmm_whole(bc), tmm_whole(bm), tmm_whole(bs)));
    h_run(r);
    ref_tz_ssm_prefill(&desc, len, cache, modes, state);
    h_read(bs, got, ns);
    h_compare("tz_ssm_prefill state", got, state, ns, 1e-4, 1e-5);
    tmm_buffer *all[] = { bc, bm, bs, bl };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(cache), free(modes), free(state), free(got), free(len);
}

H_TEST(tz_ssm, prefill_flat) { check_prefill(4, 29, 5, 1, 1, 1, 3, 11); }
H_TEST(tz_ssm, prefill_heads_kernel) { check_prefill(5, 40, 8, 2, 3, 4, 4, 12); }
/* positions in two passes of TMM_MAX_LOOP */
H_TEST(tz_ssm, prefill_two_passes) { check_prefill(3, TMM_MAX_LOOP + 77, 3, 1, 2, 2, 2, 13); }

/* ŵ [G, K, n] of modes with an exact head taken from w. */
static void realized(const tmm_tz_ssm_desc *desc, const float *w, const float *modes, float *out)
{
    const uint32_t n = desc->tz.n, M = desc->modes, GK = desc->tz.groups * desc->tz.taps;
    for (uint32_t v = 0; v < GK; v++)
        for (uint32_t k = 0; k < n; k++) {
            double acc = 0;
            for (uint32_t j = 0; k >= desc->head && j < M; j++) {
                const float *md = modes + ((size_t)v * M + j) * 4;
                const double rho = hypot(md[0], md[1]), th = atan2(md[1], md[0]), e = k - desc->head;
                const double pr = pow(rho, e) * cos(th * e), pi = pow(rho, e) * sin(th * e);
                acc += md[2] * pr - md[3] * pi;
            }
            out[(size_t)v * n + k] = k < desc->head ? w[(size_t)v * n + k] : (float)acc;
        }
}

/* Prefill P positions, then step through the rest: every output equals the
 * forward's row with ŵ. */
static void check_decoding(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, uint32_t head, uint32_t M,
                           uint64_t seed)
{
    const tmm_tz_ssm_desc desc = { { .batch = B, .n = n, .d = d, .groups = G, .taps = K }, head, M };
    const size_t nu = (size_t)B * n * d, nw = (size_t)G * K * n, nx = (size_t)B * d, ns = tmm_tz_ssm_state_floats(&desc);
    float *u = h_floats(nu), *w = h_floats(nw), *beta = h_floats((size_t)G * n), *modes = make_modes(G, K, M, seed);
    float *what = h_floats(nw), *full = h_floats(nu), *x = h_floats(nx), *y = h_floats(nx);
    h_rand(u, nu, seed + 1, -1, 1);
    h_rand(w, nw, seed + 2, -1, 1);
    h_rand(beta, (size_t)G * n, seed + 3, -1, 1);
    realized(&desc, w, modes, what);
    ref_toeplitz_forward(&desc.tz, u, what, beta, full);

    uint32_t *len = malloc(B * sizeof *len);
    for (uint32_t b = 0; b < B; b++)
        len[b] = 1 + (b * 5 + 3) % (n - 1);
    /* the cache holds the prompts; the rest of it is garbage the steps overwrite */
    float *cache = h_floats(nu);
    h_rand(cache, nu, seed + 4, -5, 5);
    for (uint32_t b = 0; b < B; b++)
        memcpy(cache + (size_t)b * n * d, u + (size_t)b * n * d, (size_t)len[b] * d * sizeof *u);
    tmm_buffer *bc = h_buffer(cache, nu), *bw = h_buffer(w, nw), *bbeta = h_buffer(beta, (size_t)G * n);
    tmm_buffer *bm = h_buffer(modes, (size_t)G * K * M * 4), *bs = h_buffer(NULL, ns), *bl = uint_buffer(len, B);
    tmm_buffer *bpos = h_buffer(NULL, B), *bx = h_buffer(NULL, nx), *by = h_buffer(NULL, nx);
    tmm_recorder *pre = h_begin();
    H_OK(tmm_op_tz_ssm_prefill(pre, &desc, tmm_whole(bl), tmm_whole(bc), tmm_whole(bm), tmm_whole(bs)));
    h_run(pre);
    tmm_recorder *step;
    H_OK(tmm_recorder_create(h_dev, &step));
    H_OK(tmm_recorder_begin(step));
    H_OK(tmm_op_tz_ssm_step(step, &desc, tmm_whole(bpos), tmm_whole(bx), tmm_whole(bc), tmm_whole(bw),
                            tmm_whole(bbeta), tmm_whole(bm), tmm_whole(bs), tmm_whole(by)));
    H_OK(tmm_recorder_end(step));
    uint32_t *pos = malloc(B * sizeof *pos);
    for (uint32_t b = 0; b < B; b++)
        pos[b] = len[b];
    for (;;) { /* every sequence steps until the last reaches n (finished ones repeat n - 1) */
        bool more = false;
        for (uint32_t b = 0; b < B; b++) {
            more |= pos[b] < n;
            memcpy(x + (size_t)b * d, u + ((size_t)b * n + (pos[b] < n ? pos[b] : n - 1)) * d, d * sizeof *x);
        }
        if (!more)
            break;
        uint32_t p[64];
        for (uint32_t b = 0; b < B; b++)
            p[b] = pos[b] < n ? pos[b] : n - 1;
        H_OK(tmm_buffer_write(bpos, 0, p, B * 4));
        H_OK(tmm_buffer_write(bx, 0, x, nx * 4));
        H_OK(tmm_recorder_run(step));
        h_read(by, y, nx);
        for (uint32_t b = 0; b < B; b++)
            if (pos[b] < n) {
                h_compare("prefill + steps vs forward with ŵ", y + (size_t)b * d,
                          full + ((size_t)b * n + pos[b]) * d, d, 1e-4, 1e-4);
                pos[b]++;
            }
    }
    tmm_recorder_destroy(step);
    tmm_buffer *all[] = { bc, bw, bbeta, bm, bs, bl, bpos, bx, by };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(u), free(w), free(beta), free(modes), free(what), free(full), free(x), free(y), free(len), free(cache), free(pos);
}

H_TEST(tz_ssm, decoding_equals_forward_flat) { check_decoding(3, 24, 5, 1, 1, 1, 3, 21); }
H_TEST(tz_ssm, decoding_equals_forward_heads_kernel) { check_decoding(4, 19, 8, 2, 2, 4, 4, 22); }

H_TEST(tz_ssm, bad_descriptors_are_refused)
{
    tmm_tz_ssm_desc desc = { { .batch = 2, .n = 8, .d = 6, .groups = 2, .taps = 1 }, 0, 2 };
    cr_assert_eq(tmm_tz_ssm_check(&desc), TMM_ERR_INVALID_ARGUMENT); /* head 0 */
    desc.head = 9;
    cr_assert_eq(tmm_tz_ssm_check(&desc), TMM_ERR_INVALID_ARGUMENT); /* head past n */
    desc.head = 8, desc.tz.n = 8, desc.tz.taps = 16, desc.modes = TMM_MAX_LOOP / 16;
    desc.tz.d = 32;
    cr_assert_eq(tmm_tz_ssm_check(&desc), TMM_ERR_UNSUPPORTED); /* past the loop budget */
    desc.modes -= 7;
    H_OK(tmm_tz_ssm_check(&desc));
    desc.tz.groups = 4, desc.tz.d = 6;
    cr_assert_eq(tmm_tz_ssm_check(&desc), TMM_ERR_INVALID_ARGUMENT); /* 4 groups do not divide 6 */
}
