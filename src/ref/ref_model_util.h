/* Internals of the reference model (ref_model.c): the helpers its frame and
 * the mixers' references (ref_mixer_*.c) share, and the mixer interface. */
#ifndef TMM_REF_MODEL_UTIL_H
#define TMM_REF_MODEL_UTIL_H

#include <stdint.h>

#include "mixer/mixer.h"
#include "model/params.h"
#include "ref/ref_double.h"

/* y[N, out] = x[N, in] · Wᵀ + b (b may be NULL) */
void ref_linear_fwd(uint64_t N, uint32_t in, uint32_t out, const double *x, const double *W, const double *b,
                    double *y);
/* dx += dy · W; dW += dyᵀ · x; db += sum_rows dy (any output may be NULL) */
void ref_linear_bwd(uint64_t N, uint32_t in, uint32_t out, const double *x, const double *W, const double *dy,
                    double *dx, double *dW, double *db);
/* Depthwise causal convolution along the sequence, K taps, with bias:
 *   y[b, t, c] = bias[c] + Σ_{j<K} w[c, j] · x[b, t-(K-1)+j, c]     (x before t = 0 is 0)
 * x, y [B, n, C], w [C, K]. The backward adds into dx, dw, dbias (any may be NULL). */
void ref_causal_conv_fwd(uint32_t B, uint32_t n, uint32_t C, uint32_t K, const double *w, const double *bias,
                         const double *x, double *y);
void ref_causal_conv_bwd(uint32_t B, uint32_t n, uint32_t C, uint32_t K, const double *w, const double *x,
                         const double *dy, double *dx, double *dw, double *dbias);
double ref_sigmoid(double a);
/* silu(a) = a·sigmoid(a), exact GELU a·Φ(a), and their derivatives */
double ref_silu(double a);
double ref_silu_grad(double a);
double ref_gelu(double a);
double ref_gelu_grad(double a);
/* A tensor in an arena (NULL for index -1); its gradient (NULL without
 * gradients, for index -1 or a frozen tensor). */
const double *ref_param(const tmm_param_table *t, const double *arena, int idx);
double *ref_grad(const tmm_param_table *t, double *grads, int idx);

/* A mixer's reference: y = Mix_l(x) for x [B, n, d] (returns what its
 * backward needs); backward adds dL/dx into dx and the gradients into grads
 * (when not NULL). */
typedef struct ref_mixer {
    const tmm_mixer_class *const *of; /* the device mixers it is the reference of, NULL-terminated */
    void *(*forward)(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, const double *x,
                     double *y);
    void (*backward)(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, void *saved,
                     const double *dy, double *dx, double *grads);
    void (*free)(void *saved);
} ref_mixer;

extern const ref_mixer ref_toeplitz_mixer, ref_attention_mixer, ref_hyena_mixer, ref_mamba2_mixer;

#endif
