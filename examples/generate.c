/* Embedding tmm: generate text from a checkpoint with the public API only.
 *
 *   build/examples/generate CHECKPOINT "PROMPT" [TOKENS]
 *
 * Loads the checkpoint on the default Vulkan device and continues two prompts
 * greedily in one batch of two sequences at different positions: the prompt,
 * and its first half (to show batched decoding). When done it prints two
 * lines, each labelled: what followed the prompt, then what followed its
 * first half. (tmm generate streams tokens as they come; this example keeps
 * it short.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tmm/generate.h"
#include "tmm/tmm.h"

static int fail(const char *what, tmm_status s)
{
    fprintf(stderr, "generate: %s: %s\n", what, *tmm_last_error() ? tmm_last_error() : tmm_status_name(s));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CHECKPOINT PROMPT [TOKENS]\n", argv[0]);
        return 2;
    }
    const int want = argc > 3 ? atoi(argv[3]) : 32;
    tmm_device *dev;
    tmm_status s = tmm_device_create(NULL, &dev);
    if (s != TMM_OK)
        return fail("no Vulkan device", s);
    tmm_generator *gen;
    if ((s = tmm_generator_load(dev, argv[1], 2, TMM_MIXER_AUTO, &gen)) != TMM_OK) {
        tmm_device_destroy(dev);
        return fail("cannot load the checkpoint", s);
    }
    const tmm_generator_info *info = tmm_generator_get_info(gen);
    uint32_t *prompt = NULL, count = 0;
    s = tmm_tokenize(gen, argv[2], strlen(argv[2]), &prompt, &count);
    float *logits = malloc(2 * (size_t)info->config.vocab * sizeof *logits);
    int rc = 0;
    if (s != TMM_OK || count == 0 || count > info->config.n_ctx || !logits) {
        rc = s != TMM_OK ? fail("cannot tokenize the prompt", s) : (fprintf(stderr, "generate: bad prompt length\n"), 2);
    } else {
        const uint32_t *prompts[2] = { prompt, prompt };
        uint32_t lengths[2] = { count, count / 2 ? count / 2 : 1 };
        char text[2][4096] = { "", "" };
        size_t len[2] = { 0, 0 };
        tmm_sampler greedy = TMM_SAMPLER_DEFAULT;
        greedy.greedy = true;
        s = tmm_generator_prefill(gen, prompts, lengths, logits);
        for (int i = 0; s == TMM_OK && i < want; i++) {
            uint32_t next[2];
            for (uint32_t b = 0; b < 2 && s == TMM_OK; b++) {
                s = tmm_sample(&greedy, logits + b * info->config.vocab, info->config.vocab, (uint64_t)i, &next[b]);
                if (len[b] + 16 < sizeof text[b])
                    len[b] += tmm_detokenize(gen, next[b], text[b] + len[b], sizeof text[b] - len[b]);
            }
            if (s != TMM_OK || tmm_generator_position(gen, 0) == info->config.n_ctx || i + 1 == want)
                break; /* the longer sequence fills the context first */
            s = tmm_generator_step(gen, next, logits);
        }
        if (s != TMM_OK)
            rc = fail("generation failed", s);
        else
            printf("after the prompt:      %s\nafter its first half:  %s\n", text[0], text[1]);
    }
    free(prompt);
    free(logits);
    tmm_generator_destroy(gen);
    tmm_device_destroy(dev);
    return rc;
}
