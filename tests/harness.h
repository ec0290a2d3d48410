/* Test harness: a validated device per test, seeded random data, and
 * comparisons that report the largest deviation.
 *
 *   H_TEST(suite, name) { ... }   runs with h_dev open and validation on; at the
 *                                 end any validation message or leaked buffer fails it.
 *   H_OK(call)                    asserts a tmm_status is TMM_OK, printing the error. */
#ifndef TMM_TEST_HARNESS_H
#define TMM_TEST_HARNESS_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>

#include "buffer.h"
#include "model/params.h"
#include "recorder.h"

extern tmm_device *h_dev;

void h_init(void);
void h_fini(void);

#define H_TEST(suite, name) Test(suite, name, .init = h_init, .fini = h_fini)

/* The long tests' lengths (DEVELOPERS.md, "What CI runs"). By default they run
 * a short mode that still crosses every path they check (fewer layers, steps
 * or repeated shapes); TMM_TEST_FULL=1 (tools/test.sh --full) runs them at full
 * length. h_full() says which. */
bool h_full(void);
#if defined(__SANITIZE_ADDRESS__)
#define H_SANITIZED true
#else
#define H_SANITIZED false
#endif

#define H_OK(call)                                                                      \
    do {                                                                                \
        tmm_status h_s_ = (call);                                                       \
        cr_assert_eq(h_s_, TMM_OK, "%s -> %s: %s", #call, tmm_status_name(h_s_), tmm_last_error()); \
    } while (0)

/* A tiny model of architecture a, built through the generic path alone
 * (tmm_model_config_default, a few small sizes, tmm_model_config_resolve
 * for the row's defaults): the tests that loop over every row
 * (model_gpu.every_row, generate.every_row, checkpoint.round_trip_every_row)
 * cover a new architecture without new test code. */
tmm_model_config h_tiny_row(tmm_arch a);

/* Uniform floats in [lo, hi) from a seed (splitmix64; same on every machine). */
void h_rand(float *x, size_t n, uint64_t seed, float lo, float hi);
/* malloc that fails the test on NULL; n floats (at least 1). */
float *h_floats(size_t n);
/* A device buffer of n floats (n >= 1), filled from data when not NULL. */
tmm_buffer *h_buffer(const float *data, size_t n);
void h_read(const tmm_buffer *b, float *out, size_t n);
/* A recorder that is recording; h_run ends, submits, waits and destroys it. */
tmm_recorder *h_begin(void);
void h_run(tmm_recorder *r);

/* Asserts |got - ref| <= atol + rtol * |ref| elementwise; prints and returns
 * the largest |got - ref|. */
double h_compare(const char *what, const float *got, const float *ref, size_t n, double atol, double rtol);

/* A model file of random weights in a temporary directory: the config's
 * initialization, with every Toeplitz beta and Linear bias random in
 * [-0.5, 0.5] and the small-init weights (the baselines' N(0, 0.02²), which
 * would give tiny logits) in [-0.6, 0.6], so that every term shows; the
 * header records `tokenizer` and `step`. h_checkpoint_drop removes it. */
typedef struct h_checkpoint {
    char dir[64], path[96];
    tmm_param_table table;
    float *params;
} h_checkpoint;
void h_checkpoint_make(h_checkpoint *f, const tmm_model_config *c, const char *tokenizer, uint64_t step);
void h_checkpoint_drop(h_checkpoint *f);

#endif
