/* The measured fft/direct crossover behind --mixer-impl auto: measured once,
 * cached per device, a bad cache file measured again. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "model/mixer_select.h"

H_TEST(mixer_select, crossover_is_measured_once_and_cached)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tmm-mixer-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    setenv("TMM_CACHE_DIR", dir, 1);

    tmm_toeplitz_impl impl;
    H_OK(tmm_mixer_resolve(h_dev, TMM_TOEPLITZ_AUTO, 64, &impl));
    cr_assert_eq(impl, TMM_TOEPLITZ_DIRECT, "short sequences use the direct kernel");
    H_OK(tmm_mixer_resolve(h_dev, TMM_TOEPLITZ_FFT, 64, &impl));
    cr_assert_eq(impl, TMM_TOEPLITZ_FFT, "an explicit choice passes through");

    uint32_t first, again;
    H_OK(tmm_mixer_crossover(h_dev, &first));
    printf("  measured crossover: n = %u\n", first);
    cr_assert(first == UINT32_MAX || (first >= TMM_MIXER_CALIBRATE_FROM && first <= 8192), "crossover %u", first);
    H_OK(tmm_mixer_crossover(h_dev, &again));
    cr_assert_eq(again, first, "the cached value differs");

    /* AUTO follows the crossover */
    if (first != UINT32_MAX) {
        H_OK(tmm_mixer_resolve(h_dev, TMM_TOEPLITZ_AUTO, first, &impl));
        cr_assert_eq(impl, TMM_TOEPLITZ_FFT);
    }

    /* a garbage cache file is measured again and replaced */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "for f in %s/mixer-*.txt; do echo garbage > $f; done", dir);
    cr_assert_eq(system(cmd), 0);
    H_OK(tmm_mixer_crossover(h_dev, &again));
    cr_assert(again == UINT32_MAX || again >= TMM_MIXER_CALIBRATE_FROM);
    snprintf(cmd, sizeof cmd, "grep -q '^crossover ' %s/mixer-*.txt", dir);
    cr_assert_eq(system(cmd), 0, "the cache file was not rewritten");
}
