/* The retention/capacity autoencoder (docs/model.md, "Autoencoder"): the
 * unroll op against its reference on awkward sizes (odd half widths, lengths
 * beyond one pass of TMM_MAX_LOOP, a source row that is not the last), the
 * whole reference autoencoder's backward by finite differences (frozen and
 * trained encoders of several architectures, a decoder of another width),
 * the device autoencoder's loss and every gradient against the reference,
 * and a short training run whose reconstruction loss falls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fd.h"
#include "harness.h"
#include "model/model.h"
#include "model/rng.h"
#include "ops/autoenc_ops.h"
#include "ref/ref_autoenc.h"
#include "ref/ref_model.h"
#include "train/autoenc.h"

/* ---- the unroll op ---------------------------------------------------------- */

static void check_unroll(uint32_t B, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n)
{
    const size_t nh = (size_t)B * n_src * d, nu = (size_t)B * n * (d / 2);
    float *h = h_floats(nh), *du = h_floats(nu), *u = h_floats(nu), *dh = h_floats(nh);
    h_rand(h, nh, 11 + d, -1, 1);
    h_rand(du, nu, 12 + n, -1, 1);
    double *hd = dzeros(nh), *dud = dzeros(nu), *ur = dzeros(nu), *dhr = dzeros(nh);
    for (size_t i = 0; i < nh; i++)
        hd[i] = h[i];
    for (size_t i = 0; i < nu; i++)
        dud[i] = du[i];
    ref_unroll_fwd_d(B, n_src, src_row, d, n, hd, ur);
    ref_unroll_bwd_d(B, n_src, src_row, d, n, dud, dhr);

    tmm_buffer *bh = h_buffer(h, nh), *bu = h_buffer(NULL, nu), *bdu = h_buffer(du, nu), *bdh = h_buffer(NULL, nh);
    /* garbage in dh: the backward must write every element */
    float *junk = h_floats(nh);
    h_rand(junk, nh, 13, 5, 6);
    H_OK(tmm_buffer_write(bdh, 0, junk, nh * 4));
    tmm_recorder *r = h_begin();
    H_OK(tmm_op_unroll_forward(r, tmm_whole(bh), B, n_src, src_row, d, n, tmm_whole(bu)));
    H_OK(tmm_op_unroll_backward(r, tmm_whole(bdu), B, n_src, src_row, d, n, tmm_whole(bdh)));
    h_run(r);
    h_read(bu, u, nu);
    h_read(bdh, dh, nh);
    for (size_t i = 0; i < nu; i++)
        cr_assert_eq(u[i], (float)ur[i], "unroll B %u n_src %u row %u d %u n %u: u[%zu] %g vs %g", B, n_src, src_row,
                     d, n, i, (double)u[i], ur[i]);
    double worst = 0;
    for (size_t i = 0; i < nh; i++) {
        double dev = fabs((double)dh[i] - dhr[i]);
        worst = fmax(worst, dev);
        /* a float sum of about n/2 terms of magnitude <= 1 */
        cr_assert(dev <= 1e-6 * (1 + n), "unroll bwd B %u n_src %u d %u n %u: dh[%zu] %g vs %g", B, n_src, d, n, i,
                  (double)dh[i], dhr[i]);
    }
    printf("  unroll B %u n_src %u row %u d %u n %u: forward exact, backward max|dev| %.3g\n", B, n_src, src_row, d,
           n, worst);
    tmm_buffer_destroy(bh), tmm_buffer_destroy(bu), tmm_buffer_destroy(bdu), tmm_buffer_destroy(bdh);
    free(h), free(du), free(u), free(dh), free(junk), free(hd), free(dud), free(ur), free(dhr);
}

H_TEST(autoenc, unroll_matches_reference)
{
    check_unroll(1, 1, 0, 2, 1);
    check_unroll(3, 5, 4, 6, 7);        /* d/2 odd */
    check_unroll(2, 17, 16, 10, 37);    /* n > d: windows wrap several times */
    check_unroll(2, 9, 3, 130, 300);    /* a source row that is not the last; n_src != n */
    check_unroll(1, 3, 2, 66, 9001);    /* three passes of TMM_MAX_LOOP positions */
}

H_TEST(autoenc, unroll_refuses_bad_shapes)
{
    tmm_buffer *b = h_buffer(NULL, 1024), *c = h_buffer(NULL, 1024);
    tmm_recorder *r = h_begin();
    cr_assert_eq(tmm_op_unroll_forward(r, tmm_whole(b), 1, 4, 3, 7, 4, tmm_whole(c)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "even"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_unroll_backward(r, tmm_whole(b), 1, 4, 4, 8, 4, tmm_whole(c)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "source row"), "%s", tmm_last_error());
    cr_assert_eq(tmm_op_unroll_forward(r, tmm_whole(b), 1, 4, 3, 8, 1000, tmm_whole(c)), TMM_ERR_INVALID_ARGUMENT,
                 "u of 4000 floats does not fit 1024");
    cr_assert_eq(tmm_op_unroll_forward(r, tmm_whole(b), 1, 16, 3, 8, 16, tmm_whole(b)), TMM_ERR_INVALID_ARGUMENT,
                 "in place");
    h_run(r);
    tmm_buffer_destroy(b), tmm_buffer_destroy(c);
    tmm_model_config e = { .vocab = 7, .d_model = 5, .n_ctx = 5, .n_layers = 1, .heads = 1, .expansion = 2,
                           .kernel = 1, .seed = 1 };
    tmm_model_config dcfg = e;
    dcfg.d_model = 6;
    cr_assert_eq(tmm_autoenc_config_check(&e, &dcfg), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "even"), "%s", tmm_last_error());
    e.d_model = 6, dcfg.n_ctx = 6;
    cr_assert_eq(tmm_autoenc_config_check(&e, &dcfg), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "context"), "%s", tmm_last_error());
}

/* ---- the reference by finite differences ------------------------------------ */

typedef struct fd_case {
    tmm_param_table enc, dec;
    double *pe, *pd, *w, *b;
    uint32_t B;
    uint32_t tok[64];
} fd_case;

static double fd_loss(void *ctx)
{
    fd_case *f = ctx;
    return ref_autoenc_run(&f->enc, f->pe, &f->dec, f->pd, f->w, f->b, f->B, f->tok, NULL, NULL, NULL, NULL, NULL);
}

/* fd_check (fd.h) with a step of 1e-6: through two models the loss's third
 * derivatives are large enough that the step of 1e-5 leaves truncation errors
 * near 1e-6 of the gradient; rounding stays near 1e-9 here. */
static double fd_check_fine(const char *what, loss_fn loss, void *ctx, double *x, const double *grad, size_t n)
{
    const double h = 1e-6;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = loss(ctx);
        x[i] = keep - h;
        double lm = loss(ctx);
        x[i] = keep;
        double fd = (lp - lm) / (2 * h), dev = fabs(fd - grad[i]);
        worst = fmax(worst, dev);
        cr_assert(dev <= FD_TOL * (1 + fabs(grad[i])), "%s: element %zu: backward %.12g, finite difference %.12g",
                  what, i, grad[i], fd);
    }
    printf("  %-40s n=%-6zu max|fd - backward| = %.3g\n", what, n, worst);
    return worst;
}

static double *init_arena(const tmm_param_table *t, uint64_t salt)
{
    float *a = h_floats(t->arena_floats);
    tmm_param_init(t, a);
    double *x = dzeros(t->arena_floats);
    for (uint64_t i = 0; i < t->arena_floats; i++)
        x[i] = a[i] + 0.3 * (tmm_rng_uniform(salt, i) - 0.5);
    free(a);
    return x;
}

static void fd_autoenc(const char *name, tmm_model_config ec, uint32_t d_dec, bool train_encoder)
{
    fd_case f = { .B = 2 };
    tmm_model_config dc = { .vocab = ec.vocab, .d_model = d_dec, .n_ctx = ec.n_ctx, .n_layers = 2, .heads = 2,
                            .expansion = 2, .kernel = 1, .seed = 9 };
    H_OK(tmm_param_table_build(&ec, &f.enc));
    H_OK(tmm_param_table_build(&dc, &f.dec));
    const uint32_t half = ec.d_model / 2, nw = d_dec * half;
    f.pe = init_arena(&f.enc, 31), f.pd = init_arena(&f.dec, 32);
    f.w = drand_array(nw, -0.5, 0.5), f.b = drand_array(d_dec, -0.2, 0.2);
    for (uint32_t i = 0; i < f.B * ec.n_ctx; i++)
        f.tok[i] = (uint32_t)(tmm_rng_bits(33, i) % ec.vocab);
    double *ge = train_encoder ? dzeros(f.enc.arena_floats) : NULL, *gd = dzeros(f.dec.arena_floats);
    double *gw = dzeros(nw), *gb = dzeros(d_dec);
    ref_autoenc_run(&f.enc, f.pe, &f.dec, f.pd, f.w, f.b, f.B, f.tok, NULL, ge, gd, gw, gb);
    char what[96];
    snprintf(what, sizeof what, "%s: unroll.weight", name);
    fd_check_fine(what, fd_loss, &f, f.w, gw, nw);
    snprintf(what, sizeof what, "%s: unroll.bias", name);
    fd_check_fine(what, fd_loss, &f, f.b, gb, d_dec);
    snprintf(what, sizeof what, "%s: decoder", name);
    fd_check_fine(what, fd_loss, &f, f.pd, gd, f.dec.arena_floats);
    if (ge) {
        snprintf(what, sizeof what, "%s: encoder", name);
        fd_check_fine(what, fd_loss, &f, f.pe, ge, f.enc.arena_floats);
    }
    free(ge), free(gd), free(gw), free(gb), free(f.pe), free(f.pd), free(f.w), free(f.b);
    tmm_param_table_free(&f.enc), tmm_param_table_free(&f.dec);
}

#define TINY(a, dm, h) { .arch = (a), .vocab = 7, .d_model = (dm), .n_ctx = 5, .n_layers = 2, .heads = (h), \
                         .expansion = 2, .kernel = 1, .seed = 42 }

Test(autoenc_ref, tmm_encoder_trained_by_finite_differences)
{
    fd_autoenc("tmm encoder (joint)", (tmm_model_config)TINY(TMM_ARCH_TMM, 6, 2), 4, true);
}

Test(autoenc_ref, frozen_encoder_by_finite_differences)
{
    fd_autoenc("tmm encoder (frozen)", (tmm_model_config)TINY(TMM_ARCH_TMM, 6, 0), 6, false);
}

Test(autoenc_ref, transformer_encoder_by_finite_differences)
{
    /* a final norm: the hidden state is its output */
    fd_autoenc("transformer encoder (joint)", (tmm_model_config)TINY(TMM_ARCH_TRANSFORMER, 6, 3), 4, true);
}

Test(autoenc_ref, mamba2_encoder_by_finite_differences)
{
    tmm_model_config c = TINY(TMM_ARCH_MAMBA2, 8, 2);
    c.state = 3;
    fd_autoenc("mamba2 encoder (joint)", c, 4, true);
}

/* ---- the device against the reference ---------------------------------------- */

enum { GB = 2, GMAX = 2 * 16 };

static double deviation(const float *got, const double *ref, uint64_t n, double *scale)
{
    double worst = 0, big = 0;
    for (uint64_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - ref[i]));
        big = fmax(big, fabs(ref[i]));
    }
    *scale = big;
    return worst;
}

/* Host copy of a device arena, perturbed (the baselines' small weights made
 * larger, so that their outputs show errors), written back. */
static double *perturb(const tmm_param_table *t, float *w, uint64_t salt)
{
    double *x = dzeros(t->arena_floats);
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        double spread = p->init == TMM_INIT_SMALL ? 1.0 : 0.2;
        for (uint64_t j = p->offset; j < p->offset + p->numel; j++)
            x[j] = w[j] = w[j] + (float)(spread * (tmm_rng_uniform(salt, j) - 0.5));
    }
    return x;
}

static void check_grads(const char *name, const char *which, const tmm_param_table *t, const float *g,
                        const double *gd)
{
    double worst = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        double scale, dev = deviation(g + p->offset, gd + p->offset, p->numel, &scale);
        worst = fmax(worst, dev / (1e-6 + scale));
        cr_assert(dev <= 1e-4 * scale + 1e-6, "%s: %s gradient of %s deviates by %g (scale %g)", name, which,
                  p->name, dev, scale);
    }
    printf("  %-28s %-8s gradients: max |dev| / max |ref| = %.2g\n", name, which, worst);
}

static void gpu_vs_ref(const char *name, tmm_model_config ec, uint32_t d_dec, bool train_encoder)
{
    tmm_model_config dc = { .vocab = ec.vocab, .d_model = d_dec, .n_ctx = ec.n_ctx, .n_layers = 2, .heads = 4,
                            .expansion = 2, .kernel = 1, .seed = 5 };
    tmm_autoenc *a;
    H_OK(tmm_autoenc_create(h_dev, &ec, &dc, GB, train_encoder, NULL, &a));
    tmm_model *enc = tmm_autoenc_encoder(a), *dec = tmm_autoenc_decoder(a);
    const tmm_param_table *te = tmm_model_table(enc), *td = tmm_model_table(dec), *tl = tmm_autoenc_linear_table(a);
    float *we = h_floats(te->arena_floats), *wd = h_floats(td->arena_floats), *wl = h_floats(tl->arena_floats);
    H_OK(tmm_model_read_params(enc, we));
    H_OK(tmm_model_read_params(dec, wd));
    H_OK(tmm_autoenc_read_linear(a, wl));
    double *pe = perturb(te, we, 41), *pd = perturb(td, wd, 42), *pl = perturb(tl, wl, 43);
    H_OK(tmm_model_write_params(enc, we));
    H_OK(tmm_model_write_params(dec, wd));
    H_OK(tmm_autoenc_write_linear(a, wl));

    const uint32_t N = GB * ec.n_ctx, V = ec.vocab;
    cr_assert_leq(N, GMAX);
    uint32_t tok[GMAX];
    for (uint32_t i = 0; i < N; i++)
        tok[i] = (uint32_t)(tmm_rng_bits(44, i) % V);
    H_OK(tmm_autoenc_set_batch(a, tok));

    const tmm_param *lw = &tl->params[0], *lb = &tl->params[1];
    double *ge = train_encoder ? dzeros(te->arena_floats) : NULL, *gd = dzeros(td->arena_floats);
    double *gl = dzeros(tl->arena_floats);
    double *logits = dzeros((size_t)N * V);
    double ref_loss = ref_autoenc_run(te, pe, td, pd, pl + lw->offset, pl + lb->offset, GB, tok, logits, ge, gd,
                                      gl + lw->offset, gl + lb->offset);

    float loss;
    H_OK(tmm_autoenc_run(a, false));
    H_OK(tmm_autoenc_loss(a, &loss));
    printf("  %-28s loss %.7g vs reference %.7g\n", name, (double)loss, ref_loss);
    cr_assert(fabs(loss - ref_loss) <= 1e-5 * (1 + ref_loss), "%s: loss %g vs %g", name, (double)loss, ref_loss);
    uint32_t am[GMAX];
    H_OK(tmm_autoenc_argmax(a, am));
    for (uint32_t r = 0; r < N; r++) {
        uint32_t best = 0;
        for (uint32_t j = 1; j < V; j++)
            if (logits[(size_t)r * V + j] > logits[(size_t)r * V + best])
                best = j;
        cr_assert_eq(am[r], best, "%s: argmax at row %u", name, r);
    }

    H_OK(tmm_autoenc_run(a, true));
    float loss2;
    H_OK(tmm_autoenc_loss(a, &loss2));
    cr_assert_eq(loss2, loss, "%s: the backward run's forward differs", name);
    float *g = h_floats(td->arena_floats);
    H_OK(tmm_model_read_grads(dec, g));
    check_grads(name, "decoder", td, g, gd);
    free(g);
    g = h_floats(tl->arena_floats);
    H_OK(tmm_autoenc_read_linear_grads(a, g));
    check_grads(name, "linear", tl, g, gl);
    free(g);
    g = h_floats(te->arena_floats);
    H_OK(tmm_model_read_grads(enc, g));
    if (train_encoder) {
        check_grads(name, "encoder", te, g, ge);
    } else {
        for (uint64_t i = 0; i < te->arena_floats; i++)
            cr_assert_eq(g[i], 0.0f, "%s: a frozen encoder got a gradient", name);
    }
    /* a replay gives the same bits */
    float *g2 = h_floats(te->arena_floats);
    H_OK(tmm_autoenc_run(a, true));
    H_OK(tmm_model_read_grads(enc, g2));
    cr_assert(memcmp(g, g2, te->arena_floats * 4) == 0, "%s: two identical runs differ", name);
    cr_assert_neq(tmm_model_loss(enc, &loss), TMM_OK, "an encoder has no loss");
    free(g), free(g2);
    free(we), free(wd), free(wl), free(pe), free(pd), free(pl), free(ge), free(gd), free(gl), free(logits);
    tmm_autoenc_destroy(a);
}

#define GCFG(a, dm, h) { .arch = (a), .vocab = 37, .d_model = (dm), .n_ctx = 13, .n_layers = 2, .heads = (h), \
                         .expansion = 2, .kernel = 1, .seed = 3 }

H_TEST(autoenc_gpu, tmm_joint)
{
    gpu_vs_ref("tmm heads 4 (joint)", (tmm_model_config)GCFG(TMM_ARCH_TMM, 20, 4), 12, true);
}
H_TEST(autoenc_gpu, tmm_frozen)
{
    gpu_vs_ref("tmm flat (frozen)", (tmm_model_config)GCFG(TMM_ARCH_TMM, 20, 0), 20, false);
}
H_TEST(autoenc_gpu, transformer_joint)
{
    gpu_vs_ref("transformer (joint)", (tmm_model_config)GCFG(TMM_ARCH_TRANSFORMER, 20, 2), 12, true);
}
H_TEST(autoenc_gpu, hyena_frozen)
{
    gpu_vs_ref("hyena (frozen)", (tmm_model_config)GCFG(TMM_ARCH_HYENA, 20, 0), 12, false);
}

/* ---- training ---------------------------------------------------------------- */

/* A tiny joint autoencoder memorizes a few batches of random sequences: the
 * reconstruction loss falls well below chance (ln V). */
H_TEST(autoenc_train, reconstruction_loss_falls)
{
    const uint32_t V = 8, n = 12, Bt = 8, d = 32;
    tmm_model_config ec = { .vocab = V, .d_model = d, .n_ctx = n, .n_layers = 1, .heads = 4, .expansion = 2,
                            .kernel = 1, .seed = 1 };
    tmm_model_config dc = ec;
    dc.seed = 2;
    tmm_optim_config oc = tmm_optim_config_default();
    tmm_autoenc *a;
    H_OK(tmm_autoenc_create(h_dev, &ec, &dc, Bt, true, &oc, &a));
    enum { BATCHES = 2 };
    uint32_t tok[BATCHES][8 * 12];
    for (uint32_t k = 0; k < BATCHES; k++)
        for (uint32_t i = 0; i < Bt * n; i++)
            tok[k][i] = (uint32_t)(tmm_rng_bits(50 + k, i) % V);
    float first = 0, last = 0;
    for (uint32_t s = 1; s <= 300; s++) {
        H_OK(tmm_autoenc_set_batch(a, tok[s % BATCHES]));
        H_OK(tmm_autoenc_step(a, s, 3e-3));
        float loss;
        H_OK(tmm_autoenc_loss(a, &loss));
        if (s <= 2)
            first += loss / 2;
        if (s > 298)
            last += loss / 2;
    }
    uint32_t am[8 * 12], right = 0;
    H_OK(tmm_autoenc_set_batch(a, tok[0]));
    H_OK(tmm_autoenc_run(a, false));
    H_OK(tmm_autoenc_argmax(a, am));
    for (uint32_t i = 0; i < Bt * n; i++)
        right += am[i] == tok[0][i];
    printf("  joint tmm autoencoder V %u n %u d %u: loss %.3f -> %.3f (ln V %.3f), accuracy %.3f\n", V, n, d,
           (double)first, (double)last, log(V), right / (double)(Bt * n));
    cr_assert(first > 0.8 * log(V), "starts near chance: %g", (double)first);
    cr_assert(last < 0.5 * first, "the reconstruction loss falls: %g -> %g", (double)first, (double)last);
    tmm_autoenc_destroy(a);
}

/* ---- the model's modes: misuse is refused ------------------------------------- */

H_TEST(autoenc, model_modes_refuse_misuse)
{
    tmm_model_config c = { .vocab = 7, .d_model = 6, .n_ctx = 5, .n_layers = 1, .heads = 1, .expansion = 2,
                           .kernel = 1, .seed = 1 };
    tmm_model *m;
    H_OK(tmm_model_create(h_dev, &c, 2, &m));
    tmm_buffer *small = h_buffer(NULL, 2 * 5 * 6 - 1), *ok = h_buffer(NULL, 2 * 5 * 6);
    cr_assert_eq(tmm_model_set_input(m, tmm_whole(small), tmm_whole(ok)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "model input"), "%s", tmm_last_error());
    cr_assert_eq(tmm_model_set_input(m, tmm_whole(ok), tmm_whole(small)), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_model_set_encoder(m, true, tmm_whole(small)), TMM_ERR_INVALID_ARGUMENT);
    uint32_t tok[10] = { 0 };
    int32_t tgt[10] = { 1, 2, 3, 4, 5, 6, 0, 1, 2, 3 };
    H_OK(tmm_model_set_batch(m, tok, tgt));
    H_OK(tmm_model_set_encoder(m, true, (tmm_view){ 0 }));
    H_OK(tmm_model_run(m, false)); /* an encoder's forward needs no gradient */
    float loss;
    cr_assert_eq(tmm_model_loss(m, &loss), TMM_ERR_INVALID_ARGUMENT);
    cr_assert_eq(tmm_model_run(m, true), TMM_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(tmm_last_error(), "hidden state's gradient"), "%s", tmm_last_error());
    /* back to the LM: the loss is there again */
    H_OK(tmm_model_set_encoder(m, false, (tmm_view){ 0 }));
    H_OK(tmm_model_run(m, false));
    H_OK(tmm_model_loss(m, &loss));
    cr_assert(isfinite(loss) && loss > 0, "loss %g", (double)loss);
    tmm_buffer_destroy(small), tmm_buffer_destroy(ok);
    tmm_model_destroy(m);
}
