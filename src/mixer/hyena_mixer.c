/* Hyena's mixer (hyena_mixer.h, docs/baselines.md section 4): the config
 * rules, the tensors, the fixed features, and the device mixer.
 *
 * Forward of layer l (N = B n rows, position-major; parts p = 0, 1, 2 are
 * x0, x1, v, the d-row blocks of in_proj and short_conv):
 *     u_p  = x · Win_pᵀ + bin_p                  matmul from row views of in_proj  [N, d] each
 *     c_p  = ShortConv3_p(u_p)                   conv1d (taps, bias: rows of short_conv)
 *     w    = c_2 ⊙ c_1                           gate_mul
 *     y1   = Toeplitz(w; hfT, beta = 0)          G = d groups of one channel, K = 1 (direct or FFT)
 *     h   += (y1 ⊙ c_0) · Woutᵀ + bout           gate_mul, matmul accumulating into h
 * with the long filter, computed once per forward (it depends on no batch):
 *     p_k  = a_{k-1} · A_kᵀ (a_0 = z [n, 3]), a_k = sin(ω_k ⊙ (p_k + c_k))  [n, 64], k = 1..3
 *     hfT  = (A4 · a_3ᵀ) ⊙ decayT + D · e0ᵀ      [d, n]: the Toeplitz op's w [G = d, K = 1, n]
 * The skip term D ⊙ w is folded into the filter's lag 0 (e0 = [1, 0, 0, ...],
 * decay at t = 0 is exactly 1): hf'[c, 0] = hf[c, 0] + D[c] gives
 * Σ_{s<=t} hf'[t-s, c] w[s, c] = (hf * w)[t, c] + D[c] w[t, c], so one
 * Toeplitz op computes the whole long convolution and dD = dhf'[:, 0].
 * z [n, 3], decayT [d, n] (tmm_hyena_features, tmm_hyena_decay, computed in
 * double for positions normalized by n_pos - 1), e0 and the zero beta are
 * fixed tables uploaded at creation. The Toeplitz op runs direct or through
 * an FFT plan as the model's impl says; AUTO takes the FFT path from a
 * quarter of the device's measured crossover (HY_DIRECT_SLOWDOWN below says why).
 *
 * Kept per layer: u_p, c_p, w, y1 [N, d]; p_k, a_k [n, 64]; hfT [d, n].
 * Workspace: two [N, d] buffers (the gate product y1 ⊙ c_0, recomputed in
 * the backward, and the backward's dx), dhfT [d, n], two [n, 64] for the
 * filter's backward, and a staging area for the short conv's parameters.
 *
 * Backward: the reverse of the above, every tensor's gradient written (not
 * accumulated) once: out_proj (matmul, column sums), the gates, the
 * Toeplitz op's du and dw = dhfT (its dbeta goes to a free [N, d] buffer
 * and is dropped), then dD = dhfT · e0, through the decay (gate_mul
 * backward with the fixed table), dA4 = dhrawT · a_3, da_3 = dhrawTᵀ · A4,
 * the three sine layers (dω_k, dc_k) and dA_k; then per part the short conv
 * (dtaps, dbias) and in_proj (dWin_p, dbin_p, dx summed over the parts).
 *
 * The conv1d op binds its taps and bias (and their gradients) as given, so
 * a part whose row view of short_conv does not start at the device's
 * offset alignment (d not a multiple of 4 on lavapipe, of 64 on most GPUs)
 * goes through an aligned staging copy (tmm_record_copy); matmul and the
 * column sums bind any float offset.
 *
 * Decoding: the long conv's cache is the model's own w activation
 * [B, n, d] (as the TMM's), so a prefill by the model itself fills it and one
 * by a shorter model copies its rows in; the short conv keeps a window of
 * the last 2 inputs per part [3, B, 2, d] (conv1d_fill from the prefill's
 * u_p, conv1d_step after). The step reads the filter hfT of the model's full
 * n: decoder_create computes it (from the weights as they are then; a
 * generator's never change) into the model's own filter activations, which
 * the model's forward rewrites with the same values. A shorter model that
 * prefills for this one gets set_positions(n): its tables are those of the
 * full context's first positions, so it computes the same function. */
#include "mixer/hyena_mixer.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mixer/mixer_common.h"
#include "ops/decode_ops.h"
#include "ops/op_util.h"
#include "ops/ops.h"
#include "ops/ssm_ops.h"
#include "ops/toeplitz_fft.h"

#define PI 3.14159265358979323846

enum { F = TMM_HYENA_FEATURES, O = TMM_HYENA_ORDER, KS = TMM_HYENA_SHORT_TAPS, PARTS = 3 };

static const tmm_view none = { 0 };

static tmm_status check(const tmm_model_config *c)
{
    if (c->heads)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "hyena has no heads: heads must be 0 (resolved), got %u", c->heads);
    if ((uint64_t)3 * c->d_model * c->d_model > (1ull << 31) || (uint64_t)c->d_model * c->n_ctx > (1ull << 31))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model dimensions too large");
    return TMM_OK;
}

static void declare(tmm_param_builder *b, const tmm_model_config *c, uint32_t l, int *idx)
{
    const uint32_t d = c->d_model;
    /* the model's Linear layers: Kaiming normal, zero biases */
    const tmm_param_spec in_w = { 2, { 3 * d, d }, TMM_INIT_KAIMING, d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec in_b = { 1, { 3 * d }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec out_w = { 2, { d, d }, TMM_INIT_KAIMING, d, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec out_b = { 1, { d }, TMM_INIT_ZERO, 0, TMM_PARAM_LINEAR_BIAS, true };
    /* the short conv and the filter MLP: PyTorch's defaults, U(±1/sqrt(fan_in)) */
    const tmm_param_spec conv_w = { 2, { 3 * d, KS }, TMM_INIT_UNIFORM, KS, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec conv_b = { 1, { 3 * d }, TMM_INIT_UNIFORM, KS, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec f1_w = { 2, { O, F }, TMM_INIT_UNIFORM, F, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec f1_b = { 1, { O }, TMM_INIT_UNIFORM, F, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec f_w = { 2, { O, O }, TMM_INIT_UNIFORM, O, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec f_b = { 1, { O }, TMM_INIT_UNIFORM, O, TMM_PARAM_LINEAR_BIAS, true };
    const tmm_param_spec f4_w = { 2, { d, O }, TMM_INIT_UNIFORM, O, TMM_PARAM_LINEAR_WEIGHT, true };
    const tmm_param_spec omega = { 1, { O }, TMM_INIT_ONE, 0, TMM_PARAM_LN_WEIGHT, true };
    const tmm_param_spec D = { 1, { d }, TMM_INIT_NORMAL, 0, TMM_PARAM_LINEAR_BIAS, true };
    idx[TMM_HY_IN_W] = tmm_param_add(b, l, "hyena.in_proj.weight", in_w);
    idx[TMM_HY_IN_B] = tmm_param_add(b, l, "hyena.in_proj.bias", in_b);
    idx[TMM_HY_CONV_W] = tmm_param_add(b, l, "hyena.short_conv.weight", conv_w);
    idx[TMM_HY_CONV_B] = tmm_param_add(b, l, "hyena.short_conv.bias", conv_b);
    idx[TMM_HY_F1_W] = tmm_param_add(b, l, "hyena.filter.fc1.weight", f1_w);
    idx[TMM_HY_F1_B] = tmm_param_add(b, l, "hyena.filter.fc1.bias", f1_b);
    idx[TMM_HY_F1_OMEGA] = tmm_param_add(b, l, "hyena.filter.omega1", omega);
    idx[TMM_HY_F2_W] = tmm_param_add(b, l, "hyena.filter.fc2.weight", f_w);
    idx[TMM_HY_F2_B] = tmm_param_add(b, l, "hyena.filter.fc2.bias", f_b);
    idx[TMM_HY_F2_OMEGA] = tmm_param_add(b, l, "hyena.filter.omega2", omega);
    idx[TMM_HY_F3_W] = tmm_param_add(b, l, "hyena.filter.fc3.weight", f_w);
    idx[TMM_HY_F3_B] = tmm_param_add(b, l, "hyena.filter.fc3.bias", f_b);
    idx[TMM_HY_F3_OMEGA] = tmm_param_add(b, l, "hyena.filter.omega3", omega);
    idx[TMM_HY_F4_W] = tmm_param_add(b, l, "hyena.filter.fc4.weight", f4_w);
    idx[TMM_HY_D] = tmm_param_add(b, l, "hyena.D", D);
    idx[TMM_HY_OUT_W] = tmm_param_add(b, l, "hyena.out_proj.weight", out_w);
    idx[TMM_HY_OUT_B] = tmm_param_add(b, l, "hyena.out_proj.bias", out_b);
}

/* tt_t = t/(n-1): 0 .. 1 over the context (torch.linspace(0, 1, n)) */
static double rel_pos(uint32_t n, uint32_t t) { return n > 1 ? (double)t / (double)(n - 1) : 0.0; }

void tmm_hyena_features(uint32_t n, uint32_t t, double z[TMM_HYENA_FEATURES])
{
    const double angle = 2.0 * PI * 1e-4 * (double)t / (double)n;
    z[0] = rel_pos(n, t);
    z[1] = cos(angle);
    z[2] = -sin(angle);
}

double tmm_hyena_decay(uint32_t n, uint32_t d, uint32_t t, uint32_t c)
{
    const double slow = log(0.01) / 1.5, fast = log(0.01) / 0.3;
    const double delta = d > 1 ? slow + (fast - slow) * (double)c / (double)(d - 1) : slow;
    return exp(-rel_pos(n, t) * fabs(delta));
}

/* ---- the device mixer ------------------------------------------------------ */

typedef struct hy_layer {
    tmm_buffer *u[PARTS], *c[PARTS];  /* in-projection and short conv outputs [N, d] */
    tmm_buffer *w, *y1;               /* the long conv's input and output [N, d] */
    tmm_buffer *p[3], *a[3];          /* the filter MLP's pre-activations and sines [n, 64] */
    tmm_buffer *hf;                   /* the filter hfT [d, n] (D folded into lag 0) */
} hy_layer;

typedef struct hy_mixer {
    tmm_mixer base;
    hy_layer *layers;
    uint32_t n_pos;                   /* positions are normalized by n_pos - 1 (set_positions) */
    tmm_toeplitz_fft *fft;            /* the plan, when the FFT path is chosen */
    tmm_buffer *z, *decay, *e0, *zeros;  /* fixed: [n, 3], [d, n], [n], the zero beta [d, n] */
    tmm_buffer *ws1, *ws2;            /* [N, d] */
    tmm_buffer *dhf;                  /* [d, n] */
    tmm_buffer *fa, *fb;              /* [n, 64] */
    tmm_buffer *stage;                /* short conv taps/bias and their gradients per part: STAGE_SLOTS */
} hy_mixer;

/* Staging slots: taps, bias, dtaps, dbias of each part, each at a multiple
 * of 256 bytes (the largest offset alignment Vulkan allows). */
enum { ST_W, ST_B, ST_DW, ST_DB, ST_KINDS, STAGE_SLOTS = ST_KINDS * PARTS };
static uint64_t align_floats(uint64_t f) { return (f + 63) / 64 * 64; }
static uint64_t slot_floats(uint32_t d) { return align_floats((uint64_t)KS * d); }

static const tmm_model_config *config_of(const hy_mixer *m) { return &m->base.s.table->config; }
static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }
static tmm_view P(const hy_mixer *m, uint32_t l, int which) { return tmm_mixer_param(&m->base, l, which); }
static tmm_view G(const hy_mixer *m, uint32_t l, int which) { return tmm_mixer_grad(&m->base, l, which); }
static tmm_view W(const hy_mixer *m, uint32_t l, int which) { return tmm_mixer_weight(&m->base, l, which); }

/* Floats [first, first + count) of a tensor view (its row block). */
static tmm_view rows_of(tmm_view v, uint64_t first, uint64_t count) { return tmm_op_sub(v, first, count); }

static tmm_toeplitz_desc desc_of(const hy_mixer *m, tmm_toeplitz_impl impl)
{
    const tmm_model_config *c = config_of(m);
    return (tmm_toeplitz_desc){ .batch = m->base.s.batch, .n = c->n_ctx, .d = c->d_model, .groups = c->d_model,
                                .taps = 1, .impl = impl };
}

/* AUTO's choice. The device's crossover (toeplitz_select.h) is measured
 * for the TMM's few groups; with G = d groups of one channel the direct
 * kernels read a filter per channel and run 4 to 6 times slower, while the
 * FFT path costs the same (lavapipe, tmm bench mixer --heads d against
 * --heads 4 at d 128 and 512, n 256 to 2048: the FFT wins forward+backward
 * from n = 512, at 256 when d = 512 about ties). So Hyena takes the FFT path
 * from a quarter of the crossover length (never below
 * TMM_MIXER_CALIBRATE_FROM). */
#define HY_DIRECT_SLOWDOWN 4u

/* The choice of impl and its FFT plan. */
static tmm_status set_impl(tmm_mixer *base, tmm_toeplitz_impl impl)
{
    hy_mixer *m = (hy_mixer *)base;
    return tmm_mixer_toeplitz_plan(base, impl, HY_DIRECT_SLOWDOWN, desc_of(m, impl), &m->fft);
}

static void destroy(tmm_mixer *base)
{
    hy_mixer *m = (hy_mixer *)base;
    if (!m)
        return;
    tmm_toeplitz_fft_destroy(m->fft);
    for (uint32_t l = 0; m->layers && l < base->s.act_sets; l++) {
        const hy_layer *a = &m->layers[l];
        tmm_mixer_buffers_destroy(a->u, PARTS), tmm_mixer_buffers_destroy(a->c, PARTS);
        tmm_mixer_buffers_destroy(a->p, 3), tmm_mixer_buffers_destroy(a->a, 3);
        tmm_buffer_destroy(a->w), tmm_buffer_destroy(a->y1), tmm_buffer_destroy(a->hf);
    }
    tmm_buffer *const work[] = { m->z, m->decay, m->e0, m->zeros, m->ws1, m->ws2, m->dhf, m->fa, m->fb, m->stage };
    tmm_mixer_buffers_destroy(work, sizeof work / sizeof work[0]);
    free(m->layers);
    free(m);
}

/* The fixed tables for positions t < n_ctx of a context of n_pos. */
static tmm_status write_tables(hy_mixer *m)
{
    const uint32_t n = config_of(m)->n_ctx, d = config_of(m)->d_model;
    const uint64_t nd = (uint64_t)n * d;
    float *z = malloc((uint64_t)n * F * sizeof *z), *decay = malloc(nd * sizeof *decay);
    float *zeros = calloc(nd, sizeof *zeros);
    tmm_status s = z && decay && zeros ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        for (uint32_t t = 0; t < n; t++) {
            double zt[F];
            tmm_hyena_features(m->n_pos, t, zt);
            for (int k = 0; k < F; k++)
                z[(uint64_t)t * F + k] = (float)zt[k];
            for (uint32_t c = 0; c < d; c++)
                decay[(uint64_t)c * n + t] = (float)tmm_hyena_decay(m->n_pos, d, t, c);
        }
        s = tmm_buffer_write(m->z, 0, z, (uint64_t)n * F * 4);
    }
    if (s == TMM_OK)
        s = tmm_buffer_write(m->decay, 0, decay, nd * 4);
    if (s == TMM_OK)
        s = tmm_buffer_write(m->zeros, 0, zeros, nd * 4);
    if (s == TMM_OK) {
        zeros[0] = 1.0f; /* e0: the first n floats */
        s = tmm_buffer_write(m->e0, 0, zeros, (uint64_t)n * 4);
    }
    free(z), free(decay), free(zeros);
    return s;
}

/* Activations, workspace, tables and the FFT plan, through the model's allocation (a dry run counts them). */
static tmm_status allocate(tmm_mixer *base)
{
    hy_mixer *m = (hy_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const tmm_allocation *al = base->s.alloc;
    const uint64_t Nd = (uint64_t)base->rows * c->d_model, n = c->n_ctx, nd = n * c->d_model, nO = n * O;
    m->n_pos = c->n_ctx;
    const tmm_toeplitz_desc td = desc_of(m, TMM_TOEPLITZ_DIRECT);
    TMM_TRY(tmm_toeplitz_check(NULL, &td));
    if (!(m->layers = calloc(base->s.act_sets, sizeof *m->layers)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t l = 0; l < base->s.act_sets; l++) {
        hy_layer *a = &m->layers[l];
        for (int p = 0; p < PARTS; p++) {
            TMM_TRY(tmm_alloc_act(al, l, &a->u[p], Nd));
            TMM_TRY(tmm_alloc_act(al, l, &a->c[p], Nd));
        }
        TMM_TRY(tmm_alloc_act(al, l, &a->w, Nd));
        TMM_TRY(tmm_alloc_act(al, l, &a->y1, Nd));
        for (int k = 0; k < 3; k++) {
            TMM_TRY(tmm_alloc_act(al, l, &a->p[k], nO));
            TMM_TRY(tmm_alloc_act(al, l, &a->a[k], nO));
        }
        TMM_TRY(tmm_alloc_act(al, l, &a->hf, nd));
    }
    struct { tmm_buffer **b; uint64_t floats; } ws[] = {
        { &m->z, n * F }, { &m->decay, nd }, { &m->e0, n }, { &m->zeros, nd }, { &m->ws1, Nd }, { &m->ws2, Nd },
        { &m->dhf, nd }, { &m->fa, nO }, { &m->fb, nO }, { &m->stage, STAGE_SLOTS * slot_floats(c->d_model) },
    };
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        TMM_TRY(tmm_alloc(al, ws[i].b, ws[i].floats, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    if (!al->dry)
        TMM_TRY(write_tables(m));
    return set_impl(base, base->s.impl);
}

static tmm_status create(const tmm_mixer_setup *s, tmm_mixer **out)
{
    return tmm_mixer_create(&tmm_hyena_mixer, s, sizeof(hy_mixer), allocate, out);
}

static tmm_status set_positions(tmm_mixer *base, uint32_t n_pos)
{
    hy_mixer *m = (hy_mixer *)base;
    if (n_pos < config_of(m)->n_ctx)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "hyena: positions of a context of %u cannot cover the model's %u",
                        n_pos, config_of(m)->n_ctx);
    m->n_pos = n_pos;
    return m->base.s.alloc->dry ? TMM_OK : write_tables(m);
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static uint64_t scratch_floats(const tmm_mixer *base)
{
    const hy_mixer *m = (const hy_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const uint32_t N = base->rows, d = c->d_model, n = c->n_ctx;
    /* the direct path's, whatever the choice now: set_impl may switch to it */
    tmm_toeplitz_desc td = desc_of(m, TMM_TOEPLITZ_DIRECT);
    uint64_t s = tmm_op_toeplitz_backward_scratch(base->s.alloc->device, &td, 0);
    s = max_u64(s, tmm_op_conv1d_backward_scratch(base->s.batch, n, d, KS, false));
    s = max_u64(s, tmm_op_sine_backward_scratch(n, O));
    return max_u64(s, tmm_op_sum_cols_scratch(N, d));
}

/* ---- parameter views -------------------------------------------------------- */

static tmm_view in_w(tmm_view w, uint32_t d, int p) { return rows_of(w, (uint64_t)p * d * d, (uint64_t)d * d); }
static tmm_view per_d(tmm_view b, uint32_t d, int p) { return rows_of(b, (uint64_t)p * d, d); }
static tmm_view taps(tmm_view w, uint32_t d, int p) { return rows_of(w, (uint64_t)p * KS * d, (uint64_t)KS * d); }

static bool aligned(const tmm_device *dev, tmm_view v) { return dev && v.offset % tmm_op_offset_align(dev) == 0; }

static tmm_view slot(const hy_mixer *m, int kind, int p, uint64_t floats)
{
    return tmm_sub(m->stage, (uint64_t)(kind * PARTS + p) * slot_floats(config_of(m)->d_model) * 4, floats * 4);
}

/* Part p's short conv taps and bias as the conv op can bind them: the
 * tensors' row views, or aligned staging copies of them. */
static tmm_status conv_params(const hy_mixer *m, tmm_recorder *r, uint32_t l, int p, tmm_view *w, tmm_view *b)
{
    const uint32_t d = config_of(m)->d_model;
    const tmm_device *dev = tmm_recorder_device(r);
    *w = taps(P(m, l, TMM_HY_CONV_W), d, p), *b = per_d(P(m, l, TMM_HY_CONV_B), d, p);
    if (!aligned(dev, *w)) {
        tmm_view to = slot(m, ST_W, p, (uint64_t)KS * d);
        TMM_TRY(tmm_record_copy(r, *w, to));
        *w = to;
    }
    if (!aligned(dev, *b)) {
        tmm_view to = slot(m, ST_B, p, d);
        TMM_TRY(tmm_record_copy(r, *b, to));
        *b = to;
    }
    return TMM_OK;
}

/* ---- forward ------------------------------------------------------------------ */

/* The filter MLP's sine layers k = 0..2: their weight, bias and ω. */
static const int filter_w[3] = { TMM_HY_F1_W, TMM_HY_F2_W, TMM_HY_F3_W };
static const int filter_b[3] = { TMM_HY_F1_B, TMM_HY_F2_B, TMM_HY_F3_B };
static const int filter_omega[3] = { TMM_HY_F1_OMEGA, TMM_HY_F2_OMEGA, TMM_HY_F3_OMEGA };

/* Layer l's filter hfT [d, n] into `hf` from its weights (p_k, a_k into the layer's activations). */
static tmm_status record_filter(const hy_mixer *m, const tmm_rec *rec, uint32_t l, tmm_view hf)
{
    const tmm_model_config *c = config_of(m);
    const uint32_t n = c->n_ctx, d = c->d_model;
    tmm_recorder *r = rec->r;
    const hy_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view in = A(m->z);
    for (int k = 0; k < 3; k++) {
        TMM_REC_OP(rec, "matmul", tmm_op_linear(r, in, n, k ? O : F, O, W(m, l, filter_w[k]), none, A(a->p[k]),
                                                false));
        TMM_REC_OP(rec, "sine", tmm_op_sine_forward(r, A(a->p[k]), P(m, l, filter_omega[k]), P(m, l, filter_b[k]), n, O,
                                                    A(a->a[k])));
        in = A(a->a[k]);
    }
    const tmm_matmul_desc raw = { .m = d, .n = n, .k = O, .trans_b = true };   /* A4 · a3ᵀ */
    const tmm_matmul_desc skip = { .m = d, .n = n, .k = 1, .accumulate = true }; /* += D · e0ᵀ */
    TMM_REC_OP(rec, "matmul", tmm_op_matmul(r, &raw, P(m, l, TMM_HY_F4_W), in, none, hf));
    TMM_REC_OP(rec, "gate", tmm_op_gate_mul_forward(r, hf, A(m->decay), d, n, hf));
    TMM_REC_OP(rec, "matmul", tmm_op_matmul(r, &skip, P(m, l, TMM_HY_D), A(m->e0), none, hf));
    return TMM_OK;
}

static tmm_status toeplitz_fwd(hy_mixer *m, tmm_recorder *r, tmm_view u, tmm_view w, tmm_view y)
{
    if (m->fft)
        return tmm_toeplitz_fft_record_forward(r, m->fft, u, w, A(m->zeros), y);
    tmm_toeplitz_desc td = desc_of(m, m->base.s.impl);
    return tmm_op_toeplitz_forward(r, &td, u, w, A(m->zeros), y);
}

static tmm_status forward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view h)
{
    hy_mixer *m = (hy_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const uint32_t N = base->rows, d = c->d_model, B = base->s.batch, n = c->n_ctx;
    tmm_recorder *r = rec->r;
    hy_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    TMM_TRY(record_filter(m, rec, l, A(a->hf)));
    for (int p = 0; p < PARTS; p++) {
        tmm_view cw, cb;
        TMM_REC_OP(rec, "matmul", tmm_op_linear(r, x, N, d, d, in_w(W(m, l, TMM_HY_IN_W), d, p),
                                                per_d(P(m, l, TMM_HY_IN_B), d, p), A(a->u[p]), false));
        TMM_TRY(conv_params(m, r, l, p, &cw, &cb));
        TMM_REC_OP(rec, "conv1d", tmm_op_conv1d_forward(r, A(a->u[p]), cw, cb, B, n, d, KS, false, A(a->c[p])));
    }
    TMM_REC_OP(rec, "gate", tmm_op_gate_mul_forward(r, A(a->c[2]), A(a->c[1]), N, d, A(a->w)));
    TMM_REC_OP(rec, "toeplitz", toeplitz_fwd(m, r, A(a->w), A(a->hf), A(a->y1)));
    TMM_REC_OP(rec, "gate", tmm_op_gate_mul_forward(r, A(a->y1), A(a->c[0]), N, d, A(m->ws1)));
    TMM_REC_OP(rec, "matmul", tmm_op_linear(r, A(m->ws1), N, d, d, W(m, l, TMM_HY_OUT_W), P(m, l, TMM_HY_OUT_B), h,
                                            true));
    return TMM_OK;
}

/* ---- backward ----------------------------------------------------------------- */

/* The filter's gradients from dhfT (in m->dhf; consumed). */
static tmm_status filter_backward(hy_mixer *m, const tmm_rec *rec, uint32_t l)
{
    const tmm_model_config *c = config_of(m);
    const uint32_t n = c->n_ctx, d = c->d_model;
    tmm_recorder *r = rec->r;
    const hy_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view dhf = A(m->dhf);
    const tmm_matmul_desc dD = { .m = d, .n = 1, .k = n };            /* dhfT · e0 */
    const tmm_matmul_desc dA4 = { .m = d, .n = O, .k = n, .half_inputs = rec->half_dw }; /* dhrawT · a3 */
    const tmm_matmul_desc da3 = { .m = n, .n = O, .k = d, .trans_a = true }; /* dhrawTᵀ · A4 */
    TMM_REC_OP(rec, "matmul bwd", tmm_op_matmul(r, &dD, dhf, A(m->e0), none, G(m, l, TMM_HY_D)));
    TMM_REC_OP(rec, "gate bwd", tmm_op_gate_mul_backward(r, A(a->hf), A(m->decay), dhf, d, n, dhf, none));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_matmul(r, &dA4, dhf, A(a->a[2]), none, G(m, l, TMM_HY_F4_W)));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_matmul(r, &da3, dhf, P(m, l, TMM_HY_F4_W), none, A(m->fa)));
    tmm_view da = A(m->fa), other = A(m->fb);
    for (int k = 2; k >= 0; k--) {
        /* da holds dL/da_k: dp_k in place, then the layer's weight and the input's gradient */
        TMM_REC_OP(rec, "sine bwd", tmm_op_sine_backward(r, A(a->p[k]), P(m, l, filter_omega[k]), P(m, l, filter_b[k]),
                                                         da, n, O, false, rec->scratch, da, G(m, l, filter_omega[k]),
                                                         G(m, l, filter_b[k])));
        tmm_view in = k ? A(a->a[k - 1]) : A(m->z);
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, da, in, n, k ? O : F, O, G(m, l, filter_w[k]), rec->half_dw));
        if (k) {
            TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, da, n, O, O, W(m, l, filter_w[k]), other, false));
            tmm_view t = da;
            da = other, other = t;
        }
    }
    return TMM_OK;
}

static tmm_status toeplitz_bwd(hy_mixer *m, tmm_recorder *r, tmm_view scratch, tmm_view u, tmm_view w, tmm_view gy,
                               tmm_view du, tmm_view dw, tmm_view dbeta)
{
    if (m->fft)
        return tmm_toeplitz_fft_record_backward(r, m->fft, 0, u, w, gy, du, dw, dbeta);
    tmm_toeplitz_desc td = desc_of(m, m->base.s.impl);
    return tmm_op_toeplitz_backward(r, &td, 0, u, w, gy, scratch, du, dw, dbeta);
}

/* Buffers (N = rows): dg, then the Toeplitz op's dropped dbeta and each
 * part's du: tmp[0]; dw, then dv: tmp[1]; dy1, then dx1: ws1; dx0, then dx: ws2. */
static tmm_status backward(tmm_mixer *base, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dh,
                           const tmm_view tmp[2], tmm_view *dx)
{
    hy_mixer *m = (hy_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const uint32_t N = base->rows, d = c->d_model, B = base->s.batch, n = c->n_ctx;
    tmm_recorder *r = rec->r;
    const tmm_device *dev = tmm_recorder_device(r);
    hy_layer *a = &m->layers[tmm_mixer_set(&m->base, l)];
    tmm_view g = A(m->ws1), dy1 = A(m->ws1), dx1 = A(m->ws1), dx0 = A(m->ws2);
    tmm_view dg = tmp[0], ddw = tmp[1], dv = tmp[1];

    /* h += g Woutᵀ + bout, g = y1 ⊙ x0 (recomputed) */
    TMM_REC_OP(rec, "gate", tmm_op_gate_mul_forward(r, A(a->y1), A(a->c[0]), N, d, g));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, dh, g, N, d, d, G(m, l, TMM_HY_OUT_W), rec->half_dw));
    TMM_REC_OP(rec, "bias grad bwd", tmm_op_sum_cols(r, dh, N, d, rec->scratch, G(m, l, TMM_HY_OUT_B)));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, dh, N, d, d, W(m, l, TMM_HY_OUT_W), dg, false));
    TMM_REC_OP(rec, "gate bwd", tmm_op_gate_mul_backward(r, A(a->y1), A(a->c[0]), dg, N, d, dy1, dx0));

    /* y1 = Toeplitz(w; hfT), then the filter */
    TMM_REC_OP(rec, "toeplitz bwd", toeplitz_bwd(m, r, rec->scratch, A(a->w), A(a->hf), dy1, ddw, A(m->dhf),
                                                 tmp[0]));
    TMM_TRY(filter_backward(m, rec, l));

    /* w = v ⊙ x1 */
    TMM_REC_OP(rec, "gate bwd", tmm_op_gate_mul_backward(r, A(a->c[2]), A(a->c[1]), ddw, N, d, dv, dx1));

    /* per part: the short conv, then in_proj; dx summed over the parts into ws2 */
    const tmm_view dparts[PARTS] = { dx0, dx1, dv };
    tmm_view du = tmp[0];
    *dx = A(m->ws2);
    for (int p = 0; p < PARTS; p++) {
        tmm_view cw, cb, gw = taps(G(m, l, TMM_HY_CONV_W), d, p), gb = per_d(G(m, l, TMM_HY_CONV_B), d, p);
        tmm_view sw = aligned(dev, gw) ? gw : slot(m, ST_DW, p, (uint64_t)KS * d);
        tmm_view sb = aligned(dev, gb) ? gb : slot(m, ST_DB, p, d);
        TMM_TRY(conv_params(m, r, l, p, &cw, &cb));
        TMM_REC_OP(rec, "conv1d bwd", tmm_op_conv1d_backward(r, A(a->u[p]), cw, cb, dparts[p], B, n, d, KS, false,
                                                             false, rec->scratch, du, sw, sb));
        if (sw.offset != gw.offset || sw.buffer != gw.buffer)
            TMM_TRY(tmm_record_copy(r, sw, gw));
        if (sb.offset != gb.offset || sb.buffer != gb.buffer)
            TMM_TRY(tmm_record_copy(r, sb, gb));
        TMM_REC_OP(rec, "matmul bwd",
                   tmm_op_linear_dw(r, du, x, N, d, d, in_w(G(m, l, TMM_HY_IN_W), d, p), rec->half_dw));
        TMM_REC_OP(rec, "bias grad bwd", tmm_op_sum_cols(r, du, N, d, rec->scratch,
                                                         per_d(G(m, l, TMM_HY_IN_B), d, p)));
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, du, N, d, d, in_w(W(m, l, TMM_HY_IN_W), d, p), *dx, p > 0));
    }
    return TMM_OK;
}

/* ---- decoding ------------------------------------------------------------- */

typedef struct hy_decoder {
    hy_mixer *m;
    tmm_buffer **window;          /* per layer: the short conv's windows [3, B, 2, d] */
    tmm_buffer *u, *g, *scratch;  /* one position: [3, B, d], [B, d], the step's */
} hy_decoder;

static void decoder_destroy(tmm_mixer_decoder *dd)
{
    hy_decoder *dec = (hy_decoder *)dd;
    if (!dec)
        return;
    const uint32_t L = config_of(dec->m)->n_layers;
    tmm_mixer_layer_buffers_free(dec->window, L);
    tmm_buffer *const step[] = { dec->u, dec->g, dec->scratch };
    tmm_mixer_buffers_destroy(step, sizeof step / sizeof step[0]);
    free(dec);
}

static tmm_toeplitz_desc step_desc(const hy_mixer *m) { return desc_of(m, TMM_TOEPLITZ_DIRECT); }

/* What the decoder derives from the weights alone, once (arg: the
 * hy_decoder): every layer's filter for the model's n (into the model's
 * filter activations). */
static tmm_status record_derive(tmm_recorder *r, void *arg)
{
    hy_decoder *dec = arg;
    hy_mixer *m = dec->m;
    const tmm_rec rec = { r, false, none, TMM_ELEM_F32 };
    for (uint32_t l = 0; l < config_of(m)->n_layers; l++)
        TMM_TRY(record_filter(m, &rec, l, A(m->layers[l].hf)));
    return TMM_OK;
}

static tmm_status decoder_create(tmm_mixer *base, const tmm_view *x, tmm_mixer_decoder **out)
{
    (void)x;
    *out = NULL;
    hy_mixer *m = (hy_mixer *)base;
    const tmm_model_config *c = config_of(m);
    const uint32_t L = c->n_layers;
    tmm_device *dev = base->s.alloc->device;
    const uint64_t Bd = (uint64_t)base->s.batch * c->d_model;
    const tmm_toeplitz_desc td = step_desc(m);
    hy_decoder *dec = calloc(1, sizeof *dec);
    if (!dec)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    dec->m = m;
    tmm_status s = tmm_mixer_layer_buffers(dev, L, PARTS * Bd * (KS - 1), &dec->window);
    const tmm_buffer_spec step[] = {
        { &dec->u, PARTS * Bd }, { &dec->g, Bd },
        { &dec->scratch, tmm_op_toeplitz_step_scratch(&td) },
    };
    if (s == TMM_OK)
        s = tmm_mixer_buffers_create(dev, step, sizeof step / sizeof step[0]);
    if (s == TMM_OK)
        s = tmm_record_once(dev, record_derive, dec);
    return tmm_mixer_decoder_done(base, (tmm_mixer_decoder *)dec, s, out);
}

static tmm_view window_of(const hy_decoder *dec, uint32_t l, int p)
{
    const uint64_t bytes = (uint64_t)dec->m->base.s.batch * (KS - 1) * config_of(dec->m)->d_model * 4;
    return tmm_sub(dec->window[l], p * bytes, bytes);
}

/* The windows from the prompts' conv inputs; the long conv's cache (the
 * model's w) from a shorter model's rows [0, ns) of each sequence. */
static tmm_status record_prefill(tmm_mixer_decoder *dd, tmm_recorder *r, tmm_mixer *src_base, const tmm_view *src_x,
                                 tmm_view len)
{
    (void)src_x;
    hy_decoder *dec = (hy_decoder *)dd;
    hy_mixer *src = (hy_mixer *)src_base;
    const tmm_model_config *c = config_of(dec->m);
    const uint32_t B = dec->m->base.s.batch, d = c->d_model, ns = config_of(src)->n_ctx;
    for (uint32_t l = 0; l < c->n_layers; l++)
        for (int p = 0; p < PARTS; p++)
            TMM_TRY(tmm_op_conv1d_fill(r, A(src->layers[l].u[p]), len, B, ns, d, KS, window_of(dec, l, p)));
    if (src == dec->m)
        return TMM_OK;
    const uint64_t bytes = (uint64_t)ns * d * 4, stride = (uint64_t)c->n_ctx * d * 4;
    for (uint32_t l = 0; l < c->n_layers; l++)
        for (uint64_t b = 0; b < B; b++)
            TMM_TRY(tmm_record_copy(r, tmm_sub(src->layers[l].w, b * bytes, bytes),
                                    tmm_sub(dec->m->layers[l].w, b * stride, bytes)));
    return TMM_OK;
}

static tmm_status record_step(tmm_mixer_decoder *dd, const tmm_rec *rec, uint32_t l, tmm_view pos, tmm_view x,
                              tmm_view h)
{
    hy_decoder *dec = (hy_decoder *)dd;
    hy_mixer *m = dec->m;
    const uint32_t B = m->base.s.batch, d = config_of(m)->d_model;
    const tmm_toeplitz_desc td = step_desc(m);
    tmm_recorder *r = rec->r;
    tmm_view u[PARTS];
    tmm_row_group g[PARTS];
    for (int p = 0; p < PARTS; p++) {
        u[p] = tmm_op_sub(A(dec->u), (uint64_t)p * B * d, (uint64_t)B * d);
        g[p] = (tmm_row_group){ in_w(P(m, l, TMM_HY_IN_W), d, p), per_d(P(m, l, TMM_HY_IN_B), d, p), u[p], d,
                                TMM_ROW_ACT_NONE };
    }
    TMM_TRY(tmm_op_linear_rows_group(r, x, B, d, g, PARTS, NULL, none)); /* the three projections: one dispatch */
    /* the short convs, x0 into u[0] and w = v ⊙ x1 into u[2] (one dispatch);
     * g = (w's long conv, w cached at pos) ⊙ x0 */
    TMM_TRY(tmm_op_hyena_conv_step(r, A(dec->u), P(m, l, TMM_HY_CONV_W), P(m, l, TMM_HY_CONV_B), pos, B, d, KS,
                                   A(dec->window[l])));
    TMM_TRY(tmm_op_toeplitz_step_gate(r, &td, pos, u[2], A(m->layers[l].w), A(m->layers[l].hf), A(m->zeros), u[0],
                                      A(dec->scratch), A(dec->g)));
    return tmm_op_linear_rows(r, A(dec->g), B, d, d, P(m, l, TMM_HY_OUT_W), P(m, l, TMM_HY_OUT_B), h, true);
}

/* Caches only: the short convs' windows (conv1d_step reads the inputs before
 * position 0 as 0) and the long conv's inputs w, of every layer. */
static uint32_t state_parts(tmm_mixer_decoder *dd, tmm_decoder_part *parts, uint32_t max)
{
    hy_decoder *dec = (hy_decoder *)dd;
    const tmm_model_config *c = config_of(dec->m);
    const uint64_t d = c->d_model;
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        for (int p = 0; p < PARTS; p++)
            tmm_decoder_part_add(parts, max, &n, window_of(dec, l, p), (KS - 1) * d * 4, false);
        tmm_decoder_part_add(parts, max, &n, A(dec->m->layers[l].w), c->n_ctx * d * 4, false);
    }
    return n;
}

/* The long convolutions, d (n + 1) per token; the filter MLP runs once per
 * step for the whole batch, not per token. */
static double flops(const tmm_model_config *c, uint64_t *per_step)
{
    *per_step = 64 * 3 + 64 + 2 * (64 * 64 + 64) + 3 * 64 + (uint64_t)c->d_model * 64;
    return (double)c->d_model * (c->n_ctx + 1.0);
}

static void describe(const tmm_model_config *c, char *buf, size_t size)
{
    (void)c;
    snprintf(buf, size, "implicit filters");
}

const tmm_mixer_class tmm_hyena_mixer = {
    TMM_MIXER_SLOTS,
    .declare = declare,
    .set_toeplitz_impl = set_impl,
    .set_positions = set_positions,
    .state_parts = state_parts,
};
