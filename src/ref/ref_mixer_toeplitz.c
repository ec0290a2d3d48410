/* Reference of the TMM's mixer (docs/model.md "Mix"), in double: the causal
 * Toeplitz layer of the spec and the mixer around it (src/mixer/toeplitz_mixer.c). */
#include <stdlib.h>
#include <string.h>

#include "mixer/toeplitz_mixer.h"
#include "ref/ref_model.h"
#include "ref/ref_model_util.h"

void ref_toeplitz_fwd_d(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, const double *w,
                        const double *beta, const double *u, double *y)
{
    const uint32_t cpg = d / G;
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t c = 0; c < d; c++) {
                uint32_t g = c / cpg;
                double s = beta[(uint64_t)g * n + t];
                for (uint32_t a = 0; a < K; a++) {
                    int64_t ci = (int64_t)c - (K - 1) + a;
                    if (ci < (int64_t)g * cpg)
                        continue; /* a head's window stays inside the head */
                    const double *wa = w + ((uint64_t)g * K + a) * n;
                    for (uint32_t src = 0; src <= t; src++)
                        s += wa[t - src] * u[((uint64_t)b * n + src) * d + (uint64_t)ci];
                }
                y[((uint64_t)b * n + t) * d + c] = s;
            }
}

void ref_toeplitz_bwd_d(uint32_t B, uint32_t n, uint32_t d, uint32_t G, uint32_t K, const double *w,
                        const double *u, const double *gy, double *du, double *dw, double *dbeta)
{
    const uint32_t cpg = d / G;
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t c = 0; c < d; c++) {
                uint32_t g = c / cpg;
                double gv = gy[((uint64_t)b * n + t) * d + c];
                if (dbeta)
                    dbeta[(uint64_t)g * n + t] += gv;
                for (uint32_t a = 0; a < K; a++) {
                    int64_t ci = (int64_t)c - (K - 1) + a;
                    if (ci < (int64_t)g * cpg)
                        continue; /* a head's window stays inside the head */
                    const double *wa = w + ((uint64_t)g * K + a) * n;
                    double *dwa = dw ? dw + ((uint64_t)g * K + a) * n : NULL;
                    for (uint32_t src = 0; src <= t; src++) {
                        uint64_t ui = ((uint64_t)b * n + src) * d + (uint64_t)ci;
                        if (du)
                            du[ui] += wa[t - src] * gv;
                        if (dwa)
                            dwa[t - src] += gv * u[ui];
                    }
                }
            }
}

/* ---- the TMM's mixer -------------------------------------------------------- */

typedef struct tz_saved {
    double *x, *v, *y1, *q, *mix;  /* input; Toeplitz input; first output; its silu; before out-projection */
} tz_saved;

static void *tz_forward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, const double *x,
                        double *y)
{
    const tmm_model_config *c = &t->config;
    const int *ix = t->blocks[l].mix;
    const uint32_t d = c->d_model, n = c->n_ctx, K = c->kernel, G = c->heads ? c->heads : 1;
    const uint64_t N = (uint64_t)B * n;
    tz_saved *S = calloc(1, sizeof *S);
    if (!S)
        abort();
    S->x = ref_zalloc(N * d), S->v = ref_zalloc(N * d), S->y1 = ref_zalloc(N * d), S->mix = ref_zalloc(N * d);
    memcpy(S->x, x, N * d * sizeof *x);
    if (c->heads)
        ref_linear_fwd(N, d, d, x, ref_param(t, params, ix[TMM_TZ_IN_W]), ref_param(t, params, ix[TMM_TZ_IN_B]), S->v);
    else
        memcpy(S->v, x, N * d * sizeof *x);
    ref_toeplitz_fwd_d(B, n, d, G, K, ref_param(t, params, ix[TMM_TZ_W]), ref_param(t, params, ix[TMM_TZ_BETA]), S->v, S->y1);
    if (c->expanded) {
        S->q = ref_zalloc(N * d);
        for (uint64_t i = 0; i < N * d; i++)
            S->q[i] = S->y1[i] * ref_sigmoid(S->y1[i]);
        ref_toeplitz_fwd_d(B, n, d, G, K, ref_param(t, params, ix[TMM_TZ_W2]), ref_param(t, params, ix[TMM_TZ_BETA2]), S->q, S->mix);
    } else {
        memcpy(S->mix, S->y1, N * d * sizeof *x);
    }
    if (c->heads)
        ref_linear_fwd(N, d, d, S->mix, ref_param(t, params, ix[TMM_TZ_OUT_W]), ref_param(t, params, ix[TMM_TZ_OUT_B]), y);
    else
        memcpy(y, S->mix, N * d * sizeof *x);
    return S;
}

static void tz_backward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, void *saved,
                        const double *dy, double *dx, double *grads)
{
    const tmm_model_config *c = &t->config;
    const int *ix = t->blocks[l].mix;
    const uint32_t d = c->d_model, n = c->n_ctx, K = c->kernel, G = c->heads ? c->heads : 1;
    const uint64_t N = (uint64_t)B * n;
    tz_saved *S = saved;
    double *dmix = ref_zalloc(N * d), *dy1 = ref_zalloc(N * d), *dv = ref_zalloc(N * d);
    if (c->heads)
        ref_linear_bwd(N, d, d, S->mix, ref_param(t, params, ix[TMM_TZ_OUT_W]), dy, dmix, ref_grad(t, grads, ix[TMM_TZ_OUT_W]),
                   ref_grad(t, grads, ix[TMM_TZ_OUT_B]));
    else
        memcpy(dmix, dy, N * d * sizeof *dy);
    if (c->expanded) {
        double *dq = ref_zalloc(N * d);
        ref_toeplitz_bwd_d(B, n, d, G, K, ref_param(t, params, ix[TMM_TZ_W2]), S->q, dmix, dq, ref_grad(t, grads, ix[TMM_TZ_W2]),
                           ref_grad(t, grads, ix[TMM_TZ_BETA2]));
        for (uint64_t i = 0; i < N * d; i++) {
            double s = ref_sigmoid(S->y1[i]);
            dy1[i] = dq[i] * s * (1 + S->y1[i] * (1 - s));
        }
        free(dq);
    } else {
        memcpy(dy1, dmix, N * d * sizeof *dy);
    }
    ref_toeplitz_bwd_d(B, n, d, G, K, ref_param(t, params, ix[TMM_TZ_W]), S->v, dy1, dv, ref_grad(t, grads, ix[TMM_TZ_W]),
                       ref_grad(t, grads, ix[TMM_TZ_BETA]));
    if (c->heads)
        ref_linear_bwd(N, d, d, S->x, ref_param(t, params, ix[TMM_TZ_IN_W]), dv, dx, ref_grad(t, grads, ix[TMM_TZ_IN_W]),
                   ref_grad(t, grads, ix[TMM_TZ_IN_B]));
    else
        for (uint64_t i = 0; i < N * d; i++)
            dx[i] += dv[i];
    free(dmix), free(dy1), free(dv);
}

static void tz_free(void *saved)
{
    tz_saved *S = saved;
    free(S->x), free(S->v), free(S->y1), free(S->q), free(S->mix);
    free(S);
}

static const tmm_mixer_class *const tz_of[] = { &tmm_toeplitz_mixer, NULL };
const ref_mixer ref_toeplitz_mixer = { tz_of, tz_forward, tz_backward, tz_free };
