/* Finite-difference checks of every backward of the nn references
 * (src/ref/ref_nn.h), in double: for a scalar loss L (sum(w * y) with random
 * weights w, or the mean cross-entropy), every element of every input that
 * has a gradient is moved by +-h and (L(+h) - L(-h)) / 2h is compared with
 * the reference backward. Runs on the CPU only. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd.h"
#include "ref/ref_nn.h"

/* ---- embedding ----------------------------------------------------------- */

typedef struct emb_ctx {
    const uint32_t *tok;
    size_t rows, vocab, d;
    double *E, *w, *h;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *c = p;
    ref_embedding_fwd_d(c->tok, c->rows, c->E, c->vocab, c->d, c->h);
    return dot(c->w, c->h, c->rows * c->d);
}

Test(nn_fd, embedding)
{
    static const size_t shapes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 13, 4, 2 }, { 9, 12, 4 } };
    rng_state = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], vocab = shapes[s][1], d = shapes[s][2];
        uint32_t *tok = calloc(rows, sizeof *tok);
        for (size_t i = 0; i < rows; i++) /* repeats; the last position out of range when there are several */
            tok[i] = (uint32_t)(urand(0, 1) * (vocab > 2 ? vocab / 2 : vocab));
        if (rows > 2)
            tok[rows - 1] = (uint32_t)vocab;
        emb_ctx c = { tok, rows, vocab, d, drand_array(vocab * d, -1, 1), drand_array(rows * d, -1, 1),
                      dzeros(rows * d) };
        double *dE = dzeros(vocab * d);
        ref_embedding_bwd_d(tok, rows, c.w, vocab, d, false, dE);
        fd_check("embedding dE", emb_loss, &c, c.E, dE, vocab * d);
        /* accumulate adds the same sums */
        double *acc = drand_array(vocab * d, -1, 1), *start = malloc(vocab * d * sizeof *start);
        memcpy(start, acc, vocab * d * sizeof *acc);
        ref_embedding_bwd_d(tok, rows, c.w, vocab, d, true, acc);
        for (size_t i = 0; i < vocab * d; i++)
            cr_assert(fabs(acc[i] - (start[i] + dE[i])) < 1e-12);
        free(tok), free(c.E), free(c.w), free(c.h), free(dE), free(acc), free(start);
    }
}

/* ---- LayerNorm ----------------------------------------------------------- */

typedef struct ln_ctx {
    size_t rows, d;
    double *x, *gamma, *beta, *w, *y;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ref_layernorm_fwd_d(c->x, c->gamma, c->beta, c->rows, c->d, 1e-5, c->y, NULL, NULL);
    return dot(c->w, c->y, c->rows * c->d);
}

Test(nn_fd, layernorm)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 2, 2 }, { 1, 7 }, { 3, 5 }, { 4, 17 } };
    rng_state = 2;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], d = shapes[s][1], n = rows * d;
        ln_ctx c = { rows, d, drand_array(n, -2, 2), drand_array(d, 0.5, 1.5), drand_array(d, -1, 1),
                     drand_array(n, -1, 1), dzeros(n) };
        double *dx = dzeros(n), *dg = dzeros(d), *db = dzeros(d);
        ref_layernorm_bwd_d(c.x, c.gamma, c.w, rows, d, 1e-5, false, dx, dg, db);
        fd_check("layernorm dx", ln_loss, &c, c.x, dx, n);
        fd_check("layernorm dgamma", ln_loss, &c, c.gamma, dg, d);
        fd_check("layernorm dbeta", ln_loss, &c, c.beta, db, d);
        free(c.x), free(c.gamma), free(c.beta), free(c.w), free(c.y), free(dx), free(dg), free(db);
    }
}

/* ---- bias + SiLU --------------------------------------------------------- */

typedef struct silu_ctx {
    size_t rows, d;
    double *x, *b, *w, *y;
} silu_ctx;

static double silu_loss(void *p)
{
    silu_ctx *c = p;
    ref_bias_silu_fwd_d(c->x, c->b, c->rows, c->d, c->y);
    return dot(c->w, c->y, c->rows * c->d);
}

Test(nn_fd, bias_silu)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 3, 4 }, { 5, 7 } };
    rng_state = 3;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], d = shapes[s][1], n = rows * d;
        silu_ctx c = { rows, d, drand_array(n, -6, 6), drand_array(d, -1, 1), drand_array(n, -1, 1), dzeros(n) };
        if (n > 2) { /* far into both tails */
            c.x[0] = -40;
            c.x[1] = 40;
        }
        double *dx = dzeros(n), *db = dzeros(d);
        ref_bias_silu_bwd_d(c.x, c.b, c.w, rows, d, false, dx, db);
        fd_check("bias_silu dx", silu_loss, &c, c.x, dx, n);
        fd_check("bias_silu db", silu_loss, &c, c.b, db, d);
        free(c.x), free(c.b), free(c.w), free(c.y), free(dx), free(db);
    }
}

/* ---- softmax cross-entropy ----------------------------------------------- */

typedef struct xent_ctx {
    const int32_t *targets;
    size_t rows, vocab;
    double *logits;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    return ref_xent_fwd_d(c->logits, c->targets, c->rows, c->vocab, NULL, NULL);
}

Test(nn_fd, xent)
{
    static const int32_t t1[] = { 0 }, t2[] = { 1 }, t3[] = { 2, -100, 4, 0 }, t4[] = { -100, -1, -100 },
                         t5[] = { 6, 3, 7, -100, 0 };
    static const struct {
        const int32_t *targets;
        size_t rows, vocab;
    } cases[] = { { t1, 1, 1 }, { t2, 1, 2 }, { t3, 4, 5 }, { t4, 3, 7 }, { t5, 5, 7 } /* 7 >= vocab: ignored */ };
    rng_state = 4;
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        size_t rows = cases[s].rows, vocab = cases[s].vocab, n = rows * vocab;
        xent_ctx c = { cases[s].targets, rows, vocab, drand_array(n, -4, 4) };
        if (n > 3)
            c.logits[3] += 60; /* max-subtraction matters */
        double *g = dzeros(n);
        ref_xent_bwd_d(c.logits, c.targets, rows, vocab, ref_count_scored(c.targets, rows, vocab), 1.0, g);
        fd_check("xent dlogits", xent_loss, &c, c.logits, g, n);
        free(c.logits), free(g);
    }
}
