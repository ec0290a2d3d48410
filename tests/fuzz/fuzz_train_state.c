/* libFuzzer harness: train_state.safetensors, the optimizer state that
 * tmm train --resume reads (src/model/checkpoint.c), on any bytes, beside a
 * fixed valid model file (train_state_model.safetensors, a one-layer copy
 * model of step 1; corpus/train_state/ holds its own valid state). Whatever
 * the input, the load either succeeds with moments of the model's layout and
 * words within their bound, or fails with a message; it never crashes, hangs
 * or leaks. */
#include "fuzz_util.h"

#include <assert.h>
#include <string.h>

#include "model/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Once: DIR/model.safetensors (a copy of the fixed model) and
 * DIR/train_state.safetensors (a link to the input's memfd). */
static const char *model_beside(const char *state)
{
    static char model[96];
    if (model[0])
        return model;
    char dir[] = "/tmp/tmm-fuzz-state-XXXXXX", link[96];
    if (!mkdtemp(dir))
        abort();
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(link, sizeof link, "%s/train_state.safetensors", dir);
    FILE *in = fopen(TMM_FUZZ_STATE_MODEL, "rb"), *out = fopen(model, "wb");
    if (!in || !out)
        abort();
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
        if (fwrite(buf, 1, n, out) != n)
            abort();
    if (fclose(out) != 0 || symlink(state, link) != 0)
        abort();
    fclose(in);
    return model;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *model = model_beside(fuzz_file(data, size));
    tmm_checkpoint ck;
    if (tmm_checkpoint_load(model, NULL, TMM_CHECKPOINT_STATE, &ck) == TMM_OK) {
        assert(ck.has_state && ck.state.step == ck.step && ck.state.n_words <= TMM_TRAIN_STATE_WORDS);
        volatile float sink = 0; /* touch both arenas: ASan checks their bounds */
        for (uint64_t i = 0; i < ck.table.arena_floats; i++)
            sink += ck.state.m[i] + ck.state.v[i];
        (void)sink;
        tmm_checkpoint_free(&ck);
    }
    return 0;
}
