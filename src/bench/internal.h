/* What the benchmarks' files share inside the library (bench_util.c). */
#ifndef TMM_BENCH_INTERNAL_H
#define TMM_BENCH_INTERNAL_H

#include <cjson/cJSON.h>

#include "bench/bench.h"

/* Puts "PREFIX: " before this thread's last error: returns s. */
tmm_status tmm_bench_context(tmm_status s, const char *fmt, ...) TMM_PRINTF(2, 3);
/* root printed (cJSON_Print) and deleted; NULL after "out of host memory
 * writing JSON" when root or its text could not be made. */
char *tmm_bench_json_text(cJSON *root);
/* Adds root's "model" object: arch, vocab, d_model, n_ctx, n_layers, heads,
 * window (architectures with one) and params. */
cJSON *tmm_bench_json_model(cJSON *root, const tmm_model_config *c);

#endif
