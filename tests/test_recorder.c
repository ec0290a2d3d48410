/* Recorder: automatic barriers, replay, work run once, dispatch splitting,
 * binding limits, timestamp regions. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/op_util.h"

H_TEST(recorder, inserts_barriers_only_between_dependent_dispatches)
{
    tmm_buffer *a = h_buffer(NULL, 1000), *b = h_buffer(NULL, 1000), *c = h_buffer(NULL, 1000);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_fill(r, tmm_whole(a), 1000, 1.0f));
    H_OK(tmm_op_fill(r, tmm_whole(b), 1000, 2.0f)); /* independent of the first */
    cr_assert_eq(tmm_recorder_barriers(r), 0);
    H_OK(tmm_op_axpy(r, 3.0f, tmm_whole(a), tmm_whole(b), 1000)); /* reads a, rmw b: RAW */
    cr_assert_eq(tmm_recorder_barriers(r), 1);
    H_OK(tmm_op_copy(r, tmm_whole(a), tmm_whole(c), 1000)); /* reads a only: no hazard with axpy */
    cr_assert_eq(tmm_recorder_barriers(r), 1);
    H_OK(tmm_op_fill(r, tmm_whole(a), 1000, 0.0f)); /* writes what axpy and copy read: WAR */
    cr_assert_eq(tmm_recorder_barriers(r), 2);
    h_run(r);
    float out[1000];
    h_read(b, out, 1000);
    for (int i = 0; i < 1000; i++)
        cr_assert_float_eq(out[i], 5.0f, 0, "b[%d] = %g", i, (double)out[i]);
    h_read(c, out, 1000);
    cr_assert_float_eq(out[999], 1.0f, 0);
    tmm_buffer_destroy(a);
    tmm_buffer_destroy(b);
    tmm_buffer_destroy(c);
}

H_TEST(recorder, disjoint_ranges_of_one_buffer_need_no_barrier)
{
    tmm_buffer *a = h_buffer(NULL, 128);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_fill(r, tmm_sub(a, 0, 256), 64, 1.0f));
    H_OK(tmm_op_fill(r, tmm_sub(a, 256, 256), 64, 2.0f));
    cr_assert_eq(tmm_recorder_barriers(r), 0);
    H_OK(tmm_op_copy(r, tmm_sub(a, 0, 256), tmm_sub(a, 256, 256), 64));
    cr_assert_eq(tmm_recorder_barriers(r), 1);
    h_run(r);
    float out[128];
    h_read(a, out, 128);
    cr_assert_float_eq(out[127], 1.0f, 0);
    tmm_buffer_destroy(a);
}

H_TEST(recorder, replays_a_recording)
{
    float x[333], y[333], ref[333];
    h_rand(x, 333, 1, -1, 1);
    h_rand(y, 333, 2, -1, 1);
    tmm_buffer *bx = h_buffer(x, 333), *by = h_buffer(y, 333);
    tmm_recorder *r;
    H_OK(tmm_recorder_create(h_dev, &r));
    H_OK(tmm_recorder_begin(r));
    H_OK(tmm_op_axpy(r, 0.25f, tmm_whole(bx), tmm_whole(by), 333));
    H_OK(tmm_recorder_end(r));
    for (int i = 0; i < 3; i++)
        H_OK(tmm_recorder_run(r));
    /* a submit while the previous run is in flight waits for it */
    H_OK(tmm_recorder_submit(r));
    H_OK(tmm_recorder_submit(r));
    H_OK(tmm_recorder_wait(r));
    tmm_recorder_destroy(r);
    float got[333];
    h_read(by, got, 333);
    for (int i = 0; i < 333; i++) {
        ref[i] = y[i];
        for (int k = 0; k < 5; k++)
            ref[i] = 0.25f * x[i] + ref[i];
    }
    h_compare("5 replays of axpy", got, ref, 333, 1e-6, 1e-6);
    tmm_buffer_destroy(bx);
    tmm_buffer_destroy(by);
}

/* Fills arg's buffer (32 floats), then fails: the second fill overruns it. */
static tmm_status fill_then_fail(tmm_recorder *r, void *arg)
{
    TMM_TRY(tmm_op_fill(r, tmm_whole(arg), 32, 7.0f));
    return tmm_op_fill(r, tmm_whole(arg), 64, 7.0f);
}

/* Its success is every caller's (optimizer reset, generator restart, tmm check). */
H_TEST(recorder, record_once_returns_the_failure_and_runs_nothing)
{
    const float zeros[32] = { 0 };
    tmm_buffer *b = h_buffer(zeros, 32);
    cr_assert_eq(tmm_record_once(h_dev, fill_then_fail, b), TMM_ERR_INVALID_ARGUMENT);
    float out[32];
    h_read(b, out, 32);
    cr_assert_eq(out[0], 0.0f, "a failed recording ran");
    tmm_buffer_destroy(b);
}

H_TEST(recorder, splits_dispatches_above_the_workgroup_limit)
{
    tmm_device_set_dispatch_limit(h_dev, 3, 0, 0);
    const uint32_t n = 10 * TMM_WG_1D + 5; /* 11 workgroups -> 3 + 3 + 3 + 2 */
    float *x = h_floats(n), *got = h_floats(n);
    tmm_buffer *b = h_buffer(NULL, n);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_fill(r, tmm_whole(b), n, 4.5f));
    cr_assert_eq(tmm_recorder_dispatches(r), 4);
    h_run(r);
    h_read(b, got, n);
    for (uint32_t i = 0; i < n; i++)
        x[i] = 4.5f;
    h_compare("fill split into 4 dispatches", got, x, n, 0, 0);
    tmm_buffer_destroy(b);
    free(x);
    free(got);
}

H_TEST(recorder, elementwise_ops_split_bindings_above_max_storage_buffer_range)
{
    const tmm_device_info *d = tmm_device_get_info(h_dev);
    if (d->max_storage_buffer_range > (256u << 20))
        cr_skip_test("maxStorageBufferRange is %llu bytes; too large to exceed in a test",
                     (unsigned long long)d->max_storage_buffer_range);
    const uint64_t n = d->max_storage_buffer_range / 4 + 1000;
    tmm_buffer *b;
    H_OK(tmm_buffer_create(h_dev, n * 4, TMM_MEMORY_DEVICE, &b));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_fill(r, tmm_whole(b), (uint32_t)n, 0.5f));
    h_run(r);
    float tail[1001];
    H_OK(tmm_buffer_read(b, (n - 1001) * 4, tail, sizeof tail));
    for (int i = 0; i < 1001; i++)
        cr_assert_float_eq(tail[i], 0.5f, 0);
    /* binding the whole buffer directly is refused with a clear error */
    tmm_pipeline *p;
    r = h_begin();
    static const uint32_t local[3] = { TMM_WG_1D, 1, 1 };
    H_OK(tmm_op_pipeline(r, &tmm_spv_fill, 1, 8, local, NULL, 0, &p));
    tmm_arg arg = tmm_out(tmm_whole(b));
    struct { uint32_t n; float v; } push = { 1, 0 };
    cr_assert_eq(tmm_record_dispatch(r, p, &arg, 1, &push, 1, 1, 1), TMM_ERR_UNSUPPORTED);
    cr_assert(strstr(tmm_last_error(), "maxStorageBufferRange"));
    h_run(r);
    tmm_buffer_destroy(b);
}

H_TEST(recorder, rejects_bad_bindings_and_misuse)
{
    tmm_buffer *b = h_buffer(NULL, 64);
    tmm_recorder *r;
    H_OK(tmm_recorder_create(h_dev, &r));
    cr_assert_eq(tmm_op_fill(r, tmm_whole(b), 64, 0), TMM_ERR_INVALID_ARGUMENT, "record before begin");
    cr_assert_eq(tmm_recorder_submit(r), TMM_ERR_INVALID_ARGUMENT, "submit before end");
    H_OK(tmm_recorder_begin(r));
    tmm_pipeline *p;
    static const uint32_t local[3] = { TMM_WG_1D, 1, 1 };
    H_OK(tmm_op_pipeline(r, &tmm_spv_copy, 2, 4, local, NULL, 0, &p));
    uint32_t n = 4;
    tmm_arg one = tmm_in(tmm_whole(b));
    cr_assert_eq(tmm_record_dispatch(r, p, &one, 1, &n, 1, 1, 1), TMM_ERR_INVALID_ARGUMENT, "wrong arg count");
    uint64_t align = tmm_device_get_info(h_dev)->min_storage_buffer_offset_alignment;
    tmm_arg misaligned[2] = { tmm_in(tmm_sub(b, align > 1 ? 1 : 0, 16)), tmm_out(tmm_sub(b, 128, 16)) };
    if (align > 1)
        cr_assert_eq(tmm_record_dispatch(r, p, misaligned, 2, &n, 1, 1, 1), TMM_ERR_INVALID_ARGUMENT);
    tmm_arg overrun[2] = { tmm_in(tmm_sub(b, 0, 16)), tmm_out(tmm_sub(b, 128, 200)) };
    cr_assert_eq(tmm_record_dispatch(r, p, overrun, 2, &n, 1, 1, 1), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_op_fill(r, tmm_whole(b), 65, 0), TMM_ERR_INVALID_ARGUMENT, "view too small");
    H_OK(tmm_record_region_begin(r, "a"));
    cr_assert_eq(tmm_record_region_begin(r, "b"), TMM_ERR_INVALID_ARGUMENT, "regions do not nest");
    cr_assert_eq(tmm_recorder_end(r), TMM_ERR_INVALID_ARGUMENT, "open region");
    H_OK(tmm_record_region_end(r));
    H_OK(tmm_recorder_end(r));
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(b);
}

H_TEST(recorder, times_regions_with_timestamps)
{
    if (!tmm_device_get_info(h_dev)->timestamp_valid_bits)
        cr_skip_test("the device has no timestamps on its compute queue");
    const uint32_t n = 1 << 20;
    tmm_buffer *a = h_buffer(NULL, n), *b = h_buffer(NULL, n);
    tmm_recorder *r = h_begin();
    H_OK(tmm_record_region_begin(r, "fill"));
    H_OK(tmm_op_fill(r, tmm_whole(a), n, 1.0f));
    H_OK(tmm_record_region_end(r));
    H_OK(tmm_record_region_begin(r, "axpy"));
    H_OK(tmm_op_axpy(r, 1.0f, tmm_whole(a), tmm_whole(b), n));
    H_OK(tmm_record_region_end(r));
    H_OK(tmm_recorder_end(r));
    for (int rep = 0; rep < 2; rep++) {
        H_OK(tmm_recorder_run(r));
        cr_assert_eq(tmm_recorder_regions(r), 2);
        for (uint32_t i = 0; i < 2; i++) {
            const char *label;
            double ms;
            H_OK(tmm_recorder_region_time(r, i, &label, &ms));
            cr_assert_str_eq(label, i == 0 ? "fill" : "axpy");
            cr_assert(ms > 0 && ms < 10000, "region %s took %g ms", label, ms);
        }
    }
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(a);
    tmm_buffer_destroy(b);
}

/* What a region records, for the roofline: its commands, the bytes of the
 * views they bind (read-write twice) and the FLOPs the ops declare. */
H_TEST(recorder, counts_region_work)
{
    const uint32_t n = 1000, m = 7, k = 5, q = 3;
    tmm_buffer *a = h_buffer(NULL, n), *b = h_buffer(NULL, n);
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_fill(r, tmm_whole(a), n, 1.0f)); /* outside a region: counted nowhere */
    H_OK(tmm_record_region_begin(r, "axpy"));
    H_OK(tmm_op_axpy(r, 1.0f, tmm_whole(a), tmm_whole(b), n));
    H_OK(tmm_record_copy(r, tmm_sub(a, 0, 400), tmm_sub(b, 400, 400)));
    H_OK(tmm_record_region_end(r));
    H_OK(tmm_record_region_begin(r, "matmul"));
    tmm_matmul_desc d = { .m = m, .n = q, .k = k, .batch = 2, .stride_a = m * k, .stride_b = k * q, .stride_c = m * q };
    H_OK(tmm_op_matmul(r, &d, tmm_sub(a, 0, 4 * m * k * 2), tmm_sub(b, 0, 4 * k * q * 2), (tmm_view){ 0 },
                       tmm_sub(b, 2048, 4 * m * q * 2)));
    H_OK(tmm_record_region_end(r));
    H_OK(tmm_recorder_end(r));
    tmm_region_work w;
    H_OK(tmm_recorder_region_work(r, 0, &w));
    cr_assert_str_eq(w.label, "axpy");
    cr_assert_eq(w.commands, 2, "the axpy's dispatch and the copy");
    const uint64_t x = tmm_whole(a).size, y = tmm_whole(b).size;
    cr_assert_eq(w.bytes, x + 2 * y + 2 * 400, "x once, y read and written, the copy both ways");
    cr_assert_eq(w.flops, 0, "axpy declares none");
    cr_assert_eq(w.externals, 0);
    H_OK(tmm_recorder_region_work(r, 1, &w));
    cr_assert_eq(w.flops, 2.0 * m * q * k * 2, "2 m n k per batch");
    cr_assert(w.commands >= 1 && w.bytes > 0);
    cr_assert_eq(tmm_recorder_region_work(r, 2, &w), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_recorder_commands(r), tmm_recorder_dispatches(r) + 1, "and the copy");
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(a);
    tmm_buffer_destroy(b);
}
