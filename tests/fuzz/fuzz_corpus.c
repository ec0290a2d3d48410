/* libFuzzer harness: the corpus reader (src/text/corpus.c) through which tmm
 * tokenizer train reads: plain text and JSONL, gzip-compressed or not (by
 * content), including truncated, damaged and highly compressed (bomb-like)
 * streams. The first byte picks plain text or JSONL (the reader decides that
 * by the name: the input is reached through a link named in.txt or
 * in.jsonl); the rest is the file. Reading succeeds, handing over pieces
 * within the reader's limits and never more text in all than a .gz may
 * inflate to (tmm_gz_limit), or fails with a message. */
#include "fuzz_util.h"

#include <assert.h>
#include <string.h>

#include "text/corpus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tmm_status count(const char *text, size_t length, void *user)
{
    assert(length <= (size_t)TMM_CORPUS_MAX_LINE + 17 * (size_t)TMM_CORPUS_CHUNK);
    volatile char sink = length ? text[length - 1] : 0; /* ASan checks the piece's bounds */
    (void)sink;
    *(uint64_t *)user += length;
    return TMM_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char links[2][64];
    if (size < 1)
        return 0;
    const char *file = fuzz_file(data + 1, size - 1);
    if (!links[0][0]) { /* once: in.txt and in.jsonl, links to the input's memfd */
        char dir[] = "/tmp/tmm-fuzz-corpus-XXXXXX";
        if (!mkdtemp(dir))
            abort();
        snprintf(links[0], sizeof links[0], "%s/in.txt", dir);
        snprintf(links[1], sizeof links[1], "%s/in.jsonl", dir);
        if (symlink(file, links[0]) != 0 || symlink(file, links[1]) != 0)
            abort();
    }
    const char *path = links[data[0] & 1];
    uint64_t total = 0;
    if (tmm_corpus_read(&path, 1, count, NULL, &total) == TMM_OK)
        assert(total <= (uint64_t)(size - 1) || total <= tmm_gz_limit(path));
    return 0;
}
