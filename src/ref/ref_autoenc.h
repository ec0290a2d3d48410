/* The retention/capacity autoencoder in plain C, double precision
 * (docs/model.md, "Autoencoder"): the definition that the device's
 * src/train/autoenc.c is checked against, itself checked by finite
 * differences (tests/test_autoenc.c). */
#ifndef TMM_REF_AUTOENC_H
#define TMM_REF_AUTOENC_H

#include <stdint.h>

#include "model/params.h"

/* u [B * n, d/2] from row src_row of each sequence's n_src rows of h
 * [B * n_src, d]: u[b, i, j] = h_b[(i + j) mod d] (d even). */
void ref_unroll_fwd_d(uint32_t B, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n, const double *h,
                      double *u);
/* dh [B * n_src, d] overwritten: zero except the source rows, which get the
 * sum of du over the positions that read each channel. */
void ref_unroll_bwd_d(uint32_t B, uint32_t n_src, uint32_t src_row, uint32_t d, uint32_t n, const double *du,
                      double *dh);

/* The whole autoencoder on B sequences of n = the encoder's n_ctx tokens:
 *   H      = the encoder's final hidden state (its LM head's input) [B, n, d]
 *   U      = unroll(H at position n - 1), n positions        [B, n, d/2]
 *   X      = U · lin_wᵀ + lin_b                               [B, n, d_dec]
 *   logits = the decoder (a causal model whose first block reads X instead of
 *            an embedding); loss = mean cross-entropy of position i against
 *            tokens[i], every position scored.
 * The decoder's n_ctx and vocab equal the encoder's; lin_w is [d_dec, d/2].
 * logits [B, n, V] may be NULL. With dec_grads (arena), lin_dw [d_dec, d/2]
 * and lin_db [d_dec] (all overwritten) runs the backward; enc_grads NULL
 * leaves the encoder frozen, else it receives the encoder's gradient (which
 * flows in through H at position n - 1 only). Returns the loss. */
double ref_autoenc_run(const tmm_param_table *enc, const double *enc_params, const tmm_param_table *dec,
                       const double *dec_params, const double *lin_w, const double *lin_b, uint32_t B,
                       const uint32_t *tokens, double *logits, double *enc_grads, double *dec_grads, double *lin_dw,
                       double *lin_db);

#endif
