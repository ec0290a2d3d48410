/* libFuzzer harness: the tokenizer.json reader (src/text/tokenizer_json.c)
 * through the same file reader as --tokenizer. Any input is accepted or
 * refused with a message; an accepted tokenizer encodes a fixed text (and the
 * input itself) so that decode gives it back exactly, and survives a save and
 * load with the same fingerprint. */
#include "fuzz_util.h"

#include <assert.h>
#include <string.h>

#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const tmm_tokenizer *t, tmm_tok_cache *c, const char *text, size_t n, bool exact)
{
    tmm_tokens ids = { 0 };
    tmm_bytes out = { 0 };
    if (tmm_tokenizer_encode(t, c, text, n, false, &ids) == TMM_OK) { /* a pattern may hit PCRE2's match limit */
        assert(tmm_tokenizer_decode(t, ids.ids, ids.count, false, &out) == TMM_OK);
        assert(!exact || (out.length == n && (n == 0 || memcmp(out.data, text, n) == 0)));
    }
    free(ids.ids), free(out.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tmm_tokenizer *t = NULL, *u = NULL;
    if (tmm_tokenizer_load(fuzz_file(data, size), &t) != TMM_OK)
        return 0;
    char *json;
    size_t n;
    assert(tmm_tokenizer_to_json(t, &json, &n) == TMM_OK);
    /* a prefix space (add_prefix_space in the pre-tokenizer, which to_json writes before the
     * post_processor) is the one way a tokenizer adds bytes on purpose */
    const char *pre = strstr(json, "\"pre_tokenizer\":"), *post = strstr(json, "\"post_processor\":");
    const char *prefix = strstr(pre, "\"add_prefix_space\":true");
    bool exact = !(prefix && prefix < post);
    tmm_tok_cache *c = tmm_tok_cache_new();
    static const char text[] = "Hello, world! It's 2024 \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac  \t\n\xff\xfe<|endoftext|>";
    round_trip(t, c, text, sizeof text - 1, exact);
    round_trip(t, c, (const char *)data, size, exact);
    assert(tmm_tokenizer_parse(json, n, "round trip", &u) == TMM_OK);
    assert(tmm_tokenizer_fingerprint(t) == tmm_tokenizer_fingerprint(u));
    free(json);
    tmm_tok_cache_free(c);
    tmm_tokenizer_free(t), tmm_tokenizer_free(u);
    return 0;
}
