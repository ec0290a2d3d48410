/* Counter-based random numbers: value i of stream (seed, key) is a pure
 * function of (seed, key, i), so initialization does not depend on the
 * device, the order of tensors or the number of threads. */
#ifndef TMM_RNG_H
#define TMM_RNG_H

#include <stdint.h>

/* 64 random bits of element `counter` in stream `key`. */
uint64_t tmm_rng_bits(uint64_t key, uint64_t counter);
/* Uniform in (0, 1). */
double tmm_rng_uniform(uint64_t key, uint64_t counter);
/* Standard normal (Box-Muller over counters 2i and 2i+1). */
double tmm_rng_normal(uint64_t key, uint64_t i);
/* Stream key from a seed and a name (FNV-1a of the name, mixed). */
uint64_t tmm_rng_key(uint64_t seed, const char *name);

#endif
