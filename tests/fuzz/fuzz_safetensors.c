/* libFuzzer harness: the safetensors reader (src/io/safetensors.c) and the
 * checkpoint checks on top of it (src/train/checkpoint.c), on any bytes.
 * Whatever the input, reading either succeeds with tensors that lie inside
 * the file or fails with a message; it never crashes, hangs or leaks. */
#include "fuzz_util.h"

#include <assert.h>
#include <string.h>

#include "io/safetensors.h"
#include "train/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    return 0;
}
