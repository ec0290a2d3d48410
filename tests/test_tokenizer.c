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

/* ---- byte-level BPE from tokenizer.json --------------------------------------- */

/* A tokenizer.json of the 256 bytes (GPT-2's bytes_to_unicode order is not
 * needed: ids are byte values), extra vocabulary and merges, <|endoftext|>. */
static char *tiny_json(const char *pre, const char *extra_vocab, const char *merges, const char *added)
{
    static const char *names[256];
    static char store[256][4];
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int n = 0;
        for (int i = 0; i < b; i++)
            n += !((i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n;
        if (cp < 0x80) {
            store[b][0] = (char)cp, store[b][1] = 0;
        } else {
            store[b][0] = (char)(0xC0 | (cp >> 6)), store[b][1] = (char)(0x80 | (cp & 0x3F)), store[b][2] = 0;
        }
        names[b] = store[b];
    }
    size_t cap = 1 << 16;
    char *j = malloc(cap);
    size_t k = (size_t)snprintf(j, cap, "{\"added_tokens\":[%s],\"normalizer\":null,\"pre_tokenizer\":%s,"
                                        "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
                                        "\"model\":{\"type\":\"BPE\",\"vocab\":{",
                                added, pre);
    for (int b = 0; b < 256; b++) {
        const char *q = names[b][0] == '"' ? "\\\"" : names[b][0] == '\\' ? "\\\\" : names[b];
        k += (size_t)snprintf(j + k, cap - k, "%s\"%s\":%d", b ? "," : "", q, b);
    }
    snprintf(j + k, cap - k, "%s%s},\"merges\":[%s]}}", *extra_vocab ? "," : "", extra_vocab, merges);
    return j;
}

#define BL "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"
#define EOT_ADDED "{\"id\":300,\"content\":\"<|endoftext|>\",\"special\":true}"

static tmm_tokenizer *parse_ok(char *json)
{
    tmm_tokenizer *t = NULL;
    tmm_status s = tmm_tokenizer_parse(json, strlen(json), "tiny.json", &t);
    cr_assert_eq(s, TMM_OK, "parse: %s", tmm_last_error());
    free(json);
    return t;
}

static void expect_ids(const tmm_tokenizer *t, const char *text, bool special, const uint32_t *want, size_t n)
{
    tmm_tok_cache *c = tmm_tok_cache_new();
    for (int pass = 0; pass < 2; pass++) { /* the second from the cache */
        tmm_tokens ids = encode(t, c, text, strlen(text), special);
        cr_assert_eq(ids.count, n, "'%s': %zu ids, want %zu", text, ids.count, n);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(ids.ids[i], want[i], "'%s': id %zu is %u, want %u", text, i, ids.ids[i], want[i]);
        free(ids.ids);
    }
    tmm_tok_cache_free(c);
}

Test(tokenizer, gpt2_splits)
{
    /* merges apply within a piece only, so the ids show where GPT-2's pattern splits */
    tmm_tokenizer *t = parse_ok(tiny_json(BL, "\"Ġt\":256,\"he\":257,\"Ġthe\":258,\"'s\":259,\"ĠĠ\":260",
                                          "\"Ġ t\",\"h e\",\"Ġt he\",\"' s\",\"Ġ Ġ\"", ""));
    /* "the's" -> the | 's ; " the" -> Ġthe ; "  the": ' ' then ' the' (\s+(?!\S)) */
    uint32_t a[] = { 't', 257, 259 };
    expect_ids(t, "the's", false, a, 3);
    uint32_t b[] = { ' ', 258 };
    expect_ids(t, "  the", false, b, 2);
    uint32_t c[] = { 260, 258 };
    expect_ids(t, "   the", false, c, 2);
    /* a space does not join digits to letters: " 12" is one piece, "ab" another */
    uint32_t d[] = { 'a', 'b', ' ', '1', '2' };
    expect_ids(t, "ab 12", false, d, 5);
    tmm_tokenizer_free(t);
}

Test(tokenizer, merges_by_rank_leftmost_first)
{
    /* ranks: "a a" first, then "aa a": "aaa" -> (aa)(a) -> aaa; "aaaa" -> (aa)(aa) */
    tmm_tokenizer *t = parse_ok(tiny_json(BL, "\"aa\":256,\"aaa\":257,\"aaaa\":258", "[\"a\",\"a\"],[\"aa\",\"a\"],[\"aa\",\"aa\"]", ""));
    uint32_t a[] = { 257 };
    expect_ids(t, "aaa", false, a, 1);
    uint32_t b[] = { 258 };
    expect_ids(t, "aaaa", false, b, 1);
    tmm_tokens ids = encode(t, NULL, "aaaaa", 5, false);
    /* a a a a a -> aa aa a (leftmost pairs first) -> "aa a" (rank 1) at the right beats "aa aa" (rank 2): aa aaa */
    cr_assert_eq(ids.count, 2);
    cr_assert_eq(ids.ids[0], 256);
    cr_assert_eq(ids.ids[1], 257);
    free(ids.ids);
    tmm_tokenizer_free(t);
}

Test(tokenizer, special_tokens)
{
    tmm_tokenizer *t = parse_ok(tiny_json(BL, "", "", EOT_ADDED ",{\"id\":301,\"content\":\"<|end\",\"special\":false}"));
    cr_assert_eq(tmm_tokenizer_eot(t), 300);
    cr_assert_eq(tmm_tokenizer_vocab(t), 302);
    uint32_t a[] = { 'x', 300, 'y' };
    expect_ids(t, "x<|endoftext|>y", true, a, 3);
    /* without special, <|endoftext|> is text, but the non-special added token "<|end" still matches */
    tmm_tokens ids = encode(t, NULL, "x<|endoftext|>y", 15, false);
    cr_assert_eq(ids.ids[1], 301);
    cr_assert_eq(ids.count, 1 + 1 + 8 + 1);
    free(ids.ids);
    tmm_tokenizer_free(t);
}

Test(tokenizer, round_trip_random_bytes_bpe)
{
    tmm_tokenizer *t = parse_ok(tiny_json(BL, "\"Ġt\":256,\"he\":257,\"Ġthe\":258", "\"Ġ t\",\"h e\",\"Ġt he\"", EOT_ADDED));
    tmm_tok_cache *c = tmm_tok_cache_new();
    char buf[20000];
    uint64_t s = 7;
    for (int round = 0; round < 20; round++) {
        size_t n = lcg(&s) % sizeof buf;
        for (size_t i = 0; i < n; i++) /* bias to ASCII, spaces and UTF-8 lead/continuation bytes */
            buf[i] = (char)(lcg(&s) % 3 ? " the\n\t\xc3\xa9"[lcg(&s) % 9] : (int)lcg(&s));
        assert_round_trip(t, c, buf, n);
        assert_round_trip(t, NULL, buf, n);
    }
    tmm_tok_cache_free(c);
    tmm_tokenizer_free(t);
}

Test(tokenizer, save_load_same)
{
    const char *seq = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}|[^\\\\p{N}]+\"},"
                      "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                      "\"use_regex\":false}]}";
    tmm_tokenizer *t = parse_ok(tiny_json(seq, "\"12\":256,\"123\":257", "\"1 2\",\"12 3\"", EOT_ADDED));
    uint32_t a[] = { 257, 257, '4' };
    expect_ids(t, "1231234", false, a, 3);
    char *json;
    size_t n;
    cr_assert_eq(tmm_tokenizer_to_json(t, &json, &n), TMM_OK);
    tmm_tokenizer *u = NULL;
    cr_assert_eq(tmm_tokenizer_parse(json, n, "saved", &u), TMM_OK, "%s", tmm_last_error());
    cr_assert_eq(tmm_tokenizer_fingerprint(t), tmm_tokenizer_fingerprint(u));
    expect_ids(u, "1231234", false, a, 3);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tmm-tok-%d.json", (int)getpid());
    cr_assert_eq(tmm_tokenizer_save(u, path), TMM_OK);
    tmm_tokenizer *v = NULL;
    cr_assert_eq(tmm_tokenizer_load(path, &v), TMM_OK, "%s", tmm_last_error());
    cr_assert_eq(tmm_tokenizer_fingerprint(t), tmm_tokenizer_fingerprint(v));
    unlink(path);
    free(json);
    tmm_tokenizer_free(t), tmm_tokenizer_free(u), tmm_tokenizer_free(v);
}

static void expect_refused(const char *json, const char *words)
{
    tmm_tokenizer *t = NULL;
    tmm_status s = tmm_tokenizer_parse(json, strlen(json), "bad.json", &t);
    cr_assert_neq(s, TMM_OK, "accepted: %.200s", json);
    cr_assert_null(t);
    cr_assert(strstr(tmm_last_error(), words), "message '%s' lacks '%s'", tmm_last_error(), words);
    cr_assert(strstr(tmm_last_error(), "bad.json"), "message '%s' does not name the file", tmm_last_error());
}

Test(tokenizer, bad_json_refused)
{
    expect_refused("{\"model\":", "not valid JSON");
    expect_refused("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]},\"decoder\":{\"type\":\"ByteLevel\"}}", "Unigram");
    expect_refused("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}},\"decoder\":{\"type\":\"ByteLevel\"}}", "WordPiece");
    expect_refused("{\"normalizer\":{\"type\":\"NFKD\"},\"model\":{\"type\":\"BPE\"}}", "normalizer 'NFKD' is not supported");
    char *j = tiny_json("{\"type\":\"Whitespace\"}", "", "", "");
    expect_refused(j, "Whitespace");
    free(j);
    j = tiny_json(BL, "\"ab\":256", "\"aq\"", "");
    expect_refused(j, "not two tokens");
    free(j);
    j = tiny_json(BL, "\"ab\":256", "[\"a\",\"zz\"]", "");
    expect_refused(j, "'zz', which is not in the vocabulary");
    free(j);
    j = tiny_json(BL, "\"ab\":256", "[\"a\",\"c\"]", "");
    expect_refused(j, "not in the vocabulary");
    free(j);
    j = tiny_json(BL, "\"ab\":256,\"ab2\":256", "", "");
    expect_refused(j, "gives id 256 to both");
    free(j);
    j = tiny_json(BL, "\"ab\":99999999", "", "");
    expect_refused(j, "out of range");
    free(j);
    j = tiny_json(BL, "\"ab\":256,\"ab\":257", "", "");
    expect_refused(j, "twice");
    free(j);
    j = tiny_json(BL, "\"ab\":256", "[\"a\",\"b\"],[\"a\",\"b\"]", "");
    expect_refused(j, "repeats merge");
    free(j);
    j = tiny_json(BL, "", "", "{\"id\":300,\"content\":\"x\"},{\"id\":300,\"content\":\"y\"}");
    expect_refused(j, "share an id");
    free(j);
    j = tiny_json(BL, "\"\\u4e00\":256", "", "");
    expect_refused(j, "stand for no byte");
    free(j);
    j = tiny_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                  "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\"}]}", "", "", "");
    expect_refused(j, "does not compile");
    free(j);
    j = tiny_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
                  "\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\"}]}", "", "", "");
    expect_refused(j, "Removed");
    free(j);
}

/* ---- training ----------------------------------------------------------------- */

#include "text/bpe_train.h"

Test(tokenizer, train_deterministic_and_exact)
{
    const char *text = "the cat sat on the mat; the cat's hat is that hat. 1234 1234 ümlaut ümlaut\n\n  x";
    tmm_tokenizer *t[2];
    for (int k = 0; k < 2; k++) {
        tmm_bpe_counter *c;
        cr_assert_eq(tmm_bpe_counter_new(1u << 12, &c), TMM_OK);
        for (int r = 0; r < 3; r++)
            cr_assert_eq(tmm_bpe_count(c, text, strlen(text)), TMM_OK);
        cr_assert_eq(tmm_bpe_train(c, 300, NULL, NULL, &t[k]), TMM_OK, "%s", tmm_last_error());
        tmm_bpe_counter_free(c);
    }
    cr_assert_eq(tmm_tokenizer_fingerprint(t[0]), tmm_tokenizer_fingerprint(t[1]));
    cr_assert_eq(tmm_tokenizer_eot(t[0]), 256);
    cr_assert(tmm_tokenizer_vocab(t[0]) > 270 && tmm_tokenizer_vocab(t[0]) <= 300);
    /* the most frequent pair is merged first: "Ġ" + "t" or "t" + "h" (each 3 x 6 = 18 times) */
    const char *first;
    size_t n = tmm_tokenizer_token_bytes(t[0], 257, &first);
    cr_assert(n == 2, "first merge has %zu bytes", n);
    /* " the" becomes one token, and the text round-trips */
    tmm_tokens ids = encode(t[0], NULL, " the", 4, false);
    cr_assert_eq(ids.count, 1);
    free(ids.ids);
    assert_round_trip(t[0], NULL, text, strlen(text));
    char *json;
    size_t len;
    cr_assert_eq(tmm_tokenizer_to_json(t[0], &json, &len), TMM_OK);
    tmm_tokenizer *u;
    cr_assert_eq(tmm_tokenizer_parse(json, len, "trained", &u), TMM_OK, "%s", tmm_last_error());
    cr_assert_eq(tmm_tokenizer_fingerprint(u), tmm_tokenizer_fingerprint(t[0]));
    free(json);
    tmm_tokenizer_free(u), tmm_tokenizer_free(t[0]), tmm_tokenizer_free(t[1]);
}

Test(tokenizer, counter_prunes_to_bound)
{
    tmm_bpe_counter *c;
    cr_assert_eq(tmm_bpe_counter_new(1024, &c), TMM_OK);
    char w[32];
    for (int i = 0; i < 5000; i++) {
        int v = i % 100 == 0 ? 7 : i;
        int n = snprintf(w, sizeof w, " w%c%c%c", 'a' + v % 26, 'a' + v / 26 % 26, 'a' + v / 676);
        cr_assert_eq(tmm_bpe_count(c, w, (size_t)n), TMM_OK);
        cr_assert_leq(tmm_bpe_counter_distinct(c), 1024);
    }
    cr_assert_eq(tmm_bpe_counter_total(c), 5000);
    tmm_bpe_counter_free(c);
}
