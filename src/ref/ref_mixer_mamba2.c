/* Reference of Mamba 2's mixer (docs/baselines.md section 5; the math in
 * src/mixer/mamba2_mixer.h), in double: the plain recurrence over t, one
 * P x N state per head, no chunking. Forward keeps every state S_t for the
 * backward, which runs the recurrence in reverse:
 *     G_t = dL/dS_t = (direct from y_t) + exp(dt_{t+1} A) G_{t+1}
 * and from S_t = a_t S_{t-1} + dt_t xs_t ⊗ B_t, a_t = exp(dt_t A):
 *     d dt_t += <G_t, xs_t ⊗ B_t> + <G_t, S_{t-1}> a_t A,  dA += <G_t, S_{t-1}> a_t dt_t
 *     dxs_t  += dt_t G_t B_t,  dB_t += dt_t G_tᵀ xs_t. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixer/mamba2_mixer.h"
#include "ref/ref_llama.h"
#include "ref/ref_model_util.h"

enum { KC = TMM_MAMBA2_CONV_TAPS };

typedef struct m2_saved {
    double *x;              /* input [N, d] */
    double *zx;             /* x Winᵀ [N, in]: z | xBC | dtr */
    double *xbc;            /* xBC before the conv [N, conv] (a copy of zx's slice) */
    double *xc, *xa;        /* after the conv, after silu [N, conv]: xs | B | C */
    double *dt;             /* softplus(dtr + dt_bias) [N, nh] */
    double *S;              /* every state [N, nh, P, N] */
    double *y, *gz, *yn;    /* the scan's output, y ⊙ silu(z), the gated norm's output [N, di] */
} m2_saved;

/* softplus(a) = ln(1 + e^a), exactly and without overflow */
static double softplus(double a) { return a > 0 ? a + log1p(exp(-a)) : log1p(exp(a)); }

static void *m2_forward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, const double *x,
                        double *out)
{
    const tmm_mamba2_dims m = tmm_mamba2_dims_of(&t->config);
    const int *ix = t->blocks[l].mix;
    const uint32_t n = t->config.n_ctx, d = m.d, di = m.di, H = m.heads, P = m.P, NS = m.N, C = m.conv;
    const uint64_t N = (uint64_t)B * n, state = (uint64_t)P * NS;
    m2_saved *S = calloc(1, sizeof *S);
    if (!S)
        abort();
    S->x = ref_zalloc(N * d), S->zx = ref_zalloc(N * m.in), S->xbc = ref_zalloc(N * C), S->xc = ref_zalloc(N * C);
    S->xa = ref_zalloc(N * C), S->dt = ref_zalloc(N * H), S->S = ref_zalloc(N * H * state);
    S->y = ref_zalloc(N * di), S->gz = ref_zalloc(N * di), S->yn = ref_zalloc(N * di);
    memcpy(S->x, x, N * d * sizeof *x);

    ref_linear_fwd(N, d, m.in, x, ref_param(t, params, ix[TMM_M2_IN_W]), NULL, S->zx);
    for (uint64_t r = 0; r < N; r++)
        memcpy(S->xbc + r * C, S->zx + r * m.in + di, C * sizeof *S->xbc);
    ref_causal_conv_fwd(B, n, C, KC, ref_param(t, params, ix[TMM_M2_CONV_W]), ref_param(t, params, ix[TMM_M2_CONV_B]),
                        S->xbc, S->xc);
    for (uint64_t i = 0; i < N * C; i++)
        S->xa[i] = ref_silu(S->xc[i]);
    const double *dt_bias = ref_param(t, params, ix[TMM_M2_DT_BIAS]), *A_log = ref_param(t, params, ix[TMM_M2_A_LOG]);
    const double *D = ref_param(t, params, ix[TMM_M2_D]);
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t h = 0; h < H; h++)
            S->dt[r * H + h] = softplus(S->zx[r * m.in + di + C + h] + dt_bias[h]);

    /* the recurrence, per sequence and head */
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t h = 0; h < H; h++) {
            const double A = -exp(A_log[h]);
            for (uint32_t s = 0; s < n; s++) {
                const uint64_t r = (uint64_t)b * n + s;
                const double dt = S->dt[r * H + h], a = exp(dt * A);
                const double *xs = S->xa + r * C + (uint64_t)h * P, *Bt = S->xa + r * C + di, *Ct = Bt + NS;
                double *St = S->S + (r * H + h) * state;
                const double *Sp = s ? St - H * state : NULL; /* S_{t-1}: the previous row's */
                for (uint32_t p = 0; p < P; p++) {
                    double yv = D[h] * xs[p];
                    for (uint32_t k = 0; k < NS; k++) {
                        double v = (Sp ? a * Sp[(uint64_t)p * NS + k] : 0.0) + dt * xs[p] * Bt[k];
                        St[(uint64_t)p * NS + k] = v;
                        yv += v * Ct[k];
                    }
                    S->y[r * di + (uint64_t)h * P + p] = yv;
                }
            }
        }

    /* gated RMSNorm and the out-projection */
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t j = 0; j < di; j++)
            S->gz[r * di + j] = S->y[r * di + j] * ref_silu(S->zx[r * m.in + j]);
    ref_rmsnorm_fwd_d(S->gz, ref_param(t, params, ix[TMM_M2_NORM_W]), N, di, TMM_MAMBA2_NORM_EPS, S->yn, NULL);
    ref_linear_fwd(N, di, d, S->yn, ref_param(t, params, ix[TMM_M2_OUT_W]), NULL, out);
    return S;
}

static void m2_backward(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, void *saved,
                        const double *dout, double *dx, double *grads)
{
    const tmm_mamba2_dims m = tmm_mamba2_dims_of(&t->config);
    const int *ix = t->blocks[l].mix;
    const uint32_t n = t->config.n_ctx, d = m.d, di = m.di, H = m.heads, P = m.P, NS = m.N, C = m.conv;
    const uint64_t N = (uint64_t)B * n, state = (uint64_t)P * NS;
    m2_saved *S = saved;
    double *dyn = ref_zalloc(N * di), *dgz = ref_zalloc(N * di), *dy = ref_zalloc(N * di);
    double *dzx = ref_zalloc(N * m.in), *dxa = ref_zalloc(N * C), *dxbc = ref_zalloc(N * C);
    double *ddt = ref_zalloc(N * H), *G = ref_zalloc(state), *dA = ref_zalloc(H);

    ref_linear_bwd(N, di, d, S->yn, ref_param(t, params, ix[TMM_M2_OUT_W]), dout, dyn,
                   ref_grad(t, grads, ix[TMM_M2_OUT_W]), NULL);
    double *dgn = ref_grad(t, grads, ix[TMM_M2_NORM_W]), *sink = dgn ? NULL : ref_zalloc(di);
    ref_rmsnorm_bwd_d(S->gz, ref_param(t, params, ix[TMM_M2_NORM_W]), dyn, N, di, TMM_MAMBA2_NORM_EPS, true, dgz,
                      dgn ? dgn : sink);
    free(sink);
    /* gz = y ⊙ silu(z) */
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t j = 0; j < di; j++) {
            const double z = S->zx[r * m.in + j], g = dgz[r * di + j];
            dy[r * di + j] = g * ref_silu(z);
            dzx[r * m.in + j] = g * S->y[r * di + j] * ref_silu_grad(z);
        }

    /* the recurrence in reverse */
    const double *A_log = ref_param(t, params, ix[TMM_M2_A_LOG]), *D = ref_param(t, params, ix[TMM_M2_D]);
    double *dD = ref_grad(t, grads, ix[TMM_M2_D]);
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t h = 0; h < H; h++) {
            const double A = -exp(A_log[h]);
            memset(G, 0, state * sizeof *G);
            for (uint32_t s = n; s-- > 0;) {
                const uint64_t r = (uint64_t)b * n + s;
                const double dt = S->dt[r * H + h], a = exp(dt * A);
                const double *xs = S->xa + r * C + (uint64_t)h * P, *Bt = S->xa + r * C + di, *Ct = Bt + NS;
                double *dxs = dxa + r * C + (uint64_t)h * P, *dB = dxa + r * C + di, *dC = dB + NS;
                const double *St = S->S + (r * H + h) * state, *Sp = s ? St - H * state : NULL;
                const double *g = dy + r * di + (uint64_t)h * P;
                /* y_t = S_t C_t + D xs_t */
                for (uint32_t p = 0; p < P; p++) {
                    dxs[p] += D[h] * g[p];
                    if (dD)
                        dD[h] += g[p] * xs[p];
                    for (uint32_t k = 0; k < NS; k++) {
                        G[(uint64_t)p * NS + k] += g[p] * Ct[k];
                        dC[k] += g[p] * St[(uint64_t)p * NS + k];
                    }
                }
                /* S_t = a S_{t-1} + dt xs ⊗ B */
                double dda = 0, dd = 0;
                for (uint32_t p = 0; p < P; p++)
                    for (uint32_t k = 0; k < NS; k++) {
                        const double gv = G[(uint64_t)p * NS + k];
                        if (Sp)
                            dda += gv * Sp[(uint64_t)p * NS + k];
                        dd += gv * xs[p] * Bt[k];
                        dxs[p] += dt * gv * Bt[k];
                        dB[k] += dt * gv * xs[p];
                    }
                ddt[r * H + h] += dd + dda * a * A;
                dA[h] += dda * a * dt;
                for (uint64_t i = 0; i < state; i++)
                    G[i] *= a; /* becomes dL/dS_{t-1}'s part through S_t */
            }
        }
    double *dA_log = ref_grad(t, grads, ix[TMM_M2_A_LOG]), *ddt_bias = ref_grad(t, grads, ix[TMM_M2_DT_BIAS]);
    for (uint32_t h = 0; h < H && dA_log; h++)
        dA_log[h] += dA[h] * -exp(A_log[h]); /* A = -exp(A_log) */
    /* dt = softplus(dtr + dt_bias): softplus' = sigmoid */
    const double *dt_bias = ref_param(t, params, ix[TMM_M2_DT_BIAS]);
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t h = 0; h < H; h++) {
            const double dr = ddt[r * H + h] * ref_sigmoid(S->zx[r * m.in + di + C + h] + dt_bias[h]);
            dzx[r * m.in + di + C + h] = dr;
            if (ddt_bias)
                ddt_bias[h] += dr;
        }
    /* xa = silu(conv(xBC)) */
    for (uint64_t i = 0; i < N * C; i++)
        dxa[i] *= ref_silu_grad(S->xc[i]);
    ref_causal_conv_bwd(B, n, C, KC, ref_param(t, params, ix[TMM_M2_CONV_W]), S->xbc, dxa, dxbc,
                        ref_grad(t, grads, ix[TMM_M2_CONV_W]), ref_grad(t, grads, ix[TMM_M2_CONV_B]));
    for (uint64_t r = 0; r < N; r++)
        memcpy(dzx + r * m.in + di, dxbc + r * C, C * sizeof *dzx);
    ref_linear_bwd(N, d, m.in, S->x, ref_param(t, params, ix[TMM_M2_IN_W]), dzx, dx, ref_grad(t, grads, ix[TMM_M2_IN_W]),
                   NULL);
    free(dyn), free(dgz), free(dy), free(dzx), free(dxa), free(dxbc), free(ddt), free(G), free(dA);
}

static void m2_free(void *saved)
{
    m2_saved *S = saved;
    free(S->x), free(S->zx), free(S->xbc), free(S->xc), free(S->xa), free(S->dt), free(S->S);
    free(S->y), free(S->gz), free(S->yn);
    free(S);
}

static const tmm_mixer_class *const m2_of[] = { &tmm_mamba2_mixer, NULL };
const ref_mixer ref_mamba2_mixer = { m2_of, m2_forward, m2_backward, m2_free };
