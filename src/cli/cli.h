/* The tmm command line: one function per subcommand, each parsing its own
 * options with getopt_long and returning the process exit status. */
#ifndef TMM_CLI_H
#define TMM_CLI_H

#include <getopt.h>
#include <signal.h>

#include "bench/bench.h"
#include "device.h" /* TMM_MAX_DEVICE_INDEX */
#include "tmm/tmm.h"

int cmd_devices(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
/* tmm eval --task (cmd_eval_task.c), dispatched by cmd_eval. */
int cmd_eval_task(int argc, char **argv);
int cmd_index(int argc, char **argv);
int cmd_distill(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_experiment(int argc, char **argv);
/* tmm bench train (cmd_bench_train.c), dispatched by cmd_bench. */
int bench_train(int argc, char **argv);
/* tmm bench mixer (cmd_bench_mixer.c). */
int bench_mixer(int argc, char **argv);
/* tmm bench generate (cmd_bench_generate.c). */
int bench_generate(int argc, char **argv);

/* The command being run ("train", "bench matmul"), set by main and the
 * dispatchers: it names every error line. */
extern const char *cli_command;
/* How the program was invoked (argv[0], e.g. "build/tmm"): the hints it
 * prints name it so, and can be pasted as they are. */
extern const char *cli_program;
/* Prints "tmm COMMAND: " and the message on stderr (fmt ends with a newline). */
void cli_fail(const char *fmt, ...) TMM_PRINTF(1, 2);
/* The one line for a renamed flag that is still accepted:
 * "tmm COMMAND: --old is deprecated (it goes in version 0.2): use --now". */
void cli_deprecated(const char *old_flag, const char *flag);
/* Prints "tmm COMMAND: <what>: <last error>"; returns 1. */
int cli_error(const char *what, tmm_status status);
/* Parses a non-negative integer option value; prints an error and returns false if bad. */
bool cli_parse_uint(const char *option, const char *text, unsigned long max, unsigned long *out);
/* A whole number from 1 to max; false after a one-line error. */
bool cli_parse_positive(const char *option, const char *text, unsigned long max, uint32_t *out);
/* The option parser every command's loop runs: getopt_long over longopts
 * (short letters in shortopts, e.g. "c:d:h"; NULL: "h"), which says the
 * errors once for all: an unknown option, a missing value, and an option
 * that takes a value given twice ("--steps given twice ('10', then '20'):
 * give it once"; a later value never silently wins), except the options in
 * repeatable (their vals, 0-terminated): list-like ones that accumulate, which
 * their --help says may be repeated. An entry whose val repeats an earlier
 * entry's is that option's deprecated name: it counts as the same option and
 * prints cli_deprecated's line. Reset by its first call (optind = 1). */
#define CLI_MAX_SEEN 128
typedef struct cli_args {
    const struct option *longopts;
    const char *shortopts;
    const int *repeatable;
    /* the parser's own: the options given so far and their values */
    int seen[CLI_MAX_SEEN];
    const char *value[CLI_MAX_SEEN];
    int n_seen;
    bool started;
} cli_args;
/* The next option as getopt_long returns it (optarg: its value), -1 at the
 * end, or '?' after the one-line error (the command then exits with 2). */
int cli_getopt(cli_args *a, int argc, char **argv);
/* The loop of a subcommand `tmm NAME` whose options are all long (plus -h),
 * none repeatable: each option goes to flag(opt, optarg, ctx), which returns
 * false after its own one-line error. 0 to go on, -1 after --help (usage
 * printed), 2 after an error (cli_getopt's, or a stray argument). */
int cli_flags(int argc, char **argv, const struct option *longopts, const char *name, void (*usage)(void),
              bool (*flag)(int opt, const char *arg, void *ctx), void *ctx);
/* --toeplitz-impl picks how Toeplitz layers are computed: for a model of
 * arch without them (a baseline) it could do nothing, so it is refused: 0,
 * or 2 after the one-line error naming the model (what: its checkpoint). */
int cli_toeplitz_impl_applies(tmm_arch arch, const char *what);
/* Parses a number strictly between 0 and 1 (a tolerance); as cli_parse_uint. */
bool cli_parse_fraction(const char *option, const char *text, double *out);
/* Applies a config file (JSON, as tmm train --config) on top of c: 0, or 1
 * after a one-line error (cmd_train.c). */
struct tmm_train_config;
int cli_load_config(struct tmm_train_config *c, const char *path);
/* Applies the built-in preset name (tmm train --preset) on top of c: 0, or
 * the exit status after a one-line error (an unknown name lists them). */
int cli_apply_preset(struct tmm_train_config *c, const char *name);
/* The signal (SIGINT, SIGTERM or SIGHUP) that asked a run to stop, or 0:
 * set by the handlers of cli_catch_stop_signals, which training and the
 * experiments read after each step to save and stop. A second such signal
 * ends the process at once (the default action), for a step that would
 * take long to finish. */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_stop_signals(void);
/* An output file (flag names it: "--out") that is one of the n inputs, by
 * device and inode (a link or another spelling too), would destroy that
 * input: 0, or 1 after a one-line error. Call it before any work. */
int cli_out_apart(const char *flag, const char *out, const char *const *inputs, size_t n);
/* Opens the device for a subcommand: index -1 means $TMM_DEVICE or the best. */
int cli_open_device(int index, tmm_device **out);
/* bytes as "1.5 GiB", "12.0 MiB" or "300.0 KiB" in buf; returns buf. */
const char *cli_size(uint64_t bytes, char *buf, size_t size);
/* The clock and medians: tmm_bench_now_ms, tmm_bench_median (bench/bench.h). */

#endif
