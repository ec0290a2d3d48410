/* Finite-difference checks of every backward of the Hyena / Mamba 2 small-op
 * references (src/ref/ref_ssm_ops.h), in double: for the scalar loss
 * sum(w * y) with random weights w, every element of every input that has a
 * gradient is moved by +-h and (L(+h) - L(-h)) / 2h is compared with the
 * reference backward. Also: accumulate adds, in-place calls equal
 * out-of-place ones, the conv's decoding step and fill continue the
 * training forward, and a few values by hand. Runs on the CPU only. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd.h"
#include "ref/ref_ssm_ops.h"

/* accumulate = true added exactly the sums of accumulate = false to start. */
static void assert_added(const char *what, const double *acc, const double *start, const double *sums, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(acc[i] - (start[i] + sums[i])) <= 1e-12 * (1 + fabs(sums[i])), "%s: element %zu", what, i);
}

/* ---- conv1d ------------------------------------------------------------------- */

typedef struct conv_ctx {
    size_t B, n, C, K;
    bool silu;
    double *x, *w, *bias, *wt, *y;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    ref_conv1d_fwd_d(c->x, c->w, c->bias, c->B, c->n, c->C, c->K, c->silu, c->y);
    return dot(c->wt, c->y, c->B * c->n * c->C);
}

static const struct {
    size_t B, n, C, K;
} conv_shapes[] = { { 1, 1, 1, 1 }, { 2, 5, 3, 1 }, { 1, 1, 2, 3 }, { 2, 2, 3, 4 }, { 3, 7, 2, 3 },
                    { 2, 9, 3, 4 }, { 1, 11, 2, 8 }, { 2, 5, 1, 8 } };

Test(ssm_fd, conv1d)
{
    rng_state = 21;
    for (size_t s = 0; s < sizeof conv_shapes / sizeof conv_shapes[0]; s++)
        for (int act = 0; act < 2; act++) {
            size_t B = conv_shapes[s].B, n = conv_shapes[s].n, C = conv_shapes[s].C, K = conv_shapes[s].K;
            size_t N = B * n * C;
            printf(" conv1d B=%zu n=%zu C=%zu K=%zu%s\n", B, n, C, K, act ? " silu" : "");
            conv_ctx c = { B, n, C, K, act, drand_array(N, -2, 2), drand_array(C * K, -1, 1),
                           drand_array(C, -1, 1), drand_array(N, -1, 1), dzeros(N) };
            double *dx = dzeros(N), *dw = dzeros(C * K), *db = dzeros(C);
            ref_conv1d_bwd_d(c.x, c.w, c.bias, c.wt, B, n, C, K, act, false, dx, dw, db);
            fd_check("conv1d dx", conv_loss, &c, c.x, dx, N);
            fd_check("conv1d dw", conv_loss, &c, c.w, dw, C * K);
            fd_check("conv1d dbias", conv_loss, &c, c.bias, db, C);
            double *aw = drand_array(C * K, -1, 1), *ab = drand_array(C, -1, 1);
            double *sw = dcopy(aw, C * K), *sb = dcopy(ab, C), *dx2 = dzeros(N);
            ref_conv1d_bwd_d(c.x, c.w, c.bias, c.wt, B, n, C, K, act, true, dx2, aw, ab);
            assert_added("conv1d dw accumulate", aw, sw, dw, C * K);
            assert_added("conv1d dbias accumulate", ab, sb, db, C);
            assert_close("conv1d dx with accumulate", dx2, dx, N, 0);
            free(c.x), free(c.w), free(c.bias), free(c.wt), free(c.y), free(dx), free(dw), free(db);
            free(aw), free(ab), free(sw), free(sb), free(dx2);
        }
}

/* Stepping through each sequence from a garbage window reproduces the
 * forward; a window filled from a prefix of length len then stepped at
 * position len gives the forward at len. */
Test(ssm_fd, conv1d_step_and_fill_continue_the_forward)
{
    rng_state = 22;
    for (size_t s = 0; s < sizeof conv_shapes / sizeof conv_shapes[0]; s++)
        for (int act = 0; act < 2; act++) {
            size_t B = conv_shapes[s].B, n = conv_shapes[s].n, C = conv_shapes[s].C, K = conv_shapes[s].K;
            size_t N = B * n * C, nw = B * (K - 1) * C;
            double *x = drand_array(N, -2, 2), *w = drand_array(C * K, -1, 1), *bias = drand_array(C, -1, 1);
            double *y = dzeros(N), *win = drand_array(nw, 5, 6), *xs = dzeros(B * C), *ys = dzeros(B * C);
            uint32_t *pos = calloc(B, sizeof *pos), *len = calloc(B, sizeof *len);
            ref_conv1d_fwd_d(x, w, bias, B, n, C, K, act, y);
            for (size_t t = 0; t < n; t++) {
                for (size_t b = 0; b < B; b++) {
                    pos[b] = (uint32_t)t;
                    memcpy(xs + b * C, x + (b * n + t) * C, C * sizeof *xs);
                }
                ref_conv1d_step_d(xs, w, bias, pos, B, C, K, act, win, ys);
                for (size_t b = 0; b < B; b++)
                    assert_close("conv1d step vs forward", ys + b * C, y + (b * n + t) * C, C, 1e-14);
            }
            for (size_t b = 0; b < B; b++) /* len 0 .. n-1, differing per sequence */
                len[b] = (uint32_t)((b * 5 + s) % n);
            double *win2 = drand_array(nw, 5, 6);
            ref_conv1d_fill_d(x, len, B, n, C, K, win2);
            for (size_t b = 0; b < B; b++)
                memcpy(xs + b * C, x + (b * n + len[b]) * C, C * sizeof *xs);
            ref_conv1d_step_d(xs, w, bias, len, B, C, K, act, win2, ys);
            for (size_t b = 0; b < B; b++)
                assert_close("conv1d fill + step vs forward", ys + b * C, y + (b * n + len[b]) * C, C, 1e-14);
            free(x), free(w), free(bias), free(y), free(win), free(xs), free(ys), free(pos), free(len), free(win2);
        }
}

Test(ssm_fd, conv1d_by_hand)
{
    /* one channel, K = 3, w = (1, 10, 100), bias 0.5: y[t] = 0.5 + x[t-2] + 10 x[t-1] + 100 x[t] */
    const double x[4] = { 1, 2, 3, 4 }, w[3] = { 1, 10, 100 }, bias[1] = { 0.5 };
    double y[4];
    ref_conv1d_fwd_d(x, w, bias, 1, 4, 1, 3, false, y);
    const double want[4] = { 100.5, 210.5, 321.5, 432.5 };
    assert_close("conv1d by hand", y, want, 4, 0);
    /* two sequences of 2: nothing crosses between them */
    ref_conv1d_fwd_d(x, w, bias, 2, 2, 1, 3, false, y);
    const double want2[4] = { 100.5, 210.5, 300.5, 430.5 };
    assert_close("conv1d by hand, two sequences", y, want2, 4, 0);
}

/* ---- GELU and softplus ------------------------------------------------------------ */

typedef struct act_ctx {
    size_t rows, C;
    bool softplus;
    double *x, *b, *wt, *y;
} act_ctx;

static double act_loss(void *p)
{
    act_ctx *c = p;
    if (c->softplus)
        ref_softplus_fwd_d(c->x, c->b, c->rows, c->C, c->y);
    else
        ref_gelu_fwd_d(c->x, c->b, c->rows, c->C, c->y);
    return dot(c->wt, c->y, c->rows * c->C);
}

static void check_act(bool softplus, uint64_t seed)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 3, 4 }, { 5, 7 }, { 2, 1 }, { 1, 13 } };
    const char *name = softplus ? "softplus" : "gelu";
    rng_state = seed;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int with_b = 0; with_b < 2; with_b++) {
            size_t rows = shapes[s][0], C = shapes[s][1], N = rows * C;
            act_ctx c = { rows, C, softplus, drand_array(N, -6, 6), with_b ? drand_array(C, -1, 1) : NULL,
                          drand_array(N, -1, 1), dzeros(N) };
            if (N > 4) { /* the tails */
                c.x[0] = -30, c.x[1] = 30, c.x[2] = -12, c.x[3] = 12;
            }
            double *dx = dzeros(N), *db = dzeros(C);
            printf(" %s rows=%zu C=%zu%s\n", name, rows, C, with_b ? " with bias" : "");
            if (softplus)
                ref_softplus_bwd_d(c.x, c.b, c.wt, rows, C, false, dx, db);
            else
                ref_gelu_bwd_d(c.x, c.b, c.wt, rows, C, false, dx, db);
            fd_check("dx", act_loss, &c, c.x, dx, N);
            if (with_b)
                fd_check("db", act_loss, &c, c.b, db, C);
            /* db is the column sum of dx (also without a bias) */
            for (size_t j = 0; j < C; j++) {
                double sum = 0;
                for (size_t r = 0; r < rows; r++)
                    sum += dx[r * C + j];
                cr_assert(fabs(sum - db[j]) <= 1e-12 * (1 + fabs(sum)));
            }
            /* accumulate; dx in place over dy; y in place over x; db optional */
            double *acc = drand_array(C, -1, 1), *start = dcopy(acc, C), *ip = dcopy(c.wt, N);
            if (softplus)
                ref_softplus_bwd_d(c.x, c.b, ip, rows, C, true, ip, acc);
            else
                ref_gelu_bwd_d(c.x, c.b, ip, rows, C, true, ip, acc);
            assert_added("db accumulate", acc, start, db, C);
            assert_close("dx in place", ip, dx, N, 0);
            if (softplus)
                ref_softplus_bwd_d(c.x, c.b, c.wt, rows, C, false, ip, NULL);
            else
                ref_gelu_bwd_d(c.x, c.b, c.wt, rows, C, false, ip, NULL);
            assert_close("dx without db", ip, dx, N, 0);
            double *y2 = dcopy(c.x, N);
            act_loss(&c);
            if (softplus)
                ref_softplus_fwd_d(y2, c.b, rows, C, y2);
            else
                ref_gelu_fwd_d(y2, c.b, rows, C, y2);
            assert_close("y in place", y2, c.y, N, 0);
            free(c.x), free(c.b), free(c.wt), free(c.y), free(dx), free(db), free(acc), free(start), free(ip);
            free(y2);
        }
}

Test(ssm_fd, gelu) { check_act(false, 23); }
Test(ssm_fd, softplus) { check_act(true, 24); }

Test(ssm_fd, gelu_and_softplus_values)
{
    /* gelu(1) = Phi(1) = 0.841344746068542948...; gelu(-1) = -(1 - Phi(1)); gelu(0) = 0 */
    const double x[5] = { 1, -1, 0, -10, 40 };
    double y[5];
    ref_gelu_fwd_d(x, NULL, 1, 5, y);
    const double want[5] = { 0.8413447460685429, -0.15865525393145707, 0, -10 * 7.619853024160527e-24, 40 };
    for (int i = 0; i < 5; i++)
        cr_assert(fabs(y[i] - want[i]) <= 1e-13 * fabs(want[i]), "gelu(%g) = %.17g, want %.17g", x[i], y[i],
                  want[i]);
    /* softplus: log 2 at 0, no overflow at 800, exp(-800) underflows cleanly */
    const double xs[4] = { 0, 800, -800, -30 };
    ref_softplus_fwd_d(xs, NULL, 1, 4, y);
    cr_assert(fabs(y[0] - log(2.0)) < 1e-16);
    cr_assert(y[1] == 800.0);
    cr_assert(y[2] == 0.0 && !isnan(y[2]));
    cr_assert(fabs(y[3] - 9.357622968839737e-14) <= 1e-14 * 9.357622968839737e-14); /* log1p(exp(-30)) */
    double dx[4], dy[4] = { 1, 1, 1, 1 };
    ref_softplus_bwd_d(xs, NULL, dy, 1, 4, false, dx, NULL);
    cr_assert(dx[0] == 0.5 && dx[1] == 1.0 && dx[2] == 0.0 && !isnan(dx[2]));
}

/* ---- sine ------------------------------------------------------------------------ */

typedef struct sine_ctx {
    size_t rows, C;
    double *x, *omega, *c, *wt, *y;
} sine_ctx;

static double sine_loss(void *p)
{
    sine_ctx *c = p;
    ref_sine_fwd_d(c->x, c->omega, c->c, c->rows, c->C, c->y);
    return dot(c->wt, c->y, c->rows * c->C);
}

Test(ssm_fd, sine)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 3, 4 }, { 5, 7 }, { 2, 1 }, { 1, 13 } };
    rng_state = 25;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t rows = shapes[s][0], C = shapes[s][1], N = rows * C;
        sine_ctx c = { rows, C, drand_array(N, -3, 3), drand_array(C, -2, 2), drand_array(C, -1, 1),
                       drand_array(N, -1, 1), dzeros(N) };
        double *dx = dzeros(N), *dom = dzeros(C), *dc = dzeros(C);
        printf(" sine rows=%zu C=%zu\n", rows, C);
        ref_sine_bwd_d(c.x, c.omega, c.c, c.wt, rows, C, false, dx, dom, dc);
        fd_check("sine dx", sine_loss, &c, c.x, dx, N);
        fd_check("sine domega", sine_loss, &c, c.omega, dom, C);
        fd_check("sine dc", sine_loss, &c, c.c, dc, C);
        double *a1 = drand_array(C, -1, 1), *a2 = drand_array(C, -1, 1), *s1 = dcopy(a1, C), *s2 = dcopy(a2, C);
        double *ip = dcopy(c.wt, N);
        ref_sine_bwd_d(c.x, c.omega, c.c, ip, rows, C, true, ip, a1, a2);
        assert_added("sine domega accumulate", a1, s1, dom, C);
        assert_added("sine dc accumulate", a2, s2, dc, C);
        assert_close("sine dx in place", ip, dx, N, 0);
        free(c.x), free(c.omega), free(c.c), free(c.wt), free(c.y), free(dx), free(dom), free(dc);
        free(a1), free(a2), free(s1), free(s2), free(ip);
    }
}

/* ---- gates ------------------------------------------------------------------------ */

typedef struct gate_ctx {
    int kind; /* 0 mul, 1 silu, 2 scale */
    size_t rows, C;
    double *a, *v, *wt, *y;
} gate_ctx;

static double gate_loss(void *p)
{
    gate_ctx *c = p;
    size_t N = c->rows * c->C;
    if (c->kind == 0)
        ref_gate_mul_fwd_d(c->a, c->v, N, c->y);
    else if (c->kind == 1)
        ref_gate_silu_fwd_d(c->a, c->v, N, c->y);
    else
        ref_gate_scale_fwd_d(c->a, c->v, c->rows, c->C, c->y);
    return dot(c->wt, c->y, N);
}

Test(ssm_fd, gates)
{
    static const size_t shapes[][2] = { { 1, 1 }, { 3, 4 }, { 5, 7 }, { 2, 1 }, { 1, 13 } };
    static const char *names[3][2] = { { "gate mul da", "gate mul db" }, { "gate silu da", "gate silu dz" },
                                       { "gate scale da", "gate scale dk" } };
    rng_state = 26;
    for (int kind = 0; kind < 3; kind++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            size_t rows = shapes[s][0], C = shapes[s][1], N = rows * C, nv = kind == 2 ? C : N;
            gate_ctx c = { kind, rows, C, drand_array(N, -3, 3), drand_array(nv, -6, 6), drand_array(N, -1, 1),
                           dzeros(N) };
            double *da = dzeros(N), *dv = dzeros(nv);
            printf(" gate %d rows=%zu C=%zu\n", kind, rows, C);
            if (kind == 0)
                ref_gate_mul_bwd_d(c.a, c.v, c.wt, N, da, dv);
            else if (kind == 1)
                ref_gate_silu_bwd_d(c.a, c.v, c.wt, N, da, dv);
            else
                ref_gate_scale_bwd_d(c.a, c.v, c.wt, rows, C, false, da, dv);
            fd_check(names[kind][0], gate_loss, &c, c.a, da, N);
            fd_check(names[kind][1], gate_loss, &c, c.v, dv, nv);
            /* each gradient alone equals the pair's; da in place over dy */
            double *one = dzeros(nv), *ip = dcopy(c.wt, N);
            if (kind == 0) {
                ref_gate_mul_bwd_d(c.a, c.v, c.wt, N, NULL, one);
                ref_gate_mul_bwd_d(c.a, c.v, ip, N, ip, NULL);
            } else if (kind == 1) {
                ref_gate_silu_bwd_d(c.a, c.v, c.wt, N, NULL, one);
                ref_gate_silu_bwd_d(c.a, c.v, ip, N, ip, NULL);
            } else {
                double *acc = drand_array(C, -1, 1), *start = dcopy(acc, C);
                ref_gate_scale_bwd_d(c.a, c.v, c.wt, rows, C, true, NULL, acc);
                assert_added("gate scale dk accumulate", acc, start, dv, C);
                ref_gate_scale_bwd_d(c.a, c.v, c.wt, rows, C, false, NULL, one);
                ref_gate_scale_bwd_d(c.a, c.v, ip, rows, C, false, ip, NULL);
                free(acc), free(start);
            }
            assert_close("second gradient alone", one, dv, nv, 0);
            assert_close("da in place", ip, da, N, 0);
            free(c.a), free(c.v), free(c.wt), free(c.y), free(da), free(dv), free(one), free(ip);
        }
}
