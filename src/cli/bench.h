/* What the model benchmarks share (tmm bench train, generate and arch): the
 * options that choose an architecture, and the measuring code itself, so that
 * bench arch measures exactly what bench train and bench generate do. */
#ifndef TMM_CLI_BENCH_H
#define TMM_CLI_BENCH_H

#include <stddef.h>

#include "device.h"
#include "gen/generator.h"
#include "train/train_config.h"

/* tmm bench arch (cmd_bench_arch.c) and memory (cmd_bench_memory.c), dispatched by cmd_bench. */
int bench_arch(int argc, char **argv);
int bench_memory(int argc, char **argv);

/* ---- options (cmd_bench.c) ---------------------------------------------- */

/* --arch NAME (BENCH_ARCHS); false after a one-line error. */
#define BENCH_ARCHS "tmm, transformer, swa, linear, hyena or mamba2"
bool bench_parse_arch(const char *text, tmm_arch *out);
/* --archs a,b,...: marks each named architecture in selected; false after a one-line error. */
bool bench_parse_archs(const char *text, bool selected[TMM_ARCH_COUNT]);
/* The heads a benchmark model of c->arch gets from --heads H: the TMM's and
 * attention's heads are H; Hyena has none and Mamba 2 resolves its own from
 * d (0 here, see tmm_model_config_resolve) unless heads_given. */
void bench_set_heads(tmm_model_config *c, uint32_t heads, bool heads_given);
/* --window W: 1 .. TMM_MAX_N_CTX; false after a one-line error. */
bool bench_parse_window(const char *text, uint32_t *out);
/* The model flags of the benchmarks that train (bench train, bench memory),
 * as getopt_long entries: --preset NAME, --d-model, --n-ctx, --layers,
 * --heads, --vocab, --arch, --window (option codes 'p', 'd', 'n', 'l', 'H',
 * 'V', BENCH_OPT_ARCH, BENCH_OPT_WINDOW). bench_model_flag applies one to c
 * (a text preset sets vocab 257) and returns whether opt was one of them;
 * *ok is false after a one-line error. */
enum { BENCH_OPT_ARCH = 256, BENCH_OPT_WINDOW, BENCH_OPT_FIRST_FREE };
#define BENCH_MODEL_OPTIONS                                                                            \
    { "preset", required_argument, NULL, 'p' }, { "d-model", required_argument, NULL, 'd' },           \
    { "n-ctx", required_argument, NULL, 'n' },  { "layers", required_argument, NULL, 'l' },            \
    { "heads", required_argument, NULL, 'H' },  { "vocab", required_argument, NULL, 'V' },             \
    { "arch", required_argument, NULL, BENCH_OPT_ARCH }, { "window", required_argument, NULL, BENCH_OPT_WINDOW }
bool bench_model_flag(int opt, const char *arg, tmm_train_config *c, bool *ok);
/* Their run flags, as getopt_long entries: --batch N (c->batch, at most
 * BENCH_MAX_BATCH, as train.batch), --steps N, --device N, --json (codes 'b',
 * 's', 'D', 'j'). */
#define BENCH_MAX_BATCH (1u << 20)
#define BENCH_RUN_OPTIONS                                                                              \
    { "batch", required_argument, NULL, 'b' }, { "steps", required_argument, NULL, 's' },              \
    { "device", required_argument, NULL, 'D' }, { "json", no_argument, NULL, 'j' }
typedef struct bench_run_flags {
    unsigned long steps;
    int device;     /* -1: the default device */
    bool json;
} bench_run_flags;
/* A flag of tmm bench COMMAND (train, memory) that is not its own: a model
 * or run flag applied to c and run, else a one-line error for an unknown
 * option or a missing value (opt ':'); *ok is false after any error. */
void bench_train_flag(int opt, const char *arg, char *const *argv, const char *command, tmm_train_config *c,
                      bench_run_flags *run, bool *ok);
/* After the flags: every step runs the whole batch at once (accum 1), the
 * model resolved and checked, device N opened. 0, or the exit code after a
 * one-line error (c is then freed). */
int bench_open(tmm_train_config *c, int device, tmm_device **dev);

/* "16,64,256": up to BENCH_MAX_POINTS positive values; false after an error. */
#define BENCH_MAX_POINTS 16
bool bench_parse_list(const char *option, const char *text, uint32_t *out, unsigned *count);
/* "heads 4, window 128" (swa), "heads 4", "heads 4, state 64" (mamba2),
 * "implicit filters" (hyena) or "flat, kernel 1" (a TMM without heads). */
const char *bench_mixing_desc(const tmm_model_config *c, char *buf, size_t size);

/* ---- training steps (cmd_bench_train.c) --------------------------------- */

#define BENCH_MAX_OPS 32

typedef struct bench_op_time {
    char name[32];
    double ms;        /* summed over the measured steps */
} bench_op_time;

typedef struct bench_train_result {
    double tokens_per_s, ms_per_step, cpu_ms_per_step;  /* wall-clock and CPU time of the measured steps */
    bool timed;                     /* per-op device times below (profile, and the device has timestamps) */
    int n_ops;
    bench_op_time ops[BENCH_MAX_OPS];
    double device_ms;               /* sum of ops[].ms */
    tmm_memory_budget heap;         /* the device's main heap after the steps, the model still held */
    double comm_ms_per_step;        /* several ranks: wall time of the gradients' sum across ranks */
} bench_train_result;

/* Times training steps of c->model at c->batch sequences, with c's model
 * options (tmm_train_model_options), on fixed tokens:
 * forward, backward, clipping and AdamW recorded once and replayed, `warmup`
 * unmeasured steps (lavapipe compiles kernels at their first dispatch), then
 * `steps` measured ones (none: the model and optimizer are only made and the
 * step recorded, for their memory). With `profile` every op is wrapped in a
 * timestamp region (device time per op; a little overhead). c->model must be
 * checked. */
tmm_status bench_train_steps(tmm_device *dev, const tmm_train_config *c, uint32_t warmup, uint32_t steps,
                             bool profile, bench_train_result *out);
/* The same as one of several ranks (dist; NULL: one process): c->batch is
 * the global batch, this rank steps batch / ranks sequences, and between the
 * backward and the optimizer the gradients go through a host-visible staging
 * buffer and are summed across ranks, as tmm train does (train/trainer.h). */
struct tmm_dist;
tmm_status bench_train_steps_dist(tmm_device *dev, const tmm_train_config *c, struct tmm_dist *dist, uint32_t warmup,
                                  uint32_t steps, bool profile, bench_train_result *out);

/* ---- decoding (cmd_bench_generate.c) ------------------------------------ */

#define BENCH_MAX_REPEAT 64

typedef struct bench_gen {
    tmm_generator *gen;
    uint32_t n, V, repeat;  /* repeat: timed runs per measurement (<= BENCH_MAX_REPEAT) */
    uint32_t *tokens;       /* n random tokens */
    float *logits;
} bench_gen;

/* A generator of one sequence from weights in memory (a checkpoint's or
 * random ones; distilled: decoding with these realizations, or NULL), with n
 * random tokens to feed it. */
tmm_status bench_gen_open(tmm_device *dev, const tmm_param_table *table, const float *params,
                          tmm_model_tokenizer tokenizer, tmm_toeplitz_impl impl, uint32_t repeat,
                          const tmm_distilled *distilled, bench_gen *out);
/* The same with random weights (tmm_param_init from c->seed); c must be checked. */
tmm_status bench_gen_random(tmm_device *dev, const tmm_model_config *c, tmm_toeplitz_impl impl, uint32_t repeat,
                            bench_gen *out);
void bench_gen_close(bench_gen *b);
/* Median ms of a prefill of `len` tokens and one greedy sample. */
tmm_status bench_gen_first_token(bench_gen *b, uint32_t len, double *ms);
/* Median ms of one cached decoding step at positions pos .. pos + repeat - 1,
 * after a prefill of pos tokens (pos + repeat <= n). */
tmm_status bench_gen_cached(bench_gen *b, uint32_t pos, double *ms);

#endif
