/* fill, copy, axpy and the deterministic sums against their C references,
 * over sizes around the workgroup size (256) and the sum chunk (256). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ref/ref.h"

static const uint32_t sizes[] = { 1, 2, 7, 255, 256, 257, 1000, 65536 + 3, (1u << 20) + 13 };
#define N_SIZES (sizeof sizes / sizeof sizes[0])

H_TEST(ops, fill_copy_axpy_match_reference)
{
    for (size_t s = 0; s < N_SIZES; s++) {
        uint32_t n = sizes[s];
        float *x = h_floats(n), *y = h_floats(n), *got = h_floats(n), *ref = h_floats(n);
        h_rand(x, n, 10 + s, -2, 2);
        h_rand(y, n, 20 + s, -2, 2);
        tmm_buffer *bx = h_buffer(x, n), *by = h_buffer(y, n), *bf = h_buffer(NULL, n), *bc = h_buffer(NULL, n);
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_fill(r, tmm_whole(bf), n, -3.25f));
        H_OK(tmm_op_copy(r, tmm_whole(bx), tmm_whole(bc), n));
        H_OK(tmm_op_axpy(r, 0.75f, tmm_whole(bx), tmm_whole(by), n));
        h_run(r);

        ref_fill(ref, n, -3.25f);
        h_read(bf, got, n);
        h_compare("fill", got, ref, n, 0, 0);
        ref_copy(x, ref, n);
        h_read(bc, got, n);
        h_compare("copy", got, ref, n, 0, 0);
        memcpy(ref, y, n * sizeof *y);
        ref_axpy(0.75f, x, ref, n);
        h_read(by, got, n);
        /* one fused multiply-add in float vs a double result rounded once */
        h_compare("axpy", got, ref, n, 1e-6, 1e-6);
        tmm_buffer_destroy(bx);
        tmm_buffer_destroy(by);
        tmm_buffer_destroy(bf);
        tmm_buffer_destroy(bc);
        free(x);
        free(y);
        free(got);
        free(ref);
    }
}

/* Sums of n terms in float by chunks of 256: each partial is a sequential
 * sum, so the error is below about (256 + levels) * 2^-24 * sum|x|. */
static double sum_tolerance(const float *x, size_t n)
{
    double abs = 0;
    for (size_t i = 0; i < n; i++)
        abs += fabs(x[i]);
    return 300 * 0x1p-24 * abs + 1e-7;
}

H_TEST(ops, sum_is_accurate_and_deterministic)
{
    for (size_t s = 0; s < N_SIZES; s++) {
        uint32_t n = sizes[s];
        float *x = h_floats(n);
        h_rand(x, n, 30 + s, -1, 1);
        tmm_buffer *bx = h_buffer(x, n), *scratch = h_buffer(NULL, tmm_op_sum_scratch(n));
        tmm_buffer *out[2] = { h_buffer(NULL, 1), h_buffer(NULL, 1) };
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_sum(r, tmm_whole(bx), n, tmm_whole(scratch), tmm_whole(out[0])));
        H_OK(tmm_op_sum(r, tmm_whole(bx), n, tmm_whole(scratch), tmm_whole(out[1])));
        h_run(r);
        float got[2], ref = ref_sum(x, n);
        h_read(out[0], &got[0], 1);
        h_read(out[1], &got[1], 1);
        h_compare("sum", got, &ref, 1, sum_tolerance(x, n), 0);
        cr_assert(memcmp(&got[0], &got[1], sizeof got[0]) == 0, "two sums of the same data differ: %a vs %a",
                  (double)got[0], (double)got[1]);
        tmm_buffer_destroy(bx);
        tmm_buffer_destroy(scratch);
        tmm_buffer_destroy(out[0]);
        tmm_buffer_destroy(out[1]);
        free(x);
    }
}

H_TEST(ops, row_and_column_sums_match_reference)
{
    static const uint32_t shapes[][2] = { { 1, 1 }, { 1, 300 }, { 300, 1 }, { 3, 7 }, { 17, 257 }, { 1000, 3 },
                                          { 513, 255 },
                                          /* beyond llvmpipe's 65535-iteration loop cap */
                                          { 5, 70001 }, { 70001, 2 }, { 3, 5000000 } };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        uint32_t rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *x = h_floats(n), *got = h_floats(rows > cols ? rows : cols), *ref = h_floats(rows > cols ? rows : cols);
        h_rand(x, n, 40 + s, -1, 1);
        tmm_buffer *bx = h_buffer(x, n), *br = h_buffer(NULL, rows), *bc = h_buffer(NULL, cols);
        uint64_t ns = tmm_op_sum_rows_scratch(rows, cols) + tmm_op_sum_cols_scratch(rows, cols);
        tmm_buffer *scratch = h_buffer(NULL, ns);
        tmm_view s_rows = tmm_sub(scratch, 0, tmm_op_sum_rows_scratch(rows, cols) * 4);
        tmm_view s_cols = tmm_sub(scratch, s_rows.size, tmm_op_sum_cols_scratch(rows, cols) * 4);
        tmm_recorder *r = h_begin();
        H_OK(tmm_op_sum_rows(r, tmm_whole(bx), rows, cols, s_rows, tmm_whole(br)));
        H_OK(tmm_op_sum_cols(r, tmm_whole(bx), rows, cols, s_cols, tmm_whole(bc)));
        h_run(r);
        ref_sum_rows(x, rows, cols, ref);
        h_read(br, got, rows);
        /* float sums of len terms in [-1, 1] per output in segments of 4096: the
         * partial sums stay near sqrt(len), so the error stays well below
         * len * sqrt(len) * 2^-24 */
        h_compare("sum_rows", got, ref, rows, cols * sqrt(cols) * 0x1p-24 + 1e-6, 0);
        ref_sum_cols(x, rows, cols, ref);
        h_read(bc, got, cols);
        h_compare("sum_cols", got, ref, cols, rows * sqrt(rows) * 0x1p-24 + 1e-6, 0);
        tmm_buffer_destroy(bx);
        tmm_buffer_destroy(br);
        tmm_buffer_destroy(bc);
        tmm_buffer_destroy(scratch);
        free(x);
        free(got);
        free(ref);
    }
}

H_TEST(ops, zero_sizes_and_short_views)
{
    tmm_buffer *b = h_buffer(NULL, 8), *s = h_buffer(NULL, 1);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_fill(r, tmm_whole(b), 0, 1.0f));
    H_OK(tmm_op_sum(r, tmm_whole(b), 0, tmm_whole(s), tmm_sub(b, 0, 4)));
    H_OK(tmm_op_sum_cols(r, tmm_whole(b), 0, 8, tmm_whole(s), tmm_whole(b)));
    cr_assert_eq(tmm_op_axpy(r, 1, tmm_whole(b), tmm_whole(s), 8), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "axpy: y holds 1 floats, needs 8"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_sum_rows(r, tmm_whole(b), 3, 3, tmm_whole(s), tmm_whole(b)), TMM_ERR_INVALID_ARGUMENT);
    h_run(r);
    float got[8];
    h_read(b, got, 8);
    for (int i = 0; i < 8; i++)
        cr_assert_float_eq(got[i], 0.0f, 0, "empty sums are 0");
    tmm_buffer_destroy(b);
    tmm_buffer_destroy(s);
}
