/* tmm eval --task: a checkpoint scored on a benchmark's local task file
 * (src/eval, docs/eval.md). */
#define _POSIX_C_SOURCE 200809L /* isatty */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "eval/eval.h"
#include "files.h"
#include "gen/generator.h"
#include "model/checkpoint.h"

static void usage(void)
{
    printf("usage: tmm eval --checkpoint DIR --task NAME --data FILE [options]\n\n"
           "Scores a checkpoint on a benchmark as lm-evaluation-harness does, from a local JSONL\n"
           "file of the benchmark's Hugging Face fields (docs/eval.md, docs/guide/eval.md):\n"
           "multiple choice by the log-likelihood of each choice (acc, acc_norm), question\n"
           "answering by greedy generation (SQuAD exact match and F1), IFEval's verifiable\n"
           "instructions (strict and loose accuracy). The model must read text (bytes or a\n"
           "tokenizer.json); contexts longer than its window are cut from the left.\n\n"
           "tasks:\n");
    for (const char *const *n = tmm_eval_task_names(); *n; n++) {
        const tmm_eval_task *t;
        if (tmm_eval_task_find(*n, &t) == TMM_OK)
            printf("  %-14s %s\n", *n, tmm_eval_task_about(t));
    }
    printf("\noptions:\n"
           "  --data FILE          the items, one JSON object per line\n"
           "  --shots K            K demonstrations before each item: the first K scorable items of\n"
           "                       --fewshot-data, else of --data (which are then not scored)\n"
           "  --fewshot-data FILE  where demonstrations come from (a train split)\n"
           "  --limit N            score the first N items only (after the demonstrations)\n"
           "  --batch N            sequences per forward pass (default 8; an item's choices go together)\n"
           "  --max-gen N          tokens generated per answer (default 32 for QA, 256 for ifeval, at most\n"
           "                       half the context; the multiple-choice tasks generate nothing)\n"
           "  --json               the report as JSON on stdout\n"
           "  --samples FILE       every scored item as a JSON line: its line in --data, the gold, and\n"
           "                       the choices' log-likelihoods or the generated text\n"
           "  --quiet              no progress on stderr\n"
           "  --device N           Vulkan device (see tmm devices)\n");
}

typedef struct progress {
    bool on, tty;
    double start, last;
    const char *task;
} progress;

static void on_progress(uint32_t done, uint32_t total, void *user)
{
    progress *p = user;
    double now = tmm_bench_now_ms();
    if (!p->on || (!p->tty && now - p->last < 10000 && done < total))
        return;
    p->last = now;
    double s = (now - p->start) / 1000, eta = done ? s / done * (total - done) : 0;
    fprintf(stderr, "%s%s: %u/%u items, %.1f s, ETA %.0f s%s", p->tty ? "\r" : "", p->task, done, total, s, eta,
            p->tty ? "\033[K" : "\n");
    if (p->tty && done == total)
        fprintf(stderr, "\n");
}

static void print_report(const tmm_eval_report *r, const char *checkpoint, const char *data,
                         const tmm_generator_info *info)
{
    printf("%s (%s, %u-shot) on %s\n", r->task, tmm_eval_kind_name(r->kind), r->shots, data);
    printf("checkpoint %s: %s, step %llu, n_ctx %u, tokenizer %s\n", checkpoint, tmm_arch_name(info->config.arch),
           (unsigned long long)info->step, info->config.n_ctx, info->tokenizer);
    printf("items: %u in the file, %u scored, %u skipped, %u cut from the left to fit the context\n", r->items,
           r->scored, r->skipped, r->truncated);
    for (uint32_t i = 0; i < r->n_reasons; i++)
        printf("  skipped %u: %s\n", r->reasons[i].count, r->reasons[i].reason);
    for (uint32_t i = 0; i < r->n_metrics; i++) {
        if (isfinite(r->metrics[i].stderr_))
            printf("%-24s %.4f ± %.4f\n", r->metrics[i].name, r->metrics[i].value, r->metrics[i].stderr_);
        else
            printf("%-24s %.4f\n", r->metrics[i].name, r->metrics[i].value);
    }
}

/* text as valid UTF-8: every byte that does not start a well-formed sequence becomes U+FFFD */
static char *valid_utf8(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        int len = *p < 0x80 ? 1 : (*p >> 5) == 6 && *p >= 0xC2 ? 2 : (*p >> 4) == 14 ? 3
                  : (*p >> 3) == 30 && *p <= 0xF4 ? 4 : 0;
        for (int k = 1; k < len; k++)
            if ((p[k] & 0xC0) != 0x80)
                len = 0;
        if (len == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
            len = 0; /* overlong, surrogate */
        if (len == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
            len = 0;
        if (len) {
            memcpy(o, p, (size_t)len), o += len, p += len;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3), o += 3, p++;
        }
    }
    *o = '\0';
    return out;
}

/* --samples: one JSON object per scored item (lm-eval's --log_samples) */
static tmm_status write_samples(const char *path, const tmm_eval_set *set, const tmm_eval_report *r)
{
    char *all = NULL;
    size_t n = 0, cap = 0;
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; s == TMM_OK && i < set->count; i++) {
        const tmm_eval_item *it = &set->items[i];
        if (!r->loglik[i] && !r->generated[i])
            continue;
        cJSON *o = cJSON_CreateObject();
        if (o) {
            cJSON_AddNumberToObject(o, "line", it->line);
            if (r->loglik[i]) {
                cJSON_AddNumberToObject(o, "gold", it->gold);
                cJSON_AddItemToObject(o, "loglik", cJSON_CreateDoubleArray(r->loglik[i], (int)it->n_choices));
            } else {
                char *text = valid_utf8(r->generated[i]);
                cJSON_AddStringToObject(o, "generated", text ? text : "");
                free(text);
                if (r->kind == TMM_EVAL_QA) {
                    cJSON *a = cJSON_AddArrayToObject(o, "answers");
                    for (uint32_t k = 0; a && k < it->n_answers; k++)
                        cJSON_AddItemToArray(a, cJSON_CreateString(it->answers[k]));
                }
            }
        }
        char *line = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        size_t len = line ? strlen(line) : 0;
        if (line && n + len + 2 > cap) {
            size_t nc = (n + len + 2) * 2;
            char *t = realloc(all, nc);
            if (t)
                all = t, cap = nc;
        }
        if (!line || n + len + 2 > cap)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        else {
            memcpy(all + n, line, len);
            n += len;
            all[n++] = '\n';
        }
        free(line);
    }
    if (s == TMM_OK)
        s = tmm_write_file_atomic(path, all ? all : "", n);
    free(all);
    return s;
}

int cmd_eval_task(int argc, char **argv)
{
    enum { O_TASK = 256, O_DATA, O_FEWSHOT, O_SHOTS, O_LIMIT, O_BATCH, O_MAX_GEN, O_JSON, O_QUIET, O_SAMPLES };
    static const struct option longopts[] = {
        { "checkpoint", required_argument, NULL, 'c' }, { "task", required_argument, NULL, O_TASK },
        { "data", required_argument, NULL, O_DATA },     { "fewshot-data", required_argument, NULL, O_FEWSHOT },
        { "shots", required_argument, NULL, O_SHOTS },   { "limit", required_argument, NULL, O_LIMIT },
        { "batch", required_argument, NULL, O_BATCH },   { "max-gen", required_argument, NULL, O_MAX_GEN },
        { "json", no_argument, NULL, O_JSON },           { "quiet", no_argument, NULL, O_QUIET },
        { "device", required_argument, NULL, 'd' },      { "help", no_argument, NULL, 'h' },
        { "samples", required_argument, NULL, O_SAMPLES },
        { 0, 0, 0, 0 }
    };
    const char *checkpoint = NULL, *task_name = NULL, *data = NULL, *fewshot_path = NULL, *samples = NULL;
    unsigned long v, batch = 8;
    tmm_eval_options o = { 0 };
    bool json = false, quiet = false;
    int opt, device = -1;
    cli_args args = { .longopts = longopts, .shortopts = "c:d:h" };
    while ((opt = cli_getopt(&args, argc, argv)) != -1) {
        switch (opt) {
        case 'c': checkpoint = optarg; break;
        case O_TASK: task_name = optarg; break;
        case O_DATA: data = optarg; break;
        case O_FEWSHOT: fewshot_path = optarg; break;
        case O_SHOTS: if (!cli_parse_uint("--shots", optarg, 1024, &v)) return 2; o.shots = (uint32_t)v; break;
        case O_LIMIT: if (!cli_parse_uint("--limit", optarg, UINT32_MAX, &v)) return 2; o.limit = (uint32_t)v; break;
        case O_BATCH:
            if (!cli_parse_uint("--batch", optarg, 1024, &batch))
                return 2;
            if (batch == 0) {
                cli_fail("--batch must be at least 1\n");
                return 2;
            }
            break;
        case O_MAX_GEN:
            if (!cli_parse_uint("--max-gen", optarg, 1u << 20, &v))
                return 2;
            if (v == 0) {
                cli_fail("--max-gen must be at least 1\n");
                return 2;
            }
            o.max_gen = (uint32_t)v;
            break;
        case O_JSON: json = true; break;
        case O_SAMPLES: samples = optarg; break;
        case O_QUIET: quiet = true; break;
        case 'd': if (!cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v)) return 2; device = (int)v; break;
        case 'h': usage(); return 0;
        default: return 2;
        }
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see tmm eval --task help\n", argv[optind]);
        return 2;
    }
    if (task_name && (strcmp(task_name, "help") == 0 || strcmp(task_name, "list") == 0)) {
        usage();
        return 0;
    }
    if (!checkpoint || !task_name || !data) {
        cli_fail("--checkpoint DIR, --task NAME and --data FILE are all required (tmm eval --task help)\n");
        return 2;
    }
    const tmm_eval_task *task;
    tmm_status s = tmm_eval_task_find(task_name, &task);
    if (s != TMM_OK) {
        cli_fail("%s\n", tmm_last_error());
        return 2;
    }
    /* a notice, not an error: tools/bench_eval.sh gives --max-gen to every task */
    if (o.max_gen && tmm_eval_task_kind(task) == TMM_EVAL_CHOICE)
        cli_fail("note: --max-gen does nothing for %s (multiple choice: it scores its choices by their "
                 "log-likelihood and generates nothing)\n", task_name);
    if (fewshot_path && !o.shots) {
        cli_fail("--fewshot-data is used only with --shots K\n");
        return 2;
    }
    const char *inputs[] = { data, fewshot_path };
    if (samples && cli_out_apart("--samples", samples, inputs, 2))
        return 1;
    tmm_eval_set set = { 0 }, fewshot = { 0 };
    s = tmm_eval_read(task, data, &set);
    if (s == TMM_OK && fewshot_path)
        s = tmm_eval_read(task, fewshot_path, &fewshot);
    if (s != TMM_OK) {
        tmm_eval_set_free(&set);
        return cli_error("bad task file", s);
    }
    tmm_device *dev;
    if (cli_open_device(device, &dev)) {
        tmm_eval_set_free(&set), tmm_eval_set_free(&fewshot);
        return 1;
    }
    tmm_generator *g = NULL;
    tmm_eval_report r = { 0 };
    progress p = { !quiet, isatty(STDERR_FILENO), tmm_bench_now_ms(), tmm_bench_now_ms(), task_name };
    o.on_progress = on_progress, o.user = &p;
    s = tmm_gen_load(dev, checkpoint, (uint32_t)batch, TMM_TOEPLITZ_AUTO, 0, &g);
    int rc = 0;
    if (s != TMM_OK) {
        rc = cli_error("cannot load the checkpoint", s);
    } else if ((s = tmm_eval_run(g, &set, fewshot_path ? &fewshot : NULL, &o, &r)) != TMM_OK) {
        rc = cli_error("evaluation failed", s);
    } else if (samples && (s = write_samples(samples, &set, &r)) != TMM_OK) {
        rc = cli_error("cannot write --samples", s);
    } else if (json) {
        char *text = tmm_eval_report_json(&r, checkpoint, data, tmm_generator_get_info(g));
        if (text)
            printf("%s\n", text);
        else
            rc = cli_error("out of host memory", TMM_ERR_OUT_OF_HOST_MEMORY);
        free(text);
    } else {
        print_report(&r, checkpoint, data, tmm_generator_get_info(g));
    }
    tmm_eval_report_free(&r);
    tmm_generator_destroy(g);
    tmm_device_destroy(dev);
    tmm_eval_set_free(&set), tmm_eval_set_free(&fewshot);
    return rc;
}
