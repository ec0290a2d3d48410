/* libFuzzer harness: the tokenizer readers of src/text. An input that starts
 * like JSON is a tokenizer.json, read through the same file reader as
 * --tokenizer (tokenizer_json.c and the parts' readers, json_*.c); any other
 * is a .tiktoken file (tiktoken.c) of the encoding its first byte picks, the
 * rest of the input its ranks (their number not checked). Any input is
 * accepted or refused with a message; an accepted tokenizer encodes a fixed
 * text and the input itself, and decodes the ids back: exactly for a
 * byte-level BPE that adds nothing and drops nothing. It survives a save and
 * load with the same fingerprint, and its template and decoders run. */
#include "fuzz_util.h"

#include <assert.h>
#include <string.h>

#include "text/tokenizer_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const tmm_tokenizer *t, tmm_tok_cache *c, const char *text, size_t n, bool exact)
{
    tmm_tokens ids = { 0 };
    tmm_bytes out = { 0 };
    if (tmm_tokenizer_encode(t, c, text, n, false, &ids) == TMM_OK) { /* a pattern may hit PCRE2's match limit */
        assert(tmm_tokenizer_decode(t, ids.ids, ids.count, false, &out) == TMM_OK);
        assert(!exact || (out.length == n && (n == 0 || memcmp(out.data, text, n) == 0)));
    }
    ids.count = 0;
    if (tmm_tokenizer_encode(t, c, text, n, true, &ids) == TMM_OK) {
        assert(tmm_tokenizer_add_special(t, &ids, 0) == TMM_OK);
        out.length = 0;
        assert(tmm_tokenizer_decode(t, ids.ids, ids.count, true, &out) == TMM_OK);
    }
    for (size_t i = 0; i < ids.count; i++) {
        const char *b;
        (void)tmm_tokenizer_token_bytes(t, ids.ids[i], &b);
    }
    free(ids.ids), free(out.data);
}

/* Byte-level with every byte's token, no normalizer, no prefix space, no added token that strips */
static bool exact(const tmm_tokenizer *t)
{
    if (t->bytes)
        return true;
    if (!t->byte_level || !t->all_bytes || t->n_norms)
        return false;
    for (uint32_t i = 0; i < t->n_steps; i++)
        if (t->steps[i].add_prefix_space)
            return false;
    for (uint32_t i = 0; i < t->n_added; i++)
        if (t->flags[t->added[i]] & (TOK_LSTRIP | TOK_RSTRIP))
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const encodings[] = { "r50k_base", "p50k_base", "cl100k_base", "o200k_base" };
    tmm_tokenizer *t = NULL, *u = NULL;
    size_t i = 0;
    while (i < size && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t' || data[i] == '\r'))
        i++;
    bool json = i == size || data[i] == '{' || data[i] == '[' || data[i] == '"';
    if (json ? tmm_tokenizer_load(fuzz_file(data, size), &t) != TMM_OK
             : tmm_tok_tiktoken_parse((const char *)data + 1, size - 1, "fuzz.tiktoken", encodings[data[0] % 4], false,
                                      &t) != TMM_OK)
        return 0;
    char *out;
    size_t n;
    assert(tmm_tokenizer_to_json(t, &out, &n) == TMM_OK);
    tmm_tok_cache *c = tmm_tok_cache_new();
    static const char text[] = "Hello, world! It's 2024 \xc3\xa9t\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac  \t\n\xff\xfe"
                               "<|endoftext|><s> </s>\xe2\x96\x81x e\xcc\x81";
    round_trip(t, c, text, sizeof text - 1, exact(t));
    round_trip(t, c, (const char *)data, size, exact(t));
    assert(tmm_tokenizer_parse(out, n, "round trip", &u) == TMM_OK);
    assert(tmm_tokenizer_fingerprint(t) == tmm_tokenizer_fingerprint(u));
    free(out);
    tmm_tok_cache_free(c);
    tmm_tokenizer_free(t), tmm_tokenizer_free(u);
    return 0;
}
