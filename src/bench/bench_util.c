/* What every benchmark uses: the clock, medians, a model's mixing in words,
 * heads of a benchmark model, error context and JSON text. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench/internal.h"
#include "model/arch.h"

double tmm_bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double tmm_bench_median(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const char *tmm_bench_mixing_desc(const tmm_model_config *c, char *buf, size_t size)
{
    tmm_arch_of(c->arch)->mixer->describe(c, buf, size);
    return buf;
}

void tmm_bench_set_heads(tmm_model_config *c, uint32_t heads, bool heads_given)
{
    const tmm_heads_rule rule = tmm_arch_of(c->arch)->heads;
    /* heads of the inner channels: another quantity than the others' default */
    c->heads = rule == TMM_HEADS_NONE || (rule == TMM_HEADS_OF_64_INNER && !heads_given) ? 0 : heads;
}

tmm_status tmm_bench_context(tmm_status s, const char *fmt, ...)
{
    char prefix[256], why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(why, sizeof why, "%s", tmm_last_error()); /* tmm_fail writes the buffer it would read */
    return tmm_fail(s, "%s: %s", prefix, why);
}

char *tmm_bench_json_text(cJSON *root)
{
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory writing JSON");
    return text;
}

cJSON *tmm_bench_json_model(cJSON *root, const tmm_model_config *c)
{
    cJSON *mc = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(mc, "arch", tmm_arch_name(c->arch));
    cJSON_AddNumberToObject(mc, "vocab", c->vocab);
    cJSON_AddNumberToObject(mc, "d_model", c->d_model);
    cJSON_AddNumberToObject(mc, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(mc, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(mc, "heads", c->heads);
    if (tmm_arch_of(c->arch)->default_window)
        cJSON_AddNumberToObject(mc, "window", c->window);
    cJSON_AddNumberToObject(mc, "params", (double)tmm_model_param_count(c));
    return mc;
}
