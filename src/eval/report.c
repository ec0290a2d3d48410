/* The JSON report of tmm eval --task (docs/eval.md "Report"). */
#include <cjson/cJSON.h>
#include <math.h>

#include "eval/eval.h"

static cJSON *number_or_null(double x) { return isfinite(x) ? cJSON_CreateNumber(x) : cJSON_CreateNull(); }

char *tmm_eval_report_json(const tmm_eval_report *r, const char *checkpoint, const char *data,
                           const tmm_generator_info *info)
{
    cJSON *o = cJSON_CreateObject(), *skipped = cJSON_CreateObject(), *reasons = cJSON_CreateArray(),
          *metrics = cJSON_CreateObject();
    char *text = NULL;
    if (o && skipped && reasons && metrics) {
        cJSON_AddStringToObject(o, "task", r->task);
        cJSON_AddStringToObject(o, "kind", tmm_eval_kind_name(r->kind));
        cJSON_AddStringToObject(o, "data", data);
        cJSON_AddStringToObject(o, "checkpoint", checkpoint);
        cJSON_AddStringToObject(o, "arch", tmm_arch_name(info->config.arch));
        cJSON_AddNumberToObject(o, "step", (double)info->step);
        cJSON_AddNumberToObject(o, "n_ctx", info->config.n_ctx);
        cJSON_AddStringToObject(o, "tokenizer", info->tokenizer);
        cJSON_AddNumberToObject(o, "shots", r->shots);
        cJSON_AddNumberToObject(o, "items", r->items);
        cJSON_AddNumberToObject(o, "scored", r->scored);
        cJSON_AddNumberToObject(o, "truncated", r->truncated);
        cJSON_AddNumberToObject(skipped, "count", r->skipped);
        for (uint32_t i = 0; i < r->n_reasons; i++) {
            cJSON *e = cJSON_CreateObject();
            if (!e)
                break;
            cJSON_AddStringToObject(e, "reason", r->reasons[i].reason);
            cJSON_AddNumberToObject(e, "count", r->reasons[i].count);
            cJSON_AddItemToArray(reasons, e);
        }
        cJSON_AddItemToObject(skipped, "reasons", reasons);
        reasons = NULL;
        cJSON_AddItemToObject(o, "skipped", skipped);
        skipped = NULL;
        for (uint32_t i = 0; i < r->n_metrics; i++) {
            cJSON *m = cJSON_CreateObject();
            if (!m)
                break;
            cJSON_AddItemToObject(m, "value", number_or_null(r->metrics[i].value));
            cJSON_AddItemToObject(m, "stderr", number_or_null(r->metrics[i].stderr_));
            cJSON_AddItemToObject(metrics, r->metrics[i].name, m);
        }
        cJSON_AddItemToObject(o, "metrics", metrics);
        metrics = NULL;
        text = cJSON_Print(o);
    }
    cJSON_Delete(o), cJSON_Delete(skipped), cJSON_Delete(reasons), cJSON_Delete(metrics);
    return text;
}
