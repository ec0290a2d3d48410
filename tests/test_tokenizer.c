/* Tokenizers (src/text/tokenizer.h): the byte tokenizer, byte-level BPE from
 * tokenizer.json (GPT-2 splits, merge order, special tokens, the word
 * cache), save/load round trips, refusals of bad files, and training. CPU
 * only. Parity with Hugging Face's own library: tests/tokenizer_parity_test.sh. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "status.h"
#include "text/tokenizer.h"

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static tmm_tokens encode(const tmm_tokenizer *t, tmm_tok_cache *c, const char *text, size_t n, bool special)
{
    tmm_tokens ids = { 0 };
    tmm_status s = tmm_tokenizer_encode(t, c, text, n, special, &ids);
    cr_assert_eq(s, TMM_OK, "encode: %s", tmm_last_error());
    return ids;
}

static void assert_round_trip(const tmm_tokenizer *t, tmm_tok_cache *c, const char *text, size_t n)
{
    tmm_tokens ids = encode(t, c, text, n, false);
    tmm_bytes out = { 0 };
    cr_assert_eq(tmm_tokenizer_decode(t, ids.ids, ids.count, false, &out), TMM_OK, "%s", tmm_last_error());
    cr_assert_eq(out.length, n, "decoded %zu bytes of %zu", out.length, n);
    cr_assert(n == 0 || memcmp(out.data, text, n) == 0, "decode(encode(x)) != x");
    free(ids.ids), free(out.data);
}

/* ---- the byte tokenizer ---------------------------------------------------- */

Test(tokenizer, bytes_basics)
{
    tmm_tokenizer *t;
    cr_assert_eq(tmm_tokenizer_load("bytes", &t), TMM_OK);
    cr_assert_str_eq(tmm_tokenizer_kind(t), "bytes");
    cr_assert_eq(tmm_tokenizer_vocab(t), 257);
    cr_assert_eq(tmm_tokenizer_eot(t), 256);
    const char text[] = "a\xff<|endoftext|>b";
    tmm_tokens plain = encode(t, NULL, text, sizeof text - 1, false);
    cr_assert_eq(plain.count, sizeof text - 1);
    cr_assert_eq(plain.ids[1], 0xff);
    tmm_tokens sp = encode(t, NULL, text, sizeof text - 1, true);
    cr_assert_eq(sp.count, 4);
    uint32_t want[] = { 'a', 0xff, 256, 'b' };
    cr_assert_arr_eq(sp.ids, want, sizeof want);
    tmm_bytes out = { 0 };
    cr_assert_eq(tmm_tokenizer_decode(t, sp.ids, sp.count, false, &out), TMM_OK);
    cr_assert_eq(out.length, 3);
    cr_assert_eq(tmm_tokenizer_decode(t, sp.ids, sp.count, true, &out), TMM_OK);
    cr_assert_eq(out.length, 3 + sizeof text - 1);
    const char *b;
    cr_assert_eq(tmm_tokenizer_token_bytes(t, 256, &b), 13);
    cr_assert_eq(tmm_tokenizer_token_bytes(t, 257, &b), 0);
    uint32_t bad = 257;
    cr_assert_eq(tmm_tokenizer_decode(t, &bad, 1, true, &out), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "257"), "%s", tmm_last_error());
    free(plain.ids), free(sp.ids), free(out.data);
    tmm_tokenizer_free(t);
}

Test(tokenizer, bytes_save_load_same)
{
    tmm_tokenizer *t, *u;
    cr_assert_eq(tmm_tokenizer_bytes(&t), TMM_OK);
    char *json;
    size_t n;
    cr_assert_eq(tmm_tokenizer_to_json(t, &json, &n), TMM_OK);
    cr_assert_eq(tmm_tokenizer_parse(json, n, "bytes.json", &u), TMM_OK, "%s", tmm_last_error());
    cr_assert_str_eq(tmm_tokenizer_kind(u), "bytes");
    cr_assert_eq(tmm_tokenizer_fingerprint(t), tmm_tokenizer_fingerprint(u));
    free(json);
    tmm_tokenizer_free(t), tmm_tokenizer_free(u);
}

Test(tokenizer, bytes_round_trip_random)
{
    tmm_tokenizer *t;
    cr_assert_eq(tmm_tokenizer_bytes(&t), TMM_OK);
    tmm_tok_cache *c = tmm_tok_cache_new();
    char buf[4096];
    uint64_t s = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (char)lcg(&s);
    assert_round_trip(t, c, buf, sizeof buf);
    tmm_tok_cache_free(c);
    tmm_tokenizer_free(t);
}
