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

/* ---- SentencePiece-style BPE, normalizers, decoders, templates (issue 35) ------------ */

#include "text/tokenizer_impl.h"

/* A char-level tokenizer.json: <unk> <s> </s> at 0..2 (added, special), the
 * 256 "<0xHH>" byte tokens at 3..258, then extra vocabulary from 259. */
static char *sp_json(const char *normalizer, const char *pre, const char *post, const char *decoder,
                     const char *model_opts, const char *extra_vocab, const char *merges, const char *more_added)
{
    size_t cap = 1 << 17;
    char *j = malloc(cap);
    size_t k = (size_t)snprintf(j, cap, "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},"
                                        "{\"id\":1,\"content\":\"<s>\",\"special\":true},{\"id\":2,\"content\":\"</s>\","
                                        "\"special\":true}%s%s],\"normalizer\":%s,\"pre_tokenizer\":%s,"
                                        "\"post_processor\":%s,\"decoder\":%s,\"model\":{\"type\":\"BPE\"%s,\"vocab\":{"
                                        "\"<unk>\":0,\"<s>\":1,\"</s>\":2",
                                more_added[0] ? "," : "", more_added, normalizer, pre, post, decoder, model_opts);
    for (int b = 0; b < 256; b++)
        k += (size_t)snprintf(j + k, cap - k, ",\"<0x%02X>\":%d", b, 3 + b);
    snprintf(j + k, cap - k, "%s%s},\"merges\":[%s]}}", *extra_vocab ? "," : "", extra_vocab, merges);
    return j;
}

#define LEGACY_NORM "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"}," \
                    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]}"
#define LEGACY_DEC "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"}," \
                   "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":" \
                   "\" \",\"start\":1,\"stop\":0}]}"
#define BOS_TEMPLATE "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}," \
                     "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}," \
                     "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}]," \
                     "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}}"
#define SP_OPTS ",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true"
/* "▁" 259, "a" 260, "b" 261, "▁a" 262, "ab" 263, "▁ab" 264 */
#define SP_VOCAB "\"\xe2\x96\x81\":259,\"a\":260,\"b\":261,\"\xe2\x96\x81" "a\":262,\"ab\":263,\"\xe2\x96\x81" "ab\":264"
#define SP_MERGES "\"\xe2\x96\x81 a\",\"a b\",\"\xe2\x96\x81" "a b\""

static void expect_decoded(const tmm_tokenizer *t, const uint32_t *ids, size_t n, bool special, const char *want)
{
    tmm_bytes out = { 0 };
    cr_assert_eq(tmm_tokenizer_decode(t, ids, n, special, &out), TMM_OK, "%s", tmm_last_error());
    cr_assert(out.length == strlen(want) && memcmp(out.data, want, out.length) == 0, "decoded '%.*s', want '%s'",
              (int)out.length, out.data ? out.data : "", want);
    free(out.data);
}

Test(tokenizer, sentencepiece_legacy_llama)
{
    tmm_tokenizer *t = parse_ok(sp_json(LEGACY_NORM, "null", BOS_TEMPLATE, LEGACY_DEC, SP_OPTS, SP_VOCAB, SP_MERGES, ""));
    cr_assert_str_eq(tmm_tokenizer_kind(t), "bpe");
    cr_assert_eq(tmm_tokenizer_eot(t), 2, "</s> ends the text");
    /* "ab ab" -> "▁ab▁ab": (▁ a) twice, then (▁a b) twice */
    uint32_t a[] = { 264, 264 };
    expect_ids(t, "ab ab", false, a, 2);
    /* an unknown character falls back to its bytes */
    uint32_t b[] = { 262, 3 + 0x0A, 259, 3 + 0xC3, 3 + 0x9F };
    expect_ids(t, "a\n \xc3\x9f", false, b, 5);
    /* special tokens split the text, and each piece gets its own "▁" (Prepend) */
    uint32_t c[] = { 1, 264, 2, 262 };
    expect_ids(t, "<s>ab</s>a", true, c, 4);
    expect_decoded(t, a, 2, false, "ab ab");
    expect_decoded(t, b, 5, false, "a\n \xc3\x9f");
    expect_decoded(t, c, 4, true, "<s> ab</s> a");
    expect_decoded(t, c, 4, false, "ab a");
    /* the template: <s> first */
    tmm_tokens ids = encode(t, NULL, "ab", 2, true);
    cr_assert_eq(tmm_tokenizer_add_special(t, &ids, 0), TMM_OK);
    cr_assert_eq(ids.count, 2);
    cr_assert_eq(ids.ids[0], 1);
    cr_assert_eq(ids.ids[1], 264);
    free(ids.ids);
    /* a token alone, as in the middle of a text */
    const char *p;
    size_t n = tmm_tokenizer_token_bytes(t, 264, &p);
    cr_assert(n == 3 && memcmp(p, " ab", 3) == 0);
    n = tmm_tokenizer_token_bytes(t, 3 + 0x41, &p);
    cr_assert(n == 1 && p[0] == 'A');
    /* save and load: same fingerprint, same ids */
    char *json;
    size_t len;
    cr_assert_eq(tmm_tokenizer_to_json(t, &json, &len), TMM_OK);
    tmm_tokenizer *u = NULL;
    cr_assert_eq(tmm_tokenizer_parse(json, len, "saved", &u), TMM_OK, "%s", tmm_last_error());
    cr_assert_eq(tmm_tokenizer_fingerprint(t), tmm_tokenizer_fingerprint(u));
    expect_ids(u, "<s>ab</s>a", true, c, 4);
    expect_decoded(u, c, 4, false, "ab a");
    free(json);
    tmm_tokenizer_free(t), tmm_tokenizer_free(u);
}

Test(tokenizer, unk_token_and_fuse_unk)
{
    /* no byte fallback: unknown characters become <unk>, fused or not; without unk_token, nothing */
    tmm_tokenizer *t = parse_ok(sp_json("null", "null", "null", "null", ",\"unk_token\":\"<unk>\",\"fuse_unk\":true",
                                        SP_VOCAB, SP_MERGES, ""));
    uint32_t a[] = { 0, 263, 0 };
    expect_ids(t, "xyabz", false, a, 3);
    tmm_tokenizer_free(t);
    t = parse_ok(sp_json("null", "null", "null", "null", ",\"unk_token\":\"<unk>\"", SP_VOCAB, SP_MERGES, ""));
    uint32_t b[] = { 0, 0, 263, 0 };
    expect_ids(t, "xyabz", false, b, 4);
    tmm_tokenizer_free(t);
    t = parse_ok(sp_json("null", "null", "null", "null", "", SP_VOCAB, SP_MERGES, ""));
    uint32_t c[] = { 263 };
    expect_ids(t, "xyabz", false, c, 1);
    /* no decoder: Hugging Face joins the tokens with spaces */
    expect_decoded(t, a, 3, true, "<unk> ab <unk>");
    tmm_tokenizer_free(t);
    /* an unk_token that is not in the vocabulary fails when it is needed, as in Hugging Face */
    t = parse_ok(sp_json("null", "null", "null", "null", ",\"unk_token\":\"<zz>\"", SP_VOCAB, SP_MERGES, ""));
    expect_ids(t, "ab", false, c, 1);
    tmm_tokens ids = { 0 };
    cr_assert_neq(tmm_tokenizer_encode(t, NULL, "x", 1, false, &ids), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "<zz>"), "%s", tmm_last_error());
    tmm_tokenizer_free(t);
}

Test(tokenizer, byte_fallback_keeps_a_pending_unk_after)
{
    /* Hugging Face's merge_word: a character that falls back to bytes does not flush a pending <unk> */
    char *j = sp_json("null", "null", "null", "null", ",\"unk_token\":\"<unk>\",\"byte_fallback\":true", SP_VOCAB,
                      SP_MERGES, "");
    char *cut = strstr(j, ",\"<0x79>\":124"); /* no token for 'y' */
    cr_assert(cut);
    memmove(cut, cut + strlen(",\"<0x79>\":124"), strlen(cut + strlen(",\"<0x79>\":124")) + 1);
    tmm_tokenizer *t = parse_ok(j);
    uint32_t a[] = { 3 + 'x', 0, 260 };
    expect_ids(t, "yxa", false, a, 3);
    tmm_tokenizer_free(t);
}

Test(tokenizer, byte_level_vocabulary_missing_bytes)
{
    /* as Hugging Face: a byte without its token is dropped, or is unk_token */
    char *j = tiny_json(BL, "", "", "");
    char *cut = strstr(j, ",\"a\":97");
    cr_assert(cut);
    memmove(cut, cut + 7, strlen(cut + 7) + 1);
    tmm_tokenizer *t = parse_ok(j);
    uint32_t a[] = { 'c', 'b' };
    expect_ids(t, "cab", false, a, 2);
    tmm_tokenizer_free(t);
    j = tiny_json(BL, "", "", "");
    cut = strstr(j, ",\"a\":97");
    memmove(cut, cut + 7, strlen(cut + 7) + 1);
    cut = strstr(j, "\"model\":{\"type\":\"BPE\"");
    char *k = malloc(strlen(j) + 64);
    size_t at = (size_t)(cut - j) + strlen("\"model\":{\"type\":\"BPE\"");
    memcpy(k, j, at);
    strcpy(k + at, ",\"unk_token\":\"z\"");
    strcat(k, j + at);
    free(j);
    t = parse_ok(k);
    uint32_t b[] = { 'c', 'z', 'b', 'z', 'z' };
    expect_ids(t, "cabaa", false, b, 5);
    tmm_tokenizer_free(t);
}

#define MS_VOCAB "\"\xe2\x96\x81\":259,\"a\":260,\"b\":261,\"\xe2\x96\x81" "a\":262,\"\xe2\x96\x81" "b\":263,\"\xe2\x96\x81\xe2\x96\x81\":264"
#define MS_MERGES "\"\xe2\x96\x81 a\",\"\xe2\x96\x81 b\",\"\xe2\x96\x81 \xe2\x96\x81\""
#define MS(scheme, split) "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"" scheme "\",\"split\":" split "}"

Test(tokenizer, metaspace)
{
    tmm_tokenizer *t = parse_ok(sp_json("null", MS("always", "true"), "null", MS("always", "true"), SP_OPTS, MS_VOCAB,
                                        MS_MERGES, ""));
    uint32_t a[] = { 262, 263 };
    expect_ids(t, "a b", false, a, 2);
    /* split: "▁▁▁a" is "▁", "▁", "▁a" */
    uint32_t b[] = { 259, 259, 262 };
    expect_ids(t, "   a", false, b, 3);
    /* always: every piece between special tokens gets its "▁" */
    uint32_t c[] = { 262, 1, 262 };
    expect_ids(t, "a<s>a", true, c, 3);
    /* the decoder drops the first token's "▁" */
    expect_decoded(t, a, 2, false, "a b");
    /* Hugging Face's Metaspace decoder drops every "▁" of the first token */
    expect_decoded(t, b, 3, false, "  a");
    uint32_t b2[] = { 264, 262 };
    expect_decoded(t, b2, 2, false, " a");
    tmm_tokenizer_free(t);
    /* without split "▁▁▁a" is one word: (▁ a), then (▁ ▁) */
    t = parse_ok(sp_json("null", MS("always", "false"), "null", "null", SP_OPTS, MS_VOCAB, MS_MERGES, ""));
    uint32_t d[] = { 264, 262 };
    expect_ids(t, "   a", false, d, 2);
    tmm_tokenizer_free(t);
    /* first: only the text's first piece gets it */
    t = parse_ok(sp_json("null", MS("first", "true"), "null", "null", SP_OPTS, MS_VOCAB, MS_MERGES, ""));
    uint32_t e[] = { 262, 1, 260 };
    expect_ids(t, "a<s>a", true, e, 3);
    uint32_t f[] = { 1, 260 };
    expect_ids(t, "<s>a", true, f, 2);
    tmm_tokenizer_free(t);
    t = parse_ok(sp_json("null", MS("never", "true"), "null", "null", SP_OPTS, MS_VOCAB, MS_MERGES, ""));
    uint32_t g[] = { 260, 263 };
    expect_ids(t, "a b", false, g, 2);
    tmm_tokenizer_free(t);
}

Test(tokenizer, added_token_options)
{
    tmm_tokenizer *t = parse_ok(tiny_json(BL, "", "",
                                          "{\"id\":300,\"content\":\"<x>\",\"lstrip\":true,\"special\":true},"
                                          "{\"id\":301,\"content\":\"<y>\",\"rstrip\":true,\"special\":true},"
                                          "{\"id\":302,\"content\":\"ab\",\"single_word\":true,\"normalized\":false}"));
    uint32_t a[] = { 'q', 300, 'b' };
    expect_ids(t, "q \t <x>b", true, a, 3);
    uint32_t b[] = { 301, 'b' };
    expect_ids(t, "<y>  \n b", true, b, 2);
    /* single_word: not inside a word ("cab", "abc"), but where no word character touches it */
    uint32_t c[] = { 302, ' ', 'c', 'a', 'b', ' ', 'a', 'b', 'c', ' ', 302, '!' };
    expect_ids(t, "ab cab abc ab!", true, c, 12);
    /* lstrip takes spaces back to the previous token, not past it */
    uint32_t d[] = { 301, 300 };
    expect_ids(t, "<y>  <x>", true, d, 2);
    tmm_tokenizer_free(t);
}

Test(tokenizer, normalized_added_tokens_match_the_normalized_text)
{
    /* a Replace normalizer x -> y: the normalized token "x" is found as "y" after normalizing; the
     * token "q" (normalized false) before */
    const char *norm = "{\"type\":\"Replace\",\"pattern\":{\"String\":\"x\"},\"content\":\"y\"}";
    tmm_tokenizer *t = parse_ok(sp_json(norm, "null", "null", "null", SP_OPTS, "\"y\":259", "",
                                        "{\"id\":300,\"content\":\"x\",\"normalized\":true},"
                                        "{\"id\":301,\"content\":\"q\",\"normalized\":false}"));
    uint32_t a[] = { 300, 301, 300, 3 + 'z' };
    expect_ids(t, "xqyz", false, a, 4);
    tmm_tokenizer_free(t);
}

static void expect_nfc(const char *in, const char *want)
{
    tmm_bytes out = { 0 };
    cr_assert_eq(tmm_tok_nfc(in, strlen(in), &out), TMM_OK);
    cr_assert(out.length == strlen(want) && memcmp(out.data, want, out.length) == 0, "NFC of '%s' is '%.*s'", in,
              (int)out.length, out.data);
    free(out.data);
}

Test(tokenizer, nfc)
{
    expect_nfc("e\xcc\x81", "\xc3\xa9");                         /* e + acute */
    expect_nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", "\xea\xb0\x81"); /* Hangul jamo */
    expect_nfc("\xea\xb0\x80\xe1\x86\xa8", "\xea\xb0\x81");       /* LV + T */
    expect_nfc("\xe2\x84\xab", "\xc3\x85");                       /* Angstrom sign */
    expect_nfc("a\xcc\xa3\xcc\x82", "\xe1\xba\xad");              /* a, dot below, circumflex */
    expect_nfc("a\xcc\x82\xcc\xa3", "\xe1\xba\xad");              /* the other order */
    expect_nfc("\xcd\x84", "\xcc\x88\xcc\x81");                   /* a singleton that does not compose back */
    expect_nfc("q\xcc\x87\xcc\xa3", "q\xcc\xa3\xcc\x87");         /* reordered, nothing to compose */
    expect_nfc("\xe1\xb8\x8b\xcc\xa3", "\xe1\xb8\x8d\xcc\x87");   /* d dot above + dot below */
    expect_nfc("ab\xff" "e\xcc\x81" "\xc3", "ab\xff\xc3\xa9\xc3");  /* invalid bytes pass */
    expect_nfc("plain ASCII", "plain ASCII");
}

Test(tokenizer, normalizers_and_decoders)
{
    /* NFC then a Regex Replace; decoders Replace, ByteFallback, Fuse, Strip at both ends */
    const char *norm = "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Replace\","
                       "\"pattern\":{\"Regex\":\"\\\\s+\"},\"content\":\"_\"}]}";
    const char *dec = "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"_\"},"
                      "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\","
                      "\"content\":\" \",\"start\":1,\"stop\":1}]}";
    tmm_tokenizer *t = parse_ok(sp_json(norm, "null", "null", dec, SP_OPTS, "\"_\":259,\"\xc3\xa9\":260,\"a\":261",
                                        "", ""));
    uint32_t a[] = { 261, 259, 260, 259, 261 };
    expect_ids(t, "a \t e\xcc\x81\n\na", false, a, 5);
    uint32_t b[] = { 259, 261, 3 + 0x41, 3 + 0x42, 259, 259 };
    expect_decoded(t, b, 6, false, "aAB ");
    tmm_tokenizer_free(t);
}

Test(tokenizer, template_and_part_refusals)
{
    char *j = sp_json("null", "null", "{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"B\","
                      "\"type_id\":0}}],\"pair\":[],\"special_tokens\":{}}", "null", "", "", "", "");
    expect_refused(j, "'single' names sequence B");
    free(j);
    j = sp_json("null", "null", "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<cls>\","
                "\"type_id\":0}}],\"pair\":[],\"special_tokens\":{}}", "null", "", "", "", "");
    expect_refused(j, "'<cls>', which is not in its special_tokens");
    free(j);
    j = sp_json("null", "null", "{\"type\":\"TemplateProcessing\",\"single\":[],\"pair\":[],\"special_tokens\":{"
                "\"<s>\":{\"id\":\"<s>\",\"ids\":[999],\"tokens\":[\"<s>\"]}}}", "null", "", "", "", "");
    expect_refused(j, "id 999, past the vocabulary");
    free(j);
    j = sp_json("null", "null", "{\"type\":\"BertProcessing\"}", "null", "", "", "", "");
    expect_refused(j, "post_processor 'BertProcessing' is not supported");
    free(j);
    j = sp_json("null", "{\"type\":\"Sequence\",\"pretokenizers\":[" MS("always", "true") ",{\"type\":\"Split\","
                "\"pattern\":{\"String\":\"a\"},\"behavior\":\"Isolated\"}]}", "null", "null", "", "", "", "");
    expect_refused(j, "Metaspace pre-tokenizer before other steps");
    free(j);
    j = sp_json("null", "{\"type\":\"Metaspace\",\"replacement\":\"ab\"}", "null", "null", "", "", "", "");
    expect_refused(j, "must be one character");
    free(j);
    j = sp_json("null", "{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"sometimes\"}", "null",
                "null", "", "", "", "");
    expect_refused(j, "prepend_scheme must be");
    free(j);
    j = sp_json("null", "null", "null", "{\"type\":\"ByteLevel\"}", "", "", "", "");
    expect_refused(j, "the ByteLevel decoder needs the ByteLevel pre-tokenizer");
    free(j);
    j = sp_json("null", "null", "null", "{\"type\":\"CTC\"}", "", "", "", "");
    expect_refused(j, "decoder 'CTC' is not supported");
    free(j);
    j = sp_json("{\"type\":\"Lowercase\"}", "null", "null", "null", "", "", "", "");
    expect_refused(j, "normalizer 'Lowercase' is not supported");
    free(j);
    j = sp_json("{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(\"},\"content\":\"\"}", "null", "null", "null", "",
                "", "", "");
    expect_refused(j, "does not compile");
    free(j);
    j = tiny_json(BL, "", "", "");
    char *at = strstr(j, "\"decoder\":{\"type\":\"ByteLevel\"}");
    memcpy(at, "\"decoder\":{\"type\":\"Fuse\"     }", strlen("\"decoder\":{\"type\":\"ByteLevel\"}"));
    expect_refused(j, "needs the ByteLevel decoder alone");
    free(j);
}

/* ---- tiktoken --------------------------------------------------------------------- */

/* tiktoken's own algorithm, the definition: a piece that is a token is that token; else
 * merge the adjacent pair whose concatenation has the lowest rank, leftmost first. */
typedef struct naive_vocab {
    char tok[600][16];
    size_t len[600];
    uint32_t n;
} naive_vocab;

static uint32_t naive_rank(const naive_vocab *v, const char *p, size_t n)
{
    for (uint32_t r = 0; r < v->n; r++)
        if (v->len[r] == n && memcmp(v->tok[r], p, n) == 0)
            return r;
    return UINT32_MAX;
}

static size_t naive_encode(const naive_vocab *v, const char *w, size_t n, uint32_t *out)
{
    uint32_t whole = naive_rank(v, w, n);
    if (whole != UINT32_MAX) {
        out[0] = whole;
        return 1;
    }
    size_t start[64], m = n;
    for (size_t i = 0; i <= n; i++)
        start[i] = i;
    for (;;) {
        uint32_t best = UINT32_MAX;
        size_t at = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            uint32_t r = naive_rank(v, w + start[i], start[i + 2] - start[i]);
            if (r < best)
                best = r, at = i;
        }
        if (best == UINT32_MAX)
            break;
        memmove(start + at + 1, start + at + 2, (m - at - 1) * sizeof *start);
        m--;
    }
    for (size_t i = 0; i < m; i++)
        out[i] = naive_rank(v, w + start[i], start[i + 1] - start[i]);
    return m;
}

static void b64(const unsigned char *p, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[k++] = a[v >> 18], out[k++] = a[(v >> 12) & 63];
        out[k++] = i + 1 < n ? a[(v >> 6) & 63] : '=';
        out[k++] = i + 2 < n ? a[v & 63] : '=';
    }
    out[k] = '\0';
}

Test(tokenizer, tiktoken_merges_equal_tiktoken)
{
    /* random vocabularies over "abcd" (tokens made of earlier tokens, as BPE training makes them, and
     * some that no merge reaches), random words: tmm's ids equal tiktoken's algorithm */
    uint64_t s = 99;
    for (int round = 0; round < 6; round++) {
        naive_vocab *v = calloc(1, sizeof *v);
        for (uint32_t b = 0; b < 256; b++)
            v->tok[b][0] = (char)b, v->len[b] = 1;
        v->n = 256;
        while (v->n < 600) {
            char t[16];
            size_t n = 0;
            if (lcg(&s) % 5 == 0) { /* any string */
                n = 2 + lcg(&s) % 6;
                for (size_t i = 0; i < n; i++)
                    t[i] = "abcd"[lcg(&s) % 4];
            } else { /* two earlier tokens */
                uint32_t x = v->n > 256 && lcg(&s) % 2 ? 256 + (uint32_t)(lcg(&s) % (v->n - 256)) : 'a' + lcg(&s) % 4;
                uint32_t y = v->n > 256 && lcg(&s) % 2 ? 256 + (uint32_t)(lcg(&s) % (v->n - 256)) : 'a' + lcg(&s) % 4;
                if (v->len[x] + v->len[y] > 15)
                    continue;
                memcpy(t, v->tok[x], v->len[x]);
                memcpy(t + v->len[x], v->tok[y], v->len[y]);
                n = v->len[x] + v->len[y];
            }
            if (naive_rank(v, t, n) != UINT32_MAX)
                continue;
            memcpy(v->tok[v->n], t, n);
            v->len[v->n++] = n;
        }
        tmm_bytes file = { 0 };
        for (uint32_t r = 0; r < v->n; r++) {
            char line[64], enc[32];
            b64((const unsigned char *)v->tok[r], v->len[r], enc);
            int k = snprintf(line, sizeof line, "%s %u\n", enc, r);
            cr_assert_eq(tmm_bytes_append(&file, line, (size_t)k), TMM_OK);
        }
        tmm_tokenizer *t = NULL;
        cr_assert_eq(tmm_tok_tiktoken_parse(file.data, file.length, "random.tiktoken", "cl100k_base", false, &t),
                     TMM_OK, "%s", tmm_last_error());
        tmm_tok_cache *c = tmm_tok_cache_new();
        for (int w = 0; w < 3000; w++) {
            char word[40];
            size_t n = 1 + lcg(&s) % 30;
            for (size_t i = 0; i < n; i++)
                word[i] = "abcd"[lcg(&s) % 4];
            uint32_t want[64];
            size_t m = naive_encode(v, word, n, want);
            tmm_tokens got = encode(t, c, word, n, false);
            cr_assert_eq(got.count, m, "round %d '%.*s': %zu ids, tiktoken %zu", round, (int)n, word, got.count, m);
            for (size_t i = 0; i < m; i++)
                cr_assert_eq(got.ids[i], want[i], "round %d '%.*s': id %zu", round, (int)n, word, i);
            free(got.ids);
        }
        /* what convert writes loads back to the same */
        char *json;
        size_t len;
        tmm_tokenizer *u = NULL;
        cr_assert_eq(tmm_tokenizer_to_json(t, &json, &len), TMM_OK);
        cr_assert_eq(tmm_tokenizer_parse(json, len, "converted", &u), TMM_OK, "%s", tmm_last_error());
        cr_assert_eq(tmm_tokenizer_fingerprint(u), tmm_tokenizer_fingerprint(t));
        free(json);
        tmm_tokenizer_free(u);
        tmm_tok_cache_free(c);
        tmm_tokenizer_free(t);
        free(file.data);
        free(v);
    }
}

Test(tokenizer, tiktoken_refusals)
{
    tmm_tokenizer *t = NULL;
    const char *bad[][2] = {
        { "YQ== 0\nYg== x\n", ":2: the rank is not" },
        { "YQ 0\n", ":1: not \"BASE64 RANK\"" },
        { "YQ== 0\nYQ== 1\n", "are the same token" },
        { "YQ== 0\nYg== 0\n", "rank 0 is given twice" },
        { "YQ== 0\n", "no rank for the byte 0x00" },
        { "YQ== 99999999\n", "the rank is not a whole number" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tmm_status st = tmm_tok_tiktoken_parse(bad[i][0], strlen(bad[i][0]), "bad.tiktoken", "r50k_base", false, &t);
        cr_assert_neq(st, TMM_OK, "accepted %s", bad[i][0]);
        cr_assert(strstr(tmm_last_error(), bad[i][1]), "'%s' lacks '%s'", tmm_last_error(), bad[i][1]);
        cr_assert_null(t);
    }
    cr_assert_neq(tmm_tok_tiktoken_parse("YQ== 0\n", 7, "x.tiktoken", "cl100k_base", true, &t), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "1 ranks, but cl100k_base has 100256"), "%s", tmm_last_error());
    cr_assert_neq(tmm_tok_tiktoken_parse("YQ== 0\n", 7, "x.tiktoken", NULL, true, &t), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "neither a tokenizer.json nor a .tiktoken file"), "%s", tmm_last_error());
    cr_assert_neq(tmm_tok_tiktoken_parse("YQ== 0\n", 7, "x.tiktoken", "gpt5", true, &t), TMM_OK);
    cr_assert(strstr(tmm_last_error(), "unknown tiktoken encoding 'gpt5'"), "%s", tmm_last_error());
    cr_assert_str_eq(tmm_tok_tiktoken_name("/a/b/o200k_base.tiktoken"), "o200k_base");
    cr_assert_null(tmm_tok_tiktoken_name("/a/o200k_base_x.tiktoken"));
}
