/* A model's device memory by kind: the one type the model frame and its
 * mixers share (a dry run of tmm_model_memory_plan counts into it), so that
 * the mixer layer (src/mixer/) needs no header of the frame above it. */
#ifndef TMM_MODEL_MEMORY_H
#define TMM_MODEL_MEMORY_H

#include <stdint.h>

typedef struct tmm_model_memory {
    uint64_t params;       /* bytes of the parameter arena (and its 16-bit copy in 16-bit precision) */
    uint64_t grads;        /* bytes of the gradient arena */
    uint64_t activations;  /* bytes kept from the forward for the backward */
    uint64_t workspace;    /* gradient temporaries, logits, batch inputs and op scratch */
    uint64_t fft_plans;    /* the FFT plans' buffers (0 on the direct path) */
    uint64_t total;
} tmm_model_memory;

#endif
