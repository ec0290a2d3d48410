#define _POSIX_C_SOURCE 200809L /* sigaction */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "files.h"
#include "model/arch.h"

const char *cli_command = "";
const char *cli_program = "tmm";

void cli_fail(const char *fmt, ...)
{
    fprintf(stderr, "tmm%s%s: ", *cli_command ? " " : "", cli_command);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void cli_deprecated(const char *old_flag, const char *flag)
{
    cli_fail("--%s is deprecated (it goes in version 0.2): use --%s\n", old_flag, flag);
}

int cli_error(const char *what, tmm_status status)
{
    const char *msg = tmm_last_error();
    cli_fail("%s: %s\n", what, *msg ? msg : tmm_status_name(status));
    return 1;
}

volatile sig_atomic_t cli_interrupted;

/* a second signal while the first one's checkpoint is saved or a long step
 * runs ends the process at once: atomic writes keep the last checkpoint */
static void on_stop_signal(int sig)
{
    if (cli_interrupted) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    cli_interrupted = sig;
}

void cli_catch_stop_signals(void)
{
    struct sigaction sa = { .sa_handler = on_stop_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int cli_out_apart(const char *flag, const char *out, const char *const *inputs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (inputs[i] && tmm_same_file(out, inputs[i])) {
            cli_fail("%s %s is the input %s: write to another file\n", flag, out, inputs[i]);
            return 1;
        }
    return 0;
}

int cli_toeplitz_impl_applies(tmm_arch arch, const char *what)
{
    if (tmm_arch_of(arch)->toeplitz)
        return 0;
    cli_fail("--toeplitz-impl: %s is a %s model, which has no Toeplitz layers: drop the option\n", what,
             tmm_arch_name(arch));
    return 2;
}

bool cli_parse_fraction(const char *option, const char *text, double *out)
{
    char *end;
    const double v = strtod(text, &end);
    if (end == text || *end || !(v > 0 && v < 1)) {
        cli_fail("%s expects a number between 0 and 1 (exclusive), got '%s'\n", option, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_uint(const char *option, const char *text, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v > max) {
        cli_fail("%s expects a whole number from 0 to %lu, got '%s'\n", option, max, text);
        return false;
    }
    *out = v;
    return true;
}

int cli_open_device(int index, tmm_device **out)
{
    tmm_device_options opt = TMM_DEVICE_OPTIONS_DEFAULT;
    opt.index = index;
    tmm_status s = tmm_device_create(&opt, out);
    if (s != TMM_OK)
        return cli_error("cannot open a Vulkan device", s);
    return 0;
}

const char *cli_size(uint64_t bytes, char *buf, size_t size)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, size, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, size, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else
        snprintf(buf, size, "%.1f KiB", (double)bytes / 1024.0);
    return buf;
}


bool cli_parse_positive(const char *option, const char *text, unsigned long max, uint32_t *out)
{
    unsigned long v;
    if (!cli_parse_uint(option, text, max, &v))
        return false;
    if (v == 0) {
        cli_fail("%s must be at least 1\n", option);
        return false;
    }
    *out = (uint32_t)v;
    return true;
}

/* The first entry of longopts with val: the option's name (later ones are deprecated names). */
static const struct option *option_of(const struct option *longopts, int val)
{
    for (const struct option *o = longopts; o->name; o++)
        if (o->val == val)
            return o;
    return NULL;
}

static bool repeatable(const int *vals, int val)
{
    for (; vals && *vals; vals++)
        if (*vals == val)
            return true;
    return false;
}

/* false after "--NAME given twice": a second value of an option that takes one. */
static bool once(cli_args *a, const struct option *o, int val)
{
    if (!o || o->has_arg == no_argument || repeatable(a->repeatable, val))
        return true;
    for (int i = 0; i < a->n_seen; i++)
        if (a->seen[i] == val) {
            cli_fail("--%s given twice ('%s', then '%s'): give it once\n", o->name,
                     a->value[i] ? a->value[i] : "", optarg ? optarg : "");
            return false;
        }
    if (a->n_seen < CLI_MAX_SEEN) /* more options than any table holds: never */
        a->seen[a->n_seen] = val, a->value[a->n_seen++] = optarg;
    return true;
}

int cli_getopt(cli_args *a, int argc, char **argv)
{
    if (!a->started) {
        optind = 1;
        opterr = 0; /* the messages below */
        a->started = true;
    }
    char shortopts[64];
    snprintf(shortopts, sizeof shortopts, ":%s", a->shortopts ? a->shortopts : "h");
    int index = -1;
    const int opt = getopt_long(argc, argv, shortopts, a->longopts, &index);
    if (opt == ':' || opt == '?') {
        if (opt == ':')
            cli_fail("%s needs a value\n", argv[optind - 1]);
        else
            cli_fail("unknown option '%s'; see '%s %s --help'\n", argv[optind - 1], cli_program, cli_command);
        return '?';
    }
    if (opt == -1)
        return -1;
    const struct option *o = option_of(a->longopts, opt);
    if (index >= 0 && o && o != &a->longopts[index])
        cli_deprecated(a->longopts[index].name, o->name);
    return once(a, o, opt) ? opt : '?';
}

int cli_flags(int argc, char **argv, const struct option *longopts, const char *name, void (*usage)(void),
              bool (*flag)(int opt, const char *arg, void *ctx), void *ctx)
{
    cli_args a = { .longopts = longopts };
    int opt;
    while ((opt = cli_getopt(&a, argc, argv)) != -1) {
        if (opt == '?')
            return 2;
        if (opt == 'h') {
            usage();
            return -1;
        }
        if (!flag(opt, optarg, ctx))
            return 2;
    }
    if (optind < argc) {
        cli_fail("unexpected argument '%s'; see 'tmm %s --help'\n", argv[optind], name);
        return 2;
    }
    return 0;
}
