/* tmm eval --task (src/eval): the SQuAD metrics against an independent
 * implementation written here from the official evaluate-v2.0.py, the task
 * readers on the hand-made files of tests/data/eval and on hostile lines,
 * IFEval's rules on hand-made responses, and on random checkpoints of every
 * architecture: a choice's score is the sum of the per-token
 * log-probabilities of the model's own forward (its loss over the
 * continuation's targets), and a task's acc, acc_norm, exact match and F1
 * are those recomputed here from that forward and from the generations. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eval/eval.h"
#include "eval/ifeval.h"
#include "eval/metrics.h"
#include "gen/generator.h"
#include "harness.h"
#include "model/model.h"
#include "model/rng.h"
#include "model/checkpoint.h"

/* ---- SQuAD from the official definitions. normalize_answer is lower ->
 * remove string.punctuation (C's ispunct in ASCII) -> remove articles ->
 * ' '.join(split()); after the first two steps \b(a|an|the)\b can only match
 * a whole whitespace-separated word, so here the text is split into words and
 * the articles are dropped. ---- */
#define MAXW 256
static int ref_words(const char *s, char words[][32])
{
    char t[1024], *o = t;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 128 && ispunct(c))
            continue;
        *o++ = (char)tolower(c);
    }
    *o = '\0';
    int n = 0;
    for (char *w = strtok(t, " \t\n\r\v\f"); w; w = strtok(NULL, " \t\n\r\v\f"))
        if (strcmp(w, "a") && strcmp(w, "an") && strcmp(w, "the"))
            snprintf(words[n++], 32, "%s", w);
    return n;
}

static double ref_exact(const char *gold, const char *pred)
{
    char a[MAXW][32], b[MAXW][32];
    int na = ref_words(gold, a), nb = ref_words(pred, b);
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]))
            return 0;
    return 1;
}

static double ref_f1(const char *gold, const char *pred)
{
    char a[MAXW][32], b[MAXW][32];
    int na = ref_words(gold, a), nb = ref_words(pred, b);
    if (na == 0 || nb == 0)
        return na == nb;
    bool used[MAXW] = { 0 };
    int same = 0; /* Counter(gold) & Counter(pred): each pred word matches one unused gold word */
    for (int j = 0; j < nb; j++)
        for (int i = 0; i < na; i++)
            if (!used[i] && strcmp(a[i], b[j]) == 0) {
                used[i] = true, same++;
                break;
            }
    if (!same)
        return 0;
    double p = (double)same / nb, r = (double)same / na;
    return 2 * p * r / (p + r);
}

/* max over the golds that normalize to something; none: the gold is "" */
static void ref_squad(char *const *golds, uint32_t n, const char *pred, double *em, double *f1)
{
    char w[MAXW][32];
    *em = 0, *f1 = 0;
    bool any = false;
    for (uint32_t i = 0; i < n; i++)
        if (ref_words(golds[i], w) > 0 || 0) {
            any = true;
            *em = fmax(*em, ref_exact(golds[i], pred));
            *f1 = fmax(*f1, ref_f1(golds[i], pred));
        }
    /* a gold that is only articles and punctuation normalizes to "" too: dropped above */
    if (!any)
        *em = ref_exact("", pred), *f1 = ref_f1("", pred);
}

Test(eval, squad_metrics)
{
    /* values from the official script */
    cr_assert_eq(tmm_squad_exact("the Denver Broncos", "Denver Broncos!"), 1);
    cr_assert_float_eq(tmm_squad_f1("Denver Broncos", "Broncos of Denver won"), 2 * 0.5 * 1 / 1.5, 1e-12);
    cr_assert_eq(tmm_squad_f1("", ""), 1);
    cr_assert_eq(tmm_squad_f1("", "something"), 0);
    cr_assert_eq(tmm_squad_f1("a the an", ""), 1); /* only articles: the empty answer */
    char *n = tmm_squad_normalize("  The  Cat's\tHAT, an apple;theatre  a");
    cr_assert_str_eq(n, "cats hat appletheatre"); /* ";" goes, no space comes */
    free(n);
    n = tmm_squad_normalize("the_x ANother théâtre a-b");
    cr_assert_str_eq(n, "thex another théâtre ab"); /* _ and - are punctuation; é is not */
    free(n);
    /* random texts against the implementation above */
    static const char *const pieces[] = { "the", "The", "a", "an", "An", "cat", "Cat", "hat", "dog.", "(dog)", ",",
                                          " ", "  ", "\t", "the-cat", "a_b", "x", "1990", "$5", "it's", "THE" };
    const int np = (int)(sizeof pieces / sizeof pieces[0]);
    for (uint64_t k = 0; k < 3000; k++) {
        char g[200] = "", p[200] = "";
        for (int side = 0; side < 2; side++) {
            char *s = side ? p : g;
            int len = (int)(tmm_rng_bits(k * 2 + (uint64_t)side, 0) % 8);
            for (int i = 0; i < len; i++) {
                strcat(s, pieces[tmm_rng_bits(k * 2 + (uint64_t)side, (uint64_t)i + 1) % (uint64_t)np]);
                if (tmm_rng_bits(k, (uint64_t)i + 50) % 2)
                    strcat(s, " ");
            }
        }
        cr_assert_eq(tmm_squad_exact(g, p), ref_exact(g, p), "exact(%s | %s)", g, p);
        cr_assert_float_eq(tmm_squad_f1(g, p), ref_f1(g, p), 1e-12, "f1(%s | %s)", g, p);
        char *golds[2] = { g, p };
        double e1, f1, e2, f2;
        tmm_squad_score((const char *const *)golds, 2, "cat hat", &e1, &f1);
        ref_squad(golds, 2, "cat hat", &e2, &f2);
        cr_assert(e1 == e2 && fabs(f1 - f2) < 1e-12, "score(%s | %s)", g, p);
    }
    /* means and lm-eval's standard error (sample sd / sqrt n) */
    double x[] = { 1, 0, 0, 1 };
    cr_assert_float_eq(tmm_eval_mean(x, 4), 0.5, 1e-12);
    cr_assert_float_eq(tmm_eval_stderr(x, 4), sqrt(1.0 / 3) / 2, 1e-12);
    cr_assert(isnan(tmm_eval_stderr(x, 1)));
    uint32_t gold[] = { 1, 1, 0, 0, 1 }, pred[] = { 1, 0, 0, 1, 1 };
    cr_assert_float_eq(tmm_eval_binary_f1(gold, pred, 5), 2.0 * 2 / (2 * 2 + 1 + 1), 1e-12);
    cr_assert_float_eq(tmm_eval_mcc(gold, pred, 5), (2.0 * 1 - 1 * 1) / sqrt(3.0 * 3 * 2 * 2), 1e-12);
    cr_assert_eq(tmm_utf8_length("héllo"), 5);
    /* the bootstrap standard error: against an independent bootstrap here (another generator, 4000
     * resamples; two estimates of one quantity, within 15%), 0 for a metric every resample keeps,
     * NaN below two items */
    enum { NB = 400, ITERS = 4000 };
    uint32_t bg[NB], bp[NB], rg[NB], rp[NB];
    srand(7);
    for (int i = 0; i < NB; i++)
        bg[i] = (uint32_t)(rand() % 2), bp[i] = rand() % 4 ? bg[i] : 1 - bg[i]; /* about 75% right */
    double metrics_want[2];
    double (*fns[2])(const uint32_t *, const uint32_t *, uint32_t) = { tmm_eval_binary_f1, tmm_eval_mcc };
    for (int f = 0; f < 2; f++) {
        double sum = 0, sum2 = 0;
        for (int it = 0; it < ITERS; it++) {
            for (int i = 0; i < NB; i++) {
                int j = rand() % NB;
                rg[i] = bg[j], rp[i] = bp[j];
            }
            double v = fns[f](rg, rp, NB);
            sum += v, sum2 += v * v;
        }
        metrics_want[f] = sqrt((sum2 - sum * sum / ITERS) / (ITERS - 1));
        double got = tmm_eval_bootstrap_stderr(fns[f], bg, bp, NB, TMM_EVAL_BOOTSTRAP_ITERS);
        cr_assert(fabs(got - metrics_want[f]) <= 0.15 * metrics_want[f], "bootstrap stderr %g, independent %g", got,
                  metrics_want[f]);
        cr_assert_eq(tmm_eval_bootstrap_stderr(fns[f], bg, bp, NB, TMM_EVAL_BOOTSTRAP_ITERS), got, "not repeatable");
    }
    cr_assert_float_eq(tmm_eval_bootstrap_stderr(tmm_eval_binary_f1, bg, bg, NB, 100), 0, 1e-12);
    cr_assert(isnan(tmm_eval_bootstrap_stderr(tmm_eval_mcc, bg, bp, 1, 100)));
}

/* ---- readers ---- */
static void read_task(const char *name, const char *file, tmm_eval_set *set)
{
    const tmm_eval_task *t;
    H_OK(tmm_eval_task_find(name, &t));
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/eval/%s", getenv("TMM_SOURCE_DIR"), file);
    H_OK(tmm_eval_read(t, path, set));
}

Test(eval, readers)
{
    tmm_eval_set s;
    read_task("hellaswag", "hellaswag.jsonl", &s);
    cr_assert_eq(s.count, 4);
    /* lm-eval's preprocessing (its output, from Python, for these items) */
    cr_assert_str_eq(s.items[0].context, "Roof shingle removal: A man is sitting on a roof. He");
    cr_assert_eq(s.items[0].gold, 3);
    cr_assert_str_eq(s.items[2].context, "Home and Garden: How to water a plant. Check the soil.");
    cr_assert_str_eq(s.items[2].choices[0], " Push a finger into the soil.");
    cr_assert_str_eq(s.items[2].choices[2], " Sing to the plant.");
    cr_assert_not_null(s.items[3].skip);
    tmm_eval_set_free(&s);
    read_task("arc_easy", "arc_easy.jsonl", &s);
    cr_assert_eq(s.items[2].gold, 3);
    cr_assert_str_eq(s.items[1].context, "Question: Which technology was developed most recently?\nAnswer:");
    tmm_eval_set_free(&s);
    read_task("sst2", "sst2.jsonl", &s);
    cr_assert_str_eq(s.items[1].context,
                     "unflinchingly bleak and desperate \nQuestion: Is this sentence positive or negative?\nAnswer:");
    cr_assert_str_eq(s.items[1].choices[s.items[1].gold], "negative");
    cr_assert_not_null(s.items[4].skip);
    tmm_eval_set_free(&s);
    read_task("rte", "rte.jsonl", &s);
    cr_assert_str_eq(s.items[1].choices[s.items[1].gold], "True"); /* 0 = entailment */
    tmm_eval_set_free(&s);
    read_task("squad_v2", "squad_v2.jsonl", &s);
    cr_assert_eq(s.items[0].n_answers, 2);
    cr_assert_eq(s.items[1].n_answers, 0);
    cr_assert_null(s.items[1].skip);
    tmm_eval_set_free(&s);
    read_task("squad", "squad.jsonl", &s);
    cr_assert(strstr(s.items[0].context, "Title: Super_Bowl_50\n\nBackground: Super Bowl 50"));
    tmm_eval_set_free(&s);
    read_task("longbench", "longbench.jsonl", &s);
    cr_assert_eq(s.count, 3);
    tmm_eval_set_free(&s);
    read_task("ifeval", "ifeval.jsonl", &s);
    cr_assert_eq(s.items[0].n_rules, 3);
    cr_assert_null(s.items[0].skip);
    cr_assert(s.items[3].skip && strstr(s.items[3].skip, "language:response_language"));
    tmm_eval_set_free(&s);
}

static void refused(const char *task, const char *text, const char *words)
{
    const tmm_eval_task *t;
    H_OK(tmm_eval_task_find(task, &t));
    tmm_eval_set s;
    tmm_status st = tmm_eval_parse(t, text, strlen(text), "f.jsonl", &s);
    cr_assert_eq(st, TMM_ERR_INVALID_ARGUMENT, "%s: %s accepted", task, text);
    cr_assert(strstr(tmm_last_error(), words), "%s: '%s' lacks '%s'", task, tmm_last_error(), words);
    cr_assert(!strchr(tmm_last_error(), '\n'), "one line: %s", tmm_last_error());
}

Test(eval, hostile)
{
    refused("hellaswag", "{\"endings\": [\"a\", \"b\"], \"label\": 0}", "f.jsonl:1: hellaswag item: missing field \"ctx\"");
    refused("hellaswag", "\n\n{\"ctx\": \"x\", \"label\": 0}", "f.jsonl:3: hellaswag item: missing field \"endings\"");
    refused("hellaswag", "{\"ctx\": 5, \"endings\": [\"a\", \"b\"], \"label\": 0}", "\"ctx\" is a number");
    refused("hellaswag", "{\"ctx\": \"x\", \"endings\": [\"a\", 2], \"label\": 0}", "entry 1 of \"endings\" is a number");
    refused("hellaswag", "{\"ctx\": \"x\", \"endings\": [\"a\", \"b\"], \"label\": 2}", "label 2");
    refused("hellaswag", "{\"ctx\": \"x\", \"endings\": [\"a\", \"b\"], \"label\": \"1x\"}", "whole number");
    refused("hellaswag", "{\"ctx\": \"x\", \"ctx\": \"y\", \"endings\": [\"a\", \"b\"], \"label\": 0}", "occurs twice");
    refused("arc_easy", "{\"question\": \"q\", \"choices\": {\"text\": [\"a\", \"b\"], \"label\": [\"A\", \"B\"]}, "
                        "\"answerKey\": \"C\"}", "answerKey \"C\"");
    refused("arc_easy", "{\"question\": \"q\", \"choices\": [\"a\"], \"answerKey\": \"C\"}", "\"choices\" is an array");
    refused("arc_easy", "{\"question\": \"q\", \"choices\": {\"text\": [\"a\", \"b\"]}, \"answerKey\": \"A\"}",
            "missing field \"label\"");
    refused("mrpc", "{\"sentence1\": \"a\", \"label\": 1}", "missing field \"sentence2\"");
    refused("mnli", "{\"premise\": \"a\", \"hypothesis\": \"b\", \"label\": 3}", "outside 0..2");
    refused("squad", "{\"context\": \"c\", \"question\": \"q\"}", "missing field \"answers\"");
    refused("squad", "{\"context\": \"c\", \"question\": \"q\", \"answers\": {\"text\": [1]}}", "entry 0 of \"text\"");
    refused("longbench", "{\"context\": \"c\", \"input\": \"q\", \"answers\": \"x\"}", "\"answers\" is a string");
    refused("ifeval", "{\"prompt\": \"p\", \"instruction_id_list\": [\"punctuation:no_comma\"]}", "missing field \"kwargs\"");
    refused("ifeval", "{\"prompt\": \"p\", \"instruction_id_list\": [\"length_constraints:number_words\"], "
                      "\"kwargs\": [{\"num_words\": 5}]}", "no \"relation\"");
    refused("ifeval", "{\"prompt\": \"p\", \"instruction_id_list\": [\"keywords:existence\"], "
                      "\"kwargs\": [{\"keywords\": [\"(\"]}]}", "not a valid regular expression");
    refused("ifeval", "{\"prompt\": \"p\", \"instruction_id_list\": [\"a\", \"b\"], \"kwargs\": [{}]}", "1 entries for 2");
    refused("sst2", "[1, 2]", "must be a JSON object");
    refused("sst2", "{\"sentence\": ", "not JSON");
    refused("sst2", "{\"sentence\": \"a\", \"label\": 1} {}", "more than one JSON value");
    refused("sst2", "\n  \n", "no items");
    /* a NUL byte, and a line over the limit */
    const tmm_eval_task *t;
    H_OK(tmm_eval_task_find("sst2", &t));
    tmm_eval_set s;
    cr_assert_eq(tmm_eval_parse(t, "{}\0{}", 5, "f", &s), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "NUL"));
    size_t big = TMM_EVAL_MAX_LINE + 10;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[big] = '\0';
    huge[0] = '{';
    cr_assert_eq(tmm_eval_parse(t, huge, big, "f", &s), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "f:1: the line has"), "%s", tmm_last_error());
    free(huge);
    cr_assert_eq(tmm_eval_task_find("glue", &t), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "hellaswag"));
}

/* ---- IFEval ---- */
static tmm_ifeval_rule rule(const char *id, const char *kwargs)
{
    cJSON *k = cJSON_Parse(kwargs);
    tmm_ifeval_rule r;
    char msg[256];
    int rc = tmm_ifeval_rule_parse(id, k, &r, msg, sizeof msg);
    cr_assert_eq(rc, 0, "%s: %s", id, msg);
    cJSON_Delete(k);
    return r;
}

static void follows(const char *id, const char *kwargs, const char *response, bool strict, bool loose)
{
    tmm_ifeval_rule r = rule(id, kwargs);
    cr_assert_eq(tmm_ifeval_follows(&r, response), strict, "%s strict on '%s'", id, response);
    cr_assert_eq(tmm_ifeval_follows_loose(&r, response), loose, "%s loose on '%s'", id, response);
    tmm_ifeval_rule_free(&r);
}

Test(eval, ifeval_rules)
{
    follows("punctuation:no_comma", "{}", "no commas here", true, true);
    follows("punctuation:no_comma", "{}", "Sure, here it is\nno commas here", false, true); /* first line dropped */
    follows("punctuation:no_comma", "{}", "   ", false, false);
    follows("length_constraints:number_words", "{\"num_words\": 3, \"relation\": \"less than\"}", "two words", true, true);
    follows("length_constraints:number_words", "{\"num_words\": 3, \"relation\": \"at least\"}", "it's two", true, true);
    follows("length_constraints:number_sentences", "{\"num_sentences\": 2, \"relation\": \"at least\"}",
            "One. Two! Three", true, true);
    follows("length_constraints:number_sentences", "{\"num_sentences\": 2, \"relation\": \"less than\"}", "One. Two?",
            false, false); /* one line: the loose variants without it are blank */
    follows("length_constraints:number_paragraphs", "{\"num_paragraphs\": 2}", "a\n***\nb", true, true);
    follows("length_constraints:number_paragraphs", "{\"num_paragraphs\": 2}", "a\n***\n***\nb", false, false);
    follows("change_case:english_lowercase", "{}", "all lower 123", true, true);
    follows("change_case:english_capital", "{}", "ALL UPPER", true, true);
    follows("change_case:capital_word_frequency", "{\"capital_frequency\": 2, \"capital_relation\": \"at least\"}",
            "THE big CAT", true, true);
    follows("keywords:existence", "{\"keywords\": [\"Fox\", \"dog\"]}", "the fox and the DOG", true, true);
    follows("keywords:forbidden_words", "{\"forbidden_words\": [\"cat\"]}", "concatenate", true, true);
    follows("keywords:forbidden_words", "{\"forbidden_words\": [\"cat\"]}", "a Cat", false, false);
    follows("keywords:frequency", "{\"keyword\": \"ab\", \"frequency\": 3, \"relation\": \"at least\"}", "ab AB abab",
            true, true);
    follows("keywords:letter_frequency", "{\"letter\": \"z\", \"let_frequency\": 2, \"let_relation\": \"less than\"}",
            "Zebra", true, true);
    follows("detectable_format:json_format", "{}", "```json\n{\"a\": [1, 2]}\n```", true, true);
    follows("detectable_format:json_format", "{}", "{\"a\": }", false, false);
    follows("detectable_format:number_bullet_lists", "{\"num_bullets\": 2}", "* one\n- two\ntext", true, true);
    follows("detectable_format:number_bullet_lists", "{\"num_bullets\": 2}", "* one", false, false);
    follows("detectable_format:number_highlighted_sections", "{\"num_highlights\": 2}", "*a* and **b** and * *", true,
            true);
    follows("detectable_format:title", "{}", "<<My Title>>\ntext", true, true);
    follows("detectable_format:title", "{}", "<< >> text", false, false);
    follows("detectable_format:multiple_sections", "{\"section_spliter\": \"Section\", \"num_sections\": 2}",
            "Section 1\nx\nSection 2\ny", true, true);
    follows("detectable_format:constrained_response", "{}", "My answer is yes.", true, true);
    follows("detectable_content:number_placeholders", "{\"num_placeholders\": 2}", "[name] at [address]", true, true);
    follows("detectable_content:postscript", "{\"postscript_marker\": \"P.S.\"}", "text\nP.S. more", true, true);
    follows("detectable_content:postscript", "{\"postscript_marker\": \"P.P.S\"}", "text\nps", false, false);
    follows("startend:end_checker", "{\"end_phrase\": \"Any other questions?\"}", "Hi. any other questions?  ", true, true);
    follows("startend:quotation", "{}", "\"quoted\"", true, true);
    follows("startend:quotation", "{}", "**\"quoted\"**", false, true); /* loose: stars removed */
    follows("combination:repeat_prompt", "{\"prompt_to_repeat\": \"Say hi\"}", "say HI. hi!", true, true);
    follows("combination:two_responses", "{}", "one\n******\ntwo", true, true);
    follows("combination:two_responses", "{}", "one\n******\none", false, false);
    static const char nth[] = "{\"num_paragraphs\": 3, \"nth_paragraph\": 2, \"first_word\": \"Then\"}";
    follows("length_constraints:nth_paragraph_first_word", nth, "One.\n\n\"then, more\n\nEnd", true, true);
    follows("length_constraints:nth_paragraph_first_word", nth, "One.\n\nThenceforth\n\nEnd", false, false);
    follows("length_constraints:nth_paragraph_first_word", nth, "One.\n\nthen", false, false); /* 2 paragraphs */
    follows("length_constraints:nth_paragraph_first_word",
            "{\"num_paragraphs\": 1, \"nth_paragraph\": 5, \"first_word\": \"a\"}", "a", false, false);
    /* kwargs keys of other rules and nulls are ignored, as the HF export has them all */
    follows("punctuation:no_comma", "{\"num_words\": null, \"relation\": null}", "ok", true, true);
    tmm_ifeval_rule r;
    char msg[128];
    cr_assert_eq(tmm_ifeval_rule_parse("language:response_language", NULL, &r, msg, sizeof msg), 1);
    tmm_ifeval_rule_free(&r);
    cJSON *bad_nth = cJSON_Parse("{\"num_paragraphs\": 1, \"nth_paragraph\": 0, \"first_word\": \"a\"}");
    cr_assert_eq(tmm_ifeval_rule_parse("length_constraints:nth_paragraph_first_word", bad_nth, &r, msg, sizeof msg), -1);
    cJSON_Delete(bad_nth);
    tmm_ifeval_rule_free(&r);
}

/* ---- on random checkpoints ---- */

/* The model's own forward (batch 1, the full context, no generator): the
 * loss over the continuation's targets times their count is minus the sum
 * of their log-probabilities. Bytes: a token per byte; "" is EOT (256); the
 * sequence cut from the left to n_ctx + 1 tokens. */
static double forward_loglik(tmm_model *m, const tmm_model_config *c, const char *ctx, const char *cont)
{
    const uint32_t n = c->n_ctx;
    size_t a = strlen(ctx), b = strlen(cont);
    uint32_t *seq = malloc((a + b + 1) * sizeof *seq), len = 0;
    if (a == 0)
        seq[len++] = 256;
    for (size_t i = 0; i < a; i++)
        seq[len++] = (unsigned char)ctx[i];
    for (size_t i = 0; i < b; i++)
        seq[len++] = (unsigned char)cont[i];
    uint32_t start = len > n + 1 ? len - (n + 1) : 0, L = len - start, scored = (uint32_t)b < L - 1 ? (uint32_t)b : L - 1;
    uint32_t *tok = calloc(n, sizeof *tok);
    int32_t *tgt = malloc(n * sizeof *tgt);
    for (uint32_t t = 0; t < n; t++)
        tgt[t] = -1;
    for (uint32_t t = 0; t + 1 < L; t++) {
        tok[t] = seq[start + t];
        if (t + 1 >= L - scored)
            tgt[t] = (int32_t)seq[start + t + 1];
    }
    H_OK(tmm_model_set_batch(m, tok, tgt));
    H_OK(tmm_model_run(m, false));
    float loss;
    H_OK(tmm_model_loss(m, &loss));
    free(seq), free(tok), free(tgt);
    return -(double)loss * scored;
}

static tmm_model *forward_model(h_checkpoint *f, const tmm_model_config *c)
{
    tmm_model *m;
    H_OK(tmm_model_create_impl(h_dev, c, 1, TMM_TOEPLITZ_DIRECT, &m));
    H_OK(tmm_model_write_params(m, f->params));
    return m;
}

#define BASE(a, h) .arch = (a), .vocab = 257, .d_model = 12, .n_ctx = 80, .n_layers = 2, .heads = (h), \
                   .expansion = 2, .seed = 5

static void check_loglik(tmm_model_config c)
{
    tmm_model_config_resolve(&c);
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "bytes", 3);
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, f.path, 3, TMM_TOEPLITZ_AUTO, &g));
    char longer[200];
    for (int i = 0; i < 150; i++)
        longer[i] = (char)('a' + i % 26);
    longer[150] = '\0';
    /* short (bucket 32), medium (bucket 64), the full context, cut from the left, an empty context */
    const char *ctx[] = { "Question: what", "The quick brown fox jumps over the lazy dog. Then", longer,
                          "Answer:", "", longer + 90 };
    const char *cont[] = { " is it", " it sleeps.", " tail", " yes", "hello", " and a continuation" };
    const uint32_t n = sizeof ctx / sizeof ctx[0];
    double ll[6];
    uint32_t truncated = 0;
    H_OK(tmm_eval_loglik(g, ctx, cont, n, ll, &truncated));
    tmm_model *m = forward_model(&f, &c);
    double worst = 0;
    for (uint32_t i = 0; i < n; i++) {
        double want = forward_loglik(m, &c, ctx[i], cont[i]);
        worst = fmax(worst, fabs(ll[i] - want) / (1 + fabs(want)));
        cr_assert(fabs(ll[i] - want) <= 1e-4 * (1 + fabs(want)), "%s: choice %u: %.6f, the forward %.6f",
                  tmm_arch_name(c.arch), i, ll[i], want);
    }
    cr_assert_eq(truncated, 1, "the 150-byte context is cut");
    printf("%-12s choice log-likelihood vs the forward's loss: %.2e\n", tmm_arch_name(c.arch), worst);
    tmm_model_destroy(m);
    tmm_generator_destroy(g);
    h_checkpoint_drop(&f);
}

H_TEST(eval, loglik_tmm) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_TMM, 0), .kernel = 1 }); }
H_TEST(eval, loglik_tmm_heads) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_TMM, 3), .kernel = 2 }); }
H_TEST(eval, loglik_transformer) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_TRANSFORMER, 2), .kernel = 1 }); }
H_TEST(eval, loglik_swa) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_SWA, 2), .kernel = 1, .window = 6 }); }
H_TEST(eval, loglik_linear) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_LINEAR, 3), .kernel = 1 }); }
H_TEST(eval, loglik_hyena) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_HYENA, 0), .kernel = 1 }); }
H_TEST(eval, loglik_mamba2) { check_loglik((tmm_model_config){ BASE(TMM_ARCH_MAMBA2, 3), .kernel = 1, .state = 5 }); }

static const tmm_eval_metric *find_metric(const tmm_eval_report *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_metrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return &r->metrics[i];
    cr_assert_fail("no metric %s", name);
    return NULL;
}

/* acc and acc_norm from the forward: argmax of the log-likelihood, and of
 * it divided by the choice's length in characters (lm-eval's len(str)) */
static void check_choice_task(h_checkpoint *f, const tmm_model_config *c, tmm_generator *g, tmm_model *m,
                              const char *task, const char *file, uint32_t shots)
{
    tmm_eval_set set;
    read_task(task, file, &set);
    tmm_eval_options o = { .shots = shots };
    tmm_eval_report r;
    H_OK(tmm_eval_run(g, &set, NULL, &o, &r));
    (void)f;
    /* the demonstrations: the first `shots` scorable items, then the rest */
    char prefix[4096] = "";
    uint32_t first = 0, used = 0;
    for (; used < shots; first++)
        if (!set.items[first].skip) {
            const tmm_eval_item *d = &set.items[first];
            snprintf(prefix + strlen(prefix), sizeof prefix - strlen(prefix), "%s %s\n\n", d->context,
                     d->choices[d->gold]);
            used++;
        }
    double acc = 0, accn = 0;
    uint32_t scored = 0, skipped = 0;
    for (uint32_t i = first; i < set.count; i++) {
        const tmm_eval_item *it = &set.items[i];
        if (it->skip) {
            skipped++;
            continue;
        }
        char ctx[8192], cont[512];
        snprintf(ctx, sizeof ctx, "%s%s", prefix, it->context);
        double best = -INFINITY, best_norm = -INFINITY;
        uint32_t arg = 0, arg_norm = 0;
        for (uint32_t k = 0; k < it->n_choices; k++) {
            snprintf(cont, sizeof cont, " %s", it->choices[k]);
            double ll = forward_loglik(m, c, ctx, cont);
            cr_assert(fabs(ll - r.loglik[i][k]) < 1e-4 * (1 + fabs(ll)), "%s item %u choice %u", task, i, k);
            uint32_t chars = 0;
            for (const char *p = it->choices[k]; *p; p++)
                chars += ((unsigned char)*p >> 6) != 2;
            if (ll > best)
                best = ll, arg = k;
            if (ll / chars > best_norm)
                best_norm = ll / chars, arg_norm = k;
        }
        acc += arg == it->gold, accn += arg_norm == it->gold;
        scored++;
    }
    cr_assert_eq(r.scored, scored);
    cr_assert_eq(r.skipped, skipped);
    cr_assert_float_eq(find_metric(&r, "acc")->value, acc / scored, 1e-12, "%s acc", task);
    cr_assert_float_eq(find_metric(&r, "acc_norm")->value, accn / scored, 1e-12, "%s acc_norm", task);
    printf("%-10s %u-shot: acc %.3f acc_norm %.3f over %u items (%u skipped, %u cut)\n", task, shots, acc / scored,
           accn / scored, scored, skipped, r.truncated);
    tmm_eval_report_free(&r);
    tmm_eval_set_free(&set);
}

static void check_qa_task(tmm_generator *g, const char *task, const char *file)
{
    tmm_eval_set set;
    read_task(task, file, &set);
    tmm_eval_options o = { .max_gen = 6 };
    tmm_eval_report r;
    H_OK(tmm_eval_run(g, &set, NULL, &o, &r));
    double em = 0, f1 = 0;
    uint32_t n = 0, cut = 0;
    for (uint32_t i = 0; i < set.count; i++) {
        if (set.items[i].skip)
            continue;
        cut += strlen(set.items[i].context) > 80 - 6 + 1; /* bytes: tokens */
        const char *pred = r.generated[i];
        cr_assert_not_null(pred);
        char w[MAXW][32];
        int words = ref_words(pred, w);
        if (words == 1 && strcmp(w[0], "unanswerable") == 0)
            pred = "";
        double e, f;
        ref_squad(set.items[i].answers, set.items[i].n_answers, pred, &e, &f);
        em += e, f1 += f, n++;
    }
    cr_assert_float_eq(find_metric(&r, "exact_match")->value, em / n, 1e-12);
    cr_assert_float_eq(find_metric(&r, "f1")->value, f1 / n, 1e-12);
    cr_assert_eq(r.truncated, cut, "prompts longer than n_ctx - max_gen + 1 = 75 bytes are cut");
    printf("%-10s exact %.3f f1 %.3f over %u items (%u cut)\n", task, em / n, f1 / n, n, cut);
    tmm_eval_report_free(&r);
    tmm_eval_set_free(&set);
}

H_TEST(eval, tasks)
{
    tmm_model_config c = { BASE(TMM_ARCH_TMM, 0), .kernel = 1 };
    h_checkpoint f;
    h_checkpoint_make(&f, &c, "bytes", 3);
    tmm_generator *g;
    H_OK(tmm_generator_load(h_dev, f.path, 4, TMM_TOEPLITZ_AUTO, &g));
    tmm_model *m = forward_model(&f, &c);
    check_choice_task(&f, &c, g, m, "hellaswag", "hellaswag.jsonl", 0);
    check_choice_task(&f, &c, g, m, "arc_easy", "arc_easy.jsonl", 1);
    check_choice_task(&f, &c, g, m, "sst2", "sst2.jsonl", 0);
    check_qa_task(g, "squad_v2", "squad_v2.jsonl");
    check_qa_task(g, "longbench", "longbench.jsonl");
    /* IFEval: the prompt-level accuracy is the share of items whose every rule holds */
    tmm_eval_set set;
    read_task("ifeval", "ifeval.jsonl", &set);
    tmm_eval_options o = { .max_gen = 8 };
    tmm_eval_report r;
    H_OK(tmm_eval_run(g, &set, NULL, &o, &r));
    cr_assert_eq(r.scored, 3);
    cr_assert_eq(r.skipped, 1);
    double strict = 0, inst = 0, rules = 0;
    for (uint32_t i = 0; i < set.count; i++) {
        if (set.items[i].skip)
            continue;
        bool all = true;
        for (uint32_t k = 0; k < set.items[i].n_rules; k++) {
            bool ok = tmm_ifeval_follows(&set.items[i].rules[k], r.generated[i]);
            all &= ok, inst += ok, rules++;
        }
        strict += all;
    }
    cr_assert_float_eq(find_metric(&r, "prompt_level_strict_acc")->value, strict / 3, 1e-12);
    cr_assert_float_eq(find_metric(&r, "inst_level_strict_acc")->value, inst / rules, 1e-12);
    tmm_eval_report_free(&r);
    /* IFEval is zero-shot; a copy-symbols model cannot read text */
    o.shots = 1;
    cr_assert_eq(tmm_eval_run(g, &set, NULL, &o, &r), TMM_ERR_INVALID_ARGUMENT);
    tmm_eval_set_free(&set);
    tmm_model_destroy(m);
    tmm_generator_destroy(g);
    h_checkpoint_drop(&f);
}
