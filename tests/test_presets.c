/* Every shipped preset trains a step: its exact model, its optimizer and
 * schedule, on the copy task or generated text. The paper presets run a batch
 * of one sequence (their full batch of 32 would take many minutes on
 * lavapipe). So that the smaller batch hides no binding-limit failure, the
 * device's maxStorageBufferRange is scaled down with the batch: 128 MiB (the
 * least Vulkan allows, lavapipe's) times 1/32, so every tensor that grows with
 * the batch meets the limit as the full batch would, and every op that must
 * split does; but never below two sequences of n*d floats, the least the FFT
 * path needs whatever the batch (paper-1024: 8 MiB, as for 16 of 32).
 * Short mode (the default; h_full) trains the paper presets with 2 of their 16
 * layers: every tensor keeps its full shape, so every op meets the same sizes and
 * splits; tools/test.sh --full trains all 16. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "mixer/toeplitz_select.h"
#include "train/trainer.h"

/* 400 distinct short documents, blank-line separated. */
static void write_corpus(const char *path)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 400; i++)
        fprintf(f, "document %d: the quick brown fox jumps over the lazy dog %d times.\n\n", i, i * 7 % 13);
    fclose(f);
}

static void one_step(const char *preset, uint32_t batch, uint32_t short_layers)
{
    char dir[64], corpus[128];
    snprintf(dir, sizeof dir, "/tmp/tmm-preset-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    write_corpus(corpus);

    tmm_train_config c;
    tmm_train_config_default(&c);
    const char *json = tmm_train_preset(preset);
    cr_assert_not_null(json, "no preset %s", preset);
    H_OK(tmm_train_config_apply_json(&c, json, preset));
    if (c.task == TMM_DATA_TEXT)
        c.text_files[c.text_file_count++] = strdup(corpus);
    c.steps = 1;
    c.eval_every = 0;
    if (short_layers && !h_full() && c.model.n_layers > short_layers)
        c.model.n_layers = short_layers;
    snprintf(c.run_dir, sizeof c.run_dir, "%s/run", dir);

    /* the binding range scaled with the batch, and the largest batch-sized matrix of the full batch */
    const uint32_t full = c.batch;
    if (batch)
        c.batch = batch, c.accum = 1;
    const uint64_t saved = h_dev->info.max_storage_buffer_range;
    uint64_t range = (128ull << 20) / full * c.batch / 256 * 256;
    /* ... but room for two sequences of n*d floats: what the FFT path needs at least, whatever the batch */
    const uint64_t sequence = (uint64_t)c.model.n_ctx * c.model.d_model * sizeof(float);
    if (range < 2 * sequence)
        range = 2 * sequence;
    const uint64_t largest = (uint64_t)full * c.model.n_ctx * c.model.expansion * c.model.d_model * sizeof(float);
    /* the direct/FFT crossover is measured (once per device, cached) on the device as it is: its probes
     * must not meet the shrunk range, which is the training step's alone */
    uint32_t crossover[TMM_TOEPLITZ_BUCKETS];
    H_OK(tmm_toeplitz_calibration(h_dev, crossover));
    h_dev->info.max_storage_buffer_range = range;

    tmm_train_result r;
    tmm_status s = tmm_train(h_dev, &c, NULL, NULL, &r);
    h_dev->info.max_storage_buffer_range = saved;
    H_OK(s);
    printf("  %s (%u layers): batch %u of %u, one step with bindings of %llu bytes (the full batch's largest matrix: %llu "
           "of 128 MiB): loss %.4f\n", preset, c.model.n_layers, c.batch, full, (unsigned long long)range,
           (unsigned long long)largest, r.loss);
    cr_assert(r.step == 1 && isfinite(r.loss) && r.loss > 0);
    tmm_train_config_free(&c);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

H_TEST(presets, tiny_copy) { one_step("tiny-copy", 0, 0); }
H_TEST(presets, small_text) { one_step("small-text", 0, 0); }
/* Not under the sanitizer (as before): there the mixer calibration may pick the
 * FFT path, whose padded sequence does not fit the binding range scaled down
 * above (a limit of this test's scaling, noted in issue 33's GPU work). */
Test(presets, paper_512, .init = h_init, .fini = h_fini, .disabled = H_SANITIZED) { one_step("paper-512", 1, 2); }
Test(presets, paper_1024, .init = h_init, .fini = h_fini, .disabled = H_SANITIZED) { one_step("paper-1024", 1, 2); }

/* Every shipped preset is one of the above. */
Test(presets, all_covered)
{
    static const char *const tested[] = { "tiny-copy", "small-text", "paper-512", "paper-1024" };
    for (const char *const *p = tmm_train_preset_names(); *p; p++) {
        bool found = false;
        for (size_t i = 0; i < sizeof tested / sizeof tested[0]; i++)
            found |= strcmp(*p, tested[i]) == 0;
        cr_assert(found, "preset %s has no test here", *p);
    }
}
