/* tmm generate: prefill a prompt, then decode token by token, streaming the
 * text to stdout; speeds on stderr. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "files.h"
#include "io/limits.h"
#include "gen/generator.h"
#include "tmm/generate.h"
#include "model/checkpoint.h"
#include "train/train_config.h"

static void usage(void)
{
    printf("usage: tmm generate --checkpoint DIR (--prompt TEXT | --prompt-file F) [-n N]\n"
           "                    [--temperature T] [--top-k K] [--top-p P] [--seed S] [--greedy]\n"
           "                    [--slide] [--toeplitz-impl auto|direct|fft] [--exact] [--device N] [--quiet]\n\n"
           "Continues a prompt with a trained model. The prompt is tokenized with the\n"
           "checkpoint's tokenizer (bytes for text models, the run's tokenizer.json for models\n"
           "trained on prepared shards; for copy-task models the symbols\n"
           "0-9a-z, one character each, whitespace ignored), run through the model in one\n"
           "forward pass (prefill), and then tokens are decoded one at a time from cached\n"
           "mixer inputs, each costing O(position x d) per layer. The text is written to stdout\n"
           "as it is produced; prompt and decode speeds and the time to first token go to\n"
           "stderr. Text models stop at the end-of-text token. A checkpoint made by tmm distill\n"
           "decodes through its state-space realizations instead: O(r x d) per token and layer\n"
           "whatever the position (the prefill stays exact).\n\n"
           "  -c, --checkpoint DIR   run directory, checkpoint directory or model file\n"
           "  -p, --prompt TEXT      the prompt\n"
           "  -f, --prompt-file F    read the prompt from a file (bytes as they are)\n"
           "  -n, --tokens N         tokens to generate (default 256)\n"
           "  --temperature T        softmax temperature (default 1; 0 = greedy)\n"
           "  --top-k K              sample among the K most likely tokens (default 0: all)\n"
           "  --top-p P              ... and among the fewest whose probability reaches P\n"
           "                         (default 1: all)\n"
           "  --seed S               sampling seed (default 0): same seed, same text\n"
           "  --greedy               always take the most likely token (then no --temperature,\n"
           "                         --top-k, --top-p or --seed: they would do nothing)\n"
           "  --slide                when the context (the model's n) is full, keep going: the\n"
           "                         last n/2 tokens are prefilled again and decoding goes on\n"
           "                         (a prompt longer than n is cut to its last n/2 tokens).\n"
           "                         Without it, generation stops when the context is full.\n"
           "  --toeplitz-impl I      how the prefill computes the Toeplitz layers (auto: FFT from\n"
           "                         the crossover length measured on the device; it was\n"
           "                         --mixer-impl, still accepted until version 0.2); refused for\n"
           "                         a model without them (the baselines)\n"
           "  --exact                a distilled checkpoint decodes exactly (the cached dot product);\n"
           "                         refused for one that is not distilled (it always does)\n"
           "  --device N             Vulkan device (see tmm devices)\n"
           "  --allow-nonfinite      load weights holding NaN or infinite values (debugging;\n"
           "                         sampling then stops at the first non-finite logit)\n"
           "  -q, --quiet            no speeds on stderr\n");
}

enum { O_TEMP = 256, O_TOPK, O_TOPP, O_SEED, O_GREEDY, O_SLIDE, O_MIXER, O_NONFINITE, O_EXACT };

static const struct option longopts[] = {
    { "checkpoint", required_argument, NULL, 'c' }, { "prompt", required_argument, NULL, 'p' },
    { "prompt-file", required_argument, NULL, 'f' }, { "tokens", required_argument, NULL, 'n' },
    { "temperature", required_argument, NULL, O_TEMP }, { "top-k", required_argument, NULL, O_TOPK },
    { "top-p", required_argument, NULL, O_TOPP }, { "seed", required_argument, NULL, O_SEED },
    { "greedy", no_argument, NULL, O_GREEDY }, { "slide", no_argument, NULL, O_SLIDE },
    { "toeplitz-impl", required_argument, NULL, O_MIXER },
    { "mixer-impl", required_argument, NULL, O_MIXER }, /* its old name (cli_getopt) */
    { "device", required_argument, NULL, 'd' },
    { "quiet", no_argument, NULL, 'q' }, { "allow-nonfinite", no_argument, NULL, O_NONFINITE },
    { "exact", no_argument, NULL, O_EXACT }, { "help", no_argument, NULL, 'h' }, { 0, 0, 0, 0 },
};

static bool parse_float(const char *opt, const char *text, float *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !isfinite(v)) {
        cli_fail("%s expects a number, got '%s'\n", opt, text);
        return false;
    }
    *out = (float)v;
    return true;
}

typedef struct options {
    const char *checkpoint, *prompt, *prompt_file;
    unsigned long tokens;
    tmm_sampler sampler;
    bool slide, quiet, mixer_given;
    const char *sampling; /* the first sampling option given (--top-k, ...), or NULL */
    unsigned load_flags;
    tmm_toeplitz_impl mixer;
    int device;
} options;

/* 0: parsed; else the exit status */
static int parse(int argc, char **argv, options *o)
{
    unsigned long v;
    int opt;
    cli_args args = { .longopts = longopts, .shortopts = "c:p:f:n:d:qh" };
    while ((opt = cli_getopt(&args, argc, argv)) != -1) {
        bool ok = true;
        const char *sampling = opt == O_TEMP ? "--temperature" : opt == O_TOPK ? "--top-k" : opt == O_TOPP ? "--top-p"
                               : opt == O_SEED ? "--seed" : NULL;
        if (!o->sampling)
            o->sampling = sampling;
        switch (opt) {
        case 'c': o->checkpoint = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'f': o->prompt_file = optarg; break;
        case 'n': ok = cli_parse_uint("--tokens", optarg, 1ul << 30, &o->tokens); break;
        case O_TEMP: ok = parse_float("--temperature", optarg, &o->sampler.temperature); break;
        case O_TOPK:
            ok = cli_parse_uint("--top-k", optarg, UINT32_MAX, &v);
            o->sampler.top_k = (uint32_t)v;
            break;
        case O_TOPP: ok = parse_float("--top-p", optarg, &o->sampler.top_p); break;
        case O_SEED:
            ok = cli_parse_uint("--seed", optarg, ~0ul, &v);
            o->sampler.seed = v;
            break;
        case O_GREEDY: o->sampler.greedy = true; break;
        case O_SLIDE: o->slide = true; break;
        case O_NONFINITE: o->load_flags |= TMM_CHECKPOINT_ALLOW_NONFINITE; break;
        case O_EXACT: o->load_flags |= TMM_LOAD_EXACT; break;
        case O_MIXER:
            o->mixer_given = true;
            if (tmm_toeplitz_impl_parse(optarg, &o->mixer) != TMM_OK) {
                cli_fail("--toeplitz-impl is auto, direct or fft, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'd':
            ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v);
            o->device = (int)v;
            break;
        case 'q': o->quiet = true; break;
        case 'h': usage(); return -1;
        default: return 2;
        }
        if (!ok)
            return 2;
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s' (quote a prompt with spaces)\n", argv[optind]);
        return 2;
    }
    if (!o->checkpoint) {
        cli_fail("--checkpoint DIR is required (a run directory from tmm train)\n");
        return 2;
    }
    if (!o->prompt == !o->prompt_file) {
        cli_fail("give the prompt with exactly one of --prompt TEXT or --prompt-file F\n");
        return 2;
    }
    if (o->sampler.greedy && o->sampling) {
        cli_fail("--greedy takes the most likely token: %s would do nothing; drop one of them\n", o->sampling);
        return 2;
    }
    if (tmm_sampler_check(&o->sampler) != TMM_OK) {
        cli_fail("%s\n", tmm_last_error());
        return 2;
    }
    return 0;
}

typedef struct session {
    tmm_generator *gen;
    const tmm_generator_info *info;
    uint32_t *history;  /* prompt and generated tokens */
    uint64_t count;
    float *logits;
} session;

/* Prefills the last `keep` tokens of the history. */
static tmm_status prefill_tail(session *S, uint32_t keep)
{
    const uint32_t *tail = S->history + (S->count - keep);
    return tmm_generator_prefill(S->gen, &tail, &keep, S->logits);
}

static int run(const options *o, session *S, const uint32_t *prompt, uint32_t prompt_len)
{
    const uint32_t n = S->info->config.n_ctx;
    memcpy(S->history, prompt, prompt_len * sizeof *prompt);
    S->count = prompt_len;
    uint32_t first = prompt_len;
    if (prompt_len > n) {
        if (!o->slide) {
            cli_fail("the prompt has %u tokens, more than the model's context of %u; "
                            "shorten it, or use --slide to keep its last %u\n", prompt_len, n, n / 2);
            return 1;
        }
        first = n / 2 ? n / 2 : 1;
    }
    const double t0 = tmm_bench_now_ms();
    tmm_status s = prefill_tail(S, first);
    const double t_prefill = tmm_bench_now_ms() - t0;
    double t_first = 0, t_decode0 = 0;
    uint64_t produced = 0, slides = 0;
    const char *stop = NULL;
    while (s == TMM_OK && produced < o->tokens) {
        uint32_t tok;
        if ((s = tmm_sample(&o->sampler, S->logits, S->info->config.vocab, produced, &tok)) != TMM_OK)
            break;
        S->history[S->count++] = tok;
        produced++;
        if (produced == 1)
            t_first = tmm_bench_now_ms() - t0, t_decode0 = tmm_bench_now_ms();
        if (tok == S->info->eot) {
            stop = "end of text";
            break;
        }
        char buf[256], *big = NULL; /* a BPE token may be longer than buf */
        size_t len = tmm_detokenize(S->gen, tok, buf, sizeof buf);
        if (len >= sizeof buf && (big = malloc(len + 1)))
            tmm_detokenize(S->gen, tok, big, len + 1);
        fwrite(big ? big : buf, 1, big || len < sizeof buf ? len : sizeof buf - 1, stdout);
        free(big);
        fflush(stdout);
        if (produced == o->tokens)
            break;
        if (tmm_generator_position(S->gen, 0) == n) {
            if (!o->slide) {
                stop = "context full";
                break;
            }
            slides++;
            s = prefill_tail(S, n / 2 ? n / 2 : 1);
        } else {
            s = tmm_generator_step(S->gen, &tok, S->logits);
        }
    }
    putchar('\n');
    fflush(stdout);
    if (s != TMM_OK)
        return cli_error("generation failed", s);
    if (stop && strcmp(stop, "context full") == 0)
        cli_fail("stopped after %llu tokens: the model's context of %u tokens is full "
                        "(--slide keeps going by prefilling the last %u again)\n",
                (unsigned long long)produced, n, n / 2);
    if (!o->quiet) {
        double decode_ms = produced > 1 ? tmm_bench_now_ms() - t_decode0 : 0;
        fprintf(stderr, "tmm generate: prompt %u tokens: prefill %.1f ms (%.0f tokens/s), time to first token %.1f ms; "
                        "decoded %llu tokens at %.1f tokens/s%s%s",
                first, t_prefill, first / (t_prefill / 1e3), t_first, (unsigned long long)produced,
                produced > 1 ? (produced - 1) / (decode_ms / 1e3) : 0.0, stop ? "; stop: " : "", stop ? stop : "");
        if (slides)
            fprintf(stderr, "; the window slid %llu times", (unsigned long long)slides);
        const tmm_generator_info *info = tmm_generator_get_info(S->gen);
        if (info->distilled)
            fprintf(stderr, "; distilled decoding (exact head %u)", info->distill_head);
        fputc('\n', stderr);
    }
    return 0;
}

int cmd_generate(int argc, char **argv)
{
    options o = { .tokens = 256, .sampler = TMM_SAMPLER_DEFAULT, .device = -1 };
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *file_text = NULL;
    size_t text_len = 0;
    if (o.prompt_file) {
        void *data;
        tmm_status s = tmm_read_file(o.prompt_file, "prompt file", TMM_LIMIT_PROMPT, &data, &text_len);
        if (s != TMM_OK)
            return cli_error("cannot read the prompt", s);
        file_text = data;
    }
    const char *text = file_text ? file_text : o.prompt;
    if (!file_text)
        text_len = strlen(o.prompt);

    tmm_device *dev;
    if (cli_open_device(o.device, &dev)) {
        free(file_text);
        return 1;
    }
    session S = { 0 };
    uint32_t *prompt = NULL, prompt_len = 0;
    tmm_status s = tmm_gen_load(dev, o.checkpoint, 1, o.mixer, o.load_flags, &S.gen);
    if (s == TMM_OK) {
        S.info = tmm_generator_get_info(S.gen);
        s = tmm_tokenize(S.gen, text, text_len, &prompt, &prompt_len);
    }
    rc = s == TMM_OK && o.mixer_given ? cli_toeplitz_impl_applies(S.info->config.arch, o.checkpoint) : 0;
    if (rc == 0 && s != TMM_OK) {
        rc = cli_error(S.gen ? "cannot prepare the prompt" : "cannot load the checkpoint", s);
    } else if (rc == 0 && prompt_len == 0 && S.info->eot == UINT32_MAX) {
        cli_fail("the prompt is empty; a copy-task model needs at least one symbol\n");
        rc = 2;
    } else if (rc == 0) {
        if (prompt_len == 0) /* a text model starts a new document after the end-of-text token */
            prompt[prompt_len++] = S.info->eot;
        S.history = malloc((prompt_len + o.tokens + 1) * sizeof *S.history);
        S.logits = malloc(S.info->config.vocab * sizeof *S.logits);
        if (!S.history || !S.logits)
            rc = cli_error("generation", tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory"));
        else
            rc = run(&o, &S, prompt, prompt_len);
    }
    free(prompt), free(S.history), free(S.logits), free(file_text);
    tmm_generator_destroy(S.gen);
    tmm_device_destroy(dev);
    return rc;
}
