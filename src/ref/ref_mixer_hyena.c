/* Reference of Hyena's mixer (docs/baselines.md section 4; the math in
 * src/mixer/hyena_mixer.h), in double:
 *     u = ShortConv3(x Winᵀ + bin) = [x0 | x1 | v];  w = v ⊙ x1
 *     y1 = hf ∗ w + D ⊙ w   (causal, per channel; hf from the implicit filter MLP, decayed)
 *     y  = (y1 ⊙ x0) Woutᵀ + bout
 * The filter is computed once per call (it depends on positions only) and
 * every gradient flows back through it: fc1..fc4, the biases and ω1..ω3. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixer/hyena_mixer.h"
#include "ref/ref_model_util.h"

enum { F = TMM_HYENA_FEATURES, O = TMM_HYENA_ORDER, KS = TMM_HYENA_SHORT_TAPS };

typedef struct hy_saved {
    double *x;              /* input [N, d] */
    double *u, *uc;         /* in-projection, after the short conv [N, 3d] */
    double *z;              /* the fixed features [n, 3] */
    double *p[3], *a[3];    /* the filter MLP's pre-activations and sin outputs [n, 64] */
    double *decay, *hf;     /* the window and the filter [n, d] */
    double *w, *y1, *g;     /* v ⊙ x1, the long conv's output, y1 ⊙ x0 [N, d] */
} hy_saved;

/* The filter's Sin layers and their tensors, per layer k < 3. */
static const int lin_w[3] = { TMM_HY_F1_W, TMM_HY_F2_W, TMM_HY_F3_W };
static const int lin_b[3] = { TMM_HY_F1_B, TMM_HY_F2_B, TMM_HY_F3_B };
static const int omega[3] = { TMM_HY_F1_OMEGA, TMM_HY_F2_OMEGA, TMM_HY_F3_OMEGA };

static void *hy_forward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, const double *x,
                        double *y)
{
    const tmm_model_config *c = &t->config;
    const int *ix = t->blocks[l].mix;
    const uint32_t d = c->d_model, n = c->n_ctx;
    const uint64_t N = (uint64_t)B * n;
    hy_saved *S = calloc(1, sizeof *S);
    if (!S)
        abort();
    S->x = ref_zalloc(N * d), S->u = ref_zalloc(N * 3 * d), S->uc = ref_zalloc(N * 3 * d);
    S->z = ref_zalloc((uint64_t)n * F), S->decay = ref_zalloc((uint64_t)n * d), S->hf = ref_zalloc((uint64_t)n * d);
    S->w = ref_zalloc(N * d), S->y1 = ref_zalloc(N * d), S->g = ref_zalloc(N * d);
    memcpy(S->x, x, N * d * sizeof *x);

    /* the implicit filter */
    for (uint32_t s = 0; s < n; s++) {
        tmm_hyena_features(n, s, S->z + (uint64_t)s * F);
        for (uint32_t ch = 0; ch < d; ch++)
            S->decay[(uint64_t)s * d + ch] = tmm_hyena_decay(n, d, s, ch);
    }
    const double *in = S->z;
    for (int k = 0; k < 3; k++) {
        S->p[k] = ref_zalloc((uint64_t)n * O), S->a[k] = ref_zalloc((uint64_t)n * O);
        ref_linear_fwd(n, k ? O : F, O, in, ref_param(t, params, ix[lin_w[k]]), ref_param(t, params, ix[lin_b[k]]),
                       S->p[k]);
        const double *om = ref_param(t, params, ix[omega[k]]);
        for (uint64_t i = 0; i < (uint64_t)n * O; i++)
            S->a[k][i] = sin(om[i % O] * S->p[k][i]);
        in = S->a[k];
    }
    ref_linear_fwd(n, O, d, S->a[2], ref_param(t, params, ix[TMM_HY_F4_W]), NULL, S->hf);
    for (uint64_t i = 0; i < (uint64_t)n * d; i++)
        S->hf[i] *= S->decay[i];

    /* projections, short conv, gates and the long conv */
    ref_linear_fwd(N, d, 3 * d, x, ref_param(t, params, ix[TMM_HY_IN_W]), ref_param(t, params, ix[TMM_HY_IN_B]), S->u);
    ref_causal_conv_fwd(B, n, 3 * d, KS, ref_param(t, params, ix[TMM_HY_CONV_W]), ref_param(t, params, ix[TMM_HY_CONV_B]),
                        S->u, S->uc);
    const double *D = ref_param(t, params, ix[TMM_HY_D]);
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t ch = 0; ch < d; ch++)
            S->w[r * d + ch] = S->uc[r * 3 * d + 2 * d + ch] * S->uc[r * 3 * d + d + ch];
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t ch = 0; ch < d; ch++) {
                const uint64_t r = (uint64_t)b * n + s;
                double acc = D[ch] * S->w[r * d + ch];
                for (uint32_t src = 0; src <= s; src++)
                    acc += S->hf[(uint64_t)(s - src) * d + ch] * S->w[((uint64_t)b * n + src) * d + ch];
                S->y1[r * d + ch] = acc;
                S->g[r * d + ch] = acc * S->uc[r * 3 * d + ch];
            }
    ref_linear_fwd(N, d, d, S->g, ref_param(t, params, ix[TMM_HY_OUT_W]), ref_param(t, params, ix[TMM_HY_OUT_B]), y);
    return S;
}

static void hy_backward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, void *saved,
                        const double *dy, double *dx, double *grads)
{
    const tmm_model_config *c = &t->config;
    const int *ix = t->blocks[l].mix;
    const uint32_t d = c->d_model, n = c->n_ctx;
    const uint64_t N = (uint64_t)B * n;
    hy_saved *S = saved;
    double *dg = ref_zalloc(N * d), *dw = ref_zalloc(N * d), *duc = ref_zalloc(N * 3 * d), *du = ref_zalloc(N * 3 * d);
    double *dhf = ref_zalloc((uint64_t)n * d);
    ref_linear_bwd(N, d, d, S->g, ref_param(t, params, ix[TMM_HY_OUT_W]), dy, dg, ref_grad(t, grads, ix[TMM_HY_OUT_W]),
                   ref_grad(t, grads, ix[TMM_HY_OUT_B]));

    /* g = y1 ⊙ x0; y1[s] = Σ_{src<=s} hf[s-src] w[src] + D w[s] */
    const double *D = ref_param(t, params, ix[TMM_HY_D]);
    double *dD = ref_grad(t, grads, ix[TMM_HY_D]);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t s = 0; s < n; s++)
            for (uint32_t ch = 0; ch < d; ch++) {
                const uint64_t r = (uint64_t)b * n + s;
                const double gy1 = dg[r * d + ch] * S->uc[r * 3 * d + ch];
                duc[r * 3 * d + ch] += dg[r * d + ch] * S->y1[r * d + ch]; /* dx0 */
                dw[r * d + ch] += D[ch] * gy1;
                if (dD)
                    dD[ch] += gy1 * S->w[r * d + ch];
                for (uint32_t src = 0; src <= s; src++) {
                    const uint64_t rs = (uint64_t)b * n + src;
                    dw[rs * d + ch] += S->hf[(uint64_t)(s - src) * d + ch] * gy1;
                    dhf[(uint64_t)(s - src) * d + ch] += gy1 * S->w[rs * d + ch];
                }
            }
    /* w = v ⊙ x1 */
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t ch = 0; ch < d; ch++) {
            duc[r * 3 * d + d + ch] += dw[r * d + ch] * S->uc[r * 3 * d + 2 * d + ch];     /* dx1 */
            duc[r * 3 * d + 2 * d + ch] += dw[r * d + ch] * S->uc[r * 3 * d + d + ch]; /* dv */
        }
    ref_causal_conv_bwd(B, n, 3 * d, KS, ref_param(t, params, ix[TMM_HY_CONV_W]), S->u, duc, du,
                        ref_grad(t, grads, ix[TMM_HY_CONV_W]), ref_grad(t, grads, ix[TMM_HY_CONV_B]));
    ref_linear_bwd(N, d, 3 * d, S->x, ref_param(t, params, ix[TMM_HY_IN_W]), du, dx, ref_grad(t, grads, ix[TMM_HY_IN_W]),
                   ref_grad(t, grads, ix[TMM_HY_IN_B]));

    /* back through the filter: hf = (a3 A4ᵀ) ⊙ decay, a_k = sin(ω_k ⊙ p_k), p_k = a_{k-1} A_kᵀ + c_k */
    for (uint64_t i = 0; i < (uint64_t)n * d; i++)
        dhf[i] *= S->decay[i];
    double *da = ref_zalloc((uint64_t)n * O), *dp = ref_zalloc((uint64_t)n * O);
    ref_linear_bwd(n, O, d, S->a[2], ref_param(t, params, ix[TMM_HY_F4_W]), dhf, da,
                   ref_grad(t, grads, ix[TMM_HY_F4_W]), NULL);
    for (int k = 2; k >= 0; k--) {
        const double *om = ref_param(t, params, ix[omega[k]]);
        double *dom = ref_grad(t, grads, ix[omega[k]]);
        for (uint64_t i = 0; i < (uint64_t)n * O; i++) {
            const double cs = cos(om[i % O] * S->p[k][i]);
            dp[i] = da[i] * cs * om[i % O];
            if (dom)
                dom[i % O] += da[i] * cs * S->p[k][i];
        }
        memset(da, 0, (uint64_t)n * O * sizeof *da);
        ref_linear_bwd(n, k ? O : F, O, k ? S->a[k - 1] : S->z, ref_param(t, params, ix[lin_w[k]]), dp,
                       k ? da : NULL, ref_grad(t, grads, ix[lin_w[k]]), ref_grad(t, grads, ix[lin_b[k]]));
    }
    free(da), free(dp);
    free(dg), free(dw), free(duc), free(du), free(dhf);
}

static void hy_free(void *saved)
{
    hy_saved *S = saved;
    free(S->x), free(S->u), free(S->uc), free(S->z), free(S->decay), free(S->hf);
    free(S->w), free(S->y1), free(S->g);
    for (int k = 0; k < 3; k++)
        free(S->p[k]), free(S->a[k]);
    free(S);
}

static const tmm_mixer_class *const hy_of[] = { &tmm_hyena_mixer, NULL };
const ref_mixer ref_hyena_mixer = { hy_of, hy_forward, hy_backward, hy_free };
