/* libFuzzer harness: the safetensors reader (src/io/safetensors.c) and the
 * checks on top of it: checkpoints (src/model/checkpoint.c) and
 * distill.safetensors (src/model/distilled.c, for a fixed small TMM with zero
 * weights: corpus/safetensors/distill.safetensors is a valid one), on any
 * bytes. Whatever the input, reading either succeeds with tensors that lie
 * inside the file or fails with a message; it never crashes, hangs or leaks. */
#include "fuzz_util.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "model/distilled.h"
#include "model/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The distill file of a TMM of d 4, n 8, 1 layer, 2 heads, 2 taps, expanded,
 * all weights 0 (its Toeplitz tensors are blocks.0.mix.w and .w2, [2, 2, 8]). */
static void check_distilled(const char *path)
{
    static tmm_param_table table;
    static float *params;
    if (!params) {
        const tmm_model_config c = { .arch = TMM_ARCH_TMM, .vocab = 4, .d_model = 4, .n_ctx = 8, .n_layers = 1,
                                     .heads = 2, .expansion = 1, .kernel = 2, .expanded = true };
        if (tmm_param_table_build(&c, &table) != TMM_OK || !(params = calloc(table.arena_floats, sizeof *params)))
            abort();
    }
    tmm_distilled set;
    if (tmm_distilled_read(path, &table, params, &set) == TMM_OK) {
        assert(set.head >= 1 && set.head <= 8 && set.count == 2);
        for (uint32_t i = 0; i < set.count; i++)
            for (uint64_t k = 0; k < 2ull * 2 * set.t[i].modes * 4; k += 4)
                assert(set.t[i].data[k] * set.t[i].data[k] + set.t[i].data[k + 1] * set.t[i].data[k + 1] < 1);
        tmm_distilled_free(&set);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size);
    tmm_safetensors *st;
    if (tmm_safetensors_read(path, &st) == TMM_OK) {
        size_t bytes;
        const unsigned char *base = tmm_safetensors_data(st, &bytes);
        for (uint32_t i = 0; i < tmm_safetensors_count(st); i++) {
            const tmm_st_tensor *t = tmm_safetensors_at(st, i);
            uint64_t n = tmm_st_numel(t) * tmm_st_dtype_size(t->dtype);
            const unsigned char *p = t->data;
            assert(p >= base && p + n <= base + bytes);
            volatile unsigned char sink = 0;
            for (uint64_t k = 0; k < n; k += 61) /* touch the bytes: ASan checks the bounds */
                sink ^= p[k];
            (void)sink;
            assert(tmm_safetensors_find(st, t->name) != NULL);
        }
        for (uint32_t i = 0; i < tmm_safetensors_meta_count(st); i++) {
            const tmm_st_meta *m = tmm_safetensors_meta_at(st, i);
            assert(tmm_safetensors_meta(st, m->key) == m->value);
        }
        tmm_safetensors_free(st);
    }
    tmm_checkpoint ck;
    if (tmm_checkpoint_load_model(path, NULL, &ck) == TMM_OK)
        tmm_checkpoint_free(&ck);
    check_distilled(path);
    return 0;
}
