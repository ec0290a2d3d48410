/* The flags the benchmarks of tmm bench share (cmd_bench.c). The measuring,
 * the profiles and the JSON are the library's (src/bench, bench/bench.h);
 * the cmd_bench*.c files parse the flags into its options and print its
 * results. */
#ifndef TMM_CLI_BENCH_H
#define TMM_CLI_BENCH_H

#include <stddef.h>

#include "bench/bench.h"
#include "device.h"
#include "train/train_config.h"

/* tmm bench arch (cmd_bench_arch.c) and memory (cmd_bench_memory.c), dispatched by cmd_bench. */
int bench_arch(int argc, char **argv);
int bench_memory(int argc, char **argv);

/* Prints "tmm COMMAND: " and the last error of a failed benchmark (which
 * names what failed); returns 1. */
int bench_failed(tmm_status s);

/* --arch NAME (BENCH_ARCHS); false after a one-line error. */
#define BENCH_ARCHS "tmm, transformer, swa, linear, hyena or mamba2"
bool bench_parse_arch(const char *text, tmm_arch *out);
/* --archs a,b,...: marks each named architecture in selected; false after a one-line error. */
bool bench_parse_archs(const char *text, bool selected[TMM_N_ARCHS]);
/* --window W: 1 .. TMM_MAX_N_CTX; false after a one-line error. */
bool bench_parse_window(const char *text, uint32_t *out);
/* The model flags of the benchmarks that train (bench train, bench memory),
 * as getopt_long entries: --preset NAME, --d-model, --n-ctx, --layers,
 * --heads, --vocab, --arch, --window (option codes 'p', 'd', 'n', 'l', 'H',
 * 'V', BENCH_OPT_ARCH, BENCH_OPT_WINDOW). bench_model_flag applies one to c
 * (but --preset: bench_model_base) and returns whether opt was one of them;
 * *ok is false after a one-line error. */
enum { BENCH_OPT_ARCH = 256, BENCH_OPT_WINDOW, BENCH_OPT_FIRST_FREE };
#define BENCH_MODEL_OPTIONS                                                                            \
    { "preset", required_argument, NULL, 'p' }, { "d-model", required_argument, NULL, 'd' },           \
    { "n-ctx", required_argument, NULL, 'n' },  { "layers", required_argument, NULL, 'l' },            \
    { "heads", required_argument, NULL, 'H' },  { "vocab", required_argument, NULL, 'V' },             \
    { "arch", required_argument, NULL, BENCH_OPT_ARCH }, { "window", required_argument, NULL, BENCH_OPT_WINDOW }
bool bench_model_flag(int opt, const char *arg, tmm_train_config *c, bool *ok);
/* The first pass over the options of a benchmark that trains: --preset (and
 * with config_opt, its code, --config FILE) set the whole model, so they are
 * applied to c before the flags that change parts of it, wherever they stand
 * (bench_model_flag then skips --preset); both at once are refused. false
 * after a one-line error (this pass reports the command line's errors). */
bool bench_model_base(int argc, char **argv, const struct option *longopts, int config_opt, tmm_train_config *c);
/* Their run flags, as getopt_long entries: --batch N (c->batch, at most
 * TMM_BENCH_MAX_BATCH, as train.batch), --steps N, --device N, --json
 * (codes 'b', 's', 'D', 'j'). */
#define BENCH_RUN_OPTIONS                                                                              \
    { "batch", required_argument, NULL, 'b' }, { "steps", required_argument, NULL, 's' },              \
    { "device", required_argument, NULL, 'D' }, { "json", no_argument, NULL, 'j' }
typedef struct bench_run_flags {
    unsigned long steps;
    int device;     /* -1: the default device */
    bool json;
} bench_run_flags;
/* A flag of tmm bench COMMAND (train, memory) that is not its own: a model
 * or run flag applied to c and run; *ok is false after any error (opt '?':
 * cli_getopt's). */
void bench_train_flag(int opt, const char *arg, tmm_train_config *c, bench_run_flags *run, bool *ok);
/* After the flags: every step runs the whole batch at once (accum 1), the
 * model resolved and checked, device N opened. 0, or the exit code after a
 * one-line error (c is then freed). */
int bench_open(tmm_train_config *c, int device, tmm_device **dev);

/* "16,64,256": up to TMM_BENCH_MAX_POINTS positive values; false after an error. */
bool bench_parse_list(const char *option, const char *text, uint32_t *out, unsigned *count);

#endif
