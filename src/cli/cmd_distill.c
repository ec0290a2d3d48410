/* tmm distill: state-space realizations of a TMM checkpoint's Toeplitz
 * vectors (src/analysis/realize.h), written as a new run directory whose
 * checkpoint decodes at O(r) per token (docs/model.md "Distilled decoding"). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/parallel.h"
#include "analysis/realize.h"
#include "cli.h"
#include "files.h"
#include "io/limits.h"
#include "mixer/toeplitz_mixer.h"
#include "model/arch.h"
#include "model/distilled.h"
#include "ops/ops.h"
#include "ops/tz_ssm_ops.h"
#include "model/checkpoint.h"

#define DEFAULT_TOL 0.01
#define DEFAULT_MAX_ORDER 256u

static const char usage_text[] =
    "usage: tmm distill --checkpoint DIR --out DIR2 [--order R | --tol X] [--head M] [--max-order R]\n"
    "                   [--jobs N] [--force] [--json] [--quiet]\n\n"
    "Fits every Toeplitz vector w of a TMM checkpoint (each layer, head and tap; both of an\n"
    "expanded pair) with a small state-space model: the first M lags kept exactly and the\n"
    "tail w[M + j] ~ sum_i Re(res_i * pole_i^j), by balanced truncation of the tail's Hankel\n"
    "matrix (the Hankel singular values bound the error) and a least-squares fit of the\n"
    "residues. Generation from DIR2 then costs O(r) per token and layer instead of O(t):\n"
    "`tmm generate --checkpoint DIR2` decodes with the state recurrence (the prefill stays\n"
    "exact), `tmm eval --checkpoint DIR2` evaluates the distilled model, and `tmm bench\n"
    "generate --checkpoint DIR2` compares it with exact decoding.\n\n"
    "  --checkpoint DIR   a TMM checkpoint (run directory, checkpoint directory or model file)\n"
    "  --out DIR2         the new run directory: the checkpoint with the same weights, its\n"
    "                     realizations (distill.safetensors) and the report (distill.json)\n"
    "  --order R          state dimension of every vector (a complex pole pair counts 2; 1 to\n"
    "                     1024, at most the vector's tail): where the fit at R misses its\n"
    "                     bound (R near the tail's length), the largest order below R whose\n"
    "                     fit meets it, as distill.json reports\n"
    "  --tol X            per vector the smallest order whose relative L2 error\n"
    "                     ||w - w^||/||w|| is at most X (default 0.01); an error when no\n"
    "                     order up to --max-order reaches it\n"
    "  --head M           lags kept exactly (default 1: w[0])\n"
    "  --max-order R      largest order --tol may choose (default 256)\n"
    "  --jobs N           threads, one vector each (default: one per CPU)\n"
    "  --force            replace a run that DIR2 holds\n"
    "  --json             print the report as JSON\n"
    "  --quiet            print nothing but errors\n";

/* One vector's realization and where it came from. */
typedef struct vec_report {
    const char *tensor;
    uint32_t group, tap;
    tmm_realization re;
} vec_report;

typedef struct distill_opts {
    const char *checkpoint, *out;
    tmm_realize_options ro;
    uint32_t jobs;
    bool force, json, quiet;
} distill_opts;

static int parse_args(int argc, char **argv, distill_opts *o)
{
    enum { OPT_ORDER = 256, OPT_TOL, OPT_HEAD, OPT_MAX, OPT_FORCE, OPT_JSON, OPT_QUIET, OPT_JOBS };
    static const struct option longopts[] = { { "checkpoint", required_argument, NULL, 'c' },
                                              { "out", required_argument, NULL, 'o' },
                                              { "order", required_argument, NULL, OPT_ORDER },
                                              { "tol", required_argument, NULL, OPT_TOL },
                                              { "head", required_argument, NULL, OPT_HEAD },
                                              { "max-order", required_argument, NULL, OPT_MAX },
                                              { "force", no_argument, NULL, OPT_FORCE },
                                              { "json", no_argument, NULL, OPT_JSON },
                                              { "quiet", no_argument, NULL, OPT_QUIET },
                                              { "jobs", required_argument, NULL, OPT_JOBS },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0, 0, 0, 0 } };
    *o = (distill_opts){ .ro = { .head = 1, .max_order = DEFAULT_MAX_ORDER } };
    bool tol = false;
    unsigned long v;
    int opt;
    cli_args args = { .longopts = longopts, .shortopts = "c:o:h" };
    while ((opt = cli_getopt(&args, argc, argv)) != -1) {
        switch (opt) {
        case 'c': o->checkpoint = optarg; break;
        case 'o': o->out = optarg; break;
        case OPT_ORDER:
            if (!cli_parse_uint("--order", optarg, TMM_REALIZE_MAX_ORDER, &v))
                return 2;
            if (v == 0) {
                cli_fail("--order must be at least 1 (order 0 would drop every tail: give --tol X to choose "
                         "the order per vector)\n");
                return 2;
            }
            o->ro.order = (uint32_t)v;
            break;
        case OPT_TOL: if (!cli_parse_fraction("--tol", optarg, &o->ro.tol)) return 2; tol = true; break;
        case OPT_HEAD:
            if (!cli_parse_uint("--head", optarg, TMM_MAX_LOOP, &v))
                return 2;
            o->ro.head = (uint32_t)v;
            break;
        case OPT_MAX:
            if (!cli_parse_uint("--max-order", optarg, TMM_REALIZE_MAX_ORDER, &v))
                return 2;
            o->ro.max_order = (uint32_t)v;
            break;
        case OPT_FORCE: o->force = true; break;
        case OPT_JSON: o->json = true; break;
        case OPT_QUIET: o->quiet = true; break;
        case OPT_JOBS:
            if (!cli_parse_uint("--jobs", optarg, 1024, &v))
                return 2;
            o->jobs = (uint32_t)v;
            break;
        case 'h': fputs(usage_text, stdout); return -1;
        default: return 2;
        }
    }
    const char *bad = optind < argc ? "unexpected argument" : !o->checkpoint ? "--checkpoint DIR is required"
                      : !o->out ? "--out DIR2 is required (a new run directory)"
                      : tol && o->ro.order ? "give --order or --tol, not both"
                      : o->ro.head == 0 ? "--head must be at least 1" : o->ro.max_order == 0 ? "--max-order must be at least 1"
                      : NULL;
    if (bad) {
        cli_fail("%s%s%s\n", bad, optind < argc ? ": " : "", optind < argc ? argv[optind] : "");
        return 2;
    }
    if (!o->ro.order && !tol)
        o->ro.tol = DEFAULT_TOL;
    return 0;
}

typedef struct realize_job {
    const tmm_realize_options *ro;
    uint32_t n;
    vec_report *reports;
    const float **w;  /* each report's vector */
} realize_job;

static tmm_status realize_one(void *ctx, uint32_t i)
{
    const realize_job *j = ctx;
    const tmm_status s = tmm_realize(j->w[i], j->n, j->ro, &j->reports[i].re);
    if (s == TMM_OK)
        return s;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", tmm_last_error());
    return tmm_fail(s, "%s, group %u, tap %u: %s", j->reports[i].tensor, j->reports[i].group, j->reports[i].tap, msg);
}

/* The modes of tensor p's vectors (reports v[0 .. vectors)) as one [G, K, M, 4] tensor of set. */
static tmm_status collect(const tmm_param_table *t, int param, const vec_report *v, uint32_t head,
                          tmm_distilled *set)
{
    const tmm_param *p = &t->params[param];
    const uint32_t vectors = p->shape[0] * p->shape[1];
    uint32_t M = 0;
    for (uint32_t i = 0; i < vectors; i++)
        M = v[i].re.modes > M ? v[i].re.modes : M;
    tmm_distilled_tensor *dt = &set->t[set->count++];
    *dt = (tmm_distilled_tensor){ .param = param, .modes = M, .data = calloc((size_t)vectors * M * 4 + 1, 4) };
    if (!dt->data)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < vectors; i++)
        for (uint32_t j = 0; j < v[i].re.modes; j++) {
            float *md = dt->data + ((size_t)i * M + j) * 4;
            md[0] = v[i].re.pole_re[j], md[1] = v[i].re.pole_im[j], md[2] = v[i].re.res_re[j];
            md[3] = v[i].re.res_im[j];
        }
    /* every layer must fit the decoding kernel's loop budget */
    const tmm_tz_ssm_desc sd = { { .batch = 1, .n = t->config.n_ctx, .d = t->config.d_model, .groups = p->shape[0],
                                   .taps = p->shape[1] }, head, M ? M : 1 };
    tmm_status s = tmm_tz_ssm_check(&sd);
    if (s != TMM_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tmm_last_error());
        return tmm_fail(s, "%s: %s", p->name, why);
    }
    return TMM_OK;
}

/* Realizes every Toeplitz vector of ck (on `jobs` threads); the modes per tensor into set. */
static tmm_status realize_all(const tmm_checkpoint *ck, const tmm_realize_options *ro, uint32_t jobs,
                              vec_report **reports, uint32_t *count, tmm_distilled *set)
{
    const tmm_param_table *t = &ck->table;
    const uint32_t n = t->config.n_ctx;
    uint32_t total = 0, tensors = 0;
    for (uint32_t i = 0; i < t->count; i++)
        if (t->params[i].kind == TMM_PARAM_TOEPLITZ_W)
            total += t->params[i].shape[0] * t->params[i].shape[1], tensors++;
    *reports = calloc(total ? total : 1, sizeof **reports);
    set->t = calloc(tensors ? tensors : 1, sizeof *set->t);
    const float **w = calloc(total ? total : 1, sizeof *w);
    if (!*reports || !set->t || !w) {
        free(w);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    set->head = ro->head < n ? ro->head : n;
    *count = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        for (uint32_t v = 0; p->kind == TMM_PARAM_TOEPLITZ_W && v < p->shape[0] * p->shape[1]; v++) {
            w[*count] = ck->params + p->offset + (uint64_t)v * n;
            (*reports)[(*count)++] = (vec_report){ .tensor = p->name, .group = v / p->shape[1], .tap = v % p->shape[1] };
        }
    }
    realize_job job = { ro, n, *reports, w };
    tmm_status s = tmm_parallel_for(total, jobs, realize_one, &job);
    free(w);
    for (uint32_t i = 0, first = 0; i < t->count && s == TMM_OK; i++)
        if (t->params[i].kind == TMM_PARAM_TOEPLITZ_W) {
            s = collect(t, (int)i, *reports + first, set->head, set);
            first += t->params[i].shape[0] * t->params[i].shape[1];
        }
    return s;
}

/* DIR2 as a run directory holding the checkpoint (same weights and
 * metadata), the run's tokenizer.json and config.json when it has them. */
static tmm_status write_run(const distill_opts *o, const tmm_checkpoint *ck, tmm_lock **lock, char *step_dir,
                            size_t size)
{
    char src_run[TMM_PATH_MAX], path[TMM_PATH_MAX];
    const bool has_run = tmm_checkpoint_run_dir(o->checkpoint, src_run, sizeof src_run) == TMM_OK;
    if (has_run && tmm_same_file(src_run, o->out))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "--out %s is the checkpoint's own run directory: choose a new "
                        "directory", o->out);
    TMM_TRY(tmm_make_dirs(o->out));
    TMM_TRY(tmm_path_join(path, sizeof path, o->out, ".lock"));
    TMM_TRY(tmm_lock_take(path, o->out, "tmm distill", false, lock));
    if (tmm_run_dir_holds_run(o->out)) {
        if (!o->force)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s already holds a run: choose another --out, or replace "
                            "it with --force", o->out);
        TMM_TRY(tmm_run_dir_clear(o->out));
    }
    TMM_TRY(tmm_checkpoint_save(o->out, ck->step, &ck->table, ck->params, NULL, ck->meta, ck->n_meta, 0));
    const char *tok = tmm_checkpoint_meta(ck, "tokenizer");
    const bool needs_tok = tok && strcmp(tok, TMM_RUN_TOKENIZER) == 0;
    if (needs_tok && !has_run)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s uses its run's tokenizer.json, but is not inside a run "
                        "directory: give the run directory", o->checkpoint);
    static const char *const files[] = { TMM_RUN_TOKENIZER, "config.json" };
    for (size_t i = 0; has_run && i < sizeof files / sizeof files[0]; i++) {
        TMM_TRY(tmm_path_join(path, sizeof path, src_run, files[i]));
        if (!tmm_path_exists(path) && !(i == 0 && needs_tok))
            continue;
        void *data;
        size_t bytes;
        TMM_TRY(tmm_read_file(path, files[i], i == 0 ? TMM_LIMIT_TOKENIZER : TMM_LIMIT_CONFIG, &data, &bytes));
        tmm_status s = tmm_path_join(path, sizeof path, o->out, files[i]);
        if (s == TMM_OK)
            s = tmm_write_file_atomic(path, data, bytes);
        free(data);
        TMM_TRY(s);
    }
    return tmm_checkpoint_step_dir(o->out, ck->step, step_dir, size);
}

static cJSON *report_json(const distill_opts *o, const vec_report *v, uint32_t count, uint32_t head, double secs)
{
    cJSON *root = cJSON_CreateObject(), *vectors = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "checkpoint", o->checkpoint);
    cJSON_AddStringToObject(root, "out", o->out);
    cJSON_AddNumberToObject(root, "head", head);
    if (o->ro.order)
        cJSON_AddNumberToObject(root, "order", o->ro.order);
    else
        cJSON_AddNumberToObject(root, "tol", o->ro.tol), cJSON_AddNumberToObject(root, "max_order", o->ro.max_order);
    double mean = 0, worst_rel = 0, worst_abs = 0;
    uint32_t max_order = 0, reflected = 0;
    for (uint32_t i = 0; i < count; i++) {
        const tmm_realization *re = &v[i].re;
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "tensor", v[i].tensor);
        cJSON_AddNumberToObject(e, "group", v[i].group);
        cJSON_AddNumberToObject(e, "tap", v[i].tap);
        cJSON_AddNumberToObject(e, "order", re->order);
        cJSON_AddNumberToObject(e, "modes", re->modes);
        cJSON_AddNumberToObject(e, "reflected", re->reflected);
        cJSON_AddNumberToObject(e, "sigma1", re->sigma1);
        cJSON_AddNumberToObject(e, "l2", re->l2);
        cJSON_AddNumberToObject(e, "bound", re->bound);
        cJSON_AddNumberToObject(e, "max_abs", re->max_abs);
        cJSON_AddNumberToObject(e, "rel_l2", re->rel_l2);
        cJSON_AddItemToArray(vectors, e);
        mean += re->order;
        max_order = re->order > max_order ? re->order : max_order;
        worst_rel = fmax(worst_rel, re->rel_l2), worst_abs = fmax(worst_abs, re->max_abs);
        reflected += re->reflected;
    }
    cJSON *sum = cJSON_AddObjectToObject(root, "summary");
    cJSON_AddNumberToObject(sum, "vectors", count);
    cJSON_AddNumberToObject(sum, "order_mean", count ? mean / count : 0);
    cJSON_AddNumberToObject(sum, "order_max", max_order);
    cJSON_AddNumberToObject(sum, "rel_l2_max", worst_rel);
    cJSON_AddNumberToObject(sum, "max_abs_max", worst_abs);
    cJSON_AddNumberToObject(sum, "reflected_poles", reflected);
    cJSON_AddNumberToObject(root, "seconds", secs);
    cJSON_AddItemToObject(root, "vectors", vectors);
    return root;
}

/* One line per tensor: its vectors' orders and worst errors. */
static void print_table(const vec_report *v, uint32_t count, uint32_t head)
{
    printf("%-22s %7s %17s %12s %12s %12s %12s %9s\n", "tensor", "vectors", "order min/mean/max", "max|w-w^|",
           "rel L2", "|w-w^|_2", "bound", "reflected");
    for (uint32_t i = 0; i < count;) {
        uint32_t j = i, lo = UINT32_MAX, hi = 0, refl = 0;
        double mean = 0, abs_w = 0, rel = 0, bound = 0, l2 = 0, l2_bound = 0;
        for (; j < count && strcmp(v[j].tensor, v[i].tensor) == 0; j++) {
            const tmm_realization *re = &v[j].re;
            lo = re->order < lo ? re->order : lo, hi = re->order > hi ? re->order : hi, mean += re->order;
            abs_w = fmax(abs_w, re->max_abs), rel = fmax(rel, re->rel_l2), bound = fmax(bound, re->bound);
            if (re->l2 >= l2) /* the worst L2 error beside its own bound */
                l2 = re->l2, l2_bound = re->bound;
            refl += re->reflected;
        }
        char orders[32];
        snprintf(orders, sizeof orders, "%u/%.1f/%u", lo, mean / (j - i), hi);
        printf("%-22s %7u %17s %12.3e %12.3e %12.3e %12.3e %9u\n", v[i].tensor, j - i, orders, abs_w, rel, l2,
               l2_bound, refl);
        i = j;
    }
    printf("exact head: %u lag%s; errors are the worst vector's; |w-w^|_2 is the vector with the largest, beside "
           "its bound: 2 x the Hankel singular values past the order, which every fit meets\n", head, head == 1 ? "" : "s");
}

static int run(const distill_opts *o)
{
    tmm_checkpoint ck;
    tmm_status s = tmm_checkpoint_load(o->checkpoint, NULL, 0, &ck);
    if (s != TMM_OK)
        return cli_error("cannot load the checkpoint", s);
    vec_report *reports = NULL;
    uint32_t count = 0;
    tmm_distilled set = { 0 };
    tmm_lock *lock = NULL;
    char step_dir[TMM_PATH_MAX], path[TMM_PATH_MAX];
    const double t0 = tmm_bench_now_ms();
    if (!tmm_arch_of(ck.table.config.arch)->toeplitz)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s is a %s checkpoint: only a TMM has Toeplitz vectors to distill",
                     o->checkpoint, tmm_arch_name(ck.table.config.arch));
    if (s == TMM_OK)
        s = realize_all(&ck, &o->ro, o->jobs, &reports, &count, &set);
    const double secs = (tmm_bench_now_ms() - t0) / 1000;
    const bool created = !tmm_path_exists(o->out); /* removed again if the command fails */
    if (s == TMM_OK)
        s = write_run(o, &ck, &lock, step_dir, sizeof step_dir);
    cJSON *report = s == TMM_OK ? report_json(o, reports, count, set.head, secs) : NULL;
    char *text = report ? cJSON_Print(report) : NULL;
    if (s == TMM_OK && !text)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        s = tmm_path_join(path, sizeof path, o->out, "distill.json");
    if (s == TMM_OK)
        s = tmm_write_file_atomic(path, text, strlen(text));
    if (s == TMM_OK) /* last: a checkpoint without it decodes exactly */
        s = tmm_path_join(path, sizeof path, step_dir, TMM_DISTILL_FILE);
    if (s == TMM_OK)
        s = tmm_distilled_write(path, &ck.table, ck.params, &set, NULL, 0);
    int rc = 0;
    if (s != TMM_OK) {
        rc = cli_error("distillation failed", s);
    } else if (o->json) {
        puts(text);
    } else if (!o->quiet) {
        print_table(reports, count, set.head);
        printf("wrote %s (%u vectors in %.1f s; report: %s/distill.json)\n", o->out, count, secs, o->out);
    }
    cJSON_free(text);
    cJSON_Delete(report);
    for (uint32_t i = 0; reports && i < count; i++)
        tmm_realization_free(&reports[i].re);
    free(reports);
    tmm_distilled_free(&set);
    tmm_checkpoint_free(&ck);
    tmm_lock_release(lock);
    /* a failed distill leaves no run directory that a rerun would need --force to replace */
    if (rc && created && tmm_path_exists(o->out) &&
        (tmm_run_dir_clear(o->out) != TMM_OK || tmm_remove_dir(o->out) != TMM_OK))
        fprintf(stderr, "tmm distill: could not remove the partial %s: %s\n", o->out, tmm_last_error());
    return rc;
}

int cmd_distill(int argc, char **argv)
{
    distill_opts o;
    const int rc = parse_args(argc, argv, &o);
    return rc < 0 ? 0 : rc ? rc : run(&o);
}
