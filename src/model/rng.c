#include "model/rng.h"

#include <math.h>
#include <string.h>

/* splitmix64's finalizer over a Weyl sequence: a good counter-based mix. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t tmm_rng_bits(uint64_t key, uint64_t counter)
{
    return mix64(mix64(key) + (counter + 1) * 0x9e3779b97f4a7c15ull);
}

double tmm_rng_uniform(uint64_t key, uint64_t counter)
{
    /* 53 bits, shifted by half a step so that 0 and 1 never occur */
    return ((double)(tmm_rng_bits(key, counter) >> 11) + 0.5) * 0x1.0p-53;
}

double tmm_rng_normal(uint64_t key, uint64_t i)
{
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = tmm_rng_uniform(key, 2 * i), u2 = tmm_rng_uniform(key, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

uint64_t tmm_rng_key(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; name[i]; i++) {
        h ^= (unsigned char)name[i];
        h *= 0x100000001b3ull;
    }
    return mix64(seed ^ mix64(h));
}
