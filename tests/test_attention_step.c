/* Cached-decoding attention (src/ops/attention_step.h) on the device.
 *
 * Sessions: random q, k, v [B, n, d] fed one position per step (cache_write,
 * then step) reproduce the rows of the full forward (ref_attention_forward,
 * same window) position by position: full attention (C = n), windows in a
 * ring buffer (C = W, n several times W: the slots wrap around) and windows
 * in a larger cache; B = 1 and B = 3 with a different position per sequence
 * (sequences start at different steps). The caches start as random garbage:
 * only slots written may be read. Prefill: cache_fill of per-sequence
 * lengths (shorter than C, longer: wrapped) matches ref_attention_cache_fill
 * bit for bit, and the steps after it continue equal to the forward. The
 * caches after a session equal the reference's cache writes bit for bit.
 * Chunks: the loop budget lowered to 1, 2 and 3 positions gives many chunks
 * and several combine passes; a cache of 70000 positions (past lavapipe's
 * 65535-iteration loop cap) with the default budget is checked against
 * ref_attention_step, and reruns give the same bits. The cache write inside
 * the step (tmm_op_attention_step_write) over the same kinds of sessions.
 * Errors.
 *
 * Tolerance: |got - ref| <= 2e-5 + 1e-4 |ref| per element, as
 * test_attention.c (inputs in [-1, 1), sums of at most n terms; a chunk's
 * partial softmax is rescaled once more than the forward's running one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/attention_step.h"
#include "ref/ref_attention.h"

#define ATOL 2e-5
#define RTOL 1e-4

static tmm_buffer *uint_buffer(const uint32_t *v, size_t n)
{
    tmm_buffer *b = h_buffer(NULL, n);
    H_OK(tmm_buffer_write(b, 0, v, n * 4));
    return b;
}

/* Floats [first, first + count) of b. */
static tmm_view part(tmm_buffer *b, size_t first, size_t count) { return tmm_sub(b, first * 4, count * 4); }

static double worst_seen;
/* Sessions through tmm_op_attention_step_write (the cache write in the
 * step's part kernel) instead of cache_write, then step. */
static bool write_in_step;

static void close_enough(const char *what, const float *got, const float *ref, size_t n, const char *ctx)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        cr_assert(isfinite(got[i]) && d <= ATOL + RTOL * fabs((double)ref[i]),
                  "%s (%s): element %zu is %.9g, reference %.9g", what, ctx, i, (double)got[i], (double)ref[i]);
        if (d > worst_seen)
            worst_seen = d;
    }
}

typedef struct session {
    uint32_t B, n, d, H, C, W;
    const uint32_t *len; /* prefill lengths (cache_fill), or NULL */
    const uint32_t *off; /* without prefill: the step at which each sequence starts (NULL: all at 0) */
} session;

/* Position of sequence b at step i. */
static uint32_t pos_at(const session *s, uint32_t i, uint32_t b)
{
    uint32_t p;
    if (s->len)
        p = s->len[b] + i;
    else
        p = s->off && i < s->off[b] ? 0 : i - (s->off ? s->off[b] : 0);
    return p < s->n ? p : s->n - 1; /* a finished sequence repeats its last position */
}

static void run_session(const session *s, uint64_t seed)
{
    const uint32_t B = s->B, n = s->n, d = s->d;
    tmm_attention_desc fd = { B, n, d, s->H, TMM_ATTENTION_MEMORY_EFFICIENT, s->W };
    tmm_attention_step_desc sd = { .batch = B, .d = d, .heads = s->H, .capacity = s->C, .window = s->W };
    char ctx[160];
    snprintf(ctx, sizeof ctx, "B=%u n=%u d=%u H=%u C=%u W=%u%s budget=%u", B, n, d, s->H, s->C, s->W,
             s->len ? " prefill" : "", h_dev->tuning.loop_budget);
    const size_t na = (size_t)B * n * d, nc = (size_t)B * s->C * d, row = (size_t)B * d;
    float *q = h_floats(na), *k = h_floats(na), *v = h_floats(na), *full = h_floats(na);
    float *kc = h_floats(nc), *vc = h_floats(nc);
    h_rand(q, na, seed, -1, 1);
    h_rand(k, na, seed + 1, -1, 1);
    h_rand(v, na, seed + 2, -1, 1);
    h_rand(kc, nc, seed + 3, -1, 1); /* garbage in slots not yet written */
    h_rand(vc, nc, seed + 4, -1, 1);
    ref_attention_forward(&fd, q, k, v, full, NULL);

    uint32_t steps = n, lmin = n, omax = 0;
    for (uint32_t b = 0; b < B; b++) {
        if (s->len && s->len[b] < lmin)
            lmin = s->len[b];
        if (s->off && s->off[b] > omax)
            omax = s->off[b];
    }
    steps = s->len ? n - lmin : n + omax;
    /* per step: positions [B] (packed: views at any offset), q, k, v rows [B, d] */
    uint32_t *pos = malloc((size_t)steps * B * sizeof *pos);
    float *qs = h_floats(steps * row), *ks = h_floats(steps * row), *vs = h_floats(steps * row);
    cr_assert_not_null(pos);
    for (uint32_t i = 0; i < steps; i++)
        for (uint32_t b = 0; b < B; b++) {
            uint32_t p = pos_at(s, i, b);
            pos[i * B + b] = p;
            size_t from = ((size_t)b * n + p) * d, to = (i * (size_t)B + b) * d;
            memcpy(qs + to, q + from, d * 4);
            memcpy(ks + to, k + from, d * 4);
            memcpy(vs + to, v + from, d * 4);
        }
    tmm_buffer *bkc = h_buffer(kc, nc), *bvc = h_buffer(vc, nc), *bpos = uint_buffer(pos, (size_t)steps * B);
    tmm_buffer *bq = h_buffer(qs, steps * row), *bk = h_buffer(ks, steps * row), *bv = h_buffer(vs, steps * row);
    tmm_buffer *bo = h_buffer(NULL, steps * row);
    uint64_t nscratch = tmm_op_attention_step_scratch(h_dev, &sd);
    tmm_buffer *bscratch = h_buffer(NULL, nscratch ? nscratch : 1);

    if (s->len) { /* prefill: the full k, v rows go to the cache */
        tmm_buffer *blen = uint_buffer(s->len, B), *bkf = h_buffer(k, na), *bvf = h_buffer(v, na);
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_attention_cache_fill(r, &sd, n, tmm_whole(blen), tmm_whole(bkf), tmm_whole(bvf), tmm_whole(bkc),
                                         tmm_whole(bvc)));
        h_run(r);
        ref_attention_cache_fill(&sd, n, s->len, k, v, kc, vc);
        float *got = h_floats(nc);
        h_read(bkc, got, nc);
        cr_assert(memcmp(got, kc, nc * 4) == 0, "cache_fill k (%s)", ctx);
        h_read(bvc, got, nc);
        cr_assert(memcmp(got, vc, nc * 4) == 0, "cache_fill v (%s)", ctx);
        free(got);
        tmm_buffer_destroy(blen), tmm_buffer_destroy(bkf), tmm_buffer_destroy(bvf);
    }

    tmm_recorder *r = h_begin();
    for (uint32_t i = 0; i < steps; i++) {
        tmm_view p = part(bpos, (size_t)i * B, B), ki = part(bk, i * row, row), vi = part(bv, i * row, row);
        if (write_in_step) {
            H_OK(tmm_op_attention_step_write(r, &sd, p, part(bq, i * row, row), ki, vi, tmm_whole(bkc),
                                             tmm_whole(bvc), tmm_whole(bscratch), part(bo, i * row, row)));
            continue;
        }
        H_OK(tmm_op_attention_cache_write(r, &sd, p, ki, vi, tmm_whole(bkc), tmm_whole(bvc)));
        H_OK(tmm_op_attention_step(r, &sd, p, part(bq, i * row, row), tmm_whole(bkc), tmm_whole(bvc),
                                   tmm_whole(bscratch), part(bo, i * row, row)));
    }
    h_run(r);

    float *o = h_floats(steps * row);
    h_read(bo, o, steps * row);
    for (uint32_t i = 0; i < steps; i++)
        for (uint32_t b = 0; b < B; b++) {
            char at[220];
            snprintf(at, sizeof at, "%s, step %u, sequence %u at %u", ctx, i, b, pos[i * B + b]);
            close_enough("step vs forward row", o + (i * (size_t)B + b) * d,
                         full + ((size_t)b * n + pos[i * B + b]) * d, d, at);
        }
    /* the caches: the reference's writes, bit for bit */
    for (uint32_t i = 0; i < steps; i++)
        ref_attention_cache_write(&sd, pos + (size_t)i * B, ks + i * row, vs + i * row, kc, vc);
    float *got = h_floats(nc);
    h_read(bkc, got, nc);
    cr_assert(memcmp(got, kc, nc * 4) == 0, "kcache after the steps (%s)", ctx);
    h_read(bvc, got, nc);
    cr_assert(memcmp(got, vc, nc * 4) == 0, "vcache after the steps (%s)", ctx);

    tmm_buffer *all[] = { bkc, bvc, bpos, bq, bk, bv, bo, bscratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(q), free(k), free(v), free(full), free(kc), free(vc), free(pos), free(qs), free(ks), free(vs), free(o);
    free(got);
}

static const uint32_t off3[3] = { 0, 4, 9 };

/* full attention, C = n */
static void full_sessions(void)
{
    run_session(&(session){ 1, 37, 12, 4, 37, 0, NULL, NULL }, 10);
    run_session(&(session){ 3, 29, 5, 1, 29, 0, NULL, off3 }, 20);
}

/* windows: ring buffers C = W (n several times W), and C > W */
static void window_sessions(void)
{
    run_session(&(session){ 1, 40, 12, 4, 7, 7, NULL, NULL }, 30);
    run_session(&(session){ 3, 41, 12, 4, 5, 5, NULL, off3 }, 40);
    run_session(&(session){ 3, 23, 5, 1, 1, 1, NULL, off3 }, 50);
    run_session(&(session){ 2, 31, 6, 2, 31, 13, NULL, NULL }, 60); /* window in a full cache */
    run_session(&(session){ 1, 19, 6, 3, 11, 11, NULL, NULL }, 70);
}

H_TEST(attention_step, full_matches_forward)
{
    worst_seen = 0;
    full_sessions();
    printf("attention step, full: largest |step - forward| %.3g\n", worst_seen);
}

H_TEST(attention_step, window_ring_matches_forward)
{
    worst_seen = 0;
    window_sessions();
    printf("attention step, windows: largest |step - forward| %.3g\n", worst_seen);
}

H_TEST(attention_step, prefill_then_steps)
{
    static const uint32_t len3[3] = { 1, 9, 23 }, len1[1] = { 30 };
    worst_seen = 0;
    run_session(&(session){ 3, 40, 12, 4, 6, 6, len3, NULL }, 80);   /* ring: shorter and wrapped prefills */
    run_session(&(session){ 3, 30, 5, 1, 30, 0, len3, NULL }, 90);   /* full cache */
    run_session(&(session){ 1, 37, 6, 2, 8, 8, len1, NULL }, 100);   /* ring, one sequence */
    run_session(&(session){ 3, 28, 6, 3, 28, 5, len3, NULL }, 110);  /* window in a full cache */
    printf("attention step, prefill: largest |step - forward| %.3g\n", worst_seen);
}

/* Chunks of 1, 2 and 3 positions: many chunks, several combine passes. */
H_TEST(attention_step, many_chunks)
{
    static const uint32_t budgets[] = { 1, 2, 3 };
    static const uint32_t len3[3] = { 2, 17, 40 };
    worst_seen = 0;
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        h_dev->tuning.loop_budget = budgets[i];
        run_session(&(session){ 3, 50, 12, 4, 50, 0, NULL, off3 }, 200 + i);
        run_session(&(session){ 1, 45, 5, 1, 13, 13, NULL, NULL }, 210 + i);
        run_session(&(session){ 3, 47, 6, 2, 9, 9, len3, NULL }, 220 + i);
    }
    h_dev->tuning.loop_budget = 0;
    printf("attention step, many chunks: largest |step - forward| %.3g\n", worst_seen);
}

/* The same sessions with the cache write in the step's dispatch: full,
 * windows (rings and a window in a larger cache), a prefill, many chunks
 * and bindings split per sequence. */
H_TEST(attention_step, write_in_step)
{
    static const uint32_t len3[3] = { 2, 17, 40 };
    const uint64_t saved = h_dev->info.max_storage_buffer_range;
    worst_seen = 0;
    write_in_step = true;
    full_sessions();
    window_sessions();
    run_session(&(session){ 3, 47, 6, 2, 9, 9, len3, NULL }, 400);
    h_dev->tuning.loop_budget = 3;
    run_session(&(session){ 3, 50, 12, 4, 50, 0, NULL, off3 }, 410);
    h_dev->info.max_storage_buffer_range = 1024;
    run_session(&(session){ 3, 33, 4, 2, 9, 9, NULL, off3 }, 420);
    h_dev->info.max_storage_buffer_range = saved;
    h_dev->tuning.loop_budget = 0;
    write_in_step = false;
    printf("attention step with its cache write: largest |step - forward| %.3g\n", worst_seen);
}

/* 70000 cached positions (random contents), the default budget: 274 chunks
 * of 256, and a window of 5000 in it; sequences at the end, inside and at 0.
 * Against ref_attention_step; a rerun gives the same bits. */
H_TEST(attention_step, long_cache)
{
    const uint32_t B = 3, C = 70000, d = 4, H = 2;
    const size_t nc = (size_t)B * C * d, nq = (size_t)B * d;
    float *kc = h_floats(nc), *vc = h_floats(nc), *q = h_floats(nq), *o = h_floats(nq), *o2 = h_floats(nq);
    float *ref = h_floats(nq);
    h_rand(kc, nc, 7, -1, 1);
    h_rand(vc, nc, 8, -1, 1);
    h_rand(q, nq, 9, -1, 1);
    const uint32_t pos[3] = { C - 1, 65536, 0 };
    tmm_buffer *bkc = h_buffer(kc, nc), *bvc = h_buffer(vc, nc), *bq = h_buffer(q, nq), *bo = h_buffer(NULL, nq);
    tmm_buffer *bpos = uint_buffer(pos, B);
    worst_seen = 0;
    for (uint32_t W = 0; W <= 5000; W += 5000) {
        tmm_attention_step_desc sd = { .batch = B, .d = d, .heads = H, .capacity = C, .window = W };
        uint64_t ns = tmm_op_attention_step_scratch(h_dev, &sd);
        cr_assert(ns > 0);
        tmm_buffer *bs = h_buffer(NULL, ns);
        for (int run = 0; run < 2; run++) {
            tmm_recorder *r = h_begin();
            H_OK(tmm_op_attention_step(r, &sd, tmm_whole(bpos), tmm_whole(bq), tmm_whole(bkc), tmm_whole(bvc),
                                       tmm_whole(bs), tmm_whole(bo)));
            h_run(r);
            h_read(bo, run ? o2 : o, nq);
        }
        cr_assert(memcmp(o, o2, nq * 4) == 0, "reruns differ (W = %u)", W);
        ref_attention_step(&sd, pos, q, kc, vc, ref);
        close_enough("long cache step", o, ref, nq, W ? "C=70000 W=5000" : "C=70000");
        tmm_buffer_destroy(bs);
    }
    printf("attention step, long cache: largest |step - reference| %.3g\n", worst_seen);
    tmm_buffer *all[] = { bkc, bvc, bq, bo, bpos };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(kc), free(vc), free(q), free(o), free(o2), free(ref);
}

/* maxStorageBufferRange lowered to 1 KiB: one sequence's cache (and
 * prefill rows) per binding, so every op runs per group of sequences; with
 * and without chunk records (the part kernel writes them for all groups). */
H_TEST(attention_step, split_bindings)
{
    static const uint32_t len3[3] = { 3, 11, 30 };
    const uint64_t saved = h_dev->info.max_storage_buffer_range;
    worst_seen = 0;
    h_dev->info.max_storage_buffer_range = 1024;
    for (uint32_t budget = 0; budget <= 7; budget += 7) {
        h_dev->tuning.loop_budget = budget;
        run_session(&(session){ 3, 40, 4, 1, 40, 0, NULL, off3 }, 300 + budget);
        run_session(&(session){ 3, 40, 4, 2, 40, 9, len3, NULL }, 310 + budget);
        run_session(&(session){ 3, 33, 4, 2, 9, 9, len3, NULL }, 320 + budget);
    }
    h_dev->tuning.loop_budget = 0;
    h_dev->info.max_storage_buffer_range = saved;
    printf("attention step, split bindings: largest |step - forward| %.3g\n", worst_seen);
}

H_TEST(attention_step, errors)
{
    tmm_attention_step_desc bad_heads = { .batch = 1, .d = 10, .heads = 4, .capacity = 8 };
    cr_assert_eq(tmm_attention_step_check(NULL, &bad_heads), TMM_ERR_INVALID_ARGUMENT);
    tmm_attention_step_desc empty = { .batch = 1, .d = 4, .heads = 1, .capacity = 0 };
    cr_assert_eq(tmm_attention_step_check(NULL, &empty), TMM_ERR_INVALID_ARGUMENT);
    tmm_attention_step_desc wide = { .batch = 1, .d = 2 * TMM_ATTENTION_MAX_HEAD_DIM, .heads = 1, .capacity = 8 };
    cr_assert_eq(tmm_attention_step_check(NULL, &wide), TMM_ERR_UNSUPPORTED);
    cr_assert_eq(tmm_attention_step_check(NULL, NULL), TMM_ERR_INVALID_ARGUMENT);

    tmm_attention_step_desc ok = { .batch = 2, .d = 4, .heads = 2, .capacity = 8, .window = 3 };
    cr_assert_eq(tmm_op_attention_step_scratch(h_dev, &ok), 0, "one chunk: no scratch");
    tmm_buffer *b = h_buffer(NULL, 4096);
    tmm_view pos = part(b, 0, 2), x = part(b, 64, 8), cache = part(b, 128, 64), small = part(b, 128, 63);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_attention_cache_write(r, &ok, pos, x, x, small, cache), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "kcache holds"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_attention_step(r, &ok, part(b, 0, 1), x, cache, cache, x, x), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "pos holds"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_attention_cache_fill(r, &ok, 0, pos, x, x, cache, cache), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_attention_cache_fill(r, &ok, 8, pos, x, x, cache, cache), TMM_ERR_INVALID_ARGUMENT,
                 "k of 8 floats for B = 2, n = 8, d = 4");
    cr_assert_eq(tmm_op_attention_step(r, &bad_heads, pos, x, cache, cache, x, x), TMM_ERR_INVALID_ARGUMENT);
    h_run(r);
    tmm_buffer_destroy(b);
}
