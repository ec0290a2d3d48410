/* Reference TMM forward and backward (double precision, straightforward loops). */
#include "ref/ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Activations of one block, kept for backward. */
typedef struct block_acts {
    double *h_in;             /* block input [N, d] */
    double *x1, *xhat1, *rstd1; /* LN1 */
    double *a, *z;            /* fc1 pre-activation and silu [N, e] */
    double *h_mid;            /* after the MLP residual */
    double *x2, *xhat2, *rstd2; /* LN2 */
    double *v;                /* mixer input (after the in-projection for heads) */
    double *y1, *q;           /* first Toeplitz output; its silu (expanded) */
    double *mix;              /* Toeplitz output before the out-projection */
} block_acts;

static const double *P(const tmm_param_table *t, const double *arena, int idx)
{
    return idx < 0 ? NULL : arena + t->params[idx].offset;
}

static double *PG(const tmm_param_table *t, double *grads, int idx)
{
    return (idx < 0 || !grads) ? NULL : grads + t->params[idx].offset;
}

double ref_model_run(const tmm_param_table *t, const double *params, uint32_t B, const uint32_t *tokens,
                     const int32_t *targets, double *logits_out, double *grads)
{
    const tmm_model_config *c = &t->config;
    const uint32_t d = c->d_model, e = c->expansion * d, n = c->n_ctx, V = c->vocab, K = c->kernel;
    const uint32_t G = c->heads ? c->heads : 1;
    const uint64_t N = (uint64_t)B * n;

    block_acts *acts = calloc(c->n_layers, sizeof *acts);
    double *h = zalloc(N * d);
    if (!acts)
        abort();
    const double *E = P(t, params, t->embed);
    for (uint64_t r = 0; r < N; r++)
        memcpy(h + r * d, E + (uint64_t)(tokens[r] % V) * d, d * sizeof *h);

    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &t->blocks[l];
        block_acts *A = &acts[l];
        A->h_in = zalloc(N * d);
        memcpy(A->h_in, h, N * d * sizeof *h);
        A->x1 = zalloc(N * d), A->xhat1 = zalloc(N * d), A->rstd1 = zalloc(N);
        layernorm_fwd(N, d, h, P(t, params, bp->ln1_w), P(t, params, bp->ln1_b), A->x1, A->xhat1, A->rstd1);
        A->a = zalloc(N * e), A->z = zalloc(N * e);
        linear_fwd(N, d, e, A->x1, P(t, params, bp->fc1_w), P(t, params, bp->fc1_b), A->a);
        for (uint64_t i = 0; i < N * e; i++)
            A->z[i] = A->a[i] * sigmoid(A->a[i]);
        double *m = zalloc(N * d);
        linear_fwd(N, e, d, A->z, P(t, params, bp->fc2_w), P(t, params, bp->fc2_b), m);
        for (uint64_t i = 0; i < N * d; i++)
            h[i] += m[i];
        free(m);
        A->h_mid = zalloc(N * d);
        memcpy(A->h_mid, h, N * d * sizeof *h);

        A->x2 = zalloc(N * d), A->xhat2 = zalloc(N * d), A->rstd2 = zalloc(N);
        layernorm_fwd(N, d, h, P(t, params, bp->ln2_w), P(t, params, bp->ln2_b), A->x2, A->xhat2, A->rstd2);
        A->v = zalloc(N * d);
        if (c->heads)
            linear_fwd(N, d, d, A->x2, P(t, params, bp->in_w), P(t, params, bp->in_b), A->v);
        else
            memcpy(A->v, A->x2, N * d * sizeof *h);
        A->y1 = zalloc(N * d);
        ref_toeplitz_fwd_d(B, n, d, G, K, P(t, params, bp->w), P(t, params, bp->beta), A->v, A->y1);
        A->mix = zalloc(N * d);
        if (c->expanded) {
            A->q = zalloc(N * d);
            for (uint64_t i = 0; i < N * d; i++)
                A->q[i] = A->y1[i] * sigmoid(A->y1[i]);
            ref_toeplitz_fwd_d(B, n, d, G, K, P(t, params, bp->w2), P(t, params, bp->beta2), A->q, A->mix);
        } else {
            memcpy(A->mix, A->y1, N * d * sizeof *h);
        }
        double *o = zalloc(N * d);
        if (c->heads)
            linear_fwd(N, d, d, A->mix, P(t, params, bp->out_w), P(t, params, bp->out_b), o);
        else
            memcpy(o, A->mix, N * d * sizeof *h);
        for (uint64_t i = 0; i < N * d; i++)
            h[i] += o[i];
        free(o);
    }

    /* LM head and cross-entropy; dlogits is kept for backward */
    double *logits = zalloc(N * V);
    linear_fwd(N, d, V, h, P(t, params, t->head), NULL, logits);
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
        double *dh = zalloc(N * d);
        linear_bwd(N, d, V, h, P(t, params, t->head), logits, dh, PG(t, grads, t->head), NULL);
        for (uint32_t l = c->n_layers; l-- > 0;) {
            const tmm_block_params *bp = &t->blocks[l];
            block_acts *A = &acts[l];
            /* mixer residual: h = h_mid + out(mix) */
            double *dmix = zalloc(N * d);
            if (c->heads)
                linear_bwd(N, d, d, A->mix, P(t, params, bp->out_w), dh, dmix, PG(t, grads, bp->out_w),
                           PG(t, grads, bp->out_b));
            else
                memcpy(dmix, dh, N * d * sizeof *dh);
            bool train_mix = !c->frozen;
            double *dy1 = zalloc(N * d);
            if (c->expanded) {
                double *dq = zalloc(N * d);
                ref_toeplitz_bwd_d(B, n, d, G, K, P(t, params, bp->w2), A->q, dmix, dq,
                                   train_mix ? PG(t, grads, bp->w2) : NULL,
                                   train_mix ? PG(t, grads, bp->beta2) : NULL);
                for (uint64_t i = 0; i < N * d; i++) {
                    double s = sigmoid(A->y1[i]);
                    dy1[i] = dq[i] * s * (1 + A->y1[i] * (1 - s));
                }
                free(dq);
            } else {
                memcpy(dy1, dmix, N * d * sizeof *dh);
            }
            double *dv = zalloc(N * d);
            ref_toeplitz_bwd_d(B, n, d, G, K, P(t, params, bp->w), A->v, dy1, dv,
                               train_mix ? PG(t, grads, bp->w) : NULL, train_mix ? PG(t, grads, bp->beta) : NULL);
            double *dx2 = zalloc(N * d);
            if (c->heads)
                linear_bwd(N, d, d, A->x2, P(t, params, bp->in_w), dv, dx2, PG(t, grads, bp->in_w),
                           PG(t, grads, bp->in_b));
            else
                memcpy(dx2, dv, N * d * sizeof *dh);
            /* dh (residual) + LN2 backward */
            layernorm_bwd(N, d, A->xhat2, A->rstd2, P(t, params, bp->ln2_w), dx2, dh, PG(t, grads, bp->ln2_w),
                          PG(t, grads, bp->ln2_b));
            /* MLP residual: h_mid = h_in + fc2(silu(fc1(LN1(h_in)))) */
            double *dz = zalloc(N * e);
            linear_bwd(N, e, d, A->z, P(t, params, bp->fc2_w), dh, dz, PG(t, grads, bp->fc2_w),
                       PG(t, grads, bp->fc2_b));
            for (uint64_t i = 0; i < N * e; i++) {
                double s = sigmoid(A->a[i]);
                dz[i] *= s * (1 + A->a[i] * (1 - s));
            }
            double *dx1 = zalloc(N * d);
            linear_bwd(N, d, e, A->x1, P(t, params, bp->fc1_w), dz, dx1, PG(t, grads, bp->fc1_w),
                       PG(t, grads, bp->fc1_b));
            layernorm_bwd(N, d, A->xhat1, A->rstd1, P(t, params, bp->ln1_w), dx1, dh, PG(t, grads, bp->ln1_w),
                          PG(t, grads, bp->ln1_b));
            free(dmix), free(dy1), free(dv), free(dx2), free(dz), free(dx1);
        }
        double *dE = PG(t, grads, t->embed);
        for (uint64_t r = 0; r < N; r++)
            for (uint32_t i = 0; i < d; i++)
                dE[(uint64_t)(tokens[r] % V) * d + i] += dh[r * d + i];
        free(dh);
    }

    for (uint32_t l = 0; l < c->n_layers; l++) {
        block_acts *A = &acts[l];
        free(A->h_in), free(A->x1), free(A->xhat1), free(A->rstd1), free(A->a), free(A->z), free(A->h_mid);
        free(A->x2), free(A->xhat2), free(A->rstd2), free(A->v), free(A->y1), free(A->q), free(A->mix);
    }
    free(acts);
    free(h);
    free(logits);
    return loss;
}
