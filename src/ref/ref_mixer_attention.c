/* Reference of the attention-family mixers (docs/baselines.md sections 1-3;
 * src/mixer/attention_mixer.c and linear_mixer.c), in double:
 *     q = x Wqᵀ, k = x Wkᵀ, v = x Wvᵀ; then softmax attention over the window
 *     with RoPE on q and k, or causal linear attention; y = o Woᵀ. */
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "ops/llama_ops.h"
#include "ref/ref_attention.h"
#include "ref/ref_linear_attention.h"
#include "ref/ref_llama.h"
#include "ref/ref_model_util.h"

enum { ATT_Q, ATT_K, ATT_V, ATT_O }; /* the mixer's tensors, in declaration order */

typedef struct att_saved {
    double *x, *q, *k, *v, *o;
} att_saved;

static tmm_attention_desc desc_of(const tmm_model_config *c, uint32_t B)
{
    return (tmm_attention_desc){ .batch = B, .n = c->n_ctx, .d = c->d_model, .heads = c->heads, .window = c->window };
}

static void *att_forward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, const double *x,
                         double *y)
{
    const tmm_model_config *c = &t->config;
    const int *ix = t->blocks[l].mix;
    const uint32_t d = c->d_model, n = c->n_ctx;
    const uint64_t N = (uint64_t)B * n;
    att_saved *S = calloc(1, sizeof *S);
    if (!S)
        abort();
    double **all[] = { &S->x, &S->q, &S->k, &S->v, &S->o };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        *all[i] = ref_zalloc(N * d);
    memcpy(S->x, x, N * d * sizeof *x);
    ref_linear_fwd(N, d, d, x, ref_param(t, params, ix[ATT_Q]), NULL, S->q);
    ref_linear_fwd(N, d, d, x, ref_param(t, params, ix[ATT_K]), NULL, S->k);
    ref_linear_fwd(N, d, d, x, ref_param(t, params, ix[ATT_V]), NULL, S->v);
    if (tmm_arch_of(c->arch)->mixer == &tmm_linear_mixer) {
        tmm_linear_attention_desc ld = { .batch = B, .n = n, .d = d, .heads = c->heads };
        ref_linear_attention_forward_d(&ld, S->q, S->k, S->v, S->o, NULL);
    } else {
        ref_rope_d(S->q, N, d, c->heads, n, NULL, TMM_ROPE_BASE, false, S->q);
        ref_rope_d(S->k, N, d, c->heads, n, NULL, TMM_ROPE_BASE, false, S->k);
        tmm_attention_desc ad = desc_of(c, B);
        ref_attention_forward_d(&ad, S->q, S->k, S->v, S->o, NULL);
    }
    ref_linear_fwd(N, d, d, S->o, ref_param(t, params, ix[ATT_O]), NULL, y);
    return S;
}

static void att_backward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, void *saved,
                         const double *dy, double *dx, double *grads)
{
    const tmm_model_config *c = &t->config;
    const int *ix = t->blocks[l].mix;
    const uint32_t d = c->d_model, n = c->n_ctx;
    const uint64_t N = (uint64_t)B * n;
    att_saved *S = saved;
    double *dout = ref_zalloc(N * d), *dq = ref_zalloc(N * d), *dk = ref_zalloc(N * d), *dv = ref_zalloc(N * d);
    ref_linear_bwd(N, d, d, S->o, ref_param(t, params, ix[ATT_O]), dy, dout, ref_grad(t, grads, ix[ATT_O]), NULL);
    if (tmm_arch_of(c->arch)->mixer == &tmm_linear_mixer) {
        tmm_linear_attention_desc ld = { .batch = B, .n = n, .d = d, .heads = c->heads };
        ref_linear_attention_backward_d(&ld, S->q, S->k, S->v, dout, dq, dk, dv);
    } else {
        tmm_attention_desc ad = desc_of(c, B);
        ref_attention_backward_d(&ad, S->q, S->k, S->v, dout, dq, dk, dv);
        ref_rope_d(dq, N, d, c->heads, n, NULL, TMM_ROPE_BASE, true, dq);
        ref_rope_d(dk, N, d, c->heads, n, NULL, TMM_ROPE_BASE, true, dk);
    }
    const int which[3] = { ATT_Q, ATT_K, ATT_V };
    double *grad_of[3] = { dq, dk, dv };
    for (int i = 0; i < 3; i++)
        ref_linear_bwd(N, d, d, S->x, ref_param(t, params, ix[which[i]]), grad_of[i], dx,
                       ref_grad(t, grads, ix[which[i]]), NULL);
    free(dout), free(dq), free(dk), free(dv);
}

static void att_free(void *saved)
{
    att_saved *S = saved;
    free(S->x), free(S->q), free(S->k), free(S->v), free(S->o);
    free(S);
}

static const tmm_mixer_class *const att_of[] = { &tmm_attention_mixer, &tmm_linear_mixer, NULL };
const ref_mixer ref_attention_mixer = { att_of, att_forward, att_backward, att_free };
