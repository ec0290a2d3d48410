/* tmm bench generate: time to first token against prompt length, and decode
 * time per token against position, cached beside the naive way (measured by
 * the library: tmm_bench_generate). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "model/checkpoint.h"

static void usage(void)
{
    printf("usage: tmm bench generate [--checkpoint DIR | [--arch A] [--window W]\n"
           "                          --d-model D --n-ctx N --layers L --heads H --vocab V]\n"
           "                          [--prompts P,P,...] [--positions T,T,...] [--repeat R]\n"
           "                          [--toeplitz-impl auto|direct|fft] [--device N] [--json]\n\n"
           "Measures generation: the time to first token (prefill of the prompt in one forward\n"
           "pass, plus sampling) for each prompt length, and the time per decoded token at each\n"
           "position with cached decoding (the TMM and Hyena: one dot product over the cache\n"
           "per channel; attention: the key/value cache, swa: a ring of the last W; linear\n"
           "attention and Mamba 2: a constant-size state) and the naive way (a full forward pass\n"
           "for every new token), side by side. Medians of --repeat runs after a warm-up.\n"
           "Without --checkpoint a model of random weights is used: the TMM by default (--arch\n"
           BENCH_ARCHS "; swa's --window defaults to 128), d 128, 4 layers,\n"
           "4 heads (Hyena none; Mamba 2 heads of 64 inner channels), n 1024, vocab 257,\n"
           "MLP expansion 4. With --json prints one object, including decode_speedup_at_1000\n"
           "(naive / cached ms per token at position 1000; null when n <= 1000).\n"
           "Defaults: --prompts 16,64,256,1000 --positions 1,10,100,500,1000 --repeat 5 (values\n"
           "beyond the context are left out) and the position n - R (R = --repeat: its steps end at\n"
           "the last position). --toeplitz-impl chooses how the TMM's Toeplitz layers\n"
           "are computed (refused for the other architectures, which have none).\n"
           "A distilled checkpoint (tmm distill) is decoded both ways: exact cached decoding and\n"
           "the state-space realizations side by side (ms/token and their ratio), and how far the\n"
           "distilled logits stray from exact decoding along a greedy continuation of a 16-token\n"
           "prompt to the last position measured (largest |logit difference|, argmax agreement).\n");
}

static void print_table(const tmm_device *dev, const tmm_bench_generate_opts *o, const tmm_bench_generate_result *r)
{
    const bool bd = r->distilled;
    const tmm_bench_fidelity *fid = &r->fidelity;
    char desc[192];
    printf("%s on %s\n\n  prompt   first token ms   prompt tokens/s\n", tmm_bench_generate_desc(o, desc, sizeof desc),
           tmm_device_get_info(dev)->name);
    for (unsigned i = 0; i < o->n_prompts; i++)
        printf("  %6u   %14.2f   %15.0f\n", o->prompts[i], r->first_token_ms[i],
               o->prompts[i] / (r->first_token_ms[i] / 1e3));
    printf("\n  position   cached ms/token   tokens/s   naive ms/token   speedup%s\n",
           bd ? "   distilled ms/token   vs cached" : "");
    for (unsigned i = 0; i < o->n_positions; i++) {
        const double cached = r->cached_ms[i], naive = r->naive_ms[i];
        printf("  %8u   %15.3f   %8.1f   %14.2f   %6.1fx", o->positions[i], cached, 1e3 / cached, naive,
               naive / cached);
        if (bd)
            printf("   %18.3f   %8.2fx", r->distilled_ms[i], cached / r->distilled_ms[i]);
        printf("\n");
    }
    if (r->speedup_at_1000 > 0)
        printf("\ndecode speedup at position 1000: %.1fx\n", r->speedup_at_1000);
    printf("commands per decode step: %u", r->commands_per_token);
    if (r->distilled)
        printf(" (distilled: %u)", r->distilled_commands_per_token);
    printf("\n");
    if (bd)
        printf("distilled vs exact decoding over %u greedy steps: largest |logit difference| %.3g (mean of each "
               "step's largest %.3g), same argmax at %.1f%% of steps, first different at %s%u\n", fid->steps,
               fid->max_dlogit, fid->mean_dlogit, 100.0 * fid->agree / (fid->steps ? fid->steps : 1),
               fid->first_split == UINT32_MAX ? "none: " : "position ",
               fid->first_split == UINT32_MAX ? fid->steps : fid->first_split);
}

typedef struct gen_flags {
    const char *checkpoint;
    int device;
    bool json, arch_given, heads_given, positions_given, impl_given;
} gen_flags;

enum { O_D = 256, O_N, O_L, O_H, O_V, O_PROMPTS, O_POSITIONS, O_REPEAT, O_MIXER, O_DEVICE, O_JSON, O_CKPT,
       O_ARCH, O_WINDOW };

/* One option into o and f; false after a one-line error. */
static bool gen_flag(int opt, const char *arg, tmm_bench_generate_opts *o, gen_flags *f)
{
    tmm_model_config *c = &o->config;
    unsigned long v = 0;
    bool ok = true;
    switch (opt) {
    case O_CKPT: f->checkpoint = arg; return true;
    case O_D: ok = cli_parse_uint("--d-model", arg, TMM_MAX_D_MODEL, &v); c->d_model = (uint32_t)v; return ok;
    case O_N: ok = cli_parse_uint("--n-ctx", arg, TMM_MAX_N_CTX, &v); c->n_ctx = (uint32_t)v; return ok;
    case O_L: ok = cli_parse_uint("--layers", arg, TMM_MAX_LAYERS, &v); c->n_layers = (uint32_t)v; return ok;
    case O_H:
        ok = cli_parse_uint("--heads", arg, TMM_MAX_HEADS, &v), f->heads_given = true;
        c->heads = (uint32_t)v;
        return ok;
    case O_V: ok = cli_parse_uint("--vocab", arg, TMM_MAX_VOCAB, &v); c->vocab = (uint32_t)v; return ok;
    case O_PROMPTS: return bench_parse_list("--prompts", arg, o->prompts, &o->n_prompts);
    case O_POSITIONS: f->positions_given = true; return bench_parse_list("--positions", arg, o->positions, &o->n_positions);
    case O_REPEAT:
        ok = cli_parse_uint("--repeat", arg, TMM_BENCH_MAX_REPEAT, &v) && v > 0;
        o->repeat = (uint32_t)v;
        if (!ok)
            cli_fail("--repeat is 1 to %u\n", TMM_BENCH_MAX_REPEAT);
        return ok;
    case O_MIXER:
        f->impl_given = true;
        ok = tmm_toeplitz_impl_parse(arg, &o->impl) == TMM_OK;
        if (!ok)
            cli_fail("--toeplitz-impl is auto, direct or fft, got '%s'\n", arg);
        return ok;
    case O_DEVICE: ok = cli_parse_uint("--device", arg, TMM_MAX_DEVICE_INDEX, &v); f->device = (int)v; return ok;
    case O_JSON: f->json = true; return true;
    case O_ARCH: f->arch_given = true; return bench_parse_arch(arg, &c->arch);
    case O_WINDOW: f->arch_given = true; return bench_parse_window(arg, &c->window);
    default: return false;
    }
}

typedef struct flag_ctx {
    tmm_bench_generate_opts *o;
    gen_flags *f;
} flag_ctx;

static bool gen_flag_ctx(int opt, const char *arg, void *ctx)
{
    flag_ctx *c = ctx;
    return gen_flag(opt, arg, c->o, c->f);
}

/* The options of bench generate: 0 to go on, -1 after --help, else the exit status. */
static int parse(int argc, char **argv, tmm_bench_generate_opts *o, gen_flags *f)
{
    static const struct option longopts[] = {
        { "checkpoint", required_argument, NULL, O_CKPT }, { "d-model", required_argument, NULL, O_D },
        { "n-ctx", required_argument, NULL, O_N },         { "layers", required_argument, NULL, O_L },
        { "heads", required_argument, NULL, O_H },         { "vocab", required_argument, NULL, O_V },
        { "prompts", required_argument, NULL, O_PROMPTS }, { "positions", required_argument, NULL, O_POSITIONS },
        { "repeat", required_argument, NULL, O_REPEAT },   { "toeplitz-impl", required_argument, NULL, O_MIXER },
        { "mixer-impl", required_argument, NULL, O_MIXER }, /* its old name (cli_getopt) */
        { "device", required_argument, NULL, O_DEVICE },   { "json", no_argument, NULL, O_JSON },
        { "arch", required_argument, NULL, O_ARCH },       { "window", required_argument, NULL, O_WINDOW },
        { "help", no_argument, NULL, 'h' },                { 0, 0, 0, 0 },
    };
    flag_ctx ctx = { o, f };
    int rc = cli_flags(argc, argv, longopts, "bench generate", usage, gen_flag_ctx, &ctx);
    if (rc != 0)
        return rc;
    if (f->checkpoint && f->arch_given) {
        cli_fail("--arch and --window describe the random model; a checkpoint has its own\n");
        return 2;
    }
    return 0;
}

/* The model: the checkpoint's (loaded into ck), or the random one checked;
 * then the prompts and positions that fit. 0, or the exit status. */
static int model(tmm_bench_generate_opts *o, const gen_flags *f, tmm_checkpoint *ck)
{
    tmm_status s;
    if (f->checkpoint) {
        if ((s = tmm_checkpoint_load_model(f->checkpoint, NULL, ck)) != TMM_OK)
            return cli_error("cannot load the checkpoint", s);
        o->checkpoint = ck;
        o->name = f->checkpoint;
        o->config = ck->table.config;
    } else {
        tmm_bench_set_heads(&o->config, o->config.heads, f->heads_given);
        tmm_model_config_resolve(&o->config);
        if ((s = tmm_model_config_check(&o->config)) != TMM_OK)
            return cli_error("bad model", s);
    }
    if (f->impl_given && cli_toeplitz_impl_applies(o->config.arch, f->checkpoint ? f->checkpoint : "the random model"))
        return 2;
    if (!tmm_bench_generate_fit(o, f->positions_given)) {
        cli_fail("no prompt length or position fits the context of %u\n", o->config.n_ctx);
        return 2;
    }
    return 0;
}

/* Measures and prints; the exit status. */
static int measure(tmm_device *dev, const tmm_bench_generate_opts *o, bool json)
{
    tmm_bench_generate_result r;
    tmm_status s = tmm_bench_generate(dev, o, &r);
    if (s != TMM_OK)
        return cli_error("bench generate", s);
    if (!json) {
        print_table(dev, o, &r);
        return 0;
    }
    char *text = tmm_bench_generate_json(dev, o, &r);
    if (!text)
        return bench_failed(TMM_ERR_OUT_OF_HOST_MEMORY);
    puts(text);
    free(text);
    return 0;
}

int bench_generate(int argc, char **argv)
{
    tmm_bench_generate_opts o = { .config = tmm_model_config_default(), .impl = TMM_TOEPLITZ_AUTO, .repeat = 5,
                                  .prompts = { 16, 64, 256, 1000 }, .n_prompts = 4,
                                  .positions = { 1, 10, 100, 500, 1000 }, .n_positions = 5 };
    tmm_model_config *c = &o.config;
    c->d_model = 128, c->n_ctx = 1024, c->n_layers = 4, c->heads = 4, c->vocab = 257, c->expansion = 4;
    gen_flags f = { .device = -1 };
    int rc = parse(argc, argv, &o, &f);
    if (rc)
        return rc < 0 ? 0 : rc;
    tmm_checkpoint ck = { 0 };
    tmm_device *dev = NULL;
    rc = model(&o, &f, &ck);
    if (rc == 0 && cli_open_device(f.device, &dev))
        rc = 1;
    if (rc == 0)
        rc = measure(dev, &o, f.json);
    tmm_checkpoint_free(&ck);
    tmm_device_destroy(dev);
    return rc;
}
