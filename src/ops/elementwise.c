/* fill, copy, axpy: one invocation per element, split into chunks that each
 * bind at most maxStorageBufferRange bytes. */
#include "op_util.h"

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };

tmm_status tmm_op_fill(tmm_recorder *r, tmm_view x, uint32_t n, float value)
{
    TMM_TRY(tmm_op_need("fill", "x", x, n));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_fill, 1, 8, local_1d, NULL, 0, &p));
    uint64_t chunk = tmm_op_chunk_elems(tmm_recorder_device(r));
    for (uint64_t i = 0; i < n; i += chunk) {
        uint32_t m = (uint32_t)(n - i < chunk ? n - i : chunk);
        struct { uint32_t n; float value; } push = { .n = m, .value = value };
        tmm_arg args[1] = { tmm_out(tmm_op_sub(x, i, m)) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 1, &push, tmm_div_up(m, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_copy(tmm_recorder *r, tmm_view x, tmm_view y, uint32_t n)
{
    TMM_TRY(tmm_op_need("copy", "x", x, n));
    TMM_TRY(tmm_op_need("copy", "y", y, n));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_copy, 2, 4, local_1d, NULL, 0, &p));
    uint64_t chunk = tmm_op_chunk_elems(tmm_recorder_device(r));
    for (uint64_t i = 0; i < n; i += chunk) {
        uint32_t m = (uint32_t)(n - i < chunk ? n - i : chunk);
        tmm_arg args[2] = { tmm_in(tmm_op_sub(x, i, m)), tmm_out(tmm_op_sub(y, i, m)) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 2, &m, tmm_div_up(m, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_axpy(tmm_recorder *r, float a, tmm_view x, tmm_view y, uint32_t n)
{
    TMM_TRY(tmm_op_need("axpy", "x", x, n));
    TMM_TRY(tmm_op_need("axpy", "y", y, n));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_axpy, 2, 8, local_1d, NULL, 0, &p));
    uint64_t chunk = tmm_op_chunk_elems(tmm_recorder_device(r));
    for (uint64_t i = 0; i < n; i += chunk) {
        uint32_t m = (uint32_t)(n - i < chunk ? n - i : chunk);
        struct { uint32_t n; float a; } push = { .n = m, .a = a };
        tmm_arg args[2] = { tmm_in(tmm_op_sub(x, i, m)), tmm_inout(tmm_op_sub(y, i, m)) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up(m, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}
