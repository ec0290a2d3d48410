/* tmm train and tmm eval. */
#define _POSIX_C_SOURCE 200809L /* sigaction, isatty, strdup */
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "io/limits.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/trainer.h"

/* The signal that asked training to stop (SIGINT, SIGTERM or SIGHUP), or 0. */
static volatile sig_atomic_t interrupted;

static void on_stop_signal(int sig) { interrupted = sig; }

/* Options of tmm train that are not config fields. */
enum { O_PRESET = 256, O_CONFIG, O_RESUME, O_DEVICE, O_QUIET, O_STOP_AFTER, O_FORCE, O_FIELD };

static const struct option command_options[] = {
    { "preset", required_argument, NULL, O_PRESET }, { "config", required_argument, NULL, O_CONFIG },
    { "resume", required_argument, NULL, O_RESUME }, { "device", required_argument, NULL, O_DEVICE },
    { "quiet", no_argument, NULL, O_QUIET },         { "stop-after", required_argument, NULL, O_STOP_AFTER },
    { "force", no_argument, NULL, O_FORCE },         { "help", no_argument, NULL, 'h' },
};
#define N_COMMAND_OPTIONS (sizeof command_options / sizeof command_options[0])
#define MAX_OPTIONS 64

/* The getopt table: the command's options, then one per config field with a
 * flag (val O_FIELD + its row), then the terminator. */
static void build_options(struct option *opts)
{
    size_t n = 0;
    for (size_t i = 0; i < N_COMMAND_OPTIONS; i++)
        opts[n++] = command_options[i];
    for (const tmm_config_field *f = tmm_config_fields; f->section; f++)
        if (f->flag && n + 1 < MAX_OPTIONS)
            opts[n++] = (struct option){ f->flag, f->type == TMM_CONFIG_BOOL ? optional_argument : required_argument,
                                         NULL, O_FIELD + (int)(f - tmm_config_fields) };
    opts[n] = (struct option){ 0, 0, 0, 0 };
}

static void usage(FILE *f)
{
    tmm_train_config d;
    tmm_train_config_default(&d);
    fprintf(f,
            "usage: tmm train [options]\n\n"
            "Trains a Toeplitz MLP Mixer. With no options: a small TMM on the copy task (tiny-copy),\n"
            "until it copies held-out sequences with 99%% accuracy.\n\n"
            "config (applied in this order; later wins):\n"
            "  --preset NAME          built-in preset: ");
    for (const char *const *p = tmm_train_preset_names(); *p; p++)
        fprintf(f, "%s%s", *p, p[1] ? ", " : "\n");
    fprintf(f,
            "  --config FILE          JSON config file (the keys below; see README)\n"
            "  --resume DIR           continue a run (its directory or a checkpoint) exactly where it stopped\n"
            "  flags                  one per config key, below\n");
    const char *section = "";
    for (const tmm_config_field *c = tmm_config_fields; c->section; c++) {
        if (!c->flag)
            continue;
        if (strcmp(section, c->section) != 0)
            fprintf(f, "\n%s:\n", section = c->section);
        char left[48], value[64], choices[96] = "";
        if (c->type == TMM_CONFIG_BOOL)
            snprintf(left, sizeof left, "--%s[=false]", c->flag);
        else
            snprintf(left, sizeof left, "--%s %s", c->flag, c->arg);
        if (c->type == TMM_CONFIG_ENUM) {
            size_t n = (size_t)snprintf(choices, sizeof choices, ": ");
            for (int i = 0; c->names[i]; i++)
                n += (size_t)snprintf(choices + n, sizeof choices - n, "%s%s", i ? "|" : "", c->names[i]);
        }
        tmm_config_value_text(&d, c, value, sizeof value);
        char line[320];
        int n = snprintf(line, sizeof line, "  %-22s %s%s", left, c->help, choices);
        const char *gap = n > 64 ? "\n                         " : " ";
        fprintf(f, "%s%s[%s.%s, default %s]\n", line, gap, c->section, c->key, *value ? value : "none");
    }
    fprintf(f,
            "\nrun:\n"
            "  --force                start a new run in a directory that holds another run (it is replaced)\n"
            "  --device N             Vulkan device (see tmm devices)\n"
            "  --quiet                no progress output\n"
            "  --stop-after N         stop (and save) after N steps of this invocation's run\n\n"
            "A run directory is used by one process at a time. Ctrl-C, SIGTERM and SIGHUP save a\n"
            "checkpoint and exit; resume with --resume DIR.\n");
}

typedef struct progress_ui {
    bool tty, quiet;
    bool copy;
} progress_ui;

static void on_progress(const tmm_train_progress *p, void *user)
{
    const progress_ui *ui = user;
    if (ui->quiet)
        return;
    double eta = p->step ? p->elapsed_s / (double)p->step * (double)(p->steps - p->step) : 0;
    char acc[64] = "";
    if (p->eval)
        snprintf(acc, sizeof acc, "  val_loss %.4f  %s %.2f%%", p->val_loss, ui->copy ? "copy_acc" : "val_acc",
                 100 * p->accuracy);
    if (ui->tty) {
        int width = 24, filled = (int)((double)width * (double)p->step / (double)p->steps);
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < filled ? '#' : '.';
        bar[width] = '\0';
        printf("\r[%s] step %llu/%llu  loss %.4f  %.0f tok/s  ETA %.0fs%s\033[K", bar, (unsigned long long)p->step,
               (unsigned long long)p->steps, p->loss, p->tokens_per_s, eta, acc);
        if (p->eval)
            printf("\n");
    } else {
        printf("step %llu/%llu  loss %.4f  lr %.3g  grad_norm %.3g  %.0f tok/s  %.1fs%s\n",
               (unsigned long long)p->step, (unsigned long long)p->steps, p->loss, p->lr, p->grad_norm,
               p->tokens_per_s, p->elapsed_s, acc);
    }
    fflush(stdout);
}

static int load_json_file(tmm_train_config *c, const char *path)
{
    void *text;
    size_t size;
    tmm_status s = tmm_read_file(path, "config file", TMM_LIMIT_CONFIG, &text, &size);
    if (s == TMM_OK && strlen(text) != size)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: holds a NUL byte; a config file is JSON text", path);
    if (s == TMM_OK)
        s = tmm_train_config_apply_json(c, text, path);
    free(text);
    return s == TMM_OK ? 0 : cli_error("bad config", s);
}

static int bad_option(tmm_status s)
{
    fprintf(stderr, "tmm train: %s\n", *tmm_last_error() ? tmm_last_error() : tmm_status_name(s));
    return 2;
}

int cmd_train(int argc, char **argv)
{
    tmm_train_config c;
    tmm_train_config_default(&c);
    struct option opts[MAX_OPTIONS];
    build_options(opts);
    /* pass 1: the preset and --resume set the base; pass 2: config files;
     * pass 3: flags override */
    const char *resume = NULL;
    int opt, device = -1;
    bool quiet = false, data_given = false, force = false, run_dir_given = false;
    unsigned long v, stop_after = 0;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt == O_PRESET) {
            const char *json = tmm_train_preset(optarg);
            if (!json) {
                fprintf(stderr, "tmm train: no preset '%s'; presets: ", optarg);
                for (const char *const *p = tmm_train_preset_names(); *p; p++)
                    fprintf(stderr, "%s%s", *p, p[1] ? ", " : "\n");
                return 2;
            }
            tmm_status s = tmm_train_config_apply_json(&c, json, optarg);
            if (s != TMM_OK)
                return cli_error("bad preset", s);
        } else if (opt == O_RESUME) {
            resume = optarg;
            tmm_status s = tmm_train_config_from_checkpoint(resume, &c);
            if (s != TMM_OK)
                return cli_error("cannot resume", s);
        } else if (opt == 'h') {
            usage(stdout);
            return 0;
        } else if (opt == '?') {
            fprintf(stderr, "tmm train: unknown or incomplete option '%s'; see tmm train --help\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tmm train: unexpected argument '%s'; see tmm train --help\n", argv[optind]);
        return 2;
    }
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1)
        if (opt == O_CONFIG && load_json_file(&c, optarg))
            return 1;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (opt >= O_FIELD) {
            const tmm_config_field *f = &tmm_config_fields[opt - O_FIELD];
            bool first = f->type == TMM_CONFIG_FILES && !data_given;
            tmm_status s = tmm_config_set_text(&c, f, optarg ? optarg : "true", first);
            if (s != TMM_OK) {
                tmm_train_config_free(&c);
                return bad_option(s);
            }
            if (f->type == TMM_CONFIG_FILES) {
                data_given = true;
                c.task = TMM_DATA_TEXT;
            }
            run_dir_given |= f->offset == offsetof(tmm_train_config, run_dir);
            continue;
        }
        bool ok = true;
        switch (opt) {
        case O_DEVICE: ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v), device = (int)v; break;
        case O_QUIET: quiet = true; break;
        case O_FORCE: force = true; break;
        case O_STOP_AFTER: ok = cli_parse_uint("--stop-after", optarg, 1ul << 40, &v), stop_after = v; break;
        default: break;
        }
        if (!ok) {
            tmm_train_config_free(&c);
            return 2;
        }
    }
    if (resume && !run_dir_given) {
        /* continue in the run directory that holds the checkpoint given, never
         * in one named inside the checkpoint (a copied run stays separate) */
        tmm_status s = tmm_checkpoint_run_dir(resume, c.run_dir, sizeof c.run_dir);
        if (s != TMM_OK) {
            tmm_train_config_free(&c);
            return cli_error("cannot resume", s);
        }
    }

    tmm_data *data;
    tmm_status s = tmm_train_prepare(&c, &data);
    if (s != TMM_OK) {
        tmm_train_config_free(&c);
        return cli_error("bad training setup", s);
    }
    tmm_device *dev;
    if (cli_open_device(device, &dev)) {
        tmm_data_destroy(data);
        tmm_train_config_free(&c);
        return 1;
    }
    char *json = tmm_train_config_to_json(&c);
    if (!quiet) {
        printf("tmm train on %s\n", tmm_device_get_info(dev)->name);
        printf("data: %s\n", tmm_data_describe(data));
        if (c.task == TMM_DATA_TEXT)
            printf("unigram entropy of the training text: %.4f nats per token\n", tmm_data_unigram_entropy(data));
        printf("config:\n%s\n", json ? json : "");
        printf("parameters: %llu\n", (unsigned long long)tmm_model_param_count(&c.model));
        tmm_train_memory mem;
        if (tmm_train_memory_plan(dev, &c, &mem) == TMM_OK) {
            char t[7][32];
            printf("device memory: %s planned (parameters %s, gradients %s, AdamW moments %s, activations %s, "
                   "workspace %s) of a %s heap\n", cli_size(mem.total, t[0], 32), cli_size(mem.model.params, t[1], 32),
                   cli_size(mem.model.grads + mem.accumulation, t[2], 32), cli_size(mem.optimizer, t[3], 32),
                   cli_size(mem.model.activations, t[4], 32),
                   cli_size(mem.model.workspace + mem.model.mixer, t[5], 32), cli_size(mem.heap, t[6], 32));
        }
        if (resume)
            printf("resuming from %s\n", resume);
    }
    free(json);
    tmm_data_destroy(data);

    /* schedulers and `timeout` send SIGTERM, a closed terminal SIGHUP: all save like Ctrl-C */
    struct sigaction sa = { 0 };
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    progress_ui ui = { isatty(STDOUT_FILENO), quiet, c.task == TMM_DATA_COPY };
    tmm_train_hooks hooks = { .on_progress = on_progress, .user = &ui, .stop = &interrupted,
                              .stop_after = stop_after, .replace_run = force };
    tmm_train_result res;
    s = tmm_train(dev, &c, resume, &hooks, &res);
    int rc = 0;
    if (s != TMM_OK) {
        rc = cli_error("training failed", s);
    } else {
        if (ui.tty && !quiet)
            printf("\n");
        printf("%s after %llu steps in %.1f s: loss %.4f", res.interrupted ? "interrupted" : "done",
               (unsigned long long)res.step, res.seconds, res.loss);
        if (res.accuracy >= 0)
            printf(", held-out %s %.2f%%", c.task == TMM_DATA_COPY ? "copy accuracy" : "accuracy", 100 * res.accuracy);
        printf("\ncheckpoint: %s\n", res.checkpoint);
        if (res.reached_target)
            printf("reached the target accuracy of %.0f%%\n", 100 * c.target_accuracy);
        if (res.interrupted)
            printf("resume with: tmm train --resume %s\n", c.run_dir);
        else if (c.task == TMM_DATA_COPY && !c.model.frozen)
            printf("next: tmm eval --checkpoint %s   |   tmm train --frozen --run-dir runs/frozen (the ablation: "
                   "copying fails)\n", c.run_dir);
        else
            printf("next: tmm eval --checkpoint %s\n", c.run_dir);
        rc = res.interrupted ? 128 + (int)interrupted : 0; /* 130 for Ctrl-C, 143 for SIGTERM */
    }
    tmm_device_destroy(dev);
    tmm_train_config_free(&c);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    static const struct option longopts[] = { { "checkpoint", required_argument, NULL, 'c' },
                                              { "batches", required_argument, NULL, 'b' },
                                              { "device", required_argument, NULL, 'd' },
                                              { "allow-nonfinite", no_argument, NULL, 'n' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0, 0, 0, 0 } };
    const char *path = NULL;
    unsigned long v, batches = 0;
    unsigned flags = 0;
    int opt, device = -1;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:b:d:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': path = optarg; break;
        case 'b':
            if (!cli_parse_uint("--batches", optarg, 1 << 20, &batches))
                return 2;
            if (batches == 0) {
                fprintf(stderr, "tmm eval: --batches must be at least 1\n");
                return 2;
            }
            break;
        case 'n': flags |= TMM_CHECKPOINT_ALLOW_NONFINITE; break;
        case 'd': if (!cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v)) return 2; device = (int)v; break;
        case 'h':
            printf("usage: tmm eval --checkpoint DIR [--batches N] [--device N] [--allow-nonfinite]\n\n"
                   "Evaluates a checkpoint (a run directory, a checkpoint directory or a model file) on\n"
                   "its task's held-out data: validation loss and perplexity, and for the copy task the\n"
                   "teacher-forced copy accuracy.\n\n"
                   "  --batches N         held-out batches (default: the run's eval_batches)\n"
                   "  --allow-nonfinite   load weights holding NaN or infinite values (debugging; the\n"
                   "                      evaluation then fails with the non-finite loss)\n");
            return 0;
        default: return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "tmm eval: --checkpoint DIR is required (a run directory from tmm train)\n");
        return 2;
    }
    tmm_device *dev;
    if (cli_open_device(device, &dev))
        return 1;
    tmm_eval_result r;
    tmm_status s = tmm_eval_checkpoint(dev, path, (uint32_t)batches, flags, &r);
    tmm_device_destroy(dev);
    if (s != TMM_OK)
        return cli_error("evaluation failed", s);
    printf("held-out tokens: %llu\nvalidation loss: %.4f nats/token\nperplexity: %.3f\n", (unsigned long long)r.tokens,
           r.loss, r.perplexity);
    printf("%s: %.2f%%\n", r.copy ? "copy accuracy" : "next-token accuracy", 100 * r.accuracy);
    return 0;
}
