/* tmm serve's library (src/serve): one slot of the generator restarted while
 * the others go on (bit-identical logits to each sequence alone), the
 * scheduler's determinism (eight seeded jobs at once against each alone) and
 * cancellation, and the pure parts: request parsing and its errors, the
 * chat template, stop sequences and UTF-8 in the returned text, the JSON
 * writer, log-probabilities and the metrics' text. The HTTP server end to
 * end: tests/serve_test.sh. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/generator.h"
#include "harness.h"
#include "model/rng.h"
#include "serve/serve_jw.h"
#include "serve/serve_metrics.h"
#include "serve/serve_request.h"
#include "serve/serve_sched.h"
#include "serve/serve_text.h"

#define BYTES_CFG { .vocab = 257, .d_model = 12, .n_ctx = 48, .n_layers = 2, .heads = 2, .expansion = 2, \
                    .kernel = 1, .expanded = true, .seed = 5 }

/* ---- the generator's restart hook ------------------------------------------------------ */

/* The logits of a sequence of `len` tokens fed one per step into slot 0 of
 * a fresh generator of `batch` slots (the others fed token 0): [len, V]. */
static float *alone(const char *path, uint32_t batch, const uint32_t *seq, uint32_t len, uint32_t V)
{
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, path, batch, TMM_TOEPLITZ_AUTO, &g));
    bool all[4] = { true, true, true, true };
    H_OK(tmm_gen_restart(g, all));
    float *out = h_floats((size_t)len * V), *logits = h_floats((size_t)batch * V);
    uint32_t tokens[4] = { 0 };
    for (uint32_t t = 0; t < len; t++) {
        tokens[0] = seq[t];
        H_OK(tmm_generator_step(g, tokens, logits));
        memcpy(out + (size_t)t * V, logits, V * sizeof *out);
    }
    free(logits);
    tmm_generator_destroy(g);
    return out;
}

H_TEST(serve, restart_one_slot_leaves_the_others)
{
    const tmm_model_config c = BYTES_CFG;
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "bytes", 1);
    const uint32_t V = c.vocab, B = 3, L = 20;
    uint32_t seq[3][20];
    for (uint32_t s = 0; s < 3; s++)
        for (uint32_t t = 0; t < L; t++)
            seq[s][t] = (uint32_t)(tmm_rng_bits(40 + s, t) % 256);
    float *ref[3];
    for (uint32_t s = 0; s < 3; s++)
        ref[s] = alone(f.path, B, seq[s], L, V);
    /* slot 0 runs sequence 0 from step 0; slot 1 sequence 1 from step 0, and
     * from step 7 (restarted) sequence 2; slot 2 starts sequence 2 at step 3 */
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, f.path, B, TMM_TOEPLITZ_AUTO, &g));
    float *logits = h_floats((size_t)B * V);
    bool restart[3] = { true, true, true };
    H_OK(tmm_gen_restart(g, restart));
    uint32_t start[3] = { 0, 0, 3 }, which[3] = { 0, 1, 2 };
    for (uint32_t step = 0; step < 7 + L; step++) {
        memset(restart, 0, sizeof restart);
        if (step == 7)
            restart[1] = true, start[1] = 7, which[1] = 2;
        if (step == 3)
            restart[2] = true;
        H_OK(tmm_gen_restart(g, restart));
        uint32_t tokens[3];
        for (uint32_t b = 0; b < B; b++) {
            const uint32_t t = step - start[b];
            tokens[b] = step >= start[b] && t < L ? seq[which[b]][t] : 0;
            if (step >= start[b] && t >= L)
                restart[b] = true; /* done: kept below the context's end */
        }
        H_OK(tmm_gen_restart(g, restart));
        H_OK(tmm_generator_step(g, tokens, logits));
        for (uint32_t b = 0; b < B; b++) {
            const uint32_t t = step - start[b];
            if (step >= start[b] && t < L)
                cr_assert(memcmp(logits + (size_t)b * V, ref[which[b]] + (size_t)t * V, V * sizeof *logits) == 0,
                          "slot %u, position %u of sequence %u: not the logits of the sequence alone", b, t, which[b]);
        }
    }
    tmm_generator_destroy(g);
    for (uint32_t s = 0; s < 3; s++)
        free(ref[s]);
    free(logits);
    h_checkpoint_drop(&f);
}

/* ---- the scheduler ------------------------------------------------------------------------ */

static serve_job *job_of(uint32_t prompt_seed, uint64_t seed, uint32_t max_tokens, bool logprobs)
{
    serve_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    j->n_seqs = 1;
    j->seqs = calloc(1, sizeof *j->seqs);
    serve_seq *q = &j->seqs[0];
    q->prompt_len = 3 + prompt_seed % 5;
    q->prompt = malloc(q->prompt_len * sizeof *q->prompt);
    for (uint32_t t = 0; t < q->prompt_len; t++)
        q->prompt[t] = 'a' + (uint32_t)(tmm_rng_bits(prompt_seed, t) % 26);
    q->max_tokens = max_tokens;
    q->sampler = (tmm_sampler){ .temperature = 1.0f, .top_p = 1.0f, .seed = seed };
    j->logprobs = logprobs, j->top_logprobs = logprobs ? 3 : 0;
    H_OK(serve_job_init(j));
    return j;
}

static void wait_done(serve_sched *s, serve_job *j)
{
    uint64_t seen = 0;
    for (int i = 0; i < 2400 && !serve_sched_wait(s, j, &seen, 50); i++)
        ;
    cr_assert(j->live == 0, "the job did not finish");
    cr_assert(!j->error[0], "%s", j->error);
}

static bool same_output(const serve_seq *a, const serve_seq *b)
{
    if (a->out.length != b->out.length || a->completion_tokens != b->completion_tokens ||
        a->n_entries != b->n_entries || (a->out.length && memcmp(a->out.data, b->out.data, a->out.length)))
        return false;
    for (uint32_t i = 0; i < a->n_entries; i++) /* the echoed prompt's first token has no log-probability (NAN) */
        if (a->entries[i].token != b->entries[i].token ||
            memcmp(&a->entries[i].logprob, &b->entries[i].logprob, sizeof(float)) != 0)
            return false;
    return true;
}

/* Eight seeded jobs (half of them echoing their prompts' log-probabilities)
 * through 4 slots at once, each then alone: the same tokens and entries. */
static void seeded_together_as_alone(tmm_model_config c)
{
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "bytes", 1);
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, f.path, 4, TMM_TOEPLITZ_AUTO, &g));
    serve_metrics m;
    serve_metrics_init(&m, 4);
    serve_sched *s;
    H_OK(serve_sched_create(g, &m, 16, &s));
    serve_job *together[8], *single[8];
    for (uint32_t i = 0; i < 8; i++) /* 4 decode, 4 wait, in one queue */
    {
        together[i] = job_of(i, 100 + i, 12 + 3 * i, true);
        together[i]->echo = i % 2;
        cr_assert_eq(serve_sched_submit(s, together[i]), SERVE_SUBMITTED);
    }
    for (uint32_t i = 0; i < 8; i++)
        wait_done(s, together[i]);
    for (uint32_t i = 0; i < 8; i++) {
        single[i] = job_of(i, 100 + i, 12 + 3 * i, true);
        single[i]->echo = i % 2;
        cr_assert_eq(serve_sched_submit(s, single[i]), SERVE_SUBMITTED);
        wait_done(s, single[i]);
        const serve_seq *a = &together[i]->seqs[0], *b = &single[i]->seqs[0];
        cr_assert(a->completion_tokens > 0 && a->n_entries == a->completion_tokens + (i % 2 ? a->prompt_len : 0));
        cr_assert(same_output(a, b), "job %u: %u tokens together, %u alone, or different ones", i,
                  a->completion_tokens, b->completion_tokens);
    }
    uint32_t queued, busy;
    serve_sched_load(s, &queued, &busy);
    cr_assert(queued == 0 && busy == 0);
    serve_sched_destroy(s);
    for (uint32_t i = 0; i < 8; i++)
        serve_job_free(together[i]), serve_job_free(single[i]);
    serve_metrics_destroy(&m);
    tmm_generator_destroy(g);
    h_checkpoint_drop(&f);
}

H_TEST(serve, eight_seeded_jobs_together_as_alone) { seeded_together_as_alone((tmm_model_config)BYTES_CFG); }
/* the running states: Mamba 2's and linear attention's slots restart alone */
H_TEST(serve, eight_seeded_jobs_mamba2)
{
    tmm_model_config c = h_tiny_row(TMM_ARCH_MAMBA2);
    c.vocab = 257, c.n_ctx = 48;
    seeded_together_as_alone(c);
}
H_TEST(serve, eight_seeded_jobs_linear)
{
    tmm_model_config c = h_tiny_row(TMM_ARCH_LINEAR);
    c.vocab = 257, c.n_ctx = 48;
    seeded_together_as_alone(c);
}

H_TEST(serve, cancel_frees_the_slot_and_the_queue)
{
    const tmm_model_config c = BYTES_CFG;
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "bytes", 1);
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, f.path, 1, TMM_TOEPLITZ_AUTO, &g));
    serve_metrics m;
    serve_metrics_init(&m, 1);
    serve_sched *s;
    H_OK(serve_sched_create(g, &m, 1, &s));
    serve_job *a = job_of(1, 1, 40, false), *b = job_of(2, 2, 40, false), *c3 = job_of(3, 3, 40, false);
    cr_assert_eq(serve_sched_submit(s, a), SERVE_SUBMITTED);
    cr_assert_eq(serve_sched_submit(s, b), SERVE_SUBMITTED);        /* waits */
    cr_assert_eq(serve_sched_submit(s, c3), SERVE_QUEUE_FULL);      /* one slot, a queue of one */
    serve_sched_cancel(s, b);                                        /* out of the queue */
    serve_sched_cancel(s, a);                                        /* out of its slot */
    cr_assert(a->seqs[0].done && b->seqs[0].done && a->live == 0 && b->live == 0);
    uint32_t queued, busy;
    serve_sched_load(s, &queued, &busy);
    cr_assert(queued == 0 && busy <= 1);
    cr_assert_eq(serve_sched_submit(s, c3), SERVE_SUBMITTED);
    wait_done(s, c3);
    serve_sched_load(s, &queued, &busy);
    cr_assert(queued == 0 && busy == 0, "%u queued, %u busy", queued, busy);
    serve_job *too_big = job_of(4, 4, 4, false);
    serve_seq *two = realloc(too_big->seqs, 3 * sizeof *two);
    cr_assert_not_null(two);
    too_big->seqs = two;
    for (uint32_t i = 1; i < 3; i++) {
        two[i] = two[0];
        two[i].prompt = malloc(two[0].prompt_len * sizeof *two[i].prompt);
        memcpy(two[i].prompt, two[0].prompt, two[0].prompt_len * sizeof *two[i].prompt);
    }
    too_big->n_seqs = 3;
    H_OK(serve_job_init(too_big));
    cr_assert_eq(serve_sched_submit(s, too_big), SERVE_TOO_BIG);
    serve_sched_drain(s);
    serve_job *late = job_of(5, 5, 4, false);
    cr_assert_eq(serve_sched_submit(s, late), SERVE_DRAINING);
    serve_sched_destroy(s);
    serve_job_free(a), serve_job_free(b), serve_job_free(c3), serve_job_free(too_big), serve_job_free(late);
    serve_metrics_destroy(&m);
    tmm_generator_destroy(g);
    h_checkpoint_drop(&f);
}

/* ---- requests ----------------------------------------------------------------------------- */

static serve_request parse_ok(serve_kind kind, const char *body)
{
    serve_request r;
    serve_error e;
    cr_assert(serve_request_parse(kind, body, strlen(body), 257, &r, &e), "%s: %d %s", body, e.status, e.message);
    return r;
}

Test(serve, parse_a_completion)
{
    serve_request r = parse_ok(SERVE_COMPLETION,
                               "{\"model\": \"m\", \"prompt\": [\"ab\", \"c\"], \"max_tokens\": 7, \"temperature\": 0.5, "
                               "\"top_p\": 0.9, \"top_k\": 4, \"seed\": -3, \"stop\": [\"x\", \"yz\"], \"n\": 2, "
                               "\"echo\": true, \"logprobs\": 2, \"stream\": true, \"stream_options\": "
                               "{\"include_usage\": true}, \"user\": \"u\", \"presence_penalty\": 0, "
                               "\"logit_bias\": {}, \"suffix\": null, \"best_of\": 1}");
    cr_assert(strcmp(r.model, "m") == 0 && r.n_prompts == 2 && r.n == 2 && r.max_tokens == 7 && r.has_max_tokens);
    cr_assert(strcmp(r.prompts[0].text, "ab") == 0 && r.prompts[1].length == 1);
    cr_assert(r.temperature == 0.5f && r.top_p == 0.9f && r.top_k == 4 && r.has_seed && r.seed == (uint64_t)-3);
    cr_assert(r.stops.count == 2 && r.stops.len[1] == 2 && r.echo && r.logprobs && r.top_logprobs == 2);
    cr_assert(r.stream && r.include_usage);
    serve_request_free(&r);
    r = parse_ok(SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": [[1, 2, 256], [3]]}");
    cr_assert(r.n_prompts == 2 && r.prompts[0].count == 3 && r.prompts[0].tokens[2] == 256 && !r.prompts[0].text);
    cr_assert(!r.has_max_tokens && r.temperature == 1.0f && r.n == 1 && !r.stream);
    serve_request_free(&r);
    r = parse_ok(SERVE_COMPLETION, "{\"model\": \"m\"}"); /* OpenAI's default prompt */
    cr_assert(r.n_prompts == 1 && r.prompts[0].length == 0);
    serve_request_free(&r);
}

Test(serve, chat_template)
{
    serve_request r = parse_ok(SERVE_CHAT,
                               "{\"model\": \"m\", \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                               "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"Hi\"}, "
                               "{\"type\": \"text\", \"text\": \"!\"}], \"name\": \"ann\"}, "
                               "{\"role\": \"assistant\", \"content\": \"Hello.\"}, "
                               "{\"role\": \"user\", \"content\": \"Bye\"}], \"max_completion_tokens\": 5, "
                               "\"logprobs\": true, \"top_logprobs\": 3, \"stop\": \"END\"}");
    cr_assert_str_eq(r.prompts[0].text, "System: Be brief.\nUser: Hi!\nAssistant: Hello.\nUser: Bye\nAssistant:");
    cr_assert(r.max_tokens == 5 && r.logprobs && r.top_logprobs == 3);
    cr_assert(r.stops.count == 2 && strcmp(r.stops.s[0], "END") == 0 && strcmp(r.stops.s[1], SERVE_CHAT_STOP) == 0);
    serve_request_free(&r);
}

Test(serve, parse_errors)
{
    static const struct { serve_kind kind; const char *body, *param, *words; } bad[] = {
        { SERVE_COMPLETION, "", "", "not valid JSON" },
        { SERVE_COMPLETION, "{\"model\": \"m\",", "", "not valid JSON" },
        { SERVE_COMPLETION, "{\"model\": \"m\"} x", "", "text after" },
        { SERVE_COMPLETION, "[]", "", "JSON object" },
        { SERVE_COMPLETION, "{\"prompt\": \"x\"}", "model", "model parameter" },
        { SERVE_COMPLETION, "{\"model\": 3}", "model", "expected a string" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"model\": \"n\"}", "the request body", "Duplicate key 'model'" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"foo\": 1}", "foo", "Unrecognized request argument supplied: foo" },
        /* a field name with a newline: the message stays one line (found by fuzz_serve_request) */
        { SERVE_COMPLETION, "{\"model\": \"m\", \"a\\nb\": 1}", "a\nb", "supplied: a b" },
        /* a NUL would cut the prompt where C strings end (before: "ab\u0000cd" was the prompt "ab") */
        { SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": \"ab\\u0000cd\"}", "", "the escape \\u0000" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"\\u0000\"}]}", "",
          "the escape \\u0000" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"messages\": []}", "messages", "Unrecognized" },
        { SERVE_CHAT, "{\"model\": \"m\", \"prompt\": \"x\"}", "prompt", "Unrecognized" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"max_tokens\": -1}", "max_tokens", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"max_tokens\": 1.5}", "max_tokens", "an integer" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"max_tokens\": 1e300}", "max_tokens", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"temperature\": \"hot\"}", "temperature", "a number" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"temperature\": 2.5}", "temperature", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"top_p\": -0.1}", "top_p", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"n\": 0}", "n", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"n\": 40, \"prompt\": [\"a\", \"b\"]}", "n", "choices" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"stream\": 1}", "stream", "a boolean" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"stream_options\": {\"include_usage\": true}}", "stream_options",
          "only allowed" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"stream\": true, \"stream_options\": {\"x\": 1}}", "stream_options",
          "Unrecognized stream option" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", "stop", "At most 4" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"stop\": [1]}", "stop", "array of strings" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"logprobs\": 21}", "logprobs", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"logprobs\": true}", "logprobs", "an integer" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": []}", "prompt", "empty" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": [\"a\", 1]}", "prompt", "all be strings" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": [1, 257]}", "prompt", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": [[]]}", "prompt", "at least one id" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"prompt\": {}}", "prompt", "an object" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"seed\": 1e30}", "seed", "out of range" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"frequency_penalty\": 1}", "frequency_penalty", "not supported" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"logit_bias\": {\"5\": 1}}", "logit_bias", "not supported" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"suffix\": \"x\"}", "suffix", "not supported" },
        { SERVE_COMPLETION, "{\"model\": \"m\", \"best_of\": 2}", "best_of", "not supported" },
        { SERVE_CHAT, "{\"model\": \"m\", \"tools\": []}", "tools", "not supported" },
        { SERVE_CHAT, "{\"model\": \"m\"}", "messages", "Missing required parameter" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": []}", "messages", "at least one" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [\"hi\"]}", "messages", "an object" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}", "messages",
          "Unsupported message role" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\"}]}", "messages", "'content'" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": null}]}", "messages",
          "a string or an array" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}",
          "messages", "Unrecognized field 'tool_calls'" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}",
          "messages", "type 'text'" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}",
          "top_logprobs", "needs 'logprobs'" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 3, "
                      "\"max_completion_tokens\": 4}", "max_completion_tokens", "not both" },
        { SERVE_CHAT, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"echo\": true}",
          "echo", "Unrecognized" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        serve_request r;
        serve_error e;
        cr_assert(!serve_request_parse(bad[i].kind, bad[i].body, strlen(bad[i].body), 257, &r, &e), "%s: accepted",
                  bad[i].body);
        cr_assert_eq(e.status, 400, "%s: status %d", bad[i].body, e.status);
        cr_assert_str_eq(e.type, "invalid_request_error");
        cr_assert_str_eq(e.param, bad[i].param, "%s: param '%s'", bad[i].body, e.param);
        cr_assert(strstr(e.message, bad[i].words), "%s: '%s' lacks '%s'", bad[i].body, e.message, bad[i].words);
        cr_assert(!strchr(e.message, '\n'), "one line: %s", e.message);
    }
}

/* ---- the returned text ---------------------------------------------------------------------- */

static void add(serve_text *t, const serve_stops *s, const char *bytes) { H_OK(serve_text_append(t, s, bytes, strlen(bytes))); }

Test(serve, stop_sequences_are_held_back_then_cut)
{
    serve_stops s = { .count = 2 };
    s.s[0] = strdup("END"), s.len[0] = 3;
    s.s[1] = strdup("\nUser:"), s.len[1] = 6;
    serve_text t = { 0 };
    add(&t, &s, "hello E");
    cr_assert_eq(t.committed, 6, "'E' may begin END: held back");
    add(&t, &s, "N");
    cr_assert_eq(t.committed, 6);
    add(&t, &s, "x");
    cr_assert_eq(t.committed, 9, "ENx is no stop: released");
    add(&t, &s, "\nUs");
    cr_assert_eq(t.committed, 9);
    add(&t, &s, "er: more");
    cr_assert(t.stopped && t.committed == 9 && t.all.length == 9 && memcmp(t.all.data, "hello ENx", 9) == 0);
    add(&t, &s, "ignored");
    cr_assert_eq(t.all.length, 9, "nothing after a stop");
    serve_text_free(&t);
    add(&t, &s, "aEND");
    cr_assert(t.stopped && t.all.length == 1);
    serve_text_free(&t);
    serve_stops_free(&s);
}

Test(serve, utf8_is_released_whole)
{
    serve_stops none = { 0 };
    serve_text t = { 0 };
    add(&t, &none, "a\xE2\x82");
    cr_assert_eq(t.committed, 1, "an open 3-byte character is held");
    add(&t, &none, "\xAC");
    cr_assert_eq(t.committed, 4);
    add(&t, &none, "\xFF");
    cr_assert_eq(t.committed, 5, "an invalid byte is released (the JSON writer replaces it)");
    add(&t, &none, "\xF0\x9F\x98");
    cr_assert_eq(t.committed, 5);
    serve_text_finish(&t);
    cr_assert_eq(t.committed, 8);
    serve_text_free(&t);
    cr_assert_eq(serve_utf8_whole("\xC3", 1), 0);
    cr_assert_eq(serve_utf8_whole("\xC3\xA9", 2), 2);
    cr_assert_eq(serve_utf8_whole("\x80\x80\x80\x80", 4), 4);
}

Test(serve, json_writer)
{
    serve_jw w = { 0 };
    jw_obj(&w);
    jw_key(&w, "s"), jw_str(&w, "a\"\\\n\x01\x7f\xC3\xA9\xFF\xE2\x82z\0y", 14);
    jw_key(&w, "n"), jw_num(&w, NAN);
    jw_key(&w, "a");
    jw_arr(&w);
    jw_int(&w, -5), jw_num(&w, 0.25), jw_bool(&w, true), jw_null(&w);
    jw_obj(&w);
    jw_end(&w);
    jw_end_arr(&w);
    jw_key_n(&w, "k\0", 2), jw_cstr(&w, NULL);
    jw_end(&w);
    size_t n;
    char *s = jw_take(&w, &n);
    cr_assert_str_eq(s, "{\"s\":\"a\\\"\\\\\\n\\u0001\\u007f\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz\\u0000y\","
                        "\"n\":null,\"a\":[-5,0.25,true,null,{}],\"k\\u0000\":null}");
    cr_assert_eq(n, strlen(s));
    free(s);
}

Test(serve, logprobs_and_top)
{
    const float logits[5] = { 1.0f, 3.0f, 3.0f, -1.0f, 2.0f };
    serve_entry e;
    serve_logprobs(logits, 5, 4, 3, &e);
    double sum = 0;
    for (int i = 0; i < 5; i++)
        sum += exp(logits[i]);
    cr_assert(fabs(e.logprob - (2.0 - log(sum))) < 1e-6);
    cr_assert(e.n_top == 3 && e.top[0] == 1 && e.top[1] == 2 && e.top[2] == 4, "%u %u %u", e.top[0], e.top[1], e.top[2]);
    cr_assert(e.top_logprob[0] == e.top_logprob[1] && e.top_logprob[2] == e.logprob);
    serve_logprobs(logits, 5, 0, 0, &e);
    cr_assert_eq(e.n_top, 0);
    serve_logprobs(logits, 5, 0, 20, &e);
    cr_assert(e.n_top == 5 && e.top[4] == 3);
}

Test(serve, metrics_text)
{
    serve_metrics m;
    serve_metrics_init(&m, 4);
    serve_metrics_request(&m, SERVE_EP_COMPLETIONS, 200);
    serve_metrics_request(&m, SERVE_EP_COMPLETIONS, 400);
    serve_metrics_request(&m, SERVE_EP_CHAT, 418);
    serve_metrics_first_token(&m, 0.02);
    serve_metrics_itl(&m, 0.003);
    serve_metrics_step(&m, 0.001, 2, serve_now());
    serve_metrics_prefill(&m, 0.002, 1, serve_now());
    serve_metrics_gauges(&m, 2, 3);
    tmm_bytes b = { 0 };
    cr_assert(serve_metrics_render(&m, "a\"b", &b));
    H_OK(tmm_bytes_append(&b, "", 1));
    const char *want[] = {
        "tmm_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 1\n",
        "tmm_requests_total{endpoint=\"/v1/completions\",code=\"400\"} 1\n",
        "tmm_requests_total{endpoint=\"/v1/chat/completions\",code=\"0\"} 1\n",
        "tmm_generation_tokens_total 3\n", "tmm_prefills_total 1\n", "tmm_queue_depth 2\n", "tmm_slots_busy 3\n", "tmm_slots_total 4\n",
        "tmm_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n", "tmm_time_to_first_token_seconds_count 1\n",
        "tmm_time_per_output_token_seconds_bucket{le=\"0.001\"} 0\n", "# TYPE tmm_tokens_per_second gauge\n",
        "tmm_model_info{model=\"a\\\"b\"} 1\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(b.data, want[i]), "no '%s' in:\n%s", want[i], b.data);
    free(b.data);
    serve_metrics_destroy(&m);
}
