/* tmm bench generate: time to first token against prompt length, and decode
 * time per token against position, cached beside the naive way (a full
 * forward pass for every new token). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "gen/generator.h"
#include "model/arch.h"
#include "model/rng.h"
#include "model/checkpoint.h"
#include "train/train_config.h"

#define MAX_POINTS BENCH_MAX_POINTS

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
           "are computed (the other architectures ignore it).\n"
           "A distilled checkpoint (tmm distill) is decoded both ways: exact cached decoding and\n"
           "the state-space realizations side by side (ms/token and their ratio), and how far the\n"
           "distilled logits stray from exact decoding along a greedy continuation of a 16-token\n"
           "prompt to the last position measured (largest |logit difference|, argmax agreement).\n");
}

tmm_status bench_gen_first_token(bench_gen *b, uint32_t len, double *ms)
{
    double t[BENCH_MAX_REPEAT];
    const uint32_t *p = b->tokens;
    tmm_sampler greedy = TMM_SAMPLER_DEFAULT;
    greedy.greedy = true;
    for (uint32_t r = 0; r < b->repeat; r++) {
        double t0 = cli_now_ms();
        uint32_t tok;
        TMM_TRY(tmm_generator_prefill(b->gen, &p, &len, b->logits));
        TMM_TRY(tmm_sample(&greedy, b->logits, b->V, 0, &tok));
        t[r] = cli_now_ms() - t0;
    }
    *ms = cli_median(t, b->repeat);
    return TMM_OK;
}

tmm_status bench_gen_cached(bench_gen *b, uint32_t pos, double *ms)
{
    double t[BENCH_MAX_REPEAT];
    const uint32_t *p = b->tokens;
    if ((uint64_t)pos + b->repeat > b->n)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "position %u plus %u steps passes the context of %u", pos,
                        b->repeat, b->n);
    TMM_TRY(tmm_generator_prefill(b->gen, &p, &pos, b->logits));
    for (uint32_t r = 0; r < b->repeat; r++) {
        double t0 = cli_now_ms();
        TMM_TRY(tmm_generator_step(b->gen, &b->tokens[pos + r], b->logits));
        t[r] = cli_now_ms() - t0;
    }
    *ms = cli_median(t, b->repeat);
    return TMM_OK;
}

void bench_gen_close(bench_gen *b)
{
    tmm_generator_destroy(b->gen);
    free(b->tokens), free(b->logits);
    memset(b, 0, sizeof *b);
}

tmm_status bench_gen_open(tmm_device *dev, const tmm_param_table *table, const float *params,
                          tmm_model_tokenizer tokenizer, tmm_toeplitz_impl impl, uint32_t repeat,
                          const tmm_distilled *distilled, bench_gen *out)
{
    const tmm_model_config *c = &table->config;
    memset(out, 0, sizeof *out);
    if (repeat == 0 || repeat > BENCH_MAX_REPEAT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "repeat must be from 1 to %u", BENCH_MAX_REPEAT);
    *out = (bench_gen){ .n = c->n_ctx, .V = c->vocab, .repeat = repeat };
    out->tokens = malloc(out->n * sizeof *out->tokens);
    out->logits = malloc(out->V * sizeof *out->logits);
    tmm_status s = out->tokens && out->logits ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        for (uint32_t i = 0; i < out->n; i++)
            out->tokens[i] = (uint32_t)(tmm_rng_bits(1, i) % out->V);
        s = tmm_gen_create(dev, table, params, tokenizer, 1, impl, distilled, &out->gen);
    }
    if (s != TMM_OK)
        bench_gen_close(out);
    return s;
}

tmm_status bench_gen_random(tmm_device *dev, const tmm_model_config *c, tmm_toeplitz_impl impl, uint32_t repeat,
                            bench_gen *out)
{
    memset(out, 0, sizeof *out);
    tmm_param_table table = { 0 };
    float *params = NULL;
    tmm_model_tokenizer tokenizer;
    tmm_status s = tmm_param_table_build(c, &table);
    if (s == TMM_OK && !(params = malloc(table.arena_floats * sizeof *params)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        tmm_param_init(&table, params);
        s = tmm_model_tokenizer_pick(NULL, c->vocab, &tokenizer);
    }
    if (s == TMM_OK)
        s = bench_gen_open(dev, &table, params, tokenizer, impl, repeat, NULL, out);
    free(params);
    tmm_param_table_free(&table);
    return s;
}

/* How far distilled decoding (bd) strays from exact decoding (b): the exact
 * model continues a 16-token prompt greedily to position `to`; the distilled
 * one is fed the same tokens. */
typedef struct fidelity {
    uint32_t steps, agree, first_split;  /* argmax equal at `agree` steps; first step where it is not */
    double max_dlogit, mean_dlogit;      /* |logit difference|: largest, mean over steps of each step's largest */
} fidelity;

static tmm_status measure_fidelity(bench_gen *b, bench_gen *bd, uint32_t to, fidelity *f)
{
    uint32_t len = 16 < b->n ? 16 : 1;
    const uint32_t *p = b->tokens;
    float *ld = malloc(b->V * sizeof *ld);
    if (!ld)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    *f = (fidelity){ .first_split = UINT32_MAX };
    tmm_status s = tmm_generator_prefill(b->gen, &p, &len, b->logits);
    if (s == TMM_OK)
        s = tmm_generator_prefill(bd->gen, &p, &len, ld);
    tmm_sampler greedy = TMM_SAMPLER_DEFAULT;
    greedy.greedy = true;
    const uint32_t last = to < b->n - 1 ? to : b->n - 1;
    for (uint32_t pos = len; s == TMM_OK && pos <= last; pos++) {
        uint32_t te, td;
        double worst = 0;
        for (uint32_t v = 0; v < b->V; v++)
            worst = fmax(worst, fabs((double)b->logits[v] - ld[v]));
        s = tmm_sample(&greedy, b->logits, b->V, 0, &te);
        if (s == TMM_OK)
            s = tmm_sample(&greedy, ld, b->V, 0, &td);
        f->steps++, f->agree += te == td, f->max_dlogit = fmax(f->max_dlogit, worst), f->mean_dlogit += worst;
        if (te != td && f->first_split == UINT32_MAX)
            f->first_split = pos;
        if (s == TMM_OK && pos < last)
            s = tmm_generator_step(b->gen, &te, b->logits);
        if (s == TMM_OK && pos < last)
            s = tmm_generator_step(bd->gen, &te, ld);
    }
    f->mean_dlogit /= f->steps ? f->steps : 1;
    free(ld);
    return s;
}

static int run(bench_gen *b, bench_gen *bd, const uint32_t *prompts, unsigned np, const uint32_t *positions,
               unsigned nq, bool json, const char *device_name, const char *model_desc, const tmm_model_config *c)
{
    double ttft[MAX_POINTS], cached[MAX_POINTS], naive[MAX_POINTS], dist[MAX_POINTS];
    double speedup_1000 = -1;
    fidelity fid = { 0 };
    tmm_status s = bench_gen_cached(b, 1, &cached[0]); /* warm-up: compiles every kernel */
    if (s == TMM_OK && bd)
        s = bench_gen_cached(bd, 1, &dist[0]);
    for (unsigned i = 0; s == TMM_OK && i < np; i++)
        s = bench_gen_first_token(b, prompts[i], &ttft[i]);
    for (unsigned i = 0; s == TMM_OK && i < nq; i++) {
        s = bench_gen_cached(b, positions[i], &cached[i]);
        /* the naive way: the whole prefix of position t through the model */
        if (s == TMM_OK)
            s = bench_gen_first_token(b, positions[i] + 1, &naive[i]);
        if (s == TMM_OK && bd)
            s = bench_gen_cached(bd, positions[i], &dist[i]);
        if (positions[i] == 1000)
            speedup_1000 = naive[i] / cached[i];
    }
    if (s == TMM_OK && bd)
        s = measure_fidelity(b, bd, positions[nq - 1], &fid);
    if (s != TMM_OK)
        return cli_error("bench generate", s);
    if (!json) {
        printf("%s on %s\n\n  prompt   first token ms   prompt tokens/s\n", model_desc, device_name);
        for (unsigned i = 0; i < np; i++)
            printf("  %6u   %14.2f   %15.0f\n", prompts[i], ttft[i], prompts[i] / (ttft[i] / 1e3));
        printf("\n  position   cached ms/token   tokens/s   naive ms/token   speedup%s\n",
               bd ? "   distilled ms/token   vs cached" : "");
        for (unsigned i = 0; i < nq; i++) {
            printf("  %8u   %15.3f   %8.1f   %14.2f   %6.1fx", positions[i], cached[i], 1e3 / cached[i], naive[i],
                   naive[i] / cached[i]);
            if (bd)
                printf("   %18.3f   %8.2fx", dist[i], cached[i] / dist[i]);
            printf("\n");
        }
        if (speedup_1000 > 0)
            printf("\ndecode speedup at position 1000: %.1fx\n", speedup_1000);
        if (bd)
            printf("distilled vs exact decoding over %u greedy steps: largest |logit difference| %.3g (mean of each "
                   "step's largest %.3g), same argmax at %.1f%% of steps, first different at %s%u\n", fid.steps,
                   fid.max_dlogit, fid.mean_dlogit, 100.0 * fid.agree / (fid.steps ? fid.steps : 1),
                   fid.first_split == UINT32_MAX ? "none: " : "position ",
                   fid.first_split == UINT32_MAX ? fid.steps : fid.first_split);
        return 0;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "device", device_name);
    cJSON_AddStringToObject(root, "model", model_desc);
    cJSON_AddStringToObject(root, "arch", tmm_arch_name(c->arch));
    if (tmm_arch_of(c->arch)->default_window)
        cJSON_AddNumberToObject(root, "window", c->window);
    cJSON *a = cJSON_AddArrayToObject(root, "first_token");
    for (unsigned i = 0; i < np; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "prompt", prompts[i]);
        cJSON_AddNumberToObject(o, "ms", ttft[i]);
        cJSON_AddItemToArray(a, o);
    }
    a = cJSON_AddArrayToObject(root, "decode");
    for (unsigned i = 0; i < nq; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "position", positions[i]);
        cJSON_AddNumberToObject(o, "cached_ms", cached[i]);
        cJSON_AddNumberToObject(o, "naive_ms", naive[i]);
        cJSON_AddNumberToObject(o, "speedup", naive[i] / cached[i]);
        if (bd)
            cJSON_AddNumberToObject(o, "distilled_ms", dist[i]),
                cJSON_AddNumberToObject(o, "distilled_speedup", cached[i] / dist[i]);
        cJSON_AddItemToArray(a, o);
    }
    if (bd) {
        cJSON *f = cJSON_AddObjectToObject(root, "distilled_fidelity");
        cJSON_AddNumberToObject(f, "steps", fid.steps);
        cJSON_AddNumberToObject(f, "max_abs_logit_diff", fid.max_dlogit);
        cJSON_AddNumberToObject(f, "mean_max_abs_logit_diff", fid.mean_dlogit);
        cJSON_AddNumberToObject(f, "argmax_agreement", (double)fid.agree / (fid.steps ? fid.steps : 1));
        if (fid.first_split == UINT32_MAX)
            cJSON_AddNullToObject(f, "first_different_position");
        else
            cJSON_AddNumberToObject(f, "first_different_position", fid.first_split);
    }
    if (speedup_1000 > 0)
        cJSON_AddNumberToObject(root, "decode_speedup_at_1000", speedup_1000);
    else
        cJSON_AddNullToObject(root, "decode_speedup_at_1000");
    char *text = cJSON_Print(root);
    puts(text);
    free(text);
    cJSON_Delete(root);
    return 0;
}

/* Keeps the values that fit: prompts <= n, positions + repeat <= n. */
static unsigned keep_fitting(uint32_t *v, unsigned count, uint32_t limit)
{
    unsigned k = 0;
    for (unsigned i = 0; i < count; i++)
        if (v[i] <= limit)
            v[k++] = v[i];
    return k;
}

int bench_generate(int argc, char **argv)
{
    enum { O_D = 256, O_N, O_L, O_H, O_V, O_PROMPTS, O_POSITIONS, O_REPEAT, O_MIXER, O_MIXER_OLD, O_DEVICE, O_JSON, O_CKPT,
           O_ARCH, O_WINDOW };
    static const struct option longopts[] = {
        { "checkpoint", required_argument, NULL, O_CKPT }, { "d-model", required_argument, NULL, O_D },
        { "n-ctx", required_argument, NULL, O_N },         { "layers", required_argument, NULL, O_L },
        { "heads", required_argument, NULL, O_H },         { "vocab", required_argument, NULL, O_V },
        { "prompts", required_argument, NULL, O_PROMPTS }, { "positions", required_argument, NULL, O_POSITIONS },
        { "repeat", required_argument, NULL, O_REPEAT },   { "toeplitz-impl", required_argument, NULL, O_MIXER }, { "mixer-impl", required_argument, NULL, O_MIXER_OLD },
        { "device", required_argument, NULL, O_DEVICE },   { "json", no_argument, NULL, O_JSON },
        { "arch", required_argument, NULL, O_ARCH },       { "window", required_argument, NULL, O_WINDOW },
        { "help", no_argument, NULL, 'h' },                { 0, 0, 0, 0 },
    };
    tmm_model_config c = tmm_model_config_default();
    c.d_model = 128, c.n_ctx = 1024, c.n_layers = 4, c.heads = 4, c.vocab = 257, c.expansion = 4;
    uint32_t prompts[MAX_POINTS] = { 16, 64, 256, 1000 }, positions[MAX_POINTS] = { 1, 10, 100, 500, 1000 };
    unsigned np = 4, nq = 5;
    unsigned long v, repeat = 5;
    const char *checkpoint = NULL;
    tmm_toeplitz_impl mixer = TMM_TOEPLITZ_AUTO;
    int opt, device = -1;
    bool json = false, ok = true, arch_given = false, heads_given = false, positions_given = false;
    optind = 1;
    opterr = 0; /* our own messages below */
    while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1 && ok) {
        switch (opt) {
        case O_CKPT: checkpoint = optarg; break;
        case O_D: ok = cli_parse_uint("--d-model", optarg, TMM_MAX_D_MODEL, &v); c.d_model = (uint32_t)v; break;
        case O_N: ok = cli_parse_uint("--n-ctx", optarg, TMM_MAX_N_CTX, &v); c.n_ctx = (uint32_t)v; break;
        case O_L: ok = cli_parse_uint("--layers", optarg, TMM_MAX_LAYERS, &v); c.n_layers = (uint32_t)v; break;
        case O_H:
            ok = cli_parse_uint("--heads", optarg, TMM_MAX_HEADS, &v), heads_given = true;
            c.heads = (uint32_t)v;
            break;
        case O_V: ok = cli_parse_uint("--vocab", optarg, TMM_MAX_VOCAB, &v); c.vocab = (uint32_t)v; break;
        case O_PROMPTS: ok = bench_parse_list("--prompts", optarg, prompts, &np); break;
        case O_POSITIONS: ok = bench_parse_list("--positions", optarg, positions, &nq), positions_given = true; break;
        case O_REPEAT:
            ok = cli_parse_uint("--repeat", optarg, BENCH_MAX_REPEAT, &repeat) && repeat > 0;
            if (!ok)
                cli_fail("--repeat is 1 to %u\n", BENCH_MAX_REPEAT);
            break;
        case O_MIXER_OLD: cli_deprecated("mixer-impl", "toeplitz-impl"); /* fall through */
        case O_MIXER:
            ok = tmm_toeplitz_impl_parse(optarg, &mixer) == TMM_OK;
            if (!ok)
                cli_fail("--toeplitz-impl is auto, direct or fft, got '%s'\n", optarg);
            break;
        case O_DEVICE: ok = cli_parse_uint("--device", optarg, TMM_MAX_DEVICE_INDEX, &v); device = (int)v; break;
        case O_JSON: json = true; break;
        case O_ARCH: ok = bench_parse_arch(optarg, &c.arch), arch_given = true; break;
        case O_WINDOW: ok = bench_parse_window(optarg, &c.window), arch_given = true; break;
        case 'h': usage(); return 0;
        case ':':
        default:
            cli_fail(opt == ':' ? "%s needs a value\n" : "unknown option '%s'; see 'tmm bench generate --help'\n",
                     argv[optind - 1]);
            return 2;
        }
    }
    if (!ok)
        return 2;
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm bench generate --help'\n", argv[optind]);
        return 2;
    }
    if (checkpoint && arch_given) {
        cli_fail("--arch and --window describe the random model; a checkpoint has its own\n");
        return 2;
    }

    tmm_checkpoint ck = { 0 };
    tmm_status s;
    if (checkpoint) {
        s = tmm_checkpoint_load_model(checkpoint, NULL, &ck);
        if (s != TMM_OK)
            return cli_error("cannot load the checkpoint", s);
        c = ck.table.config;
    } else {
        bench_set_heads(&c, c.heads, heads_given);
        tmm_model_config_resolve(&c);
        if ((s = tmm_model_config_check(&c)) != TMM_OK)
            return cli_error("bad model", s);
    }
    if (!positions_given && c.n_ctx > repeat) { /* the last position too: steps that end at n - 1 */
        nq = keep_fitting(positions, nq, c.n_ctx - (uint32_t)repeat - 1);
        positions[nq++] = c.n_ctx - (uint32_t)repeat;
    }
    np = keep_fitting(prompts, np, c.n_ctx);
    nq = keep_fitting(positions, nq, c.n_ctx > repeat ? c.n_ctx - (uint32_t)repeat : 0);
    if (np == 0 || nq == 0) {
        tmm_checkpoint_free(&ck);
        cli_fail("no prompt length or position fits the context of %u\n", c.n_ctx);
        return 2;
    }
    tmm_device *dev;
    if (cli_open_device(device, &dev)) {
        tmm_checkpoint_free(&ck);
        return 1;
    }
    bench_gen b = { 0 }, bd = { 0 };
    tmm_distilled set = { 0 };
    bool distilled = false;
    if (checkpoint) {
        tmm_model_tokenizer tokenizer;
        s = tmm_model_tokenizer_pick(tmm_checkpoint_meta(&ck, "tokenizer"), c.vocab, &tokenizer);
        if (s == TMM_OK)
            s = tmm_distilled_load_dir(ck.dir, &ck.table, ck.params, &set, &distilled);
        if (s == TMM_OK)
            s = bench_gen_open(dev, &ck.table, ck.params, tokenizer, mixer, (uint32_t)repeat, NULL, &b);
        if (s == TMM_OK && distilled)
            s = bench_gen_open(dev, &ck.table, ck.params, tokenizer, mixer, (uint32_t)repeat, &set, &bd);
    } else {
        s = bench_gen_random(dev, &c, mixer, (uint32_t)repeat, &b);
    }
    int rc;
    if (s != TMM_OK) {
        rc = cli_error("bench generate", s);
    } else {
        char desc[192], mix[64];
        snprintf(desc, sizeof desc, "%s (%s): d %u, %u layers, %s, n %u, vocab %u",
                 checkpoint ? checkpoint : "random model", tmm_arch_name(c.arch), c.d_model, c.n_layers,
                 bench_mixing_desc(&c, mix, sizeof mix), c.n_ctx, c.vocab);
        rc = run(&b, distilled ? &bd : NULL, prompts, np, positions, nq, json, tmm_device_get_info(dev)->name, desc,
                 &c);
    }
    bench_gen_close(&b);
    bench_gen_close(&bd);
    tmm_distilled_free(&set);
    tmm_checkpoint_free(&ck);
    tmm_device_destroy(dev);
    return rc;
}
