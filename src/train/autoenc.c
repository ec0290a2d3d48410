/* The retention/capacity autoencoder on a device (autoenc.h). */
#include "train/autoenc.h"

#include <stdlib.h>
#include <string.h>

#include "ops/autoenc_ops.h"
#include "ops/ops.h"

enum { MODE_FORWARD, MODE_GRADS, MODE_STEP, N_MODES };

struct tmm_autoenc {
    tmm_device *device;
    tmm_model *enc, *dec;
    bool train_encoder;
    uint32_t batch, n, d, half, dd, rows;
    tmm_param_table lin;
    tmm_buffer *lin_params, *lin_grads;
    tmm_buffer *u, *x, *dx, *du, *dh, *scratch;
    tmm_optim *opt_enc, *opt_dec, *opt_lin;
    tmm_recorder *rec[N_MODES];
    bool recorded[N_MODES];
    bool have_batch;
    int last_run;   /* -1 none, else the mode */
};

tmm_status tmm_autoenc_config_check(const tmm_model_config *enc, const tmm_model_config *dec)
{
    TMM_TRY(tmm_model_config_check(enc));
    TMM_TRY(tmm_model_config_check(dec));
    if (enc->d_model % 2)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "autoencoder: the encoder's width d = %u must be even (the decoder "
                        "unrolls windows of d/2 channels)", enc->d_model);
    if (enc->n_ctx != dec->n_ctx)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "autoencoder: the decoder's context %u differs from the encoder's %u",
                        dec->n_ctx, enc->n_ctx);
    if (enc->vocab != dec->vocab)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "autoencoder: the decoder's vocabulary %u differs from the "
                        "encoder's %u", dec->vocab, enc->vocab);
    return TMM_OK;
}

static uint64_t align_up(uint64_t x) { return (x + TMM_PARAM_ALIGN - 1) / TMM_PARAM_ALIGN * TMM_PARAM_ALIGN; }

/* The Linear(d/2 -> d_dec)'s table: weight Kaiming (fan_in d/2), bias 0, as
 * the TMM's Linear layers (docs/model.md, Initialization). */
static tmm_status linear_table(const tmm_model_config *dec, uint32_t in, tmm_param_table *t)
{
    memset(t, 0, sizeof *t);
    if (!(t->params = calloc(2, sizeof *t->params)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    const uint32_t out = dec->d_model;
    t->config = *dec;
    t->count = 2;
    t->embed = t->head = t->final_norm_w = -1;
    tmm_param *w = &t->params[0], *b = &t->params[1];
    strcpy(w->name, "unroll.weight");
    w->ndim = 2, w->shape[0] = out, w->shape[1] = in, w->numel = (uint64_t)out * in;
    w->offset = 0, w->init = TMM_INIT_KAIMING, w->fan_in = in, w->kind = TMM_PARAM_LINEAR_WEIGHT, w->trainable = true;
    strcpy(b->name, "unroll.bias");
    b->ndim = 1, b->shape[0] = out, b->numel = out;
    b->offset = align_up(w->numel), b->init = TMM_INIT_ZERO, b->kind = TMM_PARAM_LINEAR_BIAS, b->trainable = true;
    t->arena_floats = b->offset + align_up(out);
    return TMM_OK;
}

static tmm_status make(tmm_device *dev, uint64_t floats, tmm_buffer **out)
{
    return tmm_buffer_create(dev, (floats ? floats : 1) * 4, TMM_MEMORY_DEVICE, out);
}

void tmm_autoenc_destroy(tmm_autoenc *a)
{
    if (!a)
        return;
    for (int k = 0; k < N_MODES; k++)
        tmm_recorder_destroy(a->rec[k]);
    tmm_optim_destroy(a->opt_enc);
    tmm_optim_destroy(a->opt_dec);
    tmm_optim_destroy(a->opt_lin);
    tmm_buffer *all[] = { a->lin_params, a->lin_grads, a->u, a->x, a->dx, a->du, a->dh, a->scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    tmm_model_destroy(a->enc);
    tmm_model_destroy(a->dec);
    tmm_param_table_free(&a->lin);
    free(a);
}

tmm_status tmm_autoenc_create(tmm_device *dev, const tmm_model_config *encoder, const tmm_model_config *decoder,
                              uint32_t batch, bool train_encoder, const tmm_optim_config *optim, tmm_autoenc **out)
{
    *out = NULL;
    TMM_TRY(tmm_autoenc_config_check(encoder, decoder));
    TMM_TRY(tmm_unroll_check(batch, encoder->n_ctx, encoder->n_ctx - 1, encoder->d_model, encoder->n_ctx));
    if (optim)
        TMM_TRY(tmm_optim_config_check(optim));
    tmm_autoenc *a = calloc(1, sizeof *a);
    if (!a)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    a->device = dev;
    a->train_encoder = train_encoder;
    a->batch = batch, a->n = encoder->n_ctx, a->d = encoder->d_model, a->half = a->d / 2;
    a->dd = decoder->d_model, a->rows = batch * a->n;
    a->last_run = -1;
    const uint64_t N = a->rows;
    float *arena = NULL;
    tmm_status s = linear_table(decoder, a->half, &a->lin);
    if (s == TMM_OK)
        s = tmm_model_create(dev, encoder, batch, &a->enc);
    if (s == TMM_OK)
        s = tmm_model_create(dev, decoder, batch, &a->dec);
    if (s == TMM_OK)
        s = make(dev, a->lin.arena_floats, &a->lin_params);
    if (s == TMM_OK)
        s = make(dev, a->lin.arena_floats, &a->lin_grads);
    if (s == TMM_OK)
        s = make(dev, N * a->half, &a->u);
    if (s == TMM_OK)
        s = make(dev, N * a->dd, &a->x);
    if (s == TMM_OK)
        s = make(dev, N * a->dd, &a->dx);
    if (s == TMM_OK)
        s = make(dev, tmm_op_sum_cols_scratch((uint32_t)N, a->dd), &a->scratch);
    if (s == TMM_OK && train_encoder)
        s = make(dev, N * a->half, &a->du);
    if (s == TMM_OK && train_encoder)
        s = make(dev, N * a->d, &a->dh);
    if (s == TMM_OK && !(arena = calloc(a->lin.arena_floats, sizeof *arena)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        s = tmm_buffer_write(a->lin_grads, 0, arena, a->lin.arena_floats * 4);
    if (s == TMM_OK) {
        tmm_param_init(&a->lin, arena);
        s = tmm_buffer_write(a->lin_params, 0, arena, a->lin.arena_floats * 4);
    }
    free(arena);
    if (s == TMM_OK)
        s = tmm_model_set_encoder(a->enc, true, train_encoder ? tmm_whole(a->dh) : (tmm_view){ 0 });
    if (s == TMM_OK)
        s = tmm_model_set_input(a->dec, tmm_whole(a->x), tmm_whole(a->dx));
    if (s == TMM_OK && optim)
        s = tmm_optim_create(dev, tmm_model_table(a->dec), optim, &a->opt_dec);
    if (s == TMM_OK && optim)
        s = tmm_optim_create(dev, &a->lin, optim, &a->opt_lin);
    if (s == TMM_OK && optim && train_encoder)
        s = tmm_optim_create(dev, tmm_model_table(a->enc), optim, &a->opt_enc);
    for (int k = 0; k < N_MODES && s == TMM_OK; k++)
        s = tmm_recorder_create(dev, &a->rec[k]);
    if (s != TMM_OK) {
        tmm_autoenc_destroy(a);
        return s;
    }
    *out = a;
    return TMM_OK;
}

tmm_model *tmm_autoenc_encoder(tmm_autoenc *a) { return a->enc; }
tmm_model *tmm_autoenc_decoder(tmm_autoenc *a) { return a->dec; }
const tmm_param_table *tmm_autoenc_linear_table(const tmm_autoenc *a) { return &a->lin; }

tmm_status tmm_autoenc_write_linear(tmm_autoenc *a, const float *arena)
{
    return tmm_buffer_write(a->lin_params, 0, arena, a->lin.arena_floats * 4);
}

tmm_status tmm_autoenc_read_linear(tmm_autoenc *a, float *arena)
{
    return tmm_buffer_read(a->lin_params, 0, arena, a->lin.arena_floats * 4);
}

tmm_status tmm_autoenc_read_linear_grads(tmm_autoenc *a, float *arena)
{
    return tmm_buffer_read(a->lin_grads, 0, arena, a->lin.arena_floats * 4);
}

tmm_status tmm_autoenc_set_batch(tmm_autoenc *a, const uint32_t *tokens)
{
    int32_t *targets = malloc((size_t)a->rows * sizeof *targets);
    if (!targets)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t r = 0; r < a->rows; r++)
        targets[r] = -1; /* the encoder scores nothing */
    tmm_status s = tmm_model_set_batch(a->enc, tokens, targets);
    for (uint32_t r = 0; r < a->rows; r++)
        targets[r] = (int32_t)tokens[r];
    if (s == TMM_OK)
        s = tmm_model_set_batch(a->dec, tokens, targets);
    free(targets);
    a->have_batch = s == TMM_OK;
    return s;
}

static tmm_view lin_w(tmm_buffer *b, const tmm_param_table *t)
{
    return tmm_sub(b, t->params[0].offset * 4, t->params[0].numel * 4);
}

static tmm_view lin_b(tmm_buffer *b, const tmm_param_table *t)
{
    return tmm_sub(b, t->params[1].offset * 4, t->params[1].numel * 4);
}

static tmm_status record(tmm_autoenc *a, int mode)
{
    tmm_recorder *r = a->rec[mode];
    const bool backward = mode != MODE_FORWARD;
    const uint32_t N = a->rows;
    TMM_TRY(tmm_recorder_begin(r));
    TMM_TRY(tmm_model_record(a->enc, r, false));
    TMM_TRY(tmm_op_unroll_forward(r, tmm_model_hidden(a->enc), a->batch, a->n, a->n - 1, a->d, a->n, tmm_whole(a->u)));
    TMM_TRY(tmm_op_linear(r, tmm_whole(a->u), N, a->half, a->dd, lin_w(a->lin_params, &a->lin),
                          lin_b(a->lin_params, &a->lin), tmm_whole(a->x), false));
    TMM_TRY(tmm_model_record(a->dec, r, backward));
    if (backward) {
        TMM_TRY(tmm_op_linear_dw(r, tmm_whole(a->dx), tmm_whole(a->u), N, a->half, a->dd,
                                 lin_w(a->lin_grads, &a->lin), false));
        TMM_TRY(tmm_op_sum_cols(r, tmm_whole(a->dx), N, a->dd, tmm_whole(a->scratch), lin_b(a->lin_grads, &a->lin)));
        if (a->train_encoder) {
            TMM_TRY(tmm_op_linear_dx(r, tmm_whole(a->dx), N, a->half, a->dd, lin_w(a->lin_params, &a->lin),
                                     tmm_whole(a->du), false));
            TMM_TRY(tmm_op_unroll_backward(r, tmm_whole(a->du), a->batch, a->n, a->n - 1, a->d, a->n,
                                           tmm_whole(a->dh)));
            TMM_TRY(tmm_model_record_backward(a->enc, r));
        }
    }
    if (mode == MODE_STEP) {
        TMM_TRY(tmm_optim_record(a->opt_dec, r, tmm_whole(tmm_model_param_buffer(a->dec)),
                                 tmm_whole(tmm_model_grad_buffer(a->dec))));
        TMM_TRY(tmm_optim_record(a->opt_lin, r, tmm_whole(a->lin_params), tmm_whole(a->lin_grads)));
        if (a->train_encoder)
            TMM_TRY(tmm_optim_record(a->opt_enc, r, tmm_whole(tmm_model_param_buffer(a->enc)),
                                     tmm_whole(tmm_model_grad_buffer(a->enc))));
    }
    TMM_TRY(tmm_recorder_end(r));
    a->recorded[mode] = true;
    return TMM_OK;
}

static tmm_status run_mode(tmm_autoenc *a, int mode)
{
    if (!a->have_batch)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "autoencoder run before tmm_autoenc_set_batch");
    if (!a->recorded[mode])
        TMM_TRY(record(a, mode));
    a->last_run = -1;
    TMM_TRY(tmm_recorder_run(a->rec[mode]));
    tmm_model_mark_run(a->enc, false);
    tmm_model_mark_run(a->dec, mode != MODE_FORWARD);
    a->last_run = mode;
    return TMM_OK;
}

tmm_status tmm_autoenc_run(tmm_autoenc *a, bool backward)
{
    return run_mode(a, backward ? MODE_GRADS : MODE_FORWARD);
}

tmm_status tmm_autoenc_step(tmm_autoenc *a, uint32_t step, double lr)
{
    if (!a->opt_dec)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "autoencoder: a training step needs an optimizer config at create");
    if (step == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "autoencoder: steps count from 1");
    TMM_TRY(tmm_optim_set_step(a->opt_dec, step, lr));
    TMM_TRY(tmm_optim_set_step(a->opt_lin, step, lr));
    if (a->opt_enc)
        TMM_TRY(tmm_optim_set_step(a->opt_enc, step, lr));
    return run_mode(a, MODE_STEP);
}

tmm_status tmm_autoenc_loss(tmm_autoenc *a, float *loss)
{
    if (a->last_run < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no finished autoencoder run to read a loss from");
    return tmm_model_loss(a->dec, loss);
}

tmm_status tmm_autoenc_argmax(tmm_autoenc *a, uint32_t *argmax)
{
    if (a->last_run < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no finished autoencoder run to read predictions from");
    return tmm_model_argmax(a->dec, argmax);
}
