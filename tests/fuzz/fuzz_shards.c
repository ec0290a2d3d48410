/* libFuzzer harness: the shard reader (src/train/shards.c, manifest.c) and
 * training data read from shards (data.c). The input is a prepared directory
 * in one piece: a knob byte (mode, context length), a 2-byte little-endian
 * length L, manifest.json (L bytes), then train_000000.bin; tokenizer.json is
 * the byte tokenizer's. Opening succeeds or fails with a message; every batch
 * drawn from opened shards holds tokens of the vocabulary. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/tokenizer.h"
#include "train/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void put(const char *name, const uint8_t *bytes, size_t n)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0)
        abort();
}

static void cleanup(void)
{
    const char *names[] = { "manifest.json", "train_000000.bin", "tokenizer.json" };
    char path[128];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        remove(path);
    }
    rmdir(dir);
}

/* A private directory in memory (/dev/shm) holding the byte tokenizer,
 * removed at exit. */
static void setup(void)
{
    snprintf(dir, sizeof dir, "/dev/shm/tmm-fuzz-shards-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    atexit(cleanup);
    tmm_tokenizer *tok;
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (tmm_tokenizer_bytes(&tok) != TMM_OK || tmm_tokenizer_save(tok, path) != TMM_OK)
        abort();
    tmm_tokenizer_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0])
        setup();
    if (size < 3)
        return 0;
    const uint8_t knobs = data[0];
    size_t L = data[1] | (size_t)data[2] << 8;
    if (L > size - 3)
        return 0;
    put("manifest.json", data + 3, L);
    put("train_000000.bin", data + 3 + L, size - 3 - L);
    tmm_data_config c;
    tmm_data_config_init(&c);
    const char *paths[] = { dir };
    c.task = TMM_DATA_TEXT;
    c.seed = knobs;
    c.n = 1 + (knobs >> 2) % 16;
    c.text_paths = paths;
    c.text_path_count = 1;
    c.text_mode = knobs & 1 ? TMM_TEXT_DOCUMENTS : TMM_TEXT_WINDOWS;
    c.val_fraction = knobs & 2 ? 0.25 : 0;
    tmm_data *d;
    if (tmm_data_create(&c, &d) != TMM_OK)
        return 0;
    const uint32_t V = tmm_data_vocab(d);
    enum { B = 3 };
    uint32_t tokens[B * 16];
    int32_t targets[B * 16];
    for (int split = 0; split < 2; split++)
        for (uint64_t i = 0; i < 4; i++) {
            if (tmm_data_batch(d, (tmm_data_split)split, i * 977, B, c.n, tokens, targets) != TMM_OK)
                break;
            for (uint32_t k = 0; k < B * c.n; k++) {
                assert(tokens[k] < V);
                assert(targets[k] == TMM_TARGET_IGNORE || (targets[k] >= 0 && (uint32_t)targets[k] < V));
            }
        }
    (void)tmm_data_describe(d);
    tmm_data_destroy(d);
    return 0;
}
