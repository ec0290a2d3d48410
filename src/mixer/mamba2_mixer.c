/* Mamba 2's mixer (mamba2_mixer.h, docs/baselines.md section 5) on the
 * device: the config rules, the tensors, training and cached decoding.
 *
 * Forward, rows = B n (position-major), one dispatch chain per layer:
 *     z   = x Wzᵀ       [rows, di]     Wz, Wxbc, Wdtr: the row blocks of
 *     xbc = x Wxbcᵀ     [rows, conv]   in_proj.weight (three matmuls on
 *     dtr = x Wdtrᵀ     [rows, nh]     row sub-views of the weight)
 *     pre = conv4(xbc) + conv_bias     (ops/ssm_ops.h conv1d)
 *     xa  = silu(pre)                  (nn_ops.h bias_silu with a zero bias)
 *     dt  = softplus(dtr + dt_bias)
 *     y   = SSD(xa, dt, A_log, D)      (ops/ssd.h, chunked, Q = TMM_SSD_CHUNK)
 *     g   = y ⊙ silu(z)
 *     yn  = RMSNorm(g) ⊙ gn            (eps 1e-5; rstd saved)
 *     h  += yn Woutᵀ
 * The SiLU is a separate op rather than the conv's fused one: the fused
 * backward recomputes pre K times per element (K + 1 loads and an exp each),
 * which made the conv's backward 2x slower than SiLU's backward from the
 * kept pre plus a plain conv backward (measured on lavapipe, d 256, n 1024).
 * Activations kept per layer: z, xbc, dtr, pre, xa, dt, y, g, yn, rstd and
 * the SSD's saved workspace (about rows (4 di + 3 conv + 2 nh + 1) floats
 * plus tmm_ssd_saved_floats). The backward runs the chain in reverse through
 * a workspace shared by the layers: wa [rows, conv] (dL/dyn, dL/dg, dL/dy in
 * place, later dL/dxbc), wz [rows, di] (dL/dz), wx [rows, conv] (dL/dxa,
 * then dL/dpre in place), wt [rows, nh] (dL/ddt, then dL/ddtr in place), and
 * the SiLU's zero bias and its unused gradient [conv]; dL/dx lands in tmp[0].
 * Every parameter gradient is written (not accumulated): each tensor is
 * touched by exactly one op per step. The model's shared scratch serves the
 * SSD backward, the norm, the conv and the softplus in turn.
 *
 * Decoding (O(nh P N + d (in + di)) per token, the same at every position):
 * per layer the SSD state S [B, nh, P, N] and the conv window [B, 3, conv]
 * (the last three xbc inputs, oldest first). A step: the three projections
 * (the decode row kernel where a weight block starts at an aligned offset,
 * else a matmul), conv1d step (+ SiLU, the window shifted; position 0 reads
 * zeros), softplus, SSD step (S updated in place), the gate, the norm and
 * h += yn Woutᵀ: about 9 dispatches per layer. Prefill: the window from the
 * prompt's xbc (conv1d fill) and S from the prompt's xa, dt
 * (tmm_op_ssd_state), taken from the forward of whichever model ran it: a
 * shorter-context model works unchanged, nothing here depends on n. The state
 * op's workspace is that model's SSD saved buffer (its first regions: the
 * state op rewrites them with the same values the forward left there).
 *
 * Limits: the SSD's (P, N, nh at most 256 each; checked with the config). */
#include "mixer/mamba2_mixer.h"

#include <stdio.h>
#include <stdlib.h>

#include "mixer/mixer_common.h"
#include "ops/decode_ops.h"
#include "ops/op_util.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/ssd.h"
#include "ops/ssm_ops.h"

tmm_mamba2_dims tmm_mamba2_dims_of(const tmm_model_config *c)
{
    tmm_mamba2_dims m = { .d = c->d_model, .di = 2 * c->d_model, .heads = c->heads, .N = c->state };
    m.P = m.heads ? m.di / m.heads : 0;
    m.conv = m.di + 2 * m.N;
    m.in = 2 * m.di + 2 * m.N + m.heads;
    return m;
}

static tmm_status check(const tmm_model_config *c)
{
    if (c->heads == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2 needs heads >= 1 (--heads)");
    if ((2 * c->d_model) % c->heads)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2's inner width 2·d_model (%u) must be a multiple of heads (%u)",
                        2 * c->d_model, c->heads);
    if (c->state == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2 needs state >= 1 (--state)");
    const tmm_mamba2_dims m = tmm_mamba2_dims_of(c);
    if ((uint64_t)m.in * m.d > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    if (m.P > TMM_SSD_MAX_HEAD_DIM)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2's head width 2·d_model/heads is %u; the SSD op takes at "
                        "most %u (more --heads)", m.P, TMM_SSD_MAX_HEAD_DIM);
    if (m.heads > TMM_SSD_MAX_HEADS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2 has %u heads; the SSD op takes at most %u", m.heads,
                        TMM_SSD_MAX_HEADS);
    if (m.N > TMM_SSD_MAX_STATE)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "mamba2's state is %u; the SSD op takes at most %u (--state)", m.N,
                        TMM_SSD_MAX_STATE);
    return TMM_OK;
}

static void declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx)
{
    const tmm_mamba2_dims m = tmm_mamba2_dims_of(c);
    const uint32_t K = TMM_MAMBA2_CONV_TAPS;
    /* Win, Wout and the conv: PyTorch's defaults, U(±1/sqrt(fan_in)) */
    const tmm_param_spec in_w = { 2, { m.in, m.d }, TMM_INIT_UNIFORM, m.d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec conv_w = { 2, { m.conv, K }, TMM_INIT_UNIFORM, K, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec conv_b = { 1, { m.conv }, TMM_INIT_UNIFORM, K, TMM_PARAM_LINEAR_BIAS, true };
    /* per head; no weight decay, as mamba_ssm's */
    const tmm_param_spec dt_bias = { 1, { m.heads }, TMM_INIT_DT_BIAS, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec a_log = { 1, { m.heads }, TMM_INIT_A_LOG, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec D = { 1, { m.heads }, TMM_INIT_ONE, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec gn = { 1, { m.di }, TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true };
    const tmm_param_spec out_w = { 2, { m.d, m.di }, TMM_INIT_UNIFORM, m.di, TMM_PARAM_LINEAR_WEIGHT, true };
    idx[TMM_M2_IN_W] = tmm_param_add(b, l, "mamba.in_proj.weight", in_w);
    idx[TMM_M2_CONV_W] = tmm_param_add(b, l, "mamba.conv1d.weight", conv_w);
    idx[TMM_M2_CONV_B] = tmm_param_add(b, l, "mamba.conv1d.bias", conv_b);
    idx[TMM_M2_DT_BIAS] = tmm_param_add(b, l, "mamba.dt_bias", dt_bias);
    idx[TMM_M2_A_LOG] = tmm_param_add(b, l, "mamba.A_log", a_log);
    idx[TMM_M2_D] = tmm_param_add(b, l, "mamba.D", D);
    idx[TMM_M2_NORM_W] = tmm_param_add(b, l, "mamba.norm.weight", gn);
    idx[TMM_M2_OUT_W] = tmm_param_add(b, l, "mamba.out_proj.weight", out_w);
}

/* ---- training ------------------------------------------------------------- */

typedef struct m2_layer {
    tmm_buffer *z, *xbc, *dtr, *pre, *xa, *dt, *y, *g, *yn, *rstd, *saved;
} m2_layer;

typedef struct m2_mixer {
    tmm_mixer base;
    tmm_mamba2_dims dm;
    m2_layer *layers;
    tmm_buffer *wa, *wz, *wx, *wt;   /* backward workspace (see above) */
    tmm_buffer *zeros, *dummy;       /* [conv]: the SiLU's zero bias and its unused gradient */
} m2_mixer;

enum { KC = TMM_MAMBA2_CONV_TAPS };

static const tmm_view none = { 0 };

static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }

static const tmm_model_config *config_of(const m2_mixer *m) { return &m->base.s.table->config; }

static tmm_ssd_desc desc_of(const m2_mixer *m, uint32_t batch, uint32_t n)
{
    return (tmm_ssd_desc){ .batch = batch, .n = n, .heads = m->dm.heads, .head_dim = m->dm.P, .state = m->dm.N };
}

/* The three row blocks of in_proj.weight [in, d] (or of its gradient):
 * z [0, di), xbc [di, di + conv), dtr [di + conv, in). */
typedef struct in_blocks {
    tmm_view z, xbc, dtr;
} in_blocks;

static in_blocks blocks_of(const m2_mixer *m, tmm_view w)
{
    const uint64_t d = m->dm.d, di = m->dm.di, conv = m->dm.conv;
    return (in_blocks){ tmm_op_sub(w, 0, di * d), tmm_op_sub(w, di * d, conv * d),
                        tmm_op_sub(w, (di + conv) * d, (uint64_t)m->dm.heads * d) };
}

static tmm_view P(const m2_mixer *m, uint32_t l, int which) { return tmm_mixer_param(&m->base, l, which); }
static tmm_view G(const m2_mixer *m, uint32_t l, int which) { return tmm_mixer_grad(&m->base, l, which); }
static tmm_view W(const m2_mixer *m, uint32_t l, int which) { return tmm_mixer_weight(&m->base, l, which); }

static void destroy(tmm_mixer *base)
{
    m2_mixer *m = (m2_mixer *)base;
    if (!m)
        return;
    for (uint32_t l = 0; m->layers && l < base->s.act_sets; l++) {
        const m2_layer *a = &m->layers[l];
        tmm_buffer *const acts[] = { a->z, a->xbc, a->dtr, a->pre, a->xa, a->dt, a->y, a->g, a->yn, a->rstd, a->saved };
        tmm_mixer_buffers_destroy(acts, sizeof acts / sizeof acts[0]);
    }
    tmm_buffer *const work[] = { m->wa, m->wz, m->wx, m->wt, m->zeros, m->dummy };
    tmm_mixer_buffers_destroy(work, sizeof work / sizeof work[0]);
    free(m->layers);
    free(m);
}

/* Activations and workspace, through the model's allocation (a dry run counts them). */
static tmm_status allocate(tmm_mixer *base)
{
    m2_mixer *m = (m2_mixer *)base;
    m->dm = tmm_mamba2_dims_of(config_of(m));
    const tmm_allocation *al = base->s.alloc;
    const uint64_t rows = base->rows, di = m->dm.di, conv = m->dm.conv, nh = m->dm.heads;
    const tmm_ssd_desc sd = desc_of(m, base->s.batch, config_of(m)->n_ctx);
    TMM_TRY(tmm_ssd_check(NULL, &sd));
    if (!(m->layers = calloc(base->s.act_sets, sizeof *m->layers)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < base->s.act_sets; l++) {
        m2_layer *a = &m->layers[l];
        struct { tmm_buffer **b; uint64_t floats; } acts[] = {
            { &a->z, rows * di },   { &a->xbc, rows * conv }, { &a->dtr, rows * nh }, { &a->pre, rows * conv },
            { &a->xa, rows * conv }, { &a->dt, rows * nh },   { &a->y, rows * di },   { &a->g, rows * di },
            { &a->yn, rows * di },  { &a->rstd, rows },       { &a->saved, tmm_ssd_saved_floats(&sd) },
        };
        for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
            TMM_TRY(tmm_alloc_act(al, l, acts[i].b, acts[i].floats));
    }
    TMM_TRY(tmm_alloc(al, &m->wa, rows * conv, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->wz, rows * di, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->wx, rows * conv, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->wt, rows * nh, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->zeros, conv, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->dummy, conv, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    return al->dry ? TMM_OK : tmm_mixer_write_zeros(m->zeros, conv);
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    return tmm_mixer_create(&tmm_mamba2_mixer, s, sizeof(m2_mixer), allocate, out);
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static uint64_t scratch_floats(const tmm_mixer *base)
{
    const m2_mixer *m = (const m2_mixer *)base;
    const uint32_t rows = base->rows, n = config_of(m)->n_ctx, B = base->s.batch;
    const tmm_ssd_desc sd = desc_of(m, B, n);
    uint64_t s = tmm_ssd_backward_scratch_floats(&sd);
    s = max_u64(s, tmm_op_rmsnorm_forward_scratch(rows, m->dm.di));
    s = max_u64(s, tmm_op_rmsnorm_backward_scratch(rows, m->dm.di));
    s = max_u64(s, tmm_op_conv1d_backward_scratch(B, n, m->dm.conv, KC, false));
    s = max_u64(s, tmm_op_bias_silu_backward_scratch(rows, m->dm.conv));
    return max_u64(s, tmm_op_softplus_backward_scratch(rows, m->dm.heads));
}

static tmm_status forward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view h)
{
    m2_mixer *m = (m2_mixer *)base;
    const tmm_mamba2_dims dm = m->dm;
    const uint32_t rows = base->rows, n = config_of(m)->n_ctx, B = base->s.batch;
    const tmm_ssd_desc sd = desc_of(m, B, n);
    tmm_recorder *r = rec->r;
    m2_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    const in_blocks w = blocks_of(m, W(m, l, TMM_M2_IN_W));
    TMM_REC_OP(rec, "matmul", tmm_op_linear(r, x, rows, dm.d, dm.di, w.z, none, A(a->z), false));
    TMM_REC_OP(rec, "matmul", tmm_op_linear(r, x, rows, dm.d, dm.conv, w.xbc, none, A(a->xbc), false));
    TMM_REC_OP(rec, "matmul", tmm_op_linear(r, x, rows, dm.d, dm.heads, w.dtr, none, A(a->dtr), false));
    TMM_REC_OP(rec, "conv1d", tmm_op_conv1d_forward(r, A(a->xbc), P(m, l, TMM_M2_CONV_W), P(m, l, TMM_M2_CONV_B), B, n,
                                                    dm.conv, KC, false, A(a->pre)));
    TMM_REC_OP(rec, "silu", tmm_op_bias_silu_forward(r, A(a->pre), A(m->zeros), rows, dm.conv, A(a->xa)));
    TMM_REC_OP(rec, "softplus", tmm_op_softplus_forward(r, A(a->dtr), P(m, l, TMM_M2_DT_BIAS), rows, dm.heads,
                                                        A(a->dt)));
    TMM_REC_OP(rec, "ssd", tmm_op_ssd_forward(r, &sd, A(a->xa), A(a->dt), P(m, l, TMM_M2_A_LOG), P(m, l, TMM_M2_D),
                                              A(a->y), A(a->saved)));
    TMM_REC_OP(rec, "gate", tmm_op_gate_silu_forward(r, A(a->y), A(a->z), rows, dm.di, A(a->g)));
    TMM_REC_OP(rec, "rmsnorm", tmm_op_rmsnorm_forward(r, A(a->g), P(m, l, TMM_M2_NORM_W), rows, dm.di,
                                                      (float)TMM_MAMBA2_NORM_EPS, rec->scratch, A(a->yn),
                                                      A(a->rstd)));
    TMM_REC_OP(rec, "matmul", tmm_op_linear(r, A(a->yn), rows, dm.di, dm.d, W(m, l, TMM_M2_OUT_W), none, h, true));
    return TMM_OK;
}

static tmm_status backward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dh,
                           const tmm_view tmp[2], tmm_view *dx)
{
    m2_mixer *m = (m2_mixer *)base;
    const tmm_mamba2_dims dm = m->dm;
    const uint32_t rows = base->rows, n = config_of(m)->n_ctx, B = base->s.batch;
    const tmm_ssd_desc sd = desc_of(m, B, n);
    tmm_recorder *r = rec->r;
    m2_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    const uint64_t rdi = (uint64_t)rows * dm.di;
    /* wa holds [rows, di] gradients first, dL/dxbc [rows, conv] last */
    const tmm_view wdi = tmm_sub(m->wa, 0, rdi * 4), wa = A(m->wa), wz = A(m->wz), wx = A(m->wx), wt = A(m->wt);

    /* h += yn Woutᵀ */
    TMM_REC_OP(rec, "matmul bwd",
               tmm_op_linear_dw(r, dh, A(a->yn), rows, dm.di, dm.d, G(m, l, TMM_M2_OUT_W), rec->half_dw));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, dh, rows, dm.di, dm.d, W(m, l, TMM_M2_OUT_W), wdi, false));
    /* yn = RMSNorm(g) ⊙ gn, g = y ⊙ silu(z) */
    TMM_REC_OP(rec, "rmsnorm bwd", tmm_op_rmsnorm_backward(r, A(a->g), P(m, l, TMM_M2_NORM_W), A(a->rstd), wdi, rows,
                                                           dm.di, false, rec->scratch, wdi, G(m, l, TMM_M2_NORM_W)));
    TMM_REC_OP(rec, "gate bwd", tmm_op_gate_silu_backward(r, A(a->y), A(a->z), wdi, rows, dm.di, wdi, wz));
    /* the scan */
    TMM_REC_OP(rec, "ssd bwd", tmm_op_ssd_backward(r, &sd, A(a->xa), A(a->dt), P(m, l, TMM_M2_A_LOG),
                                                   P(m, l, TMM_M2_D), A(a->saved), wdi, rec->scratch, wx, wt,
                                                   G(m, l, TMM_M2_A_LOG), G(m, l, TMM_M2_D), false));
    /* dt = softplus(dtr + dt_bias), xa = silu(conv(xbc)) */
    TMM_REC_OP(rec, "softplus bwd", tmm_op_softplus_backward(r, A(a->dtr), P(m, l, TMM_M2_DT_BIAS), wt, rows,
                                                             dm.heads, false, rec->scratch, wt,
                                                             G(m, l, TMM_M2_DT_BIAS)));
    TMM_REC_OP(rec, "silu bwd", tmm_op_bias_silu_backward(r, A(a->pre), A(m->zeros), wx, rows, dm.conv, false,
                                                          rec->scratch, wx, A(m->dummy)));
    TMM_REC_OP(rec, "conv1d bwd", tmm_op_conv1d_backward(r, A(a->xbc), P(m, l, TMM_M2_CONV_W), P(m, l, TMM_M2_CONV_B),
                                                         wx, B, n, dm.conv, KC, false, false, rec->scratch, wa,
                                                         G(m, l, TMM_M2_CONV_W), G(m, l, TMM_M2_CONV_B)));
    /* the in-projection's three blocks */
    const in_blocks w = blocks_of(m, W(m, l, TMM_M2_IN_W)), dw = blocks_of(m, G(m, l, TMM_M2_IN_W));
    const tmm_view grads[3] = { wz, wa, wt }, ws[3] = { w.z, w.xbc, w.dtr }, dws[3] = { dw.z, dw.xbc, dw.dtr };
    const uint32_t outs[3] = { dm.di, dm.conv, dm.heads };
    *dx = tmp[0];
    for (int i = 0; i < 3; i++) {
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, grads[i], x, rows, dm.d, outs[i], dws[i], rec->half_dw));
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, grads[i], rows, dm.d, outs[i], ws[i], *dx, i > 0));
    }
    return TMM_OK;
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct m2_decoder {
    m2_mixer *m;
    tmm_buffer **S, **win;                 /* per layer: [B, nh, P, N], [B, 3, conv] */
    tmm_buffer *in, *y, *rstd;             /* one position: z, xbc, dt; [B, di], [B] */
    tmm_view z, xbc, dt;                   /* in's [B, di], [B, conv], [B, nh], each at an aligned offset */
    tmm_buffer *scratch;                   /* the norm's (di > TMM_RMSNORM_CHUNK) */
} m2_decoder;

static void decoder_destroy(tmm_mixer_decoder *dd)
{
    m2_decoder *dec = (m2_decoder *)dd;
    if (!dec)
        return;
    const uint32_t L = config_of(dec->m)->n_layers;
    tmm_mixer_layer_buffers_free(dec->S, L), tmm_mixer_layer_buffers_free(dec->win, L);
    tmm_buffer *const step[] = { dec->in, dec->y, dec->rstd, dec->scratch };
    tmm_mixer_buffers_destroy(step, sizeof step / sizeof step[0]);
    free(dec);
}

static tmm_status decoder_create(tmm_mixer *base, const tmm_view *x, tmm_mixer_decoder **out)
{
    (void)x;
    *out = NULL;
    m2_mixer *m = (m2_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const tmm_mamba2_dims dm = m->dm;
    tmm_device *dev = base->s.alloc->device;
    const uint64_t B = base->s.batch;
    m2_decoder *dec = calloc(1, sizeof *dec);
    if (!dec)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    dec->m = m;
    /* z, xbc and dt in one buffer: the in-projection's outputs, one dispatch */
    const uint64_t align = tmm_op_offset_align(dev) / 4, sizes[3] = { B * dm.di, B * dm.conv, B * dm.heads };
    uint64_t at[4] = { 0 };
    for (int i = 0; i < 3; i++)
        at[i + 1] = at[i] + (sizes[i] + align - 1) / align * align;
    const tmm_buffer_spec step[] = {
        { &dec->in, at[3] }, { &dec->y, B * dm.di }, { &dec->rstd, B },
        { &dec->scratch, tmm_op_rmsnorm_forward_scratch((uint32_t)B, dm.di) },
    };
    tmm_status s = tmm_mixer_buffers_create(dev, step, sizeof step / sizeof step[0]);
    tmm_view *views[3] = { &dec->z, &dec->xbc, &dec->dt };
    for (int i = 0; s == TMM_OK && i < 3; i++)
        *views[i] = tmm_sub(dec->in, at[i] * 4, sizes[i] * 4);
    if (s == TMM_OK)
        s = tmm_mixer_layer_buffers(dev, c->n_layers, B * dm.heads * dm.P * dm.N, &dec->S);
    if (s == TMM_OK)
        s = tmm_mixer_layer_buffers(dev, c->n_layers, B * (KC - 1) * dm.conv, &dec->win);
    return tmm_mixer_decoder_done(base, (tmm_mixer_decoder *)dec, s, out);
}

/* The state after the prompts: the conv window from src's xbc, S from its xa and dt. */
static tmm_status record_prefill(tmm_mixer_decoder *dd, tmm_recorder *r, tmm_mixer *src_base, const tmm_view *src_x,
                                 tmm_view len)
{
    (void)src_x;
    m2_decoder *dec = (m2_decoder *)dd;
    m2_mixer *src = (m2_mixer *)src_base;
    const uint32_t ns = config_of(src)->n_ctx, B = src->base.s.batch;
    const tmm_ssd_desc sd = desc_of(src, B, ns);
    for (uint32_t l = 0; l < config_of(dec->m)->n_layers; l++) {
        const m2_layer *a = &src->layers[l];
        TMM_TRY(tmm_op_conv1d_fill(r, A(a->xbc), len, B, ns, src->dm.conv, KC, A(dec->win[l])));
        TMM_TRY(tmm_op_ssd_state(r, &sd, len, A(a->xa), A(a->dt), P(src, l, TMM_M2_A_LOG), A(a->saved),
                                 A(dec->S[l])));
    }
    return TMM_OK;
}

static tmm_status record_step(tmm_mixer_decoder *dd, const tmm_rec *rec, uint32_t l, tmm_view pos, tmm_view x,
                              tmm_view h)
{
    m2_decoder *dec = (m2_decoder *)dd;
    m2_mixer *m = dec->m;
    const tmm_mamba2_dims dm = m->dm;
    const uint32_t B = m->base.s.batch;
    const tmm_ssd_desc sd = desc_of(m, B, 1);
    tmm_recorder *r = rec->r;
    const in_blocks w = blocks_of(m, P(m, l, TMM_M2_IN_W));
    /* z, xbc and dt = softplus(x Wdtᵀ + dt_bias) in one dispatch */
    const tmm_row_group g[3] = { { w.z, none, dec->z, dm.di, TMM_ROW_ACT_NONE },
                                 { w.xbc, none, dec->xbc, dm.conv, TMM_ROW_ACT_NONE },
                                 { w.dtr, P(m, l, TMM_M2_DT_BIAS), dec->dt, dm.heads, TMM_ROW_ACT_SOFTPLUS } };
    TMM_TRY(tmm_op_linear_rows_group(r, x, B, dm.d, g, 3, NULL, none));
    TMM_TRY(tmm_op_conv1d_step(r, dec->xbc, P(m, l, TMM_M2_CONV_W), P(m, l, TMM_M2_CONV_B), pos, B, dm.conv, KC,
                               true, A(dec->win[l]), dec->xbc));
    TMM_TRY(tmm_op_ssd_step(r, &sd, dec->xbc, dec->dt, P(m, l, TMM_M2_A_LOG), P(m, l, TMM_M2_D),
                            A(dec->S[l]), A(dec->y)));
    TMM_TRY(tmm_op_rmsnorm_gate_step(r, A(dec->y), dec->z, P(m, l, TMM_M2_NORM_W), B, dm.di,
                                     (float)TMM_MAMBA2_NORM_EPS, A(dec->scratch), A(dec->rstd), A(dec->y)));
    return tmm_op_linear_rows(r, A(dec->y), B, dm.di, dm.d, P(m, l, TMM_M2_OUT_W), none, h, true);
}

/* The SSM state S (running) and the conv window (the inputs of the last
 * positions: conv1d_step reads those before position 0 as 0) of every layer. */
static uint32_t state_parts(tmm_mixer_decoder *dd, tmm_decoder_part *parts, uint32_t max)
{
    m2_decoder *dec = (m2_decoder *)dd;
    const tmm_mamba2_dims dm = dec->m->dm;
    uint32_t n = 0;
    for (uint32_t l = 0; l < config_of(dec->m)->n_layers; l++) {
        tmm_decoder_part_add(parts, max, &n, A(dec->S[l]), (uint64_t)dm.heads * dm.P * dm.N * 4, true);
        tmm_decoder_part_add(parts, max, &n, A(dec->win[l]), (uint64_t)(KC - 1) * dm.conv * 4, false);
    }
    return n;
}

/* The SSD's state update and read-out over the 2d inner channels. */
static double flops(const tmm_model_config *c, uint64_t *per_step)
{
    *per_step = 0;
    return 4.0 * (2.0 * c->d_model) * c->state;
}

static void describe(const tmm_model_config *c, char *buf, size_t size)
{
    snprintf(buf, size, "heads %u, state %u", c->heads, c->state);
}

const tmm_mixer_class tmm_mamba2_mixer = {
    TMM_MIXER_SLOTS,
    .declare = declare,
    .state_parts = state_parts,
};
