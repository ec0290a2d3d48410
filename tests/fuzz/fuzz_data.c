/* libFuzzer harness: the text data loaders (src/train/data.c), plain text and
 * JSONL, window and document mode. The first byte picks the format, the mode
 * and the context length; the rest is the file. Loading succeeds or fails
 * with a message; every batch drawn from a loaded corpus holds valid tokens. */
#include "fuzz_util.h"

#include <assert.h>

#include "train/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t knobs = data[0];
    const char *path = fuzz_file(data + 1, size - 1);
    tmm_data_config c;
    tmm_data_config_init(&c);
    c.task = TMM_DATA_TEXT;
    c.seed = knobs;
    c.n = 1 + (knobs >> 3) % 16;
    c.text_paths = &path;
    c.text_path_count = 1;
    c.text_format = knobs & 1 ? TMM_TEXT_JSONL : TMM_TEXT_PLAIN;
    c.text_mode = knobs & 2 ? TMM_TEXT_DOCUMENTS : TMM_TEXT_WINDOWS;
    c.val_fraction = knobs & 4 ? 0.25 : 0.05;
    tmm_data *d;
    if (tmm_data_create(&c, &d) != TMM_OK)
        return 0;
    enum { B = 3 };
    uint32_t tokens[B * 16];
    int32_t targets[B * 16];
    for (int split = 0; split < 2; split++)
        for (uint64_t i = 0; i < 4; i++) {
            if (tmm_data_batch(d, (tmm_data_split)split, i * 977, B, c.n, tokens, targets) != TMM_OK)
                break;
            for (uint32_t k = 0; k < B * c.n; k++) {
                assert(tokens[k] < TMM_TEXT_VOCAB);
                assert(targets[k] == TMM_TARGET_IGNORE || (targets[k] >= 0 && (uint32_t)targets[k] < TMM_TEXT_VOCAB));
            }
        }
    (void)tmm_data_describe(d);
    tmm_data_destroy(d);
    return 0;
}
