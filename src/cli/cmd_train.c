/* tmm train and tmm eval. */
#define _POSIX_C_SOURCE 200809L /* sigaction, isatty, strdup */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "files.h"
#include "train/data.h"
#include "train/trainer.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tmm train [options]\n\n"
            "Trains a Toeplitz MLP Mixer. With no options: a small TMM on the copy task (tiny-copy),\n"
            "until it copies held-out sequences with 99%% accuracy.\n\n"
            "config (applied in this order; later wins):\n"
            "  --preset NAME        built-in preset: ");
    for (const char *const *p = tmm_train_preset_names(); *p; p++)
        fprintf(f, "%s%s", *p, p[1] ? ", " : "\n");
    fprintf(f,
            "  --config FILE        JSON config file (sections model, optimizer, schedule, task, train;\n"
            "                       see README)\n"
            "  --resume DIR         continue a run (its directory or a checkpoint) exactly where it stopped\n\n"
            "model:\n"
            "  --d-model N --n-ctx N --layers N --heads N (0: flat) --expansion N --kernel N\n"
            "  --expanded           Toeplitz -> SiLU -> Toeplitz mixing\n"
            "  --frozen             Toeplitz weights keep their initial values (ablation)\n"
            "  --model-seed N       initialization seed\n\n"
            "task:\n"
            "  --task copy|text     default copy\n"
            "  --alphabet N         copy: symbols (default 16)\n"
            "  --data FILE          text: a UTF-8 text or .jsonl file (repeat for more)\n"
            "  --text-mode windows|documents\n\n"
            "optimization:\n"
            "  --steps N --batch N --accum N (micro-batches per step) --lr X --warmup N\n"
            "  --schedule linear|cosine|constant --weight-decay X --clip X --seed N (data)\n\n"
            "run:\n"
            "  --run-dir DIR        where checkpoints and metrics.jsonl go (default runs/latest)\n"
            "  --eval-every N --eval-batches N --log-every N --save-every N --keep N\n"
            "  --target-acc X       copy: stop once held-out accuracy reaches X (0: never; default 0.99)\n"
            "  --mixer-impl auto|direct|fft   how the Toeplitz layers are computed (auto: FFT from the\n"
            "                       crossover length measured on the device)\n"
            "  --device N           Vulkan device (see tmm devices)\n"
            "  --quiet              no progress output\n\n"
            "Ctrl-C saves a checkpoint and exits; resume with --resume DIR.\n");
}

enum {
    O_PRESET = 256, O_CONFIG, O_RESUME, O_DMODEL, O_NCTX, O_LAYERS, O_HEADS, O_EXPANSION, O_KERNEL, O_EXPANDED,
    O_FROZEN, O_MSEED, O_TASK, O_ALPHABET, O_DATA, O_TEXTMODE, O_STEPS, O_BATCH, O_ACCUM, O_LR, O_WARMUP,
    O_SCHEDULE, O_WD, O_CLIP, O_SEED, O_RUNDIR, O_EVAL_EVERY, O_EVAL_BATCHES, O_LOG_EVERY, O_SAVE_EVERY, O_KEEP,
    O_TARGET, O_DEVICE, O_QUIET, O_STOP_AFTER, O_MIXER,
};

static const struct option train_options[] = {
    { "preset", required_argument, NULL, O_PRESET },     { "config", required_argument, NULL, O_CONFIG },
    { "resume", required_argument, NULL, O_RESUME },     { "d-model", required_argument, NULL, O_DMODEL },
    { "n-ctx", required_argument, NULL, O_NCTX },        { "layers", required_argument, NULL, O_LAYERS },
    { "heads", required_argument, NULL, O_HEADS },       { "expansion", required_argument, NULL, O_EXPANSION },
    { "kernel", required_argument, NULL, O_KERNEL },     { "expanded", no_argument, NULL, O_EXPANDED },
    { "frozen", no_argument, NULL, O_FROZEN },           { "model-seed", required_argument, NULL, O_MSEED },
    { "task", required_argument, NULL, O_TASK },         { "alphabet", required_argument, NULL, O_ALPHABET },
    { "data", required_argument, NULL, O_DATA },         { "text-mode", required_argument, NULL, O_TEXTMODE },
    { "steps", required_argument, NULL, O_STEPS },       { "batch", required_argument, NULL, O_BATCH },
    { "accum", required_argument, NULL, O_ACCUM },       { "lr", required_argument, NULL, O_LR },
    { "warmup", required_argument, NULL, O_WARMUP },     { "schedule", required_argument, NULL, O_SCHEDULE },
    { "weight-decay", required_argument, NULL, O_WD },   { "clip", required_argument, NULL, O_CLIP },
    { "seed", required_argument, NULL, O_SEED },         { "run-dir", required_argument, NULL, O_RUNDIR },
    { "eval-every", required_argument, NULL, O_EVAL_EVERY }, { "eval-batches", required_argument, NULL, O_EVAL_BATCHES },
    { "log-every", required_argument, NULL, O_LOG_EVERY }, { "save-every", required_argument, NULL, O_SAVE_EVERY },
    { "keep", required_argument, NULL, O_KEEP },         { "target-acc", required_argument, NULL, O_TARGET },
    { "device", required_argument, NULL, O_DEVICE },     { "quiet", no_argument, NULL, O_QUIET },
    { "stop-after", required_argument, NULL, O_STOP_AFTER }, { "mixer-impl", required_argument, NULL, O_MIXER },
    { "help", no_argument, NULL, 'h' },
    { 0, 0, 0, 0 },
};

static bool parse_double(const char *opt, const char *text, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "tmm train: %s expects a number from %g to %g, got '%s'\n", opt, lo, hi, text);
        return false;
    }
    *out = v;
    return true;
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
    tmm_status s = tmm_read_file(path, &text, &size);
    if (s == TMM_OK) {
        char *z = realloc(text, size + 1);
        if (!z) {
            free(text);
            return cli_error("--config", TMM_ERR_OUT_OF_HOST_MEMORY);
        }
        z[size] = '\0';
        s = tmm_train_config_apply_json(c, z, path);
        free(z);
    }
    return s == TMM_OK ? 0 : cli_error("bad config", s);
}

int cmd_train(int argc, char **argv)
{
    tmm_train_config c;
    tmm_train_config_default(&c);
    /* pass 1: the preset, the config file and --resume set the base */
    const char *resume = NULL;
    int opt, device = -1;
    bool quiet = false, data_given = false;
    unsigned long v, stop_after = 0;
    double x;
    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", train_options, NULL)) != -1) {
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
    while ((opt = getopt_long(argc, argv, "h", train_options, NULL)) != -1)
        if (opt == O_CONFIG && load_json_file(&c, optarg))
            return 1;
    /* pass 2: flags override */
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", train_options, NULL)) != -1) {
        bool ok = true;
        switch (opt) {
        case O_DMODEL: ok = cli_parse_uint("--d-model", optarg, 1 << 16, &v), c.model.d_model = (uint32_t)v; break;
        case O_NCTX: ok = cli_parse_uint("--n-ctx", optarg, 1 << 24, &v), c.model.n_ctx = (uint32_t)v; break;
        case O_LAYERS: ok = cli_parse_uint("--layers", optarg, 1024, &v), c.model.n_layers = (uint32_t)v; break;
        case O_HEADS: ok = cli_parse_uint("--heads", optarg, 1 << 16, &v), c.model.heads = (uint32_t)v; break;
        case O_EXPANSION: ok = cli_parse_uint("--expansion", optarg, 64, &v), c.model.expansion = (uint32_t)v; break;
        case O_KERNEL: ok = cli_parse_uint("--kernel", optarg, 16, &v), c.model.kernel = (uint32_t)v; break;
        case O_EXPANDED: c.model.expanded = true; break;
        case O_FROZEN: c.model.frozen = true; break;
        case O_MSEED: ok = cli_parse_uint("--model-seed", optarg, ~0ul, &v), c.model.seed = v; break;
        case O_TASK:
            if (strcmp(optarg, "copy") == 0) c.task = TMM_DATA_COPY;
            else if (strcmp(optarg, "text") == 0) c.task = TMM_DATA_TEXT;
            else { fprintf(stderr, "tmm train: --task is copy or text, got '%s'\n", optarg); return 2; }
            break;
        case O_ALPHABET: ok = cli_parse_uint("--alphabet", optarg, TMM_COPY_MAX_ALPHABET, &v), c.copy_alphabet = (uint32_t)v; break;
        case O_DATA:
            if (!data_given) {
                tmm_train_config_free(&c);
                data_given = true;
            }
            if (c.text_file_count == TMM_MAX_TEXT_FILES) {
                fprintf(stderr, "tmm train: at most %d --data files\n", TMM_MAX_TEXT_FILES);
                return 2;
            }
            c.text_files[c.text_file_count++] = strdup(optarg);
            c.task = TMM_DATA_TEXT;
            break;
        case O_TEXTMODE:
            if (strcmp(optarg, "windows") == 0) c.text_mode = TMM_TEXT_WINDOWS;
            else if (strcmp(optarg, "documents") == 0) c.text_mode = TMM_TEXT_DOCUMENTS;
            else { fprintf(stderr, "tmm train: --text-mode is windows or documents, got '%s'\n", optarg); return 2; }
            break;
        case O_STEPS: ok = cli_parse_uint("--steps", optarg, 1ul << 40, &v), c.steps = v; break;
        case O_BATCH: ok = cli_parse_uint("--batch", optarg, 1 << 20, &v), c.batch = (uint32_t)v; break;
        case O_ACCUM: ok = cli_parse_uint("--accum", optarg, 1 << 20, &v), c.accum = (uint32_t)v; break;
        case O_LR: ok = parse_double("--lr", optarg, 0, 10, &x), c.schedule.peak_lr = x; break;
        case O_WARMUP: ok = cli_parse_uint("--warmup", optarg, 1ul << 40, &v), c.schedule.warmup_steps = v; break;
        case O_SCHEDULE:
            if (tmm_lr_kind_parse(optarg, &c.schedule.kind) != TMM_OK) {
                fprintf(stderr, "tmm train: --schedule is linear, cosine or constant, got '%s'\n", optarg);
                return 2;
            }
            break;
        case O_WD: ok = parse_double("--weight-decay", optarg, 0, 10, &x), c.optim.weight_decay = x; break;
        case O_CLIP: ok = parse_double("--clip", optarg, 0, 1e9, &x), c.optim.max_grad_norm = x; break;
        case O_SEED: ok = cli_parse_uint("--seed", optarg, ~0ul, &v), c.data_seed = v; break;
        case O_RUNDIR:
            if (strlen(optarg) >= sizeof c.run_dir) { fprintf(stderr, "tmm train: --run-dir is too long\n"); return 2; }
            snprintf(c.run_dir, sizeof c.run_dir, "%s", optarg);
            break;
        case O_EVAL_EVERY: ok = cli_parse_uint("--eval-every", optarg, UINT32_MAX, &v), c.eval_every = (uint32_t)v; break;
        case O_EVAL_BATCHES: ok = cli_parse_uint("--eval-batches", optarg, 1 << 20, &v), c.eval_batches = (uint32_t)v; break;
        case O_LOG_EVERY: ok = cli_parse_uint("--log-every", optarg, UINT32_MAX, &v), c.log_every = (uint32_t)v; break;
        case O_SAVE_EVERY: ok = cli_parse_uint("--save-every", optarg, UINT32_MAX, &v), c.save_every = (uint32_t)v; break;
        case O_KEEP: ok = cli_parse_uint("--keep", optarg, 1 << 20, &v), c.keep = (uint32_t)v; break;
        case O_TARGET: ok = parse_double("--target-acc", optarg, 0, 1, &x), c.target_accuracy = x; break;
        case O_DEVICE: ok = cli_parse_uint("--device", optarg, 1000, &v), device = (int)v; break;
        case O_QUIET: quiet = true; break;
        case O_MIXER:
            if (tmm_mixer_impl_parse(optarg, &c.mixer_impl) != TMM_OK) {
                fprintf(stderr, "tmm train: --mixer-impl is auto, direct or fft, got '%s'\n", optarg);
                return 2;
            }
            break;
        case O_STOP_AFTER: ok = cli_parse_uint("--stop-after", optarg, 1ul << 40, &v), stop_after = v; break;
        default: break;
        }
        if (!ok)
            return 2;
    }
    if (resume) {
        /* continue in the run that is being resumed unless --run-dir moved it */
        bool moved = false;
        for (int i = 1; i < argc; i++)
            moved |= strcmp(argv[i], "--run-dir") == 0 || strncmp(argv[i], "--run-dir=", 10) == 0;
        if (!moved && strlen(resume) < sizeof c.run_dir && !strstr(resume, "/checkpoints"))
            snprintf(c.run_dir, sizeof c.run_dir, "%s", resume);
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
        if (resume)
            printf("resuming from %s\n", resume);
    }
    free(json);
    tmm_data_destroy(data);

    struct sigaction sa = { 0 };
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    progress_ui ui = { isatty(STDOUT_FILENO), quiet, c.task == TMM_DATA_COPY };
    tmm_train_hooks hooks = { on_progress, &ui, &interrupted, stop_after };
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
            printf("next: tmm eval --checkpoint %s   |   tmm train --frozen (the ablation: copying fails)\n",
                   c.run_dir);
        else
            printf("next: tmm eval --checkpoint %s\n", c.run_dir);
        rc = res.interrupted ? 130 : 0;
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
                                              { "help", no_argument, NULL, 'h' },
                                              { 0, 0, 0, 0 } };
    const char *path = NULL;
    unsigned long v, batches = 0;
    int opt, device = -1;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "c:b:d:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': path = optarg; break;
        case 'b': if (!cli_parse_uint("--batches", optarg, 1 << 20, &batches)) return 2; break;
        case 'd': if (!cli_parse_uint("--device", optarg, 1000, &v)) return 2; device = (int)v; break;
        case 'h':
            printf("usage: tmm eval --checkpoint DIR [--batches N] [--device N]\n\n"
                   "Evaluates a checkpoint (a run directory, a checkpoint directory or a model file) on\n"
                   "its task's held-out data: validation loss and perplexity, and for the copy task the\n"
                   "teacher-forced copy accuracy.\n");
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
    tmm_status s = tmm_eval_checkpoint(dev, path, (uint32_t)batches, &r);
    tmm_device_destroy(dev);
    if (s != TMM_OK)
        return cli_error("evaluation failed", s);
    printf("held-out tokens: %llu\nvalidation loss: %.4f nats/token\nperplexity: %.3f\n", (unsigned long long)r.tokens,
           r.loss, r.perplexity);
    printf("%s: %.2f%%\n", r.copy ? "copy accuracy" : "next-token accuracy", 100 * r.accuracy);
    return 0;
}
