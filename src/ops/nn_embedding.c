/* Embedding forward (a gather) and its deterministic backward (a
 * scatter-add done as an ordered gather through a host-built index).
 *
 * Index layout (uint32 words), R = rows, SMAX = R / 128 + 1:
 *   [0] K   distinct tokens          [1] S  long segments
 *   [2] L   segment length           [3] R
 *   [4, 4+R)            pos:    positions grouped by token (ascending), each
 *                               group in position order
 *   [4+R, 4+2R)         tok:    the K distinct tokens, ascending
 *   [4+2R, 5+3R)        tstart: token k's positions are pos[tstart[k] ..
 *                               tstart[k+1])
 *   [5+3R, 6+4R)        tseg:   token k's long segments are [tseg[k],
 *                               tseg[k+1]); empty for a short token
 *   [6+4R, 6+4R+SMAX)   segment begins (indices into pos)
 *   [6+4R+SMAX, +SMAX)  segment ends
 * A token with more than L positions is long: its positions are cut into
 * ceil(count / L) segments of L (the last shorter). With L >= 256 a long
 * token of count c has fewer than 2c / L segments, so S < R / 128 < SMAX.
 * Unused words are 0, so the same tokens give the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "nn_util.h"

#define MIN_SEG 256u

static uint64_t smax_of(uint32_t rows) { return (uint64_t)rows / 128 + 1; }

uint64_t tmm_nn_embedding_index_words(uint32_t rows) { return 6 + 4 * (uint64_t)rows + 2 * smax_of(rows); }

tmm_status tmm_nn_embedding_index(const uint32_t *tokens, uint32_t rows, uint32_t vocab, uint32_t *index)
{
    const uint64_t R = rows, smax = smax_of(rows);
    memset(index, 0, tmm_nn_embedding_index_words(rows) * sizeof *index);
    index[3] = rows;
    if (rows == 0)
        return TMM_OK;
    if (!tokens)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "embedding index: no tokens");
    uint32_t *next = calloc((size_t)vocab + 1, sizeof *next);
    if (!next)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "embedding index: out of host memory for %u counts", vocab);
    uint32_t max_count = 0;
    for (uint32_t i = 0; i < rows; i++) {
        if (tokens[i] >= vocab) {
            free(next);
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "embedding index: token %u at position %u is outside the "
                            "vocabulary of %u", tokens[i], i, vocab);
        }
        if (++next[tokens[i]] > max_count)
            max_count = next[tokens[i]];
    }
    if ((uint64_t)max_count > (uint64_t)TMM_NN_MAX_LOOP * TMM_NN_MAX_LOOP) {
        free(next);
        return tmm_fail(TMM_ERR_UNSUPPORTED, "embedding index: a token occurs %u times in one batch, more than "
                        "the %u the backward supports", max_count, TMM_NN_MAX_LOOP * TMM_NN_MAX_LOOP);
    }
    uint32_t L = (max_count + TMM_NN_MAX_LOOP - 1) / TMM_NN_MAX_LOOP;
    if (L < MIN_SEG)
        L = MIN_SEG;

    uint32_t *pos = index + 4, *tok = pos + R, *tstart = tok + R, *tseg = tstart + R + 1;
    uint32_t *seg_begin = tseg + R + 1, *seg_end = seg_begin + smax;
    uint32_t K = 0, S = 0, at = 0;
    for (uint32_t v = 0; v < vocab; v++) {
        uint32_t c = next[v];
        if (!c)
            continue;
        tok[K] = v;
        tstart[K] = at;
        tseg[K] = S;
        if (c > L)
            for (uint32_t b = 0; b < c; b += L) {
                seg_begin[S] = at + b;
                seg_end[S] = at + (c - b < L ? c : b + L);
                S++;
            }
        next[v] = at; /* from now on: where v's next position goes */
        at += c;
        K++;
    }
    tstart[K] = at;
    tseg[K] = S;
    for (uint32_t i = 0; i < rows; i++)
        pos[next[tokens[i]]++] = i;
    free(next);
    index[0] = K;
    index[1] = S;
    index[2] = L;
    if (S >= smax) /* cannot happen (see the layout comment) */
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "embedding index: %u segments exceed the layout's %llu", S,
                        (unsigned long long)smax);
    return TMM_OK;
}

tmm_status tmm_op_embedding_forward(tmm_recorder *r, tmm_view tokens, tmm_view E, uint32_t rows, uint32_t vocab,
                                    uint32_t d, tmm_view h)
{
    static const char *op = "embedding_forward";
    if (rows == 0 || d == 0)
        return TMM_OK;
    if (vocab == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the vocabulary is empty", op);
    TMM_TRY(tmm_op_need_floats(op, "tokens", tokens, rows));
    TMM_TRY(tmm_op_need_floats(op, "E", E, (uint64_t)vocab * d));
    TMM_TRY(tmm_op_need_floats(op, "h", h, (uint64_t)rows * d));
    const tmm_device *dev = tmm_recorder_device(r);
    uint64_t rows_per = rows, vocab_per = vocab;
    TMM_TRY(nn_fit_rows(dev, op, "tokens", 1, &rows_per));
    TMM_TRY(nn_fit_rows(dev, op, "h", d, &rows_per));
    TMM_TRY(nn_fit_rows(dev, op, "E", d, &vocab_per));
    tmm_pipeline *p;
    static const uint32_t local[3] = { TMM_WG_1D, 1, 1 };
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_embedding_fwd, 3, 36, local, NULL, 0, &p));
    for (uint64_t r0 = 0; r0 < rows; r0 += rows_per) {
        uint64_t nr = rows - r0 < rows_per ? rows - r0 : rows_per;
        nn_bind bt = nn_rows(dev, tokens, r0, nr, 1), bh = nn_rows(dev, h, r0, nr, d);
        for (uint64_t v0 = 0; v0 < vocab; v0 += vocab_per) {
            uint64_t nv = vocab - v0 < vocab_per ? vocab - v0 : vocab_per;
            nn_bind be = nn_rows(dev, E, v0, nv, d);
            struct {
                uint32_t n, d, v0, vcount, vocab, zero_oob, base_tok, base_e, base_h;
            } push = { .n = (uint32_t)(nr * d), .d = d, .v0 = (uint32_t)v0, .vcount = (uint32_t)nv, .vocab = vocab,
                       .zero_oob = v0 == 0, .base_tok = bt.base, .base_e = be.base, .base_h = bh.base };
            tmm_arg args[3] = { tmm_in(bt.view), tmm_in(be.view), tmm_out(bh.view) };
            TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, tmm_div_up(nr * d, TMM_WG_1D), 1, 1));
        }
    }
    return TMM_OK;
}

uint64_t tmm_op_embedding_backward_scratch(uint32_t rows, uint32_t d) { return smax_of(rows) * d; }

tmm_status tmm_op_embedding_backward(tmm_recorder *r, tmm_view index, tmm_view dh, uint32_t rows, uint32_t vocab,
                                     uint32_t d, bool accumulate, tmm_view scratch, tmm_view dE)
{
    static const char *op = "embedding_backward";
    if ((uint64_t)vocab * d == 0)
        return TMM_OK;
    tmm_device *dev = tmm_recorder_device(r);
    TMM_TRY(tmm_op_need_floats(op, "dE", dE, (uint64_t)vocab * d));
    if (!accumulate) {
        tmm_view all = tmm_sub(dE.buffer, dE.offset, (uint64_t)vocab * d * 4);
        TMM_TRY(tmm_record_fill_u32(r, all, 0));
    }
    if (rows == 0)
        return TMM_OK;
    const uint64_t words = tmm_nn_embedding_index_words(rows), smax = smax_of(rows);
    const uint64_t kmax = rows < vocab ? rows : vocab;
    TMM_TRY(tmm_op_need_bound(dev, op, "index", index, words));
    TMM_TRY(tmm_op_need_floats(op, "dh", dh, (uint64_t)rows * d));
    TMM_TRY(tmm_op_need_bound(dev, op, "scratch", scratch, smax * d));
    uint64_t range = dev->info.max_storage_buffer_range;
    nn_bind bdh = nn_rows(dev, dh, 0, rows, d);
    if (bdh.view.size > range || words * 4 > range)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "%s: dh [%u, %u] (%llu bytes) and the index (%llu bytes) are bound "
                        "whole and must each fit maxStorageBufferRange (%llu bytes); use fewer rows per call", op,
                        rows, d, (unsigned long long)bdh.view.size, (unsigned long long)words * 4,
                        (unsigned long long)range);
    uint64_t vocab_per = vocab;
    TMM_TRY(nn_fit_rows(dev, op, "dE", d, &vocab_per));

    static const uint32_t local[3] = { NN_WG_LOOP, 1, 1 };
    tmm_view vidx = tmm_sub(index.buffer, index.offset, words * 4);
    tmm_view part = tmm_op_sub(scratch, 0, smax * d);

    tmm_pipeline *p1, *p2;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_embedding_bwd_seg, 3, 16, local, NULL, 0, &p1));
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_embedding_bwd_sum, 4, 32, local, NULL, 0, &p2));
    struct { uint32_t rows, d, smax, base_dh; } push1 = { rows, d, (uint32_t)smax, bdh.base };
    tmm_arg args1[3] = { tmm_in(vidx), tmm_in(bdh.view), tmm_out(part) };
    TMM_TRY(tmm_record_dispatch(r, p1, args1, 3, &push1, tmm_div_up(smax * d, NN_WG_LOOP), 1, 1));
    for (uint64_t v0 = 0; v0 < vocab; v0 += vocab_per) {
        uint64_t nv = vocab - v0 < vocab_per ? vocab - v0 : vocab_per;
        nn_bind be = nn_rows(dev, dE, v0, nv, d);
        struct {
            uint32_t rows, d, smax, kmax, v0, vcount, base_e, base_dh;
        } push2 = { rows, d, (uint32_t)smax, (uint32_t)kmax, (uint32_t)v0, (uint32_t)nv, be.base, bdh.base };
        tmm_arg args2[4] = { tmm_in(vidx), tmm_in(bdh.view), tmm_in(part), tmm_inout(be.view) };
        TMM_TRY(tmm_record_dispatch(r, p2, args2, 4, &push2, tmm_div_up(kmax * d, NN_WG_LOOP), 1, 1));
    }
    return TMM_OK;
}
