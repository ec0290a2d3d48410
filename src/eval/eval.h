/* tmm eval --task: lm-eval-style benchmarks of a checkpoint over local JSONL
 * task files (docs/eval.md is the specification).
 *
 *   tmm_eval_task_find("hellaswag", &task)
 *   tmm_eval_read(task, "hellaswag_val.jsonl", &set)      every line checked
 *   tmm_eval_run(generator, &set, NULL, &options, &report)
 *   tmm_eval_report_json(&report) / the CLI's text
 *
 * Three kinds of task: multiple choice by the log-likelihood of each choice
 * given the context (acc, acc_norm), question answering by greedy generation
 * scored with SQuAD's exact match and token F1, and IFEval's verifiable
 * instructions (strict and loose accuracy). */
#ifndef TMM_EVAL_EVAL_H
#define TMM_EVAL_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmm/generate.h"

typedef enum tmm_eval_kind { TMM_EVAL_CHOICE, TMM_EVAL_QA, TMM_EVAL_IFEVAL } tmm_eval_kind;

#define TMM_EVAL_MAX_CHOICES 32u
#define TMM_EVAL_MAX_ANSWERS 256u
#define TMM_EVAL_MAX_RULES 32u
#define TMM_EVAL_MAX_LINE (64u << 20) /* bytes in one JSONL line (a LongBench context is < 2 MiB) */

/* One IFEval instruction (ifeval.c has the table of kinds). */
typedef struct tmm_ifeval_rule {
    int kind;
    char *text;            /* keyword, letter, end phrase, marker, prompt to repeat, section splitter */
    char **words;          /* keywords:existence and keywords:forbidden_words */
    uint32_t n_words;
    int64_t number;        /* the count the rule compares with */
    int64_t nth;           /* nth_paragraph_first_word: which paragraph (from 1) */
    bool at_least;         /* relation "at least" (else "less than") */
} tmm_ifeval_rule;

typedef struct tmm_eval_item {
    uint32_t line;         /* 1-based line of the file */
    char *context;         /* the prompt, as the task formats it (without demonstrations) */
    char **choices;        /* choice: the continuations (without the " " that joins them) */
    uint32_t n_choices, gold;
    char **answers;        /* qa: the gold answers (none: unanswerable, gold "") */
    uint32_t n_answers;
    tmm_ifeval_rule *rules;
    uint32_t n_rules;
    char *skip;            /* not NULL: the item is not scored, for this reason */
} tmm_eval_item;

typedef struct tmm_eval_task tmm_eval_task;

typedef struct tmm_eval_set {
    const tmm_eval_task *task;
    tmm_eval_item *items;
    uint32_t count;
} tmm_eval_set;

/* Every task's name, NULL-terminated; its kind and a one-line description. */
const char *const *tmm_eval_task_names(void);
tmm_status tmm_eval_task_find(const char *name, const tmm_eval_task **out);
const char *tmm_eval_task_name(const tmm_eval_task *task);
tmm_eval_kind tmm_eval_task_kind(const tmm_eval_task *task);
const char *tmm_eval_task_about(const tmm_eval_task *task);
const char *tmm_eval_kind_name(tmm_eval_kind kind);

/* Reads a task file (JSONL, one item per line; blank lines ignored), checking
 * every field: a missing or mistyped field fails with one line naming the
 * file, the line and the field. */
tmm_status tmm_eval_read(const tmm_eval_task *task, const char *path, tmm_eval_set *out);
/* The same from memory (text[size] must be NUL); name appears in messages. */
tmm_status tmm_eval_parse(const tmm_eval_task *task, const char *text, size_t size, const char *name,
                          tmm_eval_set *out);
void tmm_eval_set_free(tmm_eval_set *set);

/* ---- running ---- */
typedef struct tmm_eval_options {
    uint32_t limit;        /* score at most this many items (0: all) */
    uint32_t shots;        /* demonstrations before each item */
    uint32_t max_gen;      /* generated tokens per answer (0: the kind's default, 32 QA, 256 IFEval) */
    void (*on_progress)(uint32_t done, uint32_t total, void *user);
    void *user;
} tmm_eval_options;

#define TMM_EVAL_MAX_METRICS 8
#define TMM_EVAL_MAX_REASONS 8

typedef struct tmm_eval_metric {
    const char *name;
    double value;
    double stderr_;        /* NaN where it is not defined (one item; F1 and MCC over the set) */
} tmm_eval_metric;

typedef struct tmm_eval_report {
    const char *task;
    tmm_eval_kind kind;
    uint32_t items;        /* items in the file */
    uint32_t shots;
    uint32_t scored;
    uint32_t truncated;    /* scored items whose text was cut from the left to fit the context */
    uint32_t skipped;
    struct { char *reason; uint32_t count; } reasons[TMM_EVAL_MAX_REASONS];
    uint32_t n_reasons;
    tmm_eval_metric metrics[TMM_EVAL_MAX_METRICS];
    uint32_t n_metrics;
    /* per item of the set (count entries; unscored: NaN / NULL): the choice
     * log-likelihoods (n_choices each, in item order) and the QA / IFEval
     * generations */
    double **loglik;
    char **generated;
    uint32_t count;
} tmm_eval_report;

/* Scores the set with the generator's model (its batch is the number of
 * sequences per forward pass). fewshot: where demonstrations come from (NULL:
 * the first labelled items of set itself, which are then not scored). */
tmm_status tmm_eval_run(tmm_generator *gen, const tmm_eval_set *set, const tmm_eval_set *fewshot,
                        const tmm_eval_options *options, tmm_eval_report *out);
void tmm_eval_report_free(tmm_eval_report *report);
/* The report as a JSON object (malloc'ed text; NULL when out of memory). */
char *tmm_eval_report_json(const tmm_eval_report *report, const char *checkpoint, const char *data,
                           const tmm_generator_info *info);

/* Log-likelihood of each continuation after the context, as the harness
 * scores a choice: sum over the continuation's tokens of log p(token |
 * everything before), contexts cut from the left to fit n_ctx + 1 tokens.
 * truncated (may be NULL) counts the cut ones. */
tmm_status tmm_eval_loglik(tmm_generator *gen, const char *const *contexts, const char *const *continuations,
                           uint32_t count, double *loglik, uint32_t *truncated);

#endif
