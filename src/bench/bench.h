/* The benchmarks of tmm bench as a library (src/bench; the CLI and the tests
 * only): each sets up its models or ops, measures, and fills a result struct
 * that its JSON writer turns into the object `tmm bench NAME --json` prints.
 * The CLI (src/cli/cmd_bench*.c) parses the flags into the options and
 * prints the results; a test calls the same functions on tiny shapes.
 *
 * Every function returns a tmm_status and sets a one-line message; a JSON
 * writer returns the text (free it), or NULL after tmm_fail. Times are
 * milliseconds: device time from the recorder's timestamp regions where the
 * device has them, else (and for whole steps) wall-clock time on the host. */
#ifndef TMM_BENCH_H
#define TMM_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "gen/generator.h"
#include "model/arch.h"
#include "model/checkpoint.h"
#include "ops/ops.h"
#include "train/train_config.h"
#include "train/trainer.h"

#define TMM_BENCH_MAX_POINTS 16         /* prompt lengths, positions */
#define TMM_BENCH_MAX_REPEAT 64         /* timed decoding steps per measurement */
#define TMM_BENCH_MAX_BATCH (1u << 20)  /* sequences per training step (as train.batch) */
#define TMM_BENCH_MAX_OPS 32            /* distinct op labels in a training step's profile */

/* ---- shared ------------------------------------------------------------- */

/* Monotonic wall-clock time in milliseconds. */
double tmm_bench_now_ms(void);
/* Median of n > 0 values (sorts v; the mean of the middle two when n is even). */
double tmm_bench_median(double *v, uint32_t n);
/* "heads 4, window 128" (swa), "heads 4", "heads 4, state 64" (mamba2),
 * "implicit filters" (hyena) or "flat, kernel 1" (a TMM without heads). */
const char *tmm_bench_mixing_desc(const tmm_model_config *c, char *buf, size_t size);
/* The heads a benchmark model of c->arch gets from a heads option: the TMM's
 * and attention's heads are `heads`; Hyena has none and Mamba 2 resolves its
 * own from d (0 here, see tmm_model_config_resolve) unless heads_given. */
void tmm_bench_set_heads(tmm_model_config *c, uint32_t heads, bool heads_given);

/* ---- matmul (bench_matmul.c) -------------------------------------------- */

/* Without a repeat count: enough timed runs for about this much device time. */
#define TMM_BENCH_MATMUL_TARGET_MS 1500.0
#define TMM_BENCH_MATMUL_MIN_AUTO_REPEAT 3u
#define TMM_BENCH_MATMUL_MAX_AUTO_REPEAT 200u

typedef struct tmm_bench_matmul_opts {
    tmm_matmul_desc desc;               /* m, n, k, transposes (batch 1) */
    tmm_matmul_variant variants[2];
    int n_variants;                     /* 1 or 2 */
    uint32_t repeat;                    /* timed runs; 0: automatic (TARGET_MS) */
} tmm_bench_matmul_opts;

typedef struct tmm_bench_matmul_row {
    tmm_matmul_variant variant;
    uint32_t repeat;
    double ms;          /* median of the timed runs */
    double max_error;   /* of the spot check against a double dot product */
    bool host_timed;    /* no timestamps on this queue: wall-clock time instead */
} tmm_bench_matmul_row;

typedef struct tmm_bench_matmul_result {
    tmm_bench_matmul_row rows[2];       /* one per variant */
} tmm_bench_matmul_result;

/* C[m,n] = A[m,k] * B[k,n] of random matrices, one warm-up run, then the
 * timed ones, per variant; a few entries of C are checked against double
 * dot products, and a wrong result fails ("matmul (V variant) computed
 * wrong results on DEVICE: ..."). */
tmm_status tmm_bench_matmul(tmm_device *dev, const tmm_bench_matmul_opts *o, tmm_bench_matmul_result *out);
/* The variant's name in the table: "register", "tiled", or "auto:" and what
 * auto resolves to on dev. */
const char *tmm_bench_matmul_label(const tmm_device *dev, tmm_matmul_variant v, char *buf, size_t size);
/* What auto resolves to on dev: "register" on CPU devices, "tiled" on GPUs. */
const char *tmm_bench_matmul_resolved(const tmm_device *dev);
/* 2 m n k. */
double tmm_bench_matmul_flop(const tmm_matmul_desc *d);
/* The JSON array of `tmm bench matmul --json`. */
char *tmm_bench_matmul_json(const tmm_device *dev, const tmm_bench_matmul_opts *o, const tmm_bench_matmul_result *r);

/* ---- token mixing alone (bench_mixer.c) --------------------------------- */

enum {
    TMM_BENCH_MIXER_DIRECT,
    TMM_BENCH_MIXER_FFT,
    TMM_BENCH_MIXER_AUTO,
    TMM_BENCH_MIXER_ATTENTION,
    TMM_BENCH_MIXER_SWA,
    TMM_BENCH_MIXER_LINEAR,
    TMM_BENCH_MIXER_IMPLS
};
/* "direct", "fft", "auto", "attention", "swa", "linear" */
extern const char *const tmm_bench_mixer_impl_names[TMM_BENCH_MIXER_IMPLS];
#define TMM_BENCH_MIXER_MAX_REPEAT 15
#define TMM_BENCH_MIXER_MAX_ROWS (TMM_BENCH_MIXER_IMPLS * 32)

typedef struct tmm_bench_mixer_opts {
    uint32_t d, heads, batch;
    uint32_t window;            /* swa's keys per query */
    uint32_t only_n;            /* one length; 0: n = 256, 512, ... up to max_n */
    uint32_t max_n;
    uint32_t cap_s;             /* skip a run predicted (from the previous n) to take longer */
    uint32_t repeat;            /* timed runs per measurement, 1 .. TMM_BENCH_MIXER_MAX_REPEAT */
    uint32_t fit_from;          /* the exponent's fit over n >= this; 0: each curve's upper half */
    bool wanted[TMM_BENCH_MIXER_IMPLS];
} tmm_bench_mixer_opts;

typedef struct tmm_bench_mixer_row {
    int impl;
    uint32_t n;
    double fwd_ms, fwd_bwd_ms;  /* device time, median of repeat runs after a warm-up */
    uint64_t peak_bytes;        /* device memory of the op's buffers */
} tmm_bench_mixer_row;

typedef struct tmm_bench_mixer_result {
    tmm_bench_mixer_row rows[TMM_BENCH_MIXER_MAX_ROWS];
    int count;
    int skipped, failed;        /* runs over the cap; runs that failed (named in the events) */
} tmm_bench_mixer_result;

/* What happened to one (impl, n) as it happens, for a table that grows. */
typedef enum { TMM_BENCH_MIXER_MEASURED, TMM_BENCH_MIXER_SKIPPED, TMM_BENCH_MIXER_FAILED } tmm_bench_mixer_kind;
typedef struct tmm_bench_mixer_event {
    tmm_bench_mixer_kind kind;
    int impl;
    uint32_t n;
    const tmm_bench_mixer_row *row;     /* MEASURED */
    double predicted_s;                 /* SKIPPED: the predicted seconds */
    const char *error;                  /* FAILED: why */
} tmm_bench_mixer_event;
typedef void (*tmm_bench_mixer_progress)(void *user, const tmm_bench_mixer_event *e);

/* Times each wanted mixing op on [batch, n, d] inputs, forward and
 * forward+backward, at each length. A length whose run fails is reported
 * (FAILED) and ends that impl's series, as does one over the cap; the call
 * itself fails only for bad options. progress may be NULL. */
tmm_status tmm_bench_mixer(tmm_device *dev, const tmm_bench_mixer_opts *o, tmm_bench_mixer_progress progress,
                           void *user, tmm_bench_mixer_result *out);
/* Least-squares slope of log fwd+bwd time against log n of impl's rows over
 * n >= fit_from, or over the upper half of its rows when fit_from is 0; NAN
 * with fewer than two points. */
double tmm_bench_mixer_exponent(const tmm_bench_mixer_result *r, int impl, uint32_t fit_from);
/* The JSON object of `tmm bench mixer --json`. */
char *tmm_bench_mixer_json(const tmm_device *dev, const tmm_bench_mixer_opts *o, const tmm_bench_mixer_result *r);
/* The log-log plot of fwd+bwd time against n (r->count > 0); fails with
 * "cannot write PATH". */
tmm_status tmm_bench_mixer_svg(const char *path, const tmm_bench_mixer_opts *o, const tmm_bench_mixer_result *r);

/* ---- training steps (bench_train.c) ------------------------------------- */

typedef struct tmm_bench_op_time {
    char name[32];
    double ms;        /* summed over the measured steps */
    /* per step, from the recording (tmm_region_work): commands, external
     * recordings (VkFFT, whose work is not counted), bytes bound (an upper
     * bound of the traffic) and the FLOPs the ops declared */
    uint32_t commands, externals;
    double bytes, flops;
} tmm_bench_op_time;

/* The roofline's ceilings, measured (bench_peaks.c) at the first call on a
 * device and kept: a copy kernel's bandwidth (reads + writes) and the matmul
 * rate at 1024^3. */
typedef struct tmm_bench_peaks_result {
    double copy_gbs, matmul_gflops;
} tmm_bench_peaks_result;
tmm_status tmm_bench_peaks(tmm_device *dev, tmm_bench_peaks_result *out);
/* The share of the roofline an op reaches: the time its bytes take at the
 * copy bandwidth, or its FLOPs at the matmul rate, whichever is longer,
 * over its measured ms. */
double tmm_bench_roofline(const tmm_bench_peaks_result *peaks, double ms, double bytes, double flops);

typedef struct tmm_bench_train_result {
    double tokens_per_s, ms_per_step, cpu_ms_per_step;  /* wall-clock and CPU time of the measured steps */
    bool timed;                     /* per-op device times below (profile, and the device has timestamps) */
    int n_ops;
    tmm_bench_op_time ops[TMM_BENCH_MAX_OPS];
    double device_ms;               /* sum of ops[].ms */
    uint32_t commands_per_step;     /* dispatches, copies and fills the step records (all ranks' alike) */
    tmm_memory_budget heap;         /* the device's main heap after the steps, the model still held */
    double comm_ms_per_step;        /* several ranks: wall time of the gradients' sum across ranks */
} tmm_bench_train_result;

/* Times training steps of c->model at c->batch sequences, with c's model
 * options (tmm_train_model_options), on fixed tokens:
 * forward, backward, clipping and AdamW recorded once and replayed, `warmup`
 * unmeasured steps (lavapipe compiles kernels at their first dispatch), then
 * `steps` measured ones (none: the model and optimizer are only made and the
 * step recorded, for their memory). With `profile` every op is wrapped in a
 * timestamp region (device time per op; a little overhead). c->model must be
 * checked. */
tmm_status tmm_bench_train_steps(tmm_device *dev, const tmm_train_config *c, uint32_t warmup, uint32_t steps,
                                 bool profile, tmm_bench_train_result *out);
/* The same as one of several ranks (dist; NULL: one process): c->batch is
 * the global batch, this rank steps batch / ranks sequences, and between the
 * backward and the optimizer the gradients go through a host-visible staging
 * buffer and are summed across ranks, as tmm train does (train/trainer.h). */
struct tmm_dist;
tmm_status tmm_bench_train_steps_dist(tmm_device *dev, const tmm_train_config *c, struct tmm_dist *dist,
                                      uint32_t warmup, uint32_t steps, bool profile, tmm_bench_train_result *out);

/* tmm bench train: the planned memory of this rank's training, then
 * TMM_BENCH_TRAIN_WARMUP + steps profiled steps, and every rank's tokens/s
 * and allreduce share gathered on every rank. */
#define TMM_BENCH_TRAIN_WARMUP 2u
typedef struct tmm_bench_train_report {
    uint32_t steps;
    tmm_bench_peaks_result peaks;       /* the device's, for the roofline column */
    tmm_train_memory mem;               /* this rank's part of the batch */
    tmm_bench_train_result res;         /* this rank's steps */
    int ranks;
    double *rank_tokens_per_s;          /* [ranks] */
    double *rank_allreduce_share;       /* [ranks]: comm time / step time */
    double total_tokens_per_s;
} tmm_bench_train_report;
/* c as tmm_bench_train_steps_dist (c->batch a multiple of the ranks). */
tmm_status tmm_bench_train(tmm_device *dev, const tmm_train_config *c, struct tmm_dist *dist, uint32_t steps,
                           tmm_bench_train_report *out);
void tmm_bench_train_report_free(tmm_bench_train_report *r);
/* The JSON object of `tmm bench train --json`. */
char *tmm_bench_train_json(const tmm_device *dev, const tmm_train_config *c, const tmm_bench_train_report *r);

/* ---- decoding (bench_generate.c) ---------------------------------------- */

typedef struct tmm_bench_gen {
    tmm_generator *gen;
    uint32_t n, V, repeat;  /* repeat: timed runs per measurement (<= TMM_BENCH_MAX_REPEAT) */
    uint32_t *tokens;       /* n random tokens */
    float *logits;
} tmm_bench_gen;

/* A generator of one sequence from weights in memory (a checkpoint's or
 * random ones; distilled: decoding with these realizations, or NULL), with n
 * random tokens to feed it. */
tmm_status tmm_bench_gen_open(tmm_device *dev, const tmm_param_table *table, const float *params,
                              tmm_model_tokenizer tokenizer, tmm_toeplitz_impl impl, uint32_t repeat,
                              const tmm_distilled *distilled, tmm_bench_gen *out);
/* The same with random weights (tmm_param_init from c->seed); c must be checked. */
tmm_status tmm_bench_gen_random(tmm_device *dev, const tmm_model_config *c, tmm_toeplitz_impl impl, uint32_t repeat,
                                tmm_bench_gen *out);
void tmm_bench_gen_close(tmm_bench_gen *b);
/* Median ms of a prefill of `len` tokens and one greedy sample. */
tmm_status tmm_bench_gen_first_token(tmm_bench_gen *b, uint32_t len, double *ms);
/* Median ms of one cached decoding step at positions pos .. pos + repeat - 1,
 * after a prefill of pos tokens (pos + repeat <= n). */
tmm_status tmm_bench_gen_cached(tmm_bench_gen *b, uint32_t pos, double *ms);
/* Cached decoding ms per token of random weights at each position (each
 * with positions[i] + repeat <= c->n_ctx), after a warm-up step that
 * compiles the kernels: what bench arch reports. */
tmm_status tmm_bench_decode(tmm_device *dev, const tmm_model_config *c, uint32_t repeat, const uint32_t *positions,
                            unsigned count, double *ms);

typedef struct tmm_bench_generate_opts {
    const tmm_checkpoint *checkpoint;   /* its weights (and distilled realizations); NULL: random ones */
    const char *name;                   /* the checkpoint's name in the reports */
    tmm_model_config config;            /* the random model (checked); with a checkpoint: its config */
    tmm_toeplitz_impl impl;
    uint32_t repeat;                    /* 1 .. TMM_BENCH_MAX_REPEAT */
    uint32_t prompts[TMM_BENCH_MAX_POINTS], positions[TMM_BENCH_MAX_POINTS];
    unsigned n_prompts, n_positions;
} tmm_bench_generate_opts;

/* Keeps the prompts that fit the context and the positions whose repeat
 * steps do; without positions_given, first adds the position n - repeat
 * (its steps end at the last position). false when none of either fits. */
bool tmm_bench_generate_fit(tmm_bench_generate_opts *o, bool positions_given);

/* How far distilled decoding strays from exact decoding: the exact model
 * continues a 16-token prompt greedily to the last position; the distilled
 * one is fed the same tokens. */
typedef struct tmm_bench_fidelity {
    uint32_t steps, agree, first_split;  /* argmax equal at `agree` steps; first step where it is not (UINT32_MAX: none) */
    double max_dlogit, mean_dlogit;      /* |logit difference|: largest, mean over steps of each step's largest */
} tmm_bench_fidelity;

typedef struct tmm_bench_generate_result {
    double first_token_ms[TMM_BENCH_MAX_POINTS];    /* per prompt */
    double cached_ms[TMM_BENCH_MAX_POINTS];         /* per position */
    double naive_ms[TMM_BENCH_MAX_POINTS];          /* a full forward pass of the position's prefix */
    double distilled_ms[TMM_BENCH_MAX_POINTS];      /* with distilled */
    double speedup_at_1000;                         /* naive / cached at position 1000; -1: not measured */
    uint32_t commands_per_token;                    /* of one decode step (all positions alike) */
    uint32_t distilled_commands_per_token;          /* with distilled */
    bool distilled;                                 /* the checkpoint has distilled realizations */
    tmm_bench_fidelity fidelity;                    /* with distilled */
} tmm_bench_generate_result;

/* Opens the model (and its distilled twin), warms up, then measures every
 * prompt and position. */
tmm_status tmm_bench_generate(tmm_device *dev, const tmm_bench_generate_opts *o, tmm_bench_generate_result *out);
/* "NAME (arch): d 128, 4 layers, heads 4, n 1024, vocab 257" (NAME: o->name
 * or "random model"). */
const char *tmm_bench_generate_desc(const tmm_bench_generate_opts *o, char *buf, size_t size);
/* The JSON object of `tmm bench generate --json`. */
char *tmm_bench_generate_json(const tmm_device *dev, const tmm_bench_generate_opts *o,
                              const tmm_bench_generate_result *r);

/* ---- every architecture at matched parameters (bench_arch.c) ------------ */

#define TMM_BENCH_ARCH_EXPANSION 4u       /* the TMM's MLP expansion */
#define TMM_BENCH_ARCH_WINDOW 128u        /* swa's default (the resolved default), at most n */

typedef struct tmm_bench_arch_opts {
    uint32_t d, n, layers, heads, window, batch, vocab, steps, repeat;
    uint32_t positions[TMM_BENCH_MAX_POINTS];  /* each with position + repeat <= n */
    unsigned np;
    bool selected[TMM_N_ARCHS];
} tmm_bench_arch_opts;

typedef struct tmm_bench_arch_row {
    tmm_model_config c;
    uint64_t params;
    tmm_train_memory mem;
    tmm_bench_train_result train;
    double decode_ms[TMM_BENCH_MAX_POINTS];
} tmm_bench_arch_row;

typedef struct tmm_bench_arch_result {
    tmm_bench_arch_row rows[TMM_N_ARCHS];   /* by tmm_arch; measured where selected */
} tmm_bench_arch_result;

/* The models, no device needed: the TMM as given, each baseline with the
 * knob value whose parameter count is nearest the TMM's
 * (tmm_model_match_params). Fails naming the architecture whose model is bad. */
tmm_status tmm_bench_arch_models(const tmm_bench_arch_opts *o, tmm_bench_arch_result *out);
/* Measures every selected row of out (filled by tmm_bench_arch_models):
 * the planned training memory, training steps (TMM_BENCH_TRAIN_WARMUP
 * warm-up, o->steps measured, unprofiled) and cached decoding at each
 * position; on_row (may be NULL) after each. Fails with "measuring ARCH: ...". */
tmm_status tmm_bench_arch(tmm_device *dev, const tmm_bench_arch_opts *o, tmm_bench_arch_result *out,
                          void (*on_row)(void *user, const tmm_bench_arch_row *row), void *user);
/* The JSON object of `tmm bench arch --json`. */
char *tmm_bench_arch_json(const tmm_device *dev, const tmm_bench_arch_opts *o, const tmm_bench_arch_result *r);

/* ---- precision and recomputation (bench_memory.c) ------------------------ */

/* fp32, fp16, bf16 without recomputation; fp32/block, fp16/mixer, fp16/block */
#define TMM_BENCH_MEMORY_ROWS 6
typedef struct tmm_bench_memory_setting {
    tmm_precision precision;
    tmm_recompute recompute;
} tmm_bench_memory_setting;
extern const tmm_bench_memory_setting tmm_bench_memory_settings[TMM_BENCH_MEMORY_ROWS];
const char *tmm_bench_precision_name(tmm_precision p);
const char *tmm_bench_recompute_name(tmm_recompute r);

typedef struct tmm_bench_memory_opts {
    const tmm_train_config *config;    /* model checked, accum 1 */
    uint32_t steps;                     /* timed steps per row after one warm-up (0: memory only) */
    uint64_t limit;                     /* bytes the max batch fits */
} tmm_bench_memory_opts;

typedef struct tmm_bench_memory_row {
    tmm_train_memory plan;
    uint64_t peak;             /* measured: the most the device's buffers held above what they held before */
    int64_t heap_delta;        /* the main heap's usage with the model held, less before */
    uint32_t max_batch;        /* the largest batch whose plan fits the limit (0: none) */
    tmm_bench_train_result train;
} tmm_bench_memory_row;

typedef struct tmm_bench_memory_result {
    tmm_bench_memory_row rows[TMM_BENCH_MEMORY_ROWS];   /* as tmm_bench_memory_settings */
} tmm_bench_memory_result;

/* Each setting: the plan, the largest batch within the limit (doubling,
 * then bisection), then the model made and trained for what it holds. */
tmm_status tmm_bench_memory(tmm_device *dev, const tmm_bench_memory_opts *o, tmm_bench_memory_result *out);
/* The JSON object of `tmm bench memory --json`. */
char *tmm_bench_memory_json(const tmm_device *dev, const tmm_bench_memory_opts *o, const tmm_bench_memory_result *r);

#endif
