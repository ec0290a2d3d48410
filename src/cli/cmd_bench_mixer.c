/* tmm bench mixer: Toeplitz mixing (direct, FFT, auto) against causal
 * attention, sliding-window attention and causal linear attention, over
 * sequence lengths (measured by the library: tmm_bench_mixer). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "tmm/model.h"

#define IMPL_LIST "direct, fft, auto, attention, swa, linear"

static void usage(void)
{
    printf("usage: tmm bench mixer [--n N | --max-n N] [--d D] [--heads H] [--batch B]\n"
           "                       [--impls LIST] [--window W] [--time-cap SECONDS] [--repeat R]\n"
           "                       [--fit-from N] [--svg FILE] [--device N] [--json]\n\n"
           "Times causal token mixing alone (the op on [B, n, d] inputs, no projections),\n"
           "forward and forward+backward, for n = 256, 512, ... up to --max-n (default 65536),\n"
           "or one length with --n: Toeplitz mixing computed directly (O(n^2)), by FFT\n"
           "(O(n log n)) and as auto chooses (FFT from the crossover length measured on the\n"
           "device for this B*d), beside causal softmax attention (memory-efficient, O(n^2)),\n"
           "swa: softmax attention over a sliding window of --window keys (default 128; O(n W);\n"
           "a window of n or more is full attention) and linear: causal linear attention\n"
           "(chunked, O(n)); the attention ops use --heads heads of d/H <= 128 channels.\n"
           "--impls picks some of direct,fft,auto,attention,swa,linear (comma-separated,\n"
           "default all). Reports device time (median of --repeat runs, default 3, after a\n"
           "warm-up), peak device memory of the op's buffers, tokens/s, and the fitted exponent\n"
           "of time against n over n >= --fit-from (default: the upper half of each curve's\n"
           "points). A run predicted to take longer than --time-cap (default 20 s) from the\n"
           "previous length is skipped with a note (so the cap needs a series: not with --n). Writes a log-log plot to --svg (default\n"
           "bench-mixer.svg). Defaults: d 256, heads 4, batch 1.\n");
}

/* --impls: a comma-separated subset of tmm_bench_mixer_impl_names. */
static bool parse_impls(const char *text, bool wanted[TMM_BENCH_MIXER_IMPLS])
{
    bool any = false;
    for (int i = 0; i < TMM_BENCH_MIXER_IMPLS; i++)
        wanted[i] = false;
    while (*text) {
        size_t len = strcspn(text, ",");
        int found = -1;
        for (int i = 0; i < TMM_BENCH_MIXER_IMPLS; i++)
            if (strlen(tmm_bench_mixer_impl_names[i]) == len && strncmp(text, tmm_bench_mixer_impl_names[i], len) == 0)
                found = i;
        if (found < 0) {
            cli_fail("--impls: unknown implementation '%.*s' (" IMPL_LIST ")\n", (int)len, text);
            return false;
        }
        wanted[found] = any = true;
        text += len + (text[len] == ',');
    }
    if (!any)
        cli_fail("--impls: name at least one of " IMPL_LIST "\n");
    return any;
}

/* A value of 0 .. max; false after a one-line error. */
static bool parse_u32(const char *option, const char *text, unsigned long max, uint32_t *out)
{
    unsigned long v;
    if (!cli_parse_uint(option, text, max, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

typedef struct mixer_flags {
    const char *svg;
    int device;
    bool json, cap_given, window_given;
} mixer_flags;

/* One option into o and f; false after a one-line error. */
static bool mixer_flag(int opt, const char *arg, tmm_bench_mixer_opts *o, mixer_flags *f)
{
    bool ok = true;
    uint32_t v = 0;
    switch (opt) {
    case 'n':
        ok = parse_u32("--n", arg, 1 << 20, &o->only_n);
        if (ok && o->only_n == 0) {
            cli_fail("--n must be at least 1\n");
            ok = false;
        }
        return ok;
    case 'd': return parse_u32("--d", arg, 1 << 16, &o->d);
    case 'H': return parse_u32("--heads", arg, TMM_MAX_HEADS, &o->heads);
    case 'b': return parse_u32("--batch", arg, 1 << 16, &o->batch);
    case 'm': return parse_u32("--max-n", arg, 1 << 20, &o->max_n);
    case 't': f->cap_given = true; return parse_u32("--time-cap", arg, 86400, &o->cap_s);
    case 's': f->svg = arg; return true;
    case 'D':
        ok = parse_u32("--device", arg, TMM_MAX_DEVICE_INDEX, &v);
        f->device = (int)v;
        return ok;
    case 'j': f->json = true; return true;
    case 'i': return parse_impls(arg, o->wanted);
    case 'f': return parse_u32("--fit-from", arg, 1 << 20, &o->fit_from);
    case 'r':
        ok = parse_u32("--repeat", arg, TMM_BENCH_MIXER_MAX_REPEAT, &o->repeat);
        if (ok && o->repeat == 0) {
            cli_fail("--repeat must be from 1 to %d\n", TMM_BENCH_MIXER_MAX_REPEAT);
            ok = false;
        }
        return ok;
    case 'w': f->window_given = true; return bench_parse_window(arg, &o->window);
    default: return false;
    }
}

typedef struct flag_ctx {
    tmm_bench_mixer_opts *o;
    mixer_flags *f;
} flag_ctx;

static bool mixer_flag_ctx(int opt, const char *arg, void *ctx)
{
    flag_ctx *c = ctx;
    return mixer_flag(opt, arg, c->o, c->f);
}

/* The options of bench mixer: 0 to go on, -1 after --help, else the exit status. */
static int parse(int argc, char **argv, tmm_bench_mixer_opts *o, mixer_flags *f)
{
    static const struct option longopts[] = {
        { "n", required_argument, NULL, 'n' },          { "d", required_argument, NULL, 'd' },
        { "heads", required_argument, NULL, 'H' },      { "batch", required_argument, NULL, 'b' },
        { "max-n", required_argument, NULL, 'm' },      { "time-cap", required_argument, NULL, 't' },
        { "svg", required_argument, NULL, 's' },        { "device", required_argument, NULL, 'D' },
        { "json", no_argument, NULL, 'j' },             { "help", no_argument, NULL, 'h' },
        { "impls", required_argument, NULL, 'i' },      { "fit-from", required_argument, NULL, 'f' },
        { "repeat", required_argument, NULL, 'r' },     { "window", required_argument, NULL, 'w' },
        { 0, 0, 0, 0 },
    };
    flag_ctx ctx = { o, f };
    int rc = cli_flags(argc, argv, longopts, "bench mixer", usage, mixer_flag_ctx, &ctx);
    if (rc != 0)
        return rc;
    if (f->cap_given && o->only_n) {
        cli_fail("--time-cap skips lengths predicted from the previous one: with a single --n there is none; "
                 "use --max-n for a series\n");
        return 2;
    }
    if (f->window_given && !o->wanted[TMM_BENCH_MIXER_SWA]) {
        cli_fail("--window is for the swa rows: add swa to --impls\n");
        return 2;
    }
    if (o->d == 0 || o->batch == 0 || (o->heads && o->d % o->heads)) {
        cli_fail("--d must be a positive multiple of --heads, --batch positive\n");
        return 2;
    }
    return 0;
}

/* The table's line of each measurement as it comes. */
static void print_event(void *user, const tmm_bench_mixer_event *e)
{
    const tmm_bench_mixer_opts *o = user;
    const char *name = tmm_bench_mixer_impl_names[e->impl];
    if (e->kind == TMM_BENCH_MIXER_SKIPPED)
        printf("%-9s n=%-6u skipped: about %.0f s predicted, over the %u s cap\n", name, e->n, e->predicted_s,
               o->cap_s);
    else if (e->kind == TMM_BENCH_MIXER_FAILED)
        printf("%-9s n=%-6u not measured: %s\n", name, e->n, e->error);
    else
        printf("%-9s n=%-6u fwd %10.3f ms  fwd+bwd %10.3f ms  peak %8.1f MiB  %10.0f tokens/s\n", name, e->n,
               e->row->fwd_ms, e->row->fwd_bwd_ms, (double)e->row->peak_bytes / (1 << 20),
               (double)o->batch * e->n / (e->row->fwd_bwd_ms * 1e-3));
    if (e->kind == TMM_BENCH_MIXER_MEASURED)
        fflush(stdout);
}

static void print_exponents(const tmm_bench_mixer_opts *o, const tmm_bench_mixer_result *r)
{
    if (o->fit_from)
        printf("\nscaling exponent of fwd+bwd time over n >= %u:", o->fit_from);
    else
        printf("\nscaling exponent of fwd+bwd time over the upper half of each curve:");
    for (int impl = 0; impl < TMM_BENCH_MIXER_IMPLS; impl++) {
        double e = tmm_bench_mixer_exponent(r, impl, o->fit_from);
        if (isfinite(e))
            printf("  %s %.2f", tmm_bench_mixer_impl_names[impl], e);
    }
    printf("\n");
}

int bench_mixer(int argc, char **argv)
{
    tmm_bench_mixer_opts o = { .d = 256, .heads = 4, .batch = 1, .window = 128, .max_n = 65536, .cap_s = 20,
                               .repeat = 3, .wanted = { true, true, true, true, true, true } };
    mixer_flags f = { .svg = "bench-mixer.svg", .device = -1 };
    int rc = parse(argc, argv, &o, &f);
    if (rc)
        return rc < 0 ? 0 : rc;
    tmm_device *dev;
    if (cli_open_device(f.device, &dev))
        return 1;
    tmm_bench_mixer_result *r = malloc(sizeof *r);
    tmm_status s = r ? tmm_bench_mixer(dev, &o, f.json ? NULL : print_event, &o, r)
                     : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    char *text = s == TMM_OK && f.json ? tmm_bench_mixer_json(dev, &o, r) : NULL;
    if (s != TMM_OK || (f.json && !text))
        rc = bench_failed(s);
    else if (f.json)
        printf("%s\n", text);
    else
        print_exponents(&o, r);
    tmm_status plot = s == TMM_OK && r->count ? tmm_bench_mixer_svg(f.svg, &o, r) : TMM_ERR_INVALID_ARGUMENT;
    if (s == TMM_OK && r->count && plot != TMM_OK)
        rc = cli_error("cannot write the plot", plot);
    else if (plot == TMM_OK && !f.json)
        printf("plot: %s\n", f.svg);
    free(text);
    free(r);
    tmm_device_destroy(dev);
    return rc;
}
