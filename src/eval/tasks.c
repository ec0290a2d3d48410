/* The task table and the JSONL readers: one reader per family of Hugging
 * Face exports (docs/eval.md "Task files"). Every field is checked; an item
 * that is valid but cannot be scored (an unlabelled test split, an IFEval
 * instruction tmm does not check) is kept with the reason. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval.h"
#include "eval/ifeval.h"
#include "eval/strbuf.h"
#include "files.h"
#include "io/json.h"
#include "io/limits.h"

/* Where a reader is: the file, the line, the task (for messages). */
typedef struct where {
    const char *file, *task;
    uint32_t line;
} where;

typedef tmm_status (*reader_fn)(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it);

/* A GLUE task cast as choices: lm-eval's prompt (the fields in {braces}) and
 * its verbalized labels, label i -> choices[i]. */
typedef struct glue_task {
    const char *fields[3];
    const char *prompt;
    const char *choices[4];
} glue_task;

struct tmm_eval_task {
    const char *name;
    tmm_eval_kind kind;
    reader_fn read;
    const void *arg;
    const char *about;
};

static tmm_status bad(const where *w, const char *fmt, ...) TMM_PRINTF(2, 3);
static tmm_status bad(const where *w, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%u: %s item: %s", w->file, w->line, w->task, msg);
}

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

static tmm_status oom(void) { return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory"); }

/* obj[key] as a string (NULL and TMM_OK when optional and absent) */
static tmm_status get_string(const where *w, const cJSON *obj, const char *key, bool required, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    if (!v && !required)
        return TMM_OK;
    if (!v)
        return bad(w, "missing field \"%s\"", key);
    if (!cJSON_IsString(v))
        return bad(w, "field \"%s\" is %s; it must be a string", key, type_name(v));
    *out = v->valuestring;
    return TMM_OK;
}

/* obj[key] as an array of 1..max strings, copied */
static tmm_status get_strings(const where *w, const cJSON *obj, const char *key, uint32_t min, uint32_t max,
                              char ***out, uint32_t *count)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL, *count = 0;
    if (!v)
        return bad(w, "missing field \"%s\"", key);
    if (!cJSON_IsArray(v))
        return bad(w, "field \"%s\" is %s; it must be an array of strings", key, type_name(v));
    int n = cJSON_GetArraySize(v);
    if ((uint32_t)n < min || (uint32_t)n > max)
        return bad(w, "field \"%s\" has %d entries; it must have %u to %u", key, n, min, max);
    if (n == 0)
        return TMM_OK;
    char **s = calloc((size_t)n, sizeof *s);
    if (!s)
        return oom();
    *out = s;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (!cJSON_IsString(e))
            return bad(w, "entry %u of \"%s\" is %s; it must be a string", *count, key, type_name(e));
        if (!(s[*count] = strdup(e->valuestring)))
            return oom();
        (*count)++;
    }
    return TMM_OK;
}

/* a label: an integer, or a string holding one ("2"); "" or -1: none (*out = -1) */
static tmm_status get_label(const where *w, const cJSON *obj, const char *key, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return bad(w, "missing field \"%s\"", key);
    if (cJSON_IsString(v)) {
        char *end;
        if (!*v->valuestring) {
            *out = -1;
            return TMM_OK;
        }
        long l = strtol(v->valuestring, &end, 10);
        if (*end || l < -1 || l > 1000000)
            return bad(w, "field \"%s\" is \"%.40s\"; it must be a whole number", key, v->valuestring);
        *out = l;
        return TMM_OK;
    }
    /* the range before the cast: converting a double outside long's range is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -1 && v->valuedouble <= 1e6) ||
        v->valuedouble != floor(v->valuedouble))
        return bad(w, "field \"%s\" is %s; it must be a whole number", key,
                   cJSON_IsNumber(v) ? "not a whole number from -1" : type_name(v));
    *out = (long)v->valuedouble;
    return TMM_OK;
}

static tmm_status set_skip(tmm_eval_item *it, const char *reason)
{
    free(it->skip);
    return (it->skip = strdup(reason)) ? TMM_OK : oom();
}

/* ---- text building ---- */
static tmm_status sb_take(sbuf *b, char **out)
{
    if (!b->failed && !b->s)
        sb_add(b, "", 0);
    if (b->failed) {
        free(b->s);
        return oom();
    }
    *out = b->s;
    return TMM_OK;
}

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* lm-eval's HellaSwag preprocess: strip; " [title]" -> ". "; remove [...];
 * "  " -> " " */
static tmm_status hellaswag_preprocess(const char *text, char **out)
{
    const char *a = text, *e = text + strlen(text);
    while (a < e && is_ws(*a))
        a++;
    while (e > a && is_ws(e[-1]))
        e--;
    sbuf t = { 0 }, u = { 0 }, v = { 0 };
    for (const char *p = a; p < e;) {
        if ((size_t)(e - p) >= 8 && memcmp(p, " [title]", 8) == 0)
            sb_str(&t, ". "), p += 8;
        else
            sb_add(&t, p++, 1);
    }
    sb_add(&t, "", 0);
    for (const char *p = t.s ? t.s : ""; *p;) {
        const char *close = *p == '[' ? strpbrk(p, "]\n") : NULL; /* re's '.' stops at a newline */
        if (close && *close == ']')
            p = close + 1;
        else
            sb_add(&u, p++, 1);
    }
    sb_add(&u, "", 0);
    for (const char *p = u.s ? u.s : ""; *p;) {
        if (p[0] == ' ' && p[1] == ' ')
            sb_str(&v, " "), p += 2;
        else
            sb_add(&v, p++, 1);
    }
    free(t.s), free(u.s);
    return sb_take(&v, out);
}

/* Python's str.capitalize for ASCII: the first letter upper, the rest lower */
static void capitalize(char *s)
{
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        if (i == 0 && c >= 'a' && c <= 'z')
            s[i] = (char)(c - 32);
        else if (i > 0 && c >= 'A' && c <= 'Z')
            s[i] = (char)(c + 32);
    }
}

/* ---- readers ---- */
static tmm_status read_hellaswag(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it)
{
    (void)arg;
    const char *label = NULL, *ca, *cb, *ctx;
    long gold;
    TMM_TRY(get_strings(w, obj, "endings", 2, TMM_EVAL_MAX_CHOICES, &it->choices, &it->n_choices));
    TMM_TRY(get_label(w, obj, "label", &gold));
    TMM_TRY(get_string(w, obj, "activity_label", false, &label));
    TMM_TRY(get_string(w, obj, "ctx_a", false, &ca));
    TMM_TRY(get_string(w, obj, "ctx_b", false, &cb));
    if (label && ca && cb) { /* lm-eval: preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()) */
        sbuf b = { 0 };
        size_t at = strlen(label) + 2 + strlen(ca) + 1;
        sb_str(&b, label), sb_str(&b, ": "), sb_str(&b, ca), sb_str(&b, " "), sb_str(&b, cb);
        char *raw = NULL;
        TMM_TRY(sb_take(&b, &raw));
        capitalize(raw + at);
        tmm_status s = hellaswag_preprocess(raw, &it->context);
        free(raw);
        for (uint32_t i = 0; s == TMM_OK && i < it->n_choices; i++) {
            char *p;
            s = hellaswag_preprocess(it->choices[i], &p);
            if (s == TMM_OK)
                free(it->choices[i]), it->choices[i] = p;
        }
        TMM_TRY(s);
    } else { /* llm.c's hellaswag.py: ctx and the endings as they are */
        TMM_TRY(get_string(w, obj, "ctx", true, &ctx));
        if (!(it->context = strdup(ctx)))
            return oom();
    }
    if (gold < 0)
        return set_skip(it, "no label (a test split)");
    if ((uint32_t)gold >= it->n_choices)
        return bad(w, "label %ld is not the index of one of the %u endings", gold, it->n_choices);
    it->gold = (uint32_t)gold;
    return TMM_OK;
}

static tmm_status read_arc(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it)
{
    (void)arg;
    const char *question, *key;
    TMM_TRY(get_string(w, obj, "question", true, &question));
    TMM_TRY(get_string(w, obj, "answerKey", true, &key));
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(obj, "choices");
    if (!ch)
        return bad(w, "missing field \"choices\"");
    if (!cJSON_IsObject(ch))
        return bad(w, "field \"choices\" is %s; it must be an object {\"text\": [...], \"label\": [...]}",
                   type_name(ch));
    where in = *w;
    in.task = "ARC \"choices\"";
    char **labels = NULL;
    uint32_t n_labels = 0;
    tmm_status s = get_strings(&in, ch, "text", 2, TMM_EVAL_MAX_CHOICES, &it->choices, &it->n_choices);
    if (s == TMM_OK)
        s = get_strings(&in, ch, "label", 2, TMM_EVAL_MAX_CHOICES, &labels, &n_labels);
    if (s == TMM_OK && n_labels != it->n_choices)
        s = bad(w, "\"choices\" has %u texts and %u labels", it->n_choices, n_labels);
    it->gold = UINT32_MAX;
    for (uint32_t i = 0; s == TMM_OK && i < n_labels; i++)
        if (strcmp(labels[i], key) == 0 && it->gold == UINT32_MAX)
            it->gold = i;
    if (s == TMM_OK && it->gold == UINT32_MAX)
        s = bad(w, "answerKey \"%.20s\" is not one of the choices' labels", key);
    for (uint32_t i = 0; i < n_labels; i++)
        free(labels[i]);
    free(labels);
    TMM_TRY(s);
    sbuf b = { 0 }; /* lm-eval: "Question: {{question}}\nAnswer:" */
    sb_str(&b, "Question: "), sb_str(&b, question), sb_str(&b, "\nAnswer:");
    return sb_take(&b, &it->context);
}

static tmm_status read_glue(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it)
{
    const glue_task *g = arg;
    long gold;
    TMM_TRY(get_label(w, obj, "label", &gold));
    const char *values[3] = { 0 };
    for (int i = 0; i < 3 && g->fields[i]; i++)
        TMM_TRY(get_string(w, obj, g->fields[i], true, &values[i]));
    uint32_t n = 0;
    while (n < 4 && g->choices[n])
        n++;
    if (!(it->choices = calloc(n, sizeof *it->choices)))
        return oom();
    for (it->n_choices = 0; it->n_choices < n; it->n_choices++)
        if (!(it->choices[it->n_choices] = strdup(g->choices[it->n_choices])))
            return oom();
    sbuf b = { 0 };
    for (const char *p = g->prompt; *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        int f = -1;
        for (int i = 0; close && i < 3 && g->fields[i]; i++)
            if (strlen(g->fields[i]) == (size_t)(close - p - 1) && memcmp(p + 1, g->fields[i], (size_t)(close - p - 1)) == 0)
                f = i;
        if (f >= 0)
            sb_str(&b, values[f]), p = close + 1;
        else
            sb_add(&b, p++, 1);
    }
    TMM_TRY(sb_take(&b, &it->context));
    if (gold < 0)
        return set_skip(it, "no label (label -1: a test split)");
    if ((uint32_t)gold >= n)
        return bad(w, "label %ld is outside 0..%u", gold, n - 1);
    it->gold = (uint32_t)gold;
    return TMM_OK;
}

/* SQuAD, SQuAD v2 (arg non-NULL: unanswerable questions allowed) */
static tmm_status read_squad(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it)
{
    const char *title, *context, *question;
    TMM_TRY(get_string(w, obj, "title", false, &title));
    TMM_TRY(get_string(w, obj, "context", true, &context));
    TMM_TRY(get_string(w, obj, "question", true, &question));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "answers");
    if (!a)
        return bad(w, "missing field \"answers\"");
    if (cJSON_IsObject(a)) {
        where in = *w;
        in.task = "SQuAD \"answers\"";
        TMM_TRY(get_strings(&in, a, "text", 0, TMM_EVAL_MAX_ANSWERS, &it->answers, &it->n_answers));
    } else if (cJSON_IsArray(a)) {
        TMM_TRY(get_strings(w, obj, "answers", 0, TMM_EVAL_MAX_ANSWERS, &it->answers, &it->n_answers));
    } else {
        return bad(w, "field \"answers\" is %s; it must be {\"text\": [...], \"answer_start\": [...]}", type_name(a));
    }
    sbuf b = { 0 }; /* lm-eval's squadv2 prompt */
    if (title && *title)
        sb_str(&b, "Title: "), sb_str(&b, title), sb_str(&b, "\n\n");
    sb_str(&b, "Background: "), sb_str(&b, context), sb_str(&b, "\n\nQuestion: "), sb_str(&b, question);
    sb_str(&b, "\n\nAnswer:");
    TMM_TRY(sb_take(&b, &it->context));
    if (it->n_answers == 0 && !arg)
        return set_skip(it, "no answer (SQuAD v1 has none unanswerable; use squad_v2)");
    return TMM_OK;
}

static tmm_status read_longbench(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it)
{
    (void)arg;
    const char *context, *input;
    TMM_TRY(get_string(w, obj, "context", true, &context));
    TMM_TRY(get_string(w, obj, "input", true, &input));
    TMM_TRY(get_strings(w, obj, "answers", 0, TMM_EVAL_MAX_ANSWERS, &it->answers, &it->n_answers));
    sbuf b = { 0 };
    sb_str(&b, context), sb_str(&b, "\n\nQuestion: "), sb_str(&b, input), sb_str(&b, "\nAnswer:");
    TMM_TRY(sb_take(&b, &it->context));
    if (it->n_answers == 0)
        return set_skip(it, "no answer");
    return TMM_OK;
}

static tmm_status read_ifeval(const where *w, const cJSON *obj, const void *arg, tmm_eval_item *it)
{
    (void)arg;
    const char *prompt;
    TMM_TRY(get_string(w, obj, "prompt", true, &prompt));
    if (!(it->context = strdup(prompt)))
        return oom();
    char **ids = NULL;
    uint32_t n = 0;
    tmm_status s = get_strings(w, obj, "instruction_id_list", 1, TMM_EVAL_MAX_RULES, &ids, &n);
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(obj, "kwargs");
    if (s == TMM_OK && !kw)
        s = bad(w, "missing field \"kwargs\"");
    if (s == TMM_OK && !cJSON_IsArray(kw))
        s = bad(w, "field \"kwargs\" is %s; it must be an array of objects", type_name(kw));
    if (s == TMM_OK && (uint32_t)cJSON_GetArraySize(kw) != n)
        s = bad(w, "\"kwargs\" has %d entries for %u instructions", cJSON_GetArraySize(kw), n);
    if (s == TMM_OK && !(it->rules = calloc(n, sizeof *it->rules)))
        s = oom();
    for (uint32_t i = 0; s == TMM_OK && i < n; i++) {
        const cJSON *k = cJSON_GetArrayItem(kw, (int)i);
        char msg[256];
        if (!cJSON_IsObject(k)) {
            s = bad(w, "entry %u of \"kwargs\" is %s; it must be an object", i, type_name(k));
            break;
        }
        int r = tmm_ifeval_rule_parse(ids[i], k, &it->rules[i], msg, sizeof msg);
        it->n_rules = i + 1;
        if (r < 0)
            s = bad(w, "instruction %u (%.60s): %s", i, ids[i], msg);
        else if (r > 0 && !it->skip)
            s = set_skip(it, msg);
    }
    for (uint32_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return s;
}

static const glue_task
    sst2 = { { "sentence" }, "{sentence}\nQuestion: Is this sentence positive or negative?\nAnswer:",
             { "negative", "positive" } },
    cola = { { "sentence" }, "{sentence}\nQuestion: Does this sentence make sense?\nAnswer:", { "no", "yes" } },
    mrpc = { { "sentence1", "sentence2" },
             "Sentence 1: {sentence1}\nSentence 2: {sentence2}\nQuestion: Do both sentences mean the same thing?\nAnswer:",
             { "no", "yes" } },
    qqp = { { "question1", "question2" },
            "Question 1: {question1}\nQuestion 2: {question2}\nQuestion: Do both questions ask the same thing?\nAnswer:",
            { "no", "yes" } },
    mnli = { { "premise", "hypothesis" }, "{premise}\nQuestion: {hypothesis} True, False or Neither?\nAnswer:",
             { "True", "Neither", "False" } },
    qnli = { { "question", "sentence" },
             "{question}\n{sentence}\nQuestion: Does this response answer the question?\nAnswer:", { "yes", "no" } },
    rte = { { "sentence1", "sentence2" }, "{sentence1}\nQuestion: {sentence2} True or False?\nAnswer:",
            { "True", "False" } },
    wnli = { { "sentence1", "sentence2" }, "{sentence1}\nQuestion: {sentence2} True or False?\nAnswer:",
             { "False", "True" } };

static const int answerable_too = 1;

static const tmm_eval_task tasks[] = {
    { "hellaswag", TMM_EVAL_CHOICE, read_hellaswag, NULL, "HellaSwag: ctx_a/ctx_b/activity_label (or ctx), endings, label" },
    { "arc_easy", TMM_EVAL_CHOICE, read_arc, NULL, "ARC-Easy: question, choices {text, label}, answerKey" },
    { "arc_challenge", TMM_EVAL_CHOICE, read_arc, NULL, "ARC-Challenge: question, choices {text, label}, answerKey" },
    { "sst2", TMM_EVAL_CHOICE, read_glue, &sst2, "GLUE SST-2: sentence, label (0 negative, 1 positive)" },
    { "cola", TMM_EVAL_CHOICE, read_glue, &cola, "GLUE CoLA: sentence, label (0 unacceptable, 1 acceptable)" },
    { "mrpc", TMM_EVAL_CHOICE, read_glue, &mrpc, "GLUE MRPC: sentence1, sentence2, label (1 equivalent)" },
    { "qqp", TMM_EVAL_CHOICE, read_glue, &qqp, "GLUE QQP: question1, question2, label (1 duplicate)" },
    { "mnli", TMM_EVAL_CHOICE, read_glue, &mnli, "GLUE MNLI: premise, hypothesis, label (0 entailment, 1 neutral, 2 contradiction)" },
    { "qnli", TMM_EVAL_CHOICE, read_glue, &qnli, "GLUE QNLI: question, sentence, label (0 entailment)" },
    { "rte", TMM_EVAL_CHOICE, read_glue, &rte, "GLUE RTE: sentence1, sentence2, label (0 entailment)" },
    { "wnli", TMM_EVAL_CHOICE, read_glue, &wnli, "GLUE WNLI: sentence1, sentence2, label (1 entailment)" },
    { "squad", TMM_EVAL_QA, read_squad, NULL, "SQuAD v1.1: title, context, question, answers {text, answer_start}" },
    { "squad_v2", TMM_EVAL_QA, read_squad, &answerable_too, "SQuAD v2: as squad; empty answers: unanswerable" },
    { "longbench", TMM_EVAL_QA, read_longbench, NULL, "LongBench QA: context, input, answers [strings]" },
    { "ifeval", TMM_EVAL_IFEVAL, read_ifeval, NULL, "IFEval: prompt, instruction_id_list, kwargs" },
};
#define N_TASKS (sizeof tasks / sizeof tasks[0])

const char *const *tmm_eval_task_names(void)
{
    static const char *names[N_TASKS + 1];
    for (size_t i = 0; i < N_TASKS; i++)
        names[i] = tasks[i].name;
    return names;
}

tmm_status tmm_eval_task_find(const char *name, const tmm_eval_task **out)
{
    for (size_t i = 0; i < N_TASKS; i++)
        if (strcmp(tasks[i].name, name) == 0) {
            *out = &tasks[i];
            return TMM_OK;
        }
    char list[512];
    size_t n = 0;
    for (size_t i = 0; i < N_TASKS; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", tasks[i].name);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no task '%.60s'; tasks: %s", name, list);
}

const char *tmm_eval_task_name(const tmm_eval_task *t) { return t->name; }
tmm_eval_kind tmm_eval_task_kind(const tmm_eval_task *t) { return t->kind; }
const char *tmm_eval_task_about(const tmm_eval_task *t) { return t->about; }
const char *tmm_eval_kind_name(tmm_eval_kind k)
{
    return k == TMM_EVAL_CHOICE ? "multiple choice" : k == TMM_EVAL_QA ? "question answering" : "instruction following";
}

static void item_free(tmm_eval_item *it)
{
    free(it->context);
    for (uint32_t i = 0; i < it->n_choices; i++)
        free(it->choices[i]);
    free(it->choices);
    for (uint32_t i = 0; i < it->n_answers; i++)
        free(it->answers[i]);
    free(it->answers);
    for (uint32_t i = 0; i < it->n_rules; i++)
        tmm_ifeval_rule_free(&it->rules[i]);
    free(it->rules);
    free(it->skip);
}

void tmm_eval_set_free(tmm_eval_set *set)
{
    if (!set)
        return;
    for (uint32_t i = 0; i < set->count; i++)
        item_free(&set->items[i]);
    free(set->items);
    set->items = NULL, set->count = 0;
}

static tmm_status parse_line(const tmm_eval_task *task, const where *w, const char *line, size_t len,
                             tmm_eval_item *it)
{
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(line, len, &end, false);
    tmm_status s = TMM_OK;
    if (!obj)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%u: not JSON (near byte %zu of the line); a task file holds one "
                     "JSON object per line", w->file, w->line, (size_t)((end ? end : line) - line));
    else if (!cJSON_IsObject(obj))
        s = bad(w, "the line is %s; it must be a JSON object", type_name(obj));
    if (s == TMM_OK && tmm_json_has_nul_escape(line, len))
        s = bad(w, "the line holds the escape \\u0000 (a NUL character), which would cut its text: remove it");
    const char *dupkey = s == TMM_OK ? tmm_json_duplicate_key(obj) : NULL;
    if (dupkey)
        s = bad(w, "the key \"%.40s\" occurs twice", dupkey);
    for (; s == TMM_OK && end && end < line + len; end++)
        if (!is_ws(*end))
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%u: more than one JSON value on the line", w->file, w->line);
    it->line = w->line;
    if (s == TMM_OK)
        s = task->read(w, obj, task->arg, it);
    if (s == TMM_OK && task->kind == TMM_EVAL_CHOICE)
        for (uint32_t i = 0; i < it->n_choices && !it->skip; i++)
            if (!*it->choices[i])
                s = set_skip(it, "an empty choice");
    cJSON_Delete(obj);
    return s;
}

tmm_status tmm_eval_parse(const tmm_eval_task *task, const char *text, size_t size, const char *name,
                          tmm_eval_set *out)
{
    *out = (tmm_eval_set){ task, NULL, 0 };
    if (strlen(text) != size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: holds a NUL byte; a task file is JSONL text", name);
    size_t cap = 0;
    tmm_status s = TMM_OK;
    where w = { name, task->name, 0 };
    for (const char *p = text; s == TMM_OK && *p;) {
        const char *nl = strchr(p, '\n'), *e = nl ? nl : p + strlen(p);
        w.line++;
        bool blank = true;
        for (const char *q = p; q < e && blank; q++)
            blank = is_ws(*q);
        if ((size_t)(e - p) > TMM_EVAL_MAX_LINE)
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s:%u: the line has %zu bytes; a task item may have at most %u",
                         name, w.line, (size_t)(e - p), TMM_EVAL_MAX_LINE);
        else if (!blank) {
            if (out->count == UINT32_MAX - 1)
                s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: too many items", name);
            if (s == TMM_OK && out->count == cap) {
                size_t nc = cap ? 2 * cap : 64;
                tmm_eval_item *t = realloc(out->items, nc * sizeof *t);
                if (!t)
                    s = oom();
                else
                    out->items = t, cap = nc;
            }
            if (s == TMM_OK) {
                tmm_eval_item *it = &out->items[out->count++];
                memset(it, 0, sizeof *it);
                s = parse_line(task, &w, p, (size_t)(e - p), it);
            }
        }
        p = nl ? nl + 1 : e;
    }
    if (s == TMM_OK && out->count == 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: no items (a %s task file holds one JSON object per line)", name,
                     task->name);
    if (s != TMM_OK)
        tmm_eval_set_free(out);
    return s;
}

tmm_status tmm_eval_read(const tmm_eval_task *task, const char *path, tmm_eval_set *out)
{
    void *text;
    size_t size;
    *out = (tmm_eval_set){ task, NULL, 0 };
    TMM_TRY(tmm_read_file(path, "task file", TMM_LIMIT_TASK, &text, &size));
    tmm_status s = tmm_eval_parse(task, text, size, path, out);
    free(text);
    return s;
}
