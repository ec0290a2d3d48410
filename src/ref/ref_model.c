/* Reference model forward and backward (double precision, straightforward
 * loops): the frame of each architecture (model/arch.h) and its mixer. */
#include "ref/ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "ref/ref_llama.h"
#include "ref/ref_model_util.h"

/* y[N, out] = x[N, in] · Wᵀ + b */
void ref_linear_fwd(uint64_t N, uint32_t in, uint32_t out, const double *x, const double *W, const double *b,
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
void ref_linear_bwd(uint64_t N, uint32_t in, uint32_t out, const double *x, const double *W, const double *dy,
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

void ref_causal_conv_fwd(uint32_t B, uint32_t n, uint32_t C, uint32_t K, const double *w, const double *bias,
                         const double *x, double *y)
{
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t c = 0; c < C; c++) {
                double s = bias[c];
                for (uint32_t j = 0; j < K; j++) {
                    int64_t src = (int64_t)t - (K - 1) + j;
                    if (src >= 0)
                        s += w[(uint64_t)c * K + j] * x[((uint64_t)b * n + (uint64_t)src) * C + c];
                }
                y[((uint64_t)b * n + t) * C + c] = s;
            }
}

void ref_causal_conv_bwd(uint32_t B, uint32_t n, uint32_t C, uint32_t K, const double *w, const double *x,
                         const double *dy, double *dx, double *dw, double *dbias)
{
    for (uint32_t b = 0; b < B; b++)
        for (uint32_t t = 0; t < n; t++)
            for (uint32_t c = 0; c < C; c++) {
                double g = dy[((uint64_t)b * n + t) * C + c];
                if (dbias)
                    dbias[c] += g;
                for (uint32_t j = 0; j < K; j++) {
                    int64_t src = (int64_t)t - (K - 1) + j;
                    if (src < 0)
                        continue;
                    uint64_t at = ((uint64_t)b * n + (uint64_t)src) * C + c;
                    if (dx)
                        dx[at] += w[(uint64_t)c * K + j] * g;
                    if (dw)
                        dw[(uint64_t)c * K + j] += g * x[at];
                }
            }
}

static void layernorm_fwd(uint64_t N, uint32_t d, double eps, const double *x, const double *gamma,
                          const double *beta, double *y, double *xhat, double *rstd)
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
        rstd[r] = 1.0 / sqrt(var + eps);
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

double ref_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }

double ref_silu(double a) { return a * ref_sigmoid(a); }

double ref_silu_grad(double a)
{
    double s = ref_sigmoid(a);
    return s * (1 + a * (1 - s));
}

/* exact GELU: x Φ(x), Φ the standard normal CDF */
double ref_gelu(double a) { return 0.5 * a * (1.0 + erf(a / sqrt(2.0))); }

double ref_gelu_grad(double a)
{
    return 0.5 * (1.0 + erf(a / sqrt(2.0))) + a * exp(-0.5 * a * a) / sqrt(2.0 * 3.14159265358979323846);
}

const double *ref_param(const tmm_param_table *t, const double *arena, int idx)
{
    return idx < 0 ? NULL : arena + t->params[idx].offset;
}

/* The gradient of a tensor, NULL without gradients or for a frozen tensor. */
double *ref_grad(const tmm_param_table *t, double *grads, int idx)
{
    return (idx < 0 || !grads || !t->params[idx].trainable) ? NULL : grads + t->params[idx].offset;
}

/* ---- the frame -------------------------------------------------------------- */

/* The reference of the architecture's device mixer. */
static const ref_mixer *mixer_of(tmm_arch arch)
{
    static const ref_mixer *const refs[] = { &ref_toeplitz_mixer, &ref_attention_mixer, &ref_hyena_mixer,
                                             &ref_mamba2_mixer };
    const tmm_mixer_class *cls = tmm_arch_of(arch)->mixer;
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        for (const tmm_mixer_class *const *of = refs[i]->of; *of; of++)
            if (*of == cls)
                return refs[i];
    abort(); /* every device mixer has a reference */
}

/* A norm: y = Norm(x); keeps x, xhat and rstd for the backward. */
typedef struct norm_saved {
    double *x, *y, *xhat, *rstd;
} norm_saved;

static bool rms(const tmm_param_table *t) { return tmm_arch_of(t->config.arch)->norm == TMM_NORM_RMS; }
static double eps_of(const tmm_param_table *t) { return tmm_arch_of(t->config.arch)->norm_eps; }

static void norm_fwd(const tmm_param_table *t, const double *params, int w, int b, uint64_t N, const double *x,
                     norm_saved *S)
{
    const uint32_t d = t->config.d_model;
    S->x = ref_zalloc(N * d), S->y = ref_zalloc(N * d), S->xhat = ref_zalloc(N * d), S->rstd = ref_zalloc(N);
    memcpy(S->x, x, N * d * sizeof *x);
    if (rms(t))
        ref_rmsnorm_fwd_d(x, ref_param(t, params, w), N, d, eps_of(t), S->y, S->rstd);
    else
        layernorm_fwd(N, d, eps_of(t), x, ref_param(t, params, w), ref_param(t, params, b), S->y, S->xhat, S->rstd);
}

/* dx += dL/dx of the norm given dy; its gradients. */
static void norm_bwd(const tmm_param_table *t, const double *params, int w, int b, uint64_t N, const norm_saved *S,
                     const double *dy, double *dx, double *grads)
{
    const uint32_t d = t->config.d_model;
    double *dw = ref_grad(t, grads, w), *db = ref_grad(t, grads, b);
    double *sink_w = dw ? NULL : ref_zalloc(d), *sink_b = db ? NULL : ref_zalloc(d);
    if (rms(t)) {
        double *dxn = ref_zalloc(N * d);
        ref_rmsnorm_bwd_d(S->x, ref_param(t, params, w), dy, N, d, eps_of(t), true, dxn, dw ? dw : sink_w);
        for (uint64_t i = 0; i < N * d; i++)
            dx[i] += dxn[i];
        free(dxn);
    } else {
        layernorm_bwd(N, d, S->xhat, S->rstd, ref_param(t, params, w), dy, dx, dw ? dw : sink_w, db ? db : sink_b);
    }
    free(sink_w), free(sink_b);
}

static void norm_free(norm_saved *S) { free(S->x), free(S->y), free(S->xhat), free(S->rstd); }

typedef struct mlp_saved {
    double *x, *a, *z;   /* input; pre-activation (SwiGLU: gate and up); activation */
} mlp_saved;

static bool swiglu(const tmm_param_table *t) { return tmm_arch_of(t->config.arch)->mlp == TMM_MLP_SWIGLU; }
static bool gelu(const tmm_param_table *t) { return tmm_arch_of(t->config.arch)->mlp == TMM_MLP_GELU; }

static void mlp_fwd(const tmm_param_table *t, const double *params, uint32_t l, uint64_t N, const double *x,
                    double *y, mlp_saved *S)
{
    const tmm_block_params *bp = &t->blocks[l];
    const uint32_t d = t->config.d_model, e = t->config.expansion * d, ea = swiglu(t) ? 2 * e : e;
    S->x = ref_zalloc(N * d), S->a = ref_zalloc(N * ea), S->z = ref_zalloc(N * e);
    memcpy(S->x, x, N * d * sizeof *x);
    ref_linear_fwd(N, d, ea, x, ref_param(t, params, bp->mlp_in_w), ref_param(t, params, bp->mlp_in_b), S->a);
    if (swiglu(t))
        ref_swiglu_fwd_d(S->a, N, e, S->z);
    else
        for (uint64_t i = 0; i < N * e; i++)
            S->z[i] = gelu(t) ? ref_gelu(S->a[i]) : ref_silu(S->a[i]);
    ref_linear_fwd(N, e, d, S->z, ref_param(t, params, bp->mlp_out_w), ref_param(t, params, bp->mlp_out_b), y);
}

static void mlp_bwd(const tmm_param_table *t, const double *params, uint32_t l, uint64_t N, const mlp_saved *S,
                    const double *dy, double *dx, double *grads)
{
    const tmm_block_params *bp = &t->blocks[l];
    const uint32_t d = t->config.d_model, e = t->config.expansion * d, ea = swiglu(t) ? 2 * e : e;
    double *dz = ref_zalloc(N * e), *da = ref_zalloc(N * ea);
    ref_linear_bwd(N, e, d, S->z, ref_param(t, params, bp->mlp_out_w), dy, dz, ref_grad(t, grads, bp->mlp_out_w),
                   ref_grad(t, grads, bp->mlp_out_b));
    if (swiglu(t)) {
        ref_swiglu_bwd_d(S->a, dz, N, e, da);
    } else {
        for (uint64_t i = 0; i < N * e; i++)
            da[i] = dz[i] * (gelu(t) ? ref_gelu_grad(S->a[i]) : ref_silu_grad(S->a[i]));
    }
    ref_linear_bwd(N, d, ea, S->x, ref_param(t, params, bp->mlp_in_w), da, dx, ref_grad(t, grads, bp->mlp_in_w),
                   ref_grad(t, grads, bp->mlp_in_b));
    free(dz), free(da);
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
    return ref_model_run_io(t, params, B, tokens, targets, logits_out, grads, NULL);
}

double ref_model_run_io(const tmm_param_table *t, const double *params, uint32_t B, const uint32_t *tokens,
                        const int32_t *targets, double *logits_out, double *grads, const ref_model_io *io)
{
    static const ref_model_io plain = { 0 };
    if (!io)
        io = &plain;
    const tmm_model_config *c = &t->config;
    const tmm_arch_desc *arch = tmm_arch_of(c->arch);
    const ref_mixer *mixer = mixer_of(c->arch);
    const uint32_t d = c->d_model, n = c->n_ctx, V = c->vocab;
    const uint64_t N = (uint64_t)B * n;
    const int halves = arch->mlp == TMM_MLP_NONE ? 1 : 2; /* without an MLP, the mixer's alone */

    half_saved *acts = calloc(2 * (size_t)c->n_layers, sizeof *acts);
    double *h = ref_zalloc(N * d), *f = ref_zalloc(N * d);
    if (!acts)
        abort();
    const double *E = ref_param(t, params, t->embed);
    if (io->input)
        memcpy(h, io->input, N * d * sizeof *h);
    else
        for (uint64_t r = 0; r < N; r++)
            memcpy(h + r * d, E + (uint64_t)(tokens[r] % V) * d, d * sizeof *h);

    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &t->blocks[l];
        for (int i = 0; i < halves; i++) {
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
    if (io->hidden)
        memcpy(io->hidden, head_in, N * d * sizeof *head_in);

    /* LM head and cross-entropy; dlogits is kept for backward */
    double *logits = ref_zalloc(N * V);
    ref_linear_fwd(N, d, V, head_in, ref_param(t, params, t->head), NULL, logits);
    if (logits_out)
        memcpy(logits_out, logits, N * V * sizeof *logits);
    uint64_t scored = 0;
    for (uint64_t r = 0; r < N && !io->d_hidden; r++)
        scored += targets[r] >= 0;
    double loss = 0;
    if (io->d_hidden)
        memset(logits, 0, N * V * sizeof *logits); /* no LM loss: the backward starts from d_hidden */
    for (uint64_t r = 0; r < N && !io->d_hidden; r++) {
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
        double *dh = ref_zalloc(N * d), *dx = ref_zalloc(N * d);
        if (arch->final_norm) {
            double *dhf = ref_zalloc(N * d);
            ref_linear_bwd(N, d, V, head_in, ref_param(t, params, t->head), logits, dhf, ref_grad(t, grads, t->head), NULL);
            if (io->d_hidden)
                for (uint64_t j = 0; j < N * d; j++)
                    dhf[j] += io->d_hidden[j];
            norm_bwd(t, params, t->final_norm_w, -1, N, &fn, dhf, dh, grads);
            free(dhf);
        } else {
            ref_linear_bwd(N, d, V, head_in, ref_param(t, params, t->head), logits, dh, ref_grad(t, grads, t->head), NULL);
            if (io->d_hidden)
                for (uint64_t j = 0; j < N * d; j++)
                    dh[j] += io->d_hidden[j];
        }
        for (uint32_t l = c->n_layers; l-- > 0;) {
            const tmm_block_params *bp = &t->blocks[l];
            for (int i = halves - 1; i >= 0; i--) {
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
        double *dE = ref_grad(t, grads, t->embed);
        if (io->input && io->d_input)
            memcpy(io->d_input, dh, N * d * sizeof *dh);
        for (uint64_t r = 0; r < N && !io->input; r++)
            for (uint32_t i = 0; i < d; i++)
                dE[(uint64_t)(tokens[r] % V) * d + i] += dh[r * d + i];
        free(dh), free(dx);
    }

    for (uint32_t l = 0; l < c->n_layers; l++)
        for (int i = 0; i < halves; i++) {
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
