/* Finite-difference checks of every backward of the Llama-op references
 * (src/ref/ref_llama.h), in double: for the scalar loss sum(w * y) with
 * random weights w, every element of every input that has a gradient is
 * moved by +-h and (L(+h) - L(-h)) / 2h is compared with the reference
 * backward. Also: accumulate adds, in-place calls equal out-of-place ones.
 * Runs on the CPU only. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd.h"
#include "ref/ref_llama.h"

/* ---- RMSNorm -------------------------------------------------------------- */

typedef struct rms_ctx {
    size_t rows, d;
    double eps;
    double *x, *g, *w, *y;
} rms_ctx;

static double rms_loss(void *p)
{
    rms_ctx *c = p;
    ref_rmsnorm_fwd_d(c->x, c->g, c->rows, c->d, c->eps, c->y, NULL);
    return dot(c->w, c->y, c->rows * c->d);
}

Test(llama_fd, rmsnorm)
{
    /* eps 1e-6 as the transformer, and 0.5 where it is a large part of the mean square */
    static const struct {
        size_t rows, d;
        double eps;
    } shapes[] = { { 1, 1, 1e-6 }, { 2, 2, 1e-6 }, { 1, 7, 1e-6 }, { 3, 5, 1e-6 }, { 4, 17, 1e-6 }, { 3, 6, 0.5 } };
    rng_state = 11;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s].rows, d = shapes[s].d, n = rows * d;
        rms_ctx c = { rows, d, shapes[s].eps, drand_array(n, -2, 2), drand_array(d, 0.5, 1.5),
                      drand_array(n, -1, 1), dzeros(n) };
        double *dx = dzeros(n), *dg = dzeros(d);
        ref_rmsnorm_bwd_d(c.x, c.g, c.w, rows, d, c.eps, false, dx, dg);
        fd_check("rmsnorm dx", rms_loss, &c, c.x, dx, n);
        fd_check("rmsnorm dg", rms_loss, &c, c.g, dg, d);
        /* rstd as documented */
        double *rstd = dzeros(rows);
        ref_rmsnorm_fwd_d(c.x, c.g, rows, d, c.eps, c.y, rstd);
        for (size_t r = 0; r < rows; r++) {
            double ss = dot(c.x + r * d, c.x + r * d, d);
            cr_assert(fabs(rstd[r] - 1 / sqrt(ss / (double)d + c.eps)) <= 1e-12 * rstd[r]);
        }
        /* accumulate adds the same sums; dx in place over dy and y over x give the same values */
        double *acc = drand_array(d, -1, 1), *start = dcopy(acc, d), *dx2 = dcopy(c.w, n), *y2 = dcopy(c.x, n);
        ref_rmsnorm_bwd_d(c.x, c.g, c.w, rows, d, c.eps, true, dx2, acc);
        for (size_t i = 0; i < d; i++)
            cr_assert(fabs(acc[i] - (start[i] + dg[i])) < 1e-12);
        memcpy(dx2, c.w, n * sizeof *dx2);
        ref_rmsnorm_bwd_d(c.x, c.g, dx2, rows, d, c.eps, false, dx2, acc);
        assert_close("rmsnorm dx in place", dx2, dx, n, 0);
        assert_close("rmsnorm dg with dx in place", acc, dg, d, 0);
        ref_rmsnorm_fwd_d(y2, c.g, rows, d, c.eps, y2, NULL);
        assert_close("rmsnorm y in place", y2, c.y, n, 0);
        free(c.x), free(c.g), free(c.w), free(c.y), free(dx), free(dg), free(rstd), free(acc), free(start);
        free(dx2), free(y2);
    }
}

/* ---- SwiGLU --------------------------------------------------------------- */

typedef struct swiglu_ctx {
    size_t rows, f;
    double *gu, *w, *y;
} swiglu_ctx;

static double swiglu_loss(void *p)
{
    swiglu_ctx *c = p;
    ref_swiglu_fwd_d(c->gu, c->rows, c->f, c->y);
    return dot(c->w, c->y, c->rows * c->f);
}

Test(llama_fd, swiglu)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 3, 4 }, { 5, 7 }, { 2, 1 } };
    rng_state = 12;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], f = shapes[s][1], n = rows * f;
        swiglu_ctx c = { rows, f, drand_array(2 * n, -6, 6), drand_array(n, -1, 1), dzeros(n) };
        if (f > 2) { /* far into both tails of the gate */
            c.gu[0] = -40;
            c.gu[1] = 40;
        }
        double *dgu = dzeros(2 * n);
        ref_swiglu_bwd_d(c.gu, c.w, rows, f, dgu);
        fd_check("swiglu dgu", swiglu_loss, &c, c.gu, dgu, 2 * n);
        double *in_place = dcopy(c.gu, 2 * n);
        ref_swiglu_bwd_d(in_place, c.w, rows, f, in_place);
        assert_close("swiglu dgu in place over gu", in_place, dgu, 2 * n, 0);
        free(c.gu), free(c.w), free(c.y), free(dgu), free(in_place);
    }
}

/* ---- RoPE ----------------------------------------------------------------- */

typedef struct rope_ctx {
    size_t rows, d, heads, n;
    const uint32_t *pos;
    bool inverse;
    double *x, *w, *y;
} rope_ctx;

static double rope_loss(void *p)
{
    rope_ctx *c = p;
    ref_rope_d(c->x, c->rows, c->d, c->heads, c->n, c->pos, 10000.0, c->inverse, c->y);
    return dot(c->w, c->y, c->rows * c->d);
}

Test(llama_fd, rope)
{
    static const struct {
        size_t B, n, heads, dh;
        bool decode;
    } shapes[] = { { 1, 1, 1, 2, false }, { 2, 5, 1, 2, false }, { 1, 7, 3, 6, false }, { 2, 3, 3, 10, false },
                   { 3, 50, 1, 6, true }, { 2, 1000, 3, 2, true } };
    rng_state = 13;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t d = shapes[s].heads * shapes[s].dh, rows = shapes[s].decode ? shapes[s].B : shapes[s].B * shapes[s].n;
        size_t nx = rows * d;
        uint32_t *pos = NULL;
        if (shapes[s].decode) {
            pos = calloc(rows, sizeof *pos);
            for (size_t r = 0; r < rows; r++)
                pos[r] = (uint32_t)(urand(0, 1) * (double)shapes[s].n);
        }
        for (int inv = 0; inv < 2; inv++) {
            rope_ctx c = { rows, d, shapes[s].heads, shapes[s].n, pos, inv, drand_array(nx, -2, 2),
                           drand_array(nx, -1, 1), dzeros(nx) };
            /* the backward: the rotation the other way applied to the output gradient */
            double *dx = dzeros(nx);
            ref_rope_d(c.w, rows, d, c.heads, c.n, pos, 10000.0, !inv, dx);
            fd_check(inv ? "rope inverse dx" : "rope dx", rope_loss, &c, c.x, dx, nx);
            /* in place equals out of place; inverse undoes the rotation */
            double *y2 = dcopy(c.x, nx);
            ref_rope_d(y2, rows, d, c.heads, c.n, pos, 10000.0, inv, y2);
            rope_loss(&c);
            assert_close("rope in place", y2, c.y, nx, 0);
            ref_rope_d(y2, rows, d, c.heads, c.n, pos, 10000.0, !inv, y2);
            assert_close("rope inverse of rope", y2, c.x, nx, 1e-14);
            free(c.x), free(c.w), free(c.y), free(dx), free(y2);
        }
        free(pos);
    }
}

/* The pairing and the angles on a hand-checked case: dh = 4, position 2. */
Test(llama_fd, rope_definition)
{
    const double x[4] = { 1, 2, 3, 4 };
    const uint32_t pos[1] = { 2 };
    double y[4];
    ref_rope_d(x, 1, 4, 1, 8, pos, 10000.0, false, y);
    double t0 = 2.0, t1 = 2.0 / 100.0; /* 2 * 10000^(-0/4), 2 * 10000^(-2/4) */
    const double want[4] = { 1 * cos(t0) - 3 * sin(t0), 2 * cos(t1) - 4 * sin(t1), 1 * sin(t0) + 3 * cos(t0),
                             2 * sin(t1) + 4 * cos(t1) };
    assert_close("rope by hand", y, want, 4, 1e-15);
}

/* <rope(q, t), rope(k, s)> depends on t - s only, head by head. */
Test(llama_fd, rope_relative_positions)
{
    const size_t H = 3, dh = 10, d = H * dh;
    static const uint32_t ts[][2] = { { 3, 0 }, { 10, 7 }, { 1000, 997 }, { 70003, 70000 } };
    rng_state = 14;
    double *q = drand_array(d, -1, 1), *k = drand_array(d, -1, 1), rq[30], rk[30], first[3] = { 0 };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        ref_rope_d(q, 1, d, H, 1, &ts[i][0], 10000.0, false, rq);
        ref_rope_d(k, 1, d, H, 1, &ts[i][1], 10000.0, false, rk);
        for (size_t h = 0; h < H; h++) {
            double dot_h = dot(rq + h * dh, rk + h * dh, dh);
            if (i == 0)
                first[h] = dot_h;
            cr_assert(fabs(dot_h - first[h]) < 1e-10, "head %zu: (%u, %u) gives %.17g, (3, 0) %.17g", h, ts[i][0],
                      ts[i][1], dot_h, first[h]);
        }
    }
    free(q), free(k);
}
