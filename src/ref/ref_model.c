/* Reference model forward and backward (double precision, straightforward
 * loops): the frame of each architecture (model/arch.h) and its mixer. */
#include "ref/ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixer/toeplitz_mixer.h"
#include "model/arch.h"

#define LN_EPS 1e-5

static double *zalloc(uint64_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        abort(); /* the reference is a test tool: small shapes only */
    return p;
}

/* y[N, out] = x[N, in] · Wᵀ + b */
static void linear_fwd(uint64_t N, uint32_t in, uint32_t out, const double *x, const double *W, const double *b,
                       double *y)
{
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (uint32_t i = 0; i < in; i++)
                s += x[r * in + i] * W[(uint64_t)o * in + i];
            y[r * out + o] = s;
        }
}

/* dx += dy · W; dW += dyᵀ · x; db += sum_rows dy (any output may be NULL) */
static void linear_bwd(uint64_t N, uint32_t in, uint32_t out, const double *x, const double *W, const double *dy,
                       double *dx, double *dW, double *db)
{
    for (uint64_t r = 0; r < N; r++)
        for (uint32_t o = 0; o < out; o++) {
            double g = dy[r * out + o];
            if (db)
                db[o] += g;
            for (uint32_t i = 0; i < in; i++) {
                if (dx)
                    dx[r * in + i] += g * W[(uint64_t)o * in + i];
                if (dW)
                    dW[(uint64_t)o * in + i] += g * x[r * in + i];
            }
        }
}

static void layernorm_fwd(uint64_t N, uint32_t d, const double *x, const double *gamma, const double *beta,
                          double *y, double *xhat, double *rstd)
{
    for (uint64_t r = 0; r < N; r++) {
        const double *xr = x + r * d;
        double mean = 0, var = 0;
        for (uint32_t c = 0; c < d; c++)
            mean += xr[c];
        mean /= d;
        for (uint32_t c = 0; c < d; c++)
            var += (xr[c] - mean) * (xr[c] - mean);
        var /= d;
        rstd[r] = 1.0 / sqrt(var + LN_EPS);
        for (uint32_t c = 0; c < d; c++) {
            xhat[r * d + c] = (xr[c] - mean) * rstd[r];
            y[r * d + c] = xhat[r * d + c] * gamma[c] + beta[c];
        }
    }
}

static void layernorm_bwd(uint64_t N, uint32_t d, const double *xhat, const double *rstd, const double *gamma,
                          const double *dy, double *dx, double *dgamma, double *dbeta)
{
    for (uint64_t r = 0; r < N; r++) {
        double mean_g = 0, mean_gx = 0;
        for (uint32_t c = 0; c < d; c++) {
            double g = dy[r * d + c] * gamma[c];
            mean_g += g;
            mean_gx += g * xhat[r * d + c];
            dgamma[c] += dy[r * d + c] * xhat[r * d + c];
            dbeta[c] += dy[r * d + c];
        }
        mean_g /= d;
        mean_gx /= d;
        for (uint32_t c = 0; c < d; c++) {
            double g = dy[r * d + c] * gamma[c];
            dx[r * d + c] += rstd[r] * (g - mean_g - xhat[r * d + c] * mean_gx);
        }
    }
}

static double sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

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

static const double *P(const tmm_param_table *t, const double *arena, int idx)
{
    return idx < 0 ? NULL : arena + t->params[idx].offset;
}

/* The gradient of a tensor, NULL without gradients or for a frozen tensor. */
static double *PG(const tmm_param_table *t, double *grads, int idx)
{
    return (idx < 0 || !grads || !t->params[idx].trainable) ? NULL : grads + t->params[idx].offset;
}

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
    S->x = zalloc(N * d), S->v = zalloc(N * d), S->y1 = zalloc(N * d), S->mix = zalloc(N * d);
    memcpy(S->x, x, N * d * sizeof *x);
    if (c->heads)
        linear_fwd(N, d, d, x, P(t, params, ix[TMM_TZ_IN_W]), P(t, params, ix[TMM_TZ_IN_B]), S->v);
    else
        memcpy(S->v, x, N * d * sizeof *x);
    ref_toeplitz_fwd_d(B, n, d, G, K, P(t, params, ix[TMM_TZ_W]), P(t, params, ix[TMM_TZ_BETA]), S->v, S->y1);
    if (c->expanded) {
        S->q = zalloc(N * d);
        for (uint64_t i = 0; i < N * d; i++)
            S->q[i] = S->y1[i] * sigmoid(S->y1[i]);
        ref_toeplitz_fwd_d(B, n, d, G, K, P(t, params, ix[TMM_TZ_W2]), P(t, params, ix[TMM_TZ_BETA2]), S->q, S->mix);
    } else {
        memcpy(S->mix, S->y1, N * d * sizeof *x);
    }
    if (c->heads)
        linear_fwd(N, d, d, S->mix, P(t, params, ix[TMM_TZ_OUT_W]), P(t, params, ix[TMM_TZ_OUT_B]), y);
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
    double *dmix = zalloc(N * d), *dy1 = zalloc(N * d), *dv = zalloc(N * d);
    if (c->heads)
        linear_bwd(N, d, d, S->mix, P(t, params, ix[TMM_TZ_OUT_W]), dy, dmix, PG(t, grads, ix[TMM_TZ_OUT_W]),
                   PG(t, grads, ix[TMM_TZ_OUT_B]));
    else
        memcpy(dmix, dy, N * d * sizeof *dy);
    if (c->expanded) {
        double *dq = zalloc(N * d);
        ref_toeplitz_bwd_d(B, n, d, G, K, P(t, params, ix[TMM_TZ_W2]), S->q, dmix, dq, PG(t, grads, ix[TMM_TZ_W2]),
                           PG(t, grads, ix[TMM_TZ_BETA2]));
        for (uint64_t i = 0; i < N * d; i++) {
            double s = sigmoid(S->y1[i]);
            dy1[i] = dq[i] * s * (1 + S->y1[i] * (1 - s));
        }
        free(dq);
    } else {
        memcpy(dy1, dmix, N * d * sizeof *dy);
    }
    ref_toeplitz_bwd_d(B, n, d, G, K, P(t, params, ix[TMM_TZ_W]), S->v, dy1, dv, PG(t, grads, ix[TMM_TZ_W]),
                       PG(t, grads, ix[TMM_TZ_BETA]));
    if (c->heads)
        linear_bwd(N, d, d, S->x, P(t, params, ix[TMM_TZ_IN_W]), dv, dx, PG(t, grads, ix[TMM_TZ_IN_W]),
                   PG(t, grads, ix[TMM_TZ_IN_B]));
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

/* ---- the frame -------------------------------------------------------------- */

/* A mixer's reference: y = Mix_l(x) (returns what its backward needs);
 * backward adds dL/dx into dx and the gradients into grads (when not NULL). */
typedef struct ref_mixer {
    void *(*forward)(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, const double *x,
                     double *y);
    void (*backward)(const tmm_param_table *t, const double *params, uint32_t l, uint32_t B, void *saved,
                     const double *dy, double *dx, double *grads);
    void (*free)(void *saved);
} ref_mixer;

static const ref_mixer *ref_mixer_of(tmm_arch arch)
{
    static const ref_mixer toeplitz = { tz_forward, tz_backward, tz_free };
    switch (arch) {
    case TMM_ARCH_TMM:
        return &toeplitz;
    default:
        abort(); /* an architecture without a reference */
    }
}

/* A norm: y = Norm(x); keeps xhat and rstd for the backward. */
typedef struct norm_saved {
    double *y, *xhat, *rstd;
} norm_saved;

static void norm_fwd(const tmm_param_table *t, const double *params, int w, int b, uint64_t N, const double *x,
                     norm_saved *S)
{
    const uint32_t d = t->config.d_model;
    S->y = zalloc(N * d), S->xhat = zalloc(N * d), S->rstd = zalloc(N);
    layernorm_fwd(N, d, x, P(t, params, w), P(t, params, b), S->y, S->xhat, S->rstd);
}

/* dx += dL/dx of the norm given dy; its gradients. */
static void norm_bwd(const tmm_param_table *t, const double *params, int w, int b, uint64_t N, const norm_saved *S,
                     const double *dy, double *dx, double *grads)
{
    const uint32_t d = t->config.d_model;
    double *dw = PG(t, grads, w), *db = PG(t, grads, b);
    double *sink_w = dw ? NULL : zalloc(d), *sink_b = db ? NULL : zalloc(d);
    layernorm_bwd(N, d, S->xhat, S->rstd, P(t, params, w), dy, dx, dw ? dw : sink_w, db ? db : sink_b);
    free(sink_w), free(sink_b);
}

static void norm_free(norm_saved *S) { free(S->y), free(S->xhat), free(S->rstd); }

typedef struct mlp_saved {
    double *x, *a, *z;   /* input; fc1 pre-activation; silu */
} mlp_saved;

static void mlp_fwd(const tmm_param_table *t, const double *params, uint32_t l, uint64_t N, const double *x,
                    double *y, mlp_saved *S)
{
    const tmm_block_params *bp = &t->blocks[l];
    const uint32_t d = t->config.d_model, e = t->config.expansion * d;
    S->x = zalloc(N * d), S->a = zalloc(N * e), S->z = zalloc(N * e);
    memcpy(S->x, x, N * d * sizeof *x);
    linear_fwd(N, d, e, x, P(t, params, bp->mlp_in_w), P(t, params, bp->mlp_in_b), S->a);
    for (uint64_t i = 0; i < N * e; i++)
        S->z[i] = S->a[i] * sigmoid(S->a[i]);
    linear_fwd(N, e, d, S->z, P(t, params, bp->mlp_out_w), P(t, params, bp->mlp_out_b), y);
}

static void mlp_bwd(const tmm_param_table *t, const double *params, uint32_t l, uint64_t N, const mlp_saved *S,
                    const double *dy, double *dx, double *grads)
{
    const tmm_block_params *bp = &t->blocks[l];
    const uint32_t d = t->config.d_model, e = t->config.expansion * d;
    double *dz = zalloc(N * e);
    linear_bwd(N, e, d, S->z, P(t, params, bp->mlp_out_w), dy, dz, PG(t, grads, bp->mlp_out_w),
               PG(t, grads, bp->mlp_out_b));
    for (uint64_t i = 0; i < N * e; i++) {
        double s = sigmoid(S->a[i]);
        dz[i] *= s * (1 + S->a[i] * (1 - s));
    }
    linear_bwd(N, d, e, S->x, P(t, params, bp->mlp_in_w), dz, dx, PG(t, grads, bp->mlp_in_w),
               PG(t, grads, bp->mlp_in_b));
    free(dz);
}

static void mlp_free(mlp_saved *S) { free(S->x), free(S->a), free(S->z); }

/* One half of a block: h += F(Norm(h)), F the mixer or the MLP. */
typedef struct half_saved {
    norm_saved norm;
    mlp_saved mlp;
    void *mixer;
} half_saved;

double ref_model_run(const tmm_param_table *t, const double *params, uint32_t B, const uint32_t *tokens,
                     const int32_t *targets, double *logits_out, double *grads)
{
    const tmm_model_config *c = &t->config;
    const tmm_arch_desc *arch = tmm_arch_of(c->arch);
    const ref_mixer *mixer = ref_mixer_of(c->arch);
    const uint32_t d = c->d_model, n = c->n_ctx, V = c->vocab;
    const uint64_t N = (uint64_t)B * n;

    half_saved *acts = calloc(2 * (size_t)c->n_layers, sizeof *acts);
    double *h = zalloc(N * d), *f = zalloc(N * d);
    if (!acts)
        abort();
    const double *E = P(t, params, t->embed);
    for (uint64_t r = 0; r < N; r++)
        memcpy(h + r * d, E + (uint64_t)(tokens[r] % V) * d, d * sizeof *h);

    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &t->blocks[l];
        for (int i = 0; i < 2; i++) {
            half_saved *S = &acts[2 * l + i];
            bool is_mixer = (i == 0) == arch->mixer_first;
            norm_fwd(t, params, is_mixer ? bp->mix_norm_w : bp->mlp_norm_w, is_mixer ? bp->mix_norm_b : bp->mlp_norm_b,
                     N, h, &S->norm);
            if (is_mixer)
                S->mixer = mixer->forward(t, params, l, B, S->norm.y, f);
            else
                mlp_fwd(t, params, l, N, S->norm.y, f, &S->mlp);
            for (uint64_t j = 0; j < N * d; j++)
                h[j] += f[j];
        }
    }
    norm_saved fn = { 0 };
    const double *head_in = h;
    if (arch->final_norm) {
        norm_fwd(t, params, t->final_norm_w, -1, N, h, &fn);
        head_in = fn.y;
    }

    /* LM head and cross-entropy; dlogits is kept for backward */
    double *logits = zalloc(N * V);
    linear_fwd(N, d, V, head_in, P(t, params, t->head), NULL, logits);
    if (logits_out)
        memcpy(logits_out, logits, N * V * sizeof *logits);
    uint64_t scored = 0;
    for (uint64_t r = 0; r < N; r++)
        scored += targets[r] >= 0;
    double loss = 0;
    for (uint64_t r = 0; r < N; r++) {
        double *lr = logits + r * V;
        if (targets[r] < 0) {
            memset(lr, 0, V * sizeof *lr); /* becomes dlogits: no gradient */
            continue;
        }
        double mx = lr[0];
        for (uint32_t v = 1; v < V; v++)
            mx = fmax(mx, lr[v]);
        double se = 0;
        for (uint32_t v = 0; v < V; v++)
            se += exp(lr[v] - mx);
        loss += log(se) + mx - lr[targets[r]];
        for (uint32_t v = 0; v < V; v++)
            lr[v] = (exp(lr[v] - mx) / se - (v == (uint32_t)targets[r])) / (double)scored;
    }
    loss = scored ? loss / (double)scored : 0.0;

    if (grads) {
        memset(grads, 0, t->arena_floats * sizeof *grads);
        double *dh = zalloc(N * d), *dx = zalloc(N * d);
        if (arch->final_norm) {
            double *dhf = zalloc(N * d);
            linear_bwd(N, d, V, head_in, P(t, params, t->head), logits, dhf, PG(t, grads, t->head), NULL);
            norm_bwd(t, params, t->final_norm_w, -1, N, &fn, dhf, dh, grads);
            free(dhf);
        } else {
            linear_bwd(N, d, V, head_in, P(t, params, t->head), logits, dh, PG(t, grads, t->head), NULL);
        }
        for (uint32_t l = c->n_layers; l-- > 0;) {
            const tmm_block_params *bp = &t->blocks[l];
            for (int i = 1; i >= 0; i--) {
                /* h_out = h_in + F(Norm(h_in)): dh_in = dh + Normᵀ(Fᵀ(dh)) */
                half_saved *S = &acts[2 * l + i];
                bool is_mixer = (i == 0) == arch->mixer_first;
                memset(dx, 0, N * d * sizeof *dx);
                if (is_mixer)
                    mixer->backward(t, params, l, B, S->mixer, dh, dx, grads);
                else
                    mlp_bwd(t, params, l, N, &S->mlp, dh, dx, grads);
                norm_bwd(t, params, is_mixer ? bp->mix_norm_w : bp->mlp_norm_w,
                         is_mixer ? bp->mix_norm_b : bp->mlp_norm_b, N, &S->norm, dx, dh, grads);
            }
        }
        double *dE = PG(t, grads, t->embed);
        for (uint64_t r = 0; r < N; r++)
            for (uint32_t i = 0; i < d; i++)
                dE[(uint64_t)(tokens[r] % V) * d + i] += dh[r * d + i];
        free(dh), free(dx);
    }

    for (uint32_t l = 0; l < c->n_layers; l++)
        for (int i = 0; i < 2; i++) {
            half_saved *S = &acts[2 * l + i];
            norm_free(&S->norm);
            if ((i == 0) == arch->mixer_first)
                mixer->free(S->mixer);
            else
                mlp_free(&S->mlp);
        }
    norm_free(&fn);
    free(acts);
    free(h), free(f);
    free(logits);
    return loss;
}
