/* The device's measured peaks, the roofline's ceilings: the bandwidth of a
 * copy kernel over a buffer much larger than any cache, and the matmul rate
 * of the variant tmm picks at 1024^3; measured once, kept by the device. */
#include <stdlib.h>

#include "bench/internal.h"
#include "buffer.h"
#include "ops/ops.h"

#define COPY_FLOATS (16u << 20) /* 64 MiB each way */
#define COPY_RUNS 3

static tmm_status copy_bandwidth(tmm_device *dev, double *gbs)
{
    tmm_buffer *buf = NULL;
    tmm_recorder *r = NULL;
    const uint64_t bytes = (uint64_t)COPY_FLOATS * 4;
    tmm_status s = tmm_buffer_create(dev, 2 * bytes, TMM_MEMORY_DEVICE, &buf);
    if (s == TMM_OK)
        s = tmm_recorder_create(dev, &r);
    if (s == TMM_OK)
        s = tmm_recorder_begin(r);
    if (s == TMM_OK)
        s = tmm_op_fill(r, tmm_sub(buf, 0, bytes), COPY_FLOATS, 1.0f);
    if (s == TMM_OK)
        s = tmm_record_region_begin(r, "copy");
    if (s == TMM_OK)
        s = tmm_op_copy(r, tmm_sub(buf, 0, bytes), tmm_sub(buf, bytes, bytes), COPY_FLOATS);
    if (s == TMM_OK)
        s = tmm_record_region_end(r);
    if (s == TMM_OK)
        s = tmm_recorder_end(r);
    double best = 0;
    for (int i = 0; s == TMM_OK && i < COPY_RUNS; i++) {
        double ms = 0;
        s = tmm_recorder_run(r);
        if (s == TMM_OK)
            s = tmm_recorder_region_time(r, 0, NULL, &ms);
        if (s == TMM_OK && ms > 0 && 2.0 * (double)bytes / (ms * 1e6) > best)
            best = 2.0 * (double)bytes / (ms * 1e6);
    }
    tmm_recorder_destroy(r);
    tmm_buffer_destroy(buf);
    *gbs = best;
    return s;
}

tmm_status tmm_bench_peaks(tmm_device *dev, tmm_bench_peaks_result *out)
{
    if (!dev->peaks_measured) {
        TMM_TRY(tmm_bench_context(copy_bandwidth(dev, &dev->peak_copy_gbs), "the copy bandwidth"));
        tmm_bench_matmul_opts o = { .desc = { .m = 1024, .n = 1024, .k = 1024, .batch = 1 },
                                    .variants = { TMM_MATMUL_AUTO }, .n_variants = 1, .repeat = 3 };
        tmm_bench_matmul_result res;
        TMM_TRY(tmm_bench_context(tmm_bench_matmul(dev, &o, &res), "the matmul rate"));
        dev->peak_matmul_gflops = res.rows[0].ms > 0 ? tmm_bench_matmul_flop(&o.desc) / (res.rows[0].ms * 1e6) : 0;
        dev->peaks_measured = true;
    }
    *out = (tmm_bench_peaks_result){ dev->peak_copy_gbs, dev->peak_matmul_gflops };
    return TMM_OK;
}

double tmm_bench_roofline(const tmm_bench_peaks_result *p, double ms, double bytes, double flops)
{
    if (ms <= 0 || p->copy_gbs <= 0)
        return 0;
    const double t_bytes = bytes / (p->copy_gbs * 1e6);                      /* ms at the copy bandwidth */
    const double t_flops = p->matmul_gflops > 0 ? flops / (p->matmul_gflops * 1e6) : 0;
    return (t_bytes > t_flops ? t_bytes : t_flops) / ms;
}
