/* Device, buffers, sub-allocator, staging path, error reporting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/ops.h"

H_TEST(device, has_limits_and_features)
{
    const tmm_device_info *d = tmm_device_get_info(h_dev);
    cr_assert_gt(strlen(d->name), 0);
    cr_assert_geq(d->api_version, VK_API_VERSION_1_1);
    cr_assert(d->has_compute_queue);
    cr_assert_geq(d->max_storage_buffer_range, 1u << 27, "Vulkan guarantees at least 2^27");
    for (int i = 0; i < 3; i++)
        cr_assert_geq(d->max_workgroup_count[i], 65535);
    cr_assert_geq(d->max_workgroup_invocations, 128);
    cr_assert_geq(d->max_shared_memory, 16384);
    cr_assert_geq(d->max_push_constants, 128);
    cr_assert_gt(d->subgroup_size, 0);
    cr_assert_gt(d->heap_count, 0);
    cr_assert_gt(d->memory_type_count, 0);
    cr_assert_gt(d->min_storage_buffer_offset_alignment, 0);
}

Test(device, list_marks_a_usable_preferred_device)
{
    tmm_device_info *infos;
    uint32_t count, preferred;
    H_OK(tmm_device_list(&infos, &count, &preferred));
    cr_assert_gt(count, 0);
    cr_assert_lt(preferred, count);
    cr_assert(infos[preferred].has_compute_queue);
    free(infos);
}

Test(device, bad_index_is_a_clear_error)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.index = 999;
    tmm_device *d = (tmm_device *)1;
    cr_assert_eq(tmm_device_create(&opt, &d), TMM_ERR_NO_DEVICE);
    cr_assert_null(d);
    cr_assert(strstr(tmm_last_error(), "device 999 does not exist"), "message: %s", tmm_last_error());
}

Test(device, env_selects_the_device)
{
    setenv("TMM_DEVICE", "998", 1);
    tmm_device *d;
    cr_assert_eq(tmm_device_create(NULL, &d), TMM_ERR_NO_DEVICE);
    setenv("TMM_DEVICE", "0", 1);
    H_OK(tmm_device_create(NULL, &d));
    cr_assert_eq(tmm_device_get_info(d)->index, 0);
    tmm_device_destroy(d);
}

H_TEST(device, lost_device_is_reported_not_crashed_on)
{
    tmm_buffer *b = h_buffer(NULL, 4);
    h_dev->lost = true; /* as tmm_device_check does on VK_ERROR_DEVICE_LOST */
    float x[4] = { 0 };
    cr_assert_eq(tmm_buffer_write(b, 0, x, sizeof x), TMM_ERR_DEVICE_LOST);
    tmm_recorder *r;
    cr_assert_eq(tmm_recorder_create(h_dev, &r), TMM_ERR_DEVICE_LOST);
    cr_assert(strstr(tmm_last_error(), "lost"));
    h_dev->lost = false;
    tmm_buffer_destroy(b);
}

H_TEST(memory, suballocator_packs_many_buffers_into_few_blocks)
{
    enum { N = 300 };
    tmm_buffer *bufs[N];
    uint64_t seed = 1;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t size = 4 + (seed >> 33) % 40000;
        H_OK(tmm_buffer_create(h_dev, size, i % 2 ? TMM_MEMORY_DEVICE : TMM_MEMORY_HOST, &bufs[i]));
        uint32_t tag = (uint32_t)i;
        H_OK(tmm_buffer_write(bufs[i], 0, &tag, 4));
        H_OK(tmm_buffer_write(bufs[i], size - 4, &tag, 4));
    }
    tmm_memory_stats st;
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.buffers, N);
    cr_assert_leq(st.blocks, 4, "%u VkDeviceMemory blocks for %d buffers", st.blocks, N);
    /* no two buffers overlap: every tag survived */
    for (int i = 0; i < N; i++) {
        uint32_t a, b;
        H_OK(tmm_buffer_read(bufs[i], 0, &a, 4));
        H_OK(tmm_buffer_read(bufs[i], bufs[i]->size - 4, &b, 4));
        cr_assert(a == (uint32_t)i && b == (uint32_t)i, "buffer %d was overwritten", i);
    }
    /* free in a scrambled order; freed space is reused and empty blocks released */
    for (int i = 0; i < N; i++)
        tmm_buffer_destroy(bufs[(i * 7) % N]);
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.buffers, 0);
    cr_assert_eq(st.blocks, 0);
    cr_assert_eq(st.used_bytes, 0);
}

H_TEST(memory, large_buffer_gets_its_own_block)
{
    tmm_buffer *small, *big;
    H_OK(tmm_buffer_create(h_dev, 1024, TMM_MEMORY_DEVICE, &small));
    H_OK(tmm_buffer_create(h_dev, 100ull << 20, TMM_MEMORY_DEVICE, &big));
    tmm_memory_stats st;
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.blocks, 2);
    tmm_buffer_destroy(big);
    tmm_device_memory_stats(h_dev, &st);
    cr_assert_eq(st.blocks, 1);
    tmm_buffer_destroy(small);
}

H_TEST(memory, bad_sizes_and_ranges_are_errors)
{
    tmm_buffer *b;
    cr_assert_eq(tmm_buffer_create(h_dev, 0, TMM_MEMORY_DEVICE, &b), TMM_ERR_INVALID_ARGUMENT);
    b = h_buffer(NULL, 16);
    char x[8] = { 0 };
    cr_assert_eq(tmm_buffer_write(b, 60, x, 8), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_buffer_read(b, UINT64_MAX - 2, x, 8), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "overruns"));
    tmm_buffer_destroy(b);
}

/* The discrete-GPU path: device buffers are not mapped; uploads and
 * downloads go through the staging buffer in chunks. */
H_TEST(memory, staging_path_round_trips_and_feeds_kernels)
{
    h_dev->tuning.force_staging = true;
    const size_t n = (20u << 20) / 4 + 333; /* above the 16 MiB staging chunk */
    float *x = h_floats(n), *y = h_floats(n), *ref = h_floats(n);
    h_rand(x, n, 7, -1, 1);
    h_rand(y, n, 8, -1, 1);
    tmm_buffer *bx = h_buffer(x, n), *by = h_buffer(y, n);
    cr_assert_null(tmm_buffer_mapped(bx));
    float *back = h_floats(n);
    h_read(bx, back, n);
    cr_assert(memcmp(back, x, n * sizeof *x) == 0, "staged round trip changed the data");
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_axpy(r, 2.0f, tmm_whole(bx), tmm_whole(by), (uint32_t)n));
    h_run(r);
    h_read(by, back, n);
    memcpy(ref, y, n * sizeof *y);
    for (size_t i = 0; i < n; i++)
        ref[i] = 2.0f * x[i] + y[i];
    h_compare("axpy through staging", back, ref, n, 1e-6, 1e-6);
    tmm_buffer_destroy(bx);
    tmm_buffer_destroy(by);
    free(x);
    free(y);
    free(ref);
    free(back);
}

/* The harness relies on this: a validation error is counted. */
Test(device, counts_validation_messages)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.validate = 1;
    tmm_device *d;
    H_OK(tmm_device_create(&opt, &d));
    cr_assert_eq(tmm_device_validation_messages(d), 0);
    VkBufferCreateInfo bad = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                               .size = 0, /* VUID-VkBufferCreateInfo-size-00912 */
                               .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT };
    VkBuffer buf = VK_NULL_HANDLE;
    fprintf(stderr, "(an intentional validation error follows)\n");
    if (vkCreateBuffer(d->device, &bad, NULL, &buf) == VK_SUCCESS)
        vkDestroyBuffer(d->device, buf, NULL);
    cr_assert_gt(tmm_device_validation_messages(d), 0);
    cr_assert_gt(tmm_validation_messages_total(), 0);
    tmm_device_destroy(d);
}
