/* Plain C references of the Hyena / Mamba 2 small ops (src/ops/ssm_ops.h):
 * causal depthwise conv1d (+ SiLU) with its decoding step and window fill,
 * GELU (erf), the sine layer, softplus, and the gates. The *_d functions work
 * in double (they define the ops and are checked by finite differences in
 * tests/test_ssm_fd.c); the float versions convert, compute in double and
 * round once. Arrays are row-major [rows, C] (rows = B n). Parameter
 * gradients are overwritten, or added to with accumulate. Optional arrays
 * (biases, outputs marked optional) may be NULL. */
#ifndef TMM_REF_SSM_OPS_H
#define TMM_REF_SSM_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* conv1d: x, y [B, n, C], w [C, K], bias [C]:
 *   pre[b,t,c] = bias[c] + sum_{j<K, t-K+1+j >= 0} w[c,j] x[b, t-K+1+j, c],
 *   y = pre or silu(pre). */
void ref_conv1d_fwd_d(const double *x, const double *w, const double *bias, size_t B, size_t n, size_t C, size_t K,
                      bool silu, double *y);
/* g = dy (silu: dy silu'(pre)); dx[b,t,c] = sum_{j, t+K-1-j < n} w[c,j] g[b,t+K-1-j,c];
 * dw[c,j] (+)= sum g[b,t,c] x[b,t-K+1+j,c]; dbias[c] (+)= sum g[b,t,c]. */
void ref_conv1d_bwd_d(const double *x, const double *w, const double *bias, const double *dy, size_t B, size_t n,
                      size_t C, size_t K, bool silu, bool accumulate, double *dx, double *dw, double *dbias);
/* One decoding step (ssm_ops.h): x, y [batch, C] at positions pos[b];
 * window [batch, K-1, C] is read (entries at negative positions as 0) and
 * shifted in place. */
void ref_conv1d_step_d(const double *x, const double *w, const double *bias, const uint32_t *pos, size_t batch,
                       size_t C, size_t K, bool silu, double *window, double *y);
/* window[b, j, c] = x[b, len[b]-K+1+j, c] (0 at positions < 0 or >= n). */
void ref_conv1d_fill_d(const double *x, const uint32_t *len, size_t B, size_t n, size_t C, size_t K, double *window);

/* gelu(a) = a (1 + erf(a / sqrt 2)) / 2, a = x + b. */
void ref_gelu_fwd_d(const double *x, const double *b, size_t rows, size_t C, double *y);
/* dx = dy gelu'(a); db (+)= sum_r dx (db optional). dx may be dy. */
void ref_gelu_bwd_d(const double *x, const double *b, const double *dy, size_t rows, size_t C, bool accumulate,
                    double *dx, double *db);

/* y = sin(omega (x + c)). */
void ref_sine_fwd_d(const double *x, const double *omega, const double *c, size_t rows, size_t C, double *y);
/* g = dy cos(omega u), u = x + c: dx = g omega, domega (+)= sum g u, dc (+)= sum g omega. */
void ref_sine_bwd_d(const double *x, const double *omega, const double *c, const double *dy, size_t rows, size_t C,
                    bool accumulate, double *dx, double *domega, double *dc);

/* softplus(a) = log(1 + exp(a)), a = x + b. */
void ref_softplus_fwd_d(const double *x, const double *b, size_t rows, size_t C, double *y);
/* dx = dy sigmoid(a); db (+)= sum_r dx (db optional). */
void ref_softplus_bwd_d(const double *x, const double *b, const double *dy, size_t rows, size_t C, bool accumulate,
                        double *dx, double *db);

/* y = a b;  da = dy b, db = dy a (da, db optional). */
void ref_gate_mul_fwd_d(const double *a, const double *b, size_t n, double *y);
void ref_gate_mul_bwd_d(const double *a, const double *b, const double *dy, size_t n, double *da, double *db);
/* y = a silu(z);  da = dy silu(z), dz = dy a silu'(z) (da, dz optional). */
void ref_gate_silu_fwd_d(const double *a, const double *z, size_t n, double *y);
void ref_gate_silu_bwd_d(const double *a, const double *z, const double *dy, size_t n, double *da, double *dz);
/* y[r,c] = a[r,c] k[c];  da = dy k, dk[c] (+)= sum_r dy a (da, dk optional). */
void ref_gate_scale_fwd_d(const double *a, const double *k, size_t rows, size_t C, double *y);
void ref_gate_scale_bwd_d(const double *a, const double *k, const double *dy, size_t rows, size_t C, bool accumulate,
                          double *da, double *dk);

/* Float versions: the same contracts. */
void ref_conv1d_fwd(const float *x, const float *w, const float *bias, size_t B, size_t n, size_t C, size_t K,
                    bool silu, float *y);
void ref_conv1d_bwd(const float *x, const float *w, const float *bias, const float *dy, size_t B, size_t n, size_t C,
                    size_t K, bool silu, bool accumulate, float *dx, float *dw, float *dbias);
void ref_conv1d_step(const float *x, const float *w, const float *bias, const uint32_t *pos, size_t batch, size_t C,
                     size_t K, bool silu, float *window, float *y);
void ref_conv1d_fill(const float *x, const uint32_t *len, size_t B, size_t n, size_t C, size_t K, float *window);
void ref_gelu_fwd(const float *x, const float *b, size_t rows, size_t C, float *y);
void ref_gelu_bwd(const float *x, const float *b, const float *dy, size_t rows, size_t C, bool accumulate, float *dx,
                  float *db);
void ref_sine_fwd(const float *x, const float *omega, const float *c, size_t rows, size_t C, float *y);
void ref_sine_bwd(const float *x, const float *omega, const float *c, const float *dy, size_t rows, size_t C,
                  bool accumulate, float *dx, float *domega, float *dc);
void ref_softplus_fwd(const float *x, const float *b, size_t rows, size_t C, float *y);
void ref_softplus_bwd(const float *x, const float *b, const float *dy, size_t rows, size_t C, bool accumulate,
                      float *dx, float *db);
void ref_gate_mul_fwd(const float *a, const float *b, size_t n, float *y);
void ref_gate_mul_bwd(const float *a, const float *b, const float *dy, size_t n, float *da, float *db);
void ref_gate_silu_fwd(const float *a, const float *z, size_t n, float *y);
void ref_gate_silu_bwd(const float *a, const float *z, const float *dy, size_t n, float *da, float *dz);
void ref_gate_scale_fwd(const float *a, const float *k, size_t rows, size_t C, float *y);
void ref_gate_scale_bwd(const float *a, const float *k, const float *dy, size_t rows, size_t C, bool accumulate,
                        float *da, float *dk);

#endif
