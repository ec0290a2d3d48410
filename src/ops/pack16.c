/* pack16, unpack16: fp32 <-> 16-bit words, two values per uint32, one
 * invocation per word, in chunks that each bind at most
 * maxStorageBufferRange bytes and start at aligned offsets. */
#include "op_util.h"

static const uint32_t local_1d[3] = { TMM_WG_1D, 1, 1 };

uint64_t tmm_pack16_words(uint64_t n) { return (n + 1) / 2; }

/* Floats per chunk: even, and a multiple of the offset alignment on both sides. */
static uint64_t chunk_floats(const tmm_device *d)
{
    uint64_t align = tmm_op_offset_align(d) < 4 ? 4 : tmm_op_offset_align(d);
    return tmm_op_chunk_elems(d) / align * align;
}

static tmm_status convert(tmm_recorder *r, const char *op, const tmm_spirv *spv, tmm_view x, uint64_t n,
                          tmm_precision format, tmm_view y, bool pack)
{
    if (format != TMM_PRECISION_FP16 && format != TMM_PRECISION_BF16)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the format must be fp16 or bf16", op);
    const uint64_t words = tmm_pack16_words(n);
    TMM_TRY(tmm_op_need_floats(op, pack ? "x" : "packed x", x, pack ? n : words));
    TMM_TRY(tmm_op_need_floats(op, pack ? "packed y" : "y", y, pack ? words : n));
    tmm_pipeline *p;
    TMM_TRY(tmm_op_pipeline(r, spv, 2, 8, local_1d, NULL, 0, &p));
    const uint64_t chunk = chunk_floats(tmm_recorder_device(r));
    for (uint64_t i = 0; i < n; i += chunk) {
        const uint64_t m = n - i < chunk ? n - i : chunk, w = tmm_pack16_words(m);
        struct { uint32_t n, format; } push = { (uint32_t)m, format == TMM_PRECISION_FP16 ? 0u : 1u };
        tmm_view full = tmm_op_sub(pack ? x : y, i, m), half = tmm_op_sub(pack ? y : x, i / 2, w);
        tmm_arg args[2] = { tmm_in(pack ? full : half), tmm_out(pack ? half : full) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 2, &push, tmm_div_up((uint32_t)w, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}

tmm_status tmm_op_pack16(tmm_recorder *r, tmm_view x, uint64_t n, tmm_precision format, tmm_view y)
{
    return convert(r, "pack16", &tmm_spv_pack16, x, n, format, y, true);
}

tmm_status tmm_op_unpack16(tmm_recorder *r, tmm_view x, uint64_t n, tmm_precision format, tmm_view y)
{
    return convert(r, "unpack16", &tmm_spv_unpack16, x, n, format, y, false);
}
