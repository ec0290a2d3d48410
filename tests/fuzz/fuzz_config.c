/* libFuzzer harness: the training config's JSON reader (src/train/
 * train_config.c), as --config, presets and checkpoints use it. Any input is
 * accepted or refused with a message; an accepted config that passes the
 * checks survives a round trip through its JSON form unchanged. */
#include "fuzz_util.h"

#include <assert.h>
#include <string.h>

#include "files.h"
#include "train/train_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    void *text;
    size_t n;
    /* through the same file reader as --config: a NUL byte ends the JSON there */
    if (tmm_read_file(fuzz_file(data, size), "config file", 1u << 20, &text, &n) != TMM_OK)
        return 0;
    tmm_train_config c;
    tmm_train_config_default(&c);
    if (tmm_train_config_apply_json(&c, text, "fuzz") == TMM_OK) {
        char *json = tmm_train_config_to_json(&c);
        assert(json);
        tmm_train_config again;
        tmm_train_config_default(&again);
        tmm_status s = tmm_train_config_apply_json(&again, json, "round trip");
        assert(s == TMM_OK);
        char *json2 = tmm_train_config_to_json(&again);
        assert(json2 && strcmp(json, json2) == 0);
        (void)tmm_train_config_check(&c);
        free(json), free(json2);
        tmm_train_config_free(&again);
    }
    tmm_train_config_free(&c);
    free(text);
    return 0;
}
