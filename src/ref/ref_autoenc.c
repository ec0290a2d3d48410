/* The autoencoder's reference (ref_autoenc.h). */
#include "ref/ref_autoenc.h"

#include <stdlib.h>
#include <string.h>

#include "ref/ref_model.h"
#include "ref/ref_model_util.h"

void ref_unroll_fwd_d(uint32_t B, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n, const double *h,
                      double *u)
{
    const uint32_t half = d / 2;
    for (uint32_t b = 0; b < B; b++) {
        const double *hb = h + ((uint64_t)b * n_src + src_row) * d;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < half; j++)
                u[((uint64_t)b * n + i) * half + j] = hb[(i + j) % d];
    }
}

void ref_unroll_bwd_d(uint32_t B, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n, const double *du,
                      double *dh)
{
    const uint32_t half = d / 2;
    memset(dh, 0, (uint64_t)B * n_src * d * sizeof *dh);
    for (uint32_t b = 0; b < B; b++) {
        double *hb = dh + ((uint64_t)b * n_src + src_row) * d;
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < half; j++)
                hb[(i + j) % d] += du[((uint64_t)b * n + i) * half + j];
    }
}

double ref_autoenc_run(const tmm_param_table *enc, const double *enc_params, const tmm_param_table *dec,
                       const double *dec_params, const double *lin_w, const double *lin_b, uint32_t B,
                       const uint32_t *tokens, double *logits, double *enc_grads, double *dec_grads, double *lin_dw,
                       double *lin_db)
{
    const uint32_t n = enc->config.n_ctx, d = enc->config.d_model, half = d / 2, dd = dec->config.d_model;
    const uint64_t N = (uint64_t)B * n;
    double *H = ref_zalloc(N * d), *U = ref_zalloc(N * half), *X = ref_zalloc(N * dd);
    int32_t *targets = malloc(N * sizeof *targets);
    if (!targets)
        abort();
    for (uint64_t r = 0; r < N; r++)
        targets[r] = (int32_t)tokens[r];

    double *zero = ref_zalloc(N * d); /* as an encoder: no LM loss */
    ref_model_io eio = { .hidden = H, .d_hidden = zero };
    ref_model_run_io(enc, enc_params, B, tokens, NULL, NULL, NULL, &eio);
    ref_unroll_fwd_d(B, n, n - 1, d, n, H, U);
    ref_linear_fwd(N, half, dd, U, lin_w, lin_b, X);

    const bool backward = dec_grads != NULL;
    double *dX = backward ? ref_zalloc(N * dd) : NULL;
    ref_model_io dio = { .input = X, .d_input = dX };
    double loss = ref_model_run_io(dec, dec_params, B, tokens, targets, logits, dec_grads, &dio);
    if (backward) {
        double *dU = ref_zalloc(N * half), *dH = ref_zalloc(N * d);
        memset(lin_dw, 0, (uint64_t)dd * half * sizeof *lin_dw);
        memset(lin_db, 0, dd * sizeof *lin_db);
        ref_linear_bwd(N, half, dd, U, lin_w, dX, dU, lin_dw, lin_db);
        if (enc_grads) {
            ref_unroll_bwd_d(B, n, n - 1, d, n, dU, dH);
            ref_model_io gio = { .d_hidden = dH };
            ref_model_run_io(enc, enc_params, B, tokens, NULL, NULL, enc_grads, &gio);
        }
        free(dU), free(dH);
    }
    free(dX), free(zero), free(targets);
    free(H), free(U), free(X);
    return loss;
}
