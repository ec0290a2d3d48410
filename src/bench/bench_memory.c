/* tmm bench memory: one model trained with each precision and recomputation
 * side by side: the planned memory and its parts, the memory measured while
 * the model is made and trained, the largest batch that fits a limit, and
 * the speed. */
#include <string.h>

#include "bench/internal.h"
#include "buffer.h"
#include "model/arch.h"

const tmm_bench_memory_setting tmm_bench_memory_settings[TMM_BENCH_MEMORY_ROWS] = {
    { TMM_PRECISION_FP32, TMM_RECOMPUTE_NONE },  { TMM_PRECISION_FP16, TMM_RECOMPUTE_NONE },
    { TMM_PRECISION_BF16, TMM_RECOMPUTE_NONE },  { TMM_PRECISION_FP32, TMM_RECOMPUTE_BLOCK },
    { TMM_PRECISION_FP16, TMM_RECOMPUTE_MIXER }, { TMM_PRECISION_FP16, TMM_RECOMPUTE_BLOCK },
};

const char *tmm_bench_precision_name(tmm_precision p) { return tmm_config_field_by_flag("precision")->names[p]; }
const char *tmm_bench_recompute_name(tmm_recompute r) { return tmm_config_field_by_flag("recompute")->names[r]; }

/* Whether c's plan at this batch fits the limit. */
static bool batch_fits(tmm_device *dev, const tmm_train_config *c, uint32_t batch, uint64_t limit)
{
    tmm_train_config t = *c;
    t.batch = batch;
    tmm_train_memory m;
    return tmm_train_memory_plan(dev, &t, &m) == TMM_OK && m.total <= limit;
}

/* The largest batch whose plan fits: doubling, then bisection. */
static uint32_t max_batch(tmm_device *dev, const tmm_train_config *c, uint64_t limit)
{
    if (!batch_fits(dev, c, 1, limit))
        return 0;
    uint32_t lo = 1, hi = 2; /* lo fits; hi does not, or is past TMM_BENCH_MAX_BATCH */
    while (hi <= TMM_BENCH_MAX_BATCH && batch_fits(dev, c, hi, limit))
        lo = hi, hi *= 2;
    if (hi > TMM_BENCH_MAX_BATCH && batch_fits(dev, c, TMM_BENCH_MAX_BATCH, limit))
        return TMM_BENCH_MAX_BATCH;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (batch_fits(dev, c, mid, limit))
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* One row: the plan, then the model made (and trained) for what it holds. */
static tmm_status measure(tmm_device *dev, const tmm_bench_memory_opts *o, int i, tmm_bench_memory_row *row)
{
    tmm_train_config c = *o->config;
    c.precision = tmm_bench_memory_settings[i].precision;
    c.recompute = tmm_bench_memory_settings[i].recompute;
    memset(row, 0, sizeof *row);
    TMM_TRY(tmm_train_memory_plan(dev, &c, &row->plan));
    row->max_batch = max_batch(dev, &c, o->limit);
    tmm_memory_stats before;
    tmm_memory_budget heap;
    tmm_device_memory_stats(dev, &before);
    tmm_device_memory_budget(dev, &heap);
    tmm_device_memory_reset_peak(dev);
    TMM_TRY(tmm_bench_train_steps(dev, &c, o->steps ? 1 : 0, o->steps, false, &row->train));
    tmm_memory_stats after;
    tmm_device_memory_stats(dev, &after);
    row->peak = after.peak_bytes - before.used_bytes;
    row->heap_delta = (int64_t)row->train.heap.usage - (int64_t)heap.usage;
    return TMM_OK;
}

tmm_status tmm_bench_memory(tmm_device *dev, const tmm_bench_memory_opts *o, tmm_bench_memory_result *out)
{
    memset(out, 0, sizeof *out);
    /* A first upload makes the staging buffer a device without unified
     * memory keeps, so that no row counts it. */
    tmm_buffer *warm = NULL;
    uint32_t zero = 0;
    tmm_status s = tmm_buffer_create(dev, sizeof zero, TMM_MEMORY_DEVICE, &warm);
    if (s == TMM_OK)
        s = tmm_buffer_write(warm, 0, &zero, sizeof zero);
    tmm_buffer_destroy(warm);
    for (int i = 0; i < TMM_BENCH_MEMORY_ROWS && s == TMM_OK; i++)
        s = measure(dev, o, i, &out->rows[i]);
    return s;
}

char *tmm_bench_memory_json(const tmm_device *dev, const tmm_bench_memory_opts *o, const tmm_bench_memory_result *res)
{
    const tmm_train_config *c = o->config;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", tmm_device_get_info(dev)->name);
    cJSON_AddBoolToObject(root, "memory_budget", tmm_device_get_info(dev)->memory_budget);
    tmm_bench_json_model(root, &c->model);
    cJSON_AddNumberToObject(root, "batch", c->batch);
    cJSON_AddNumberToObject(root, "limit_bytes", (double)o->limit);
    cJSON_AddNumberToObject(root, "steps", o->steps);
    cJSON *arr = cJSON_AddArrayToObject(root, "rows");
    for (int i = 0; i < TMM_BENCH_MEMORY_ROWS; i++) {
        const tmm_bench_memory_row *r = &res->rows[i];
        const tmm_train_memory *p = &r->plan;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "precision", tmm_bench_precision_name(tmm_bench_memory_settings[i].precision));
        cJSON_AddStringToObject(e, "recompute", tmm_bench_recompute_name(tmm_bench_memory_settings[i].recompute));
        cJSON_AddNumberToObject(e, "params_grads", (double)(p->model.params + p->model.grads));
        cJSON_AddNumberToObject(e, "optimizer", (double)p->optimizer);
        cJSON_AddNumberToObject(e, "activations", (double)p->model.activations);
        cJSON_AddNumberToObject(e, "workspace", (double)(p->model.workspace + p->model.fft_plans));
        cJSON_AddNumberToObject(e, "planned_bytes", (double)p->total);
        cJSON_AddNumberToObject(e, "measured_peak_bytes", (double)r->peak);
        cJSON_AddNumberToObject(e, "heap_delta_bytes", (double)r->heap_delta);
        cJSON_AddNumberToObject(e, "max_batch", r->max_batch);
        if (o->steps)
            cJSON_AddNumberToObject(e, "tokens_per_s", r->train.tokens_per_s);
        cJSON_AddItemToArray(arr, e);
    }
    return tmm_bench_json_text(root);
}
