/* The TMM on a device: buffers, the recorded forward/backward graph, batches. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/toeplitz_fft.h"
#include "model/mixer_select.h"

/* What the forward keeps of each layer for the backward, one line each:
 * name, floats per row of the batch (d, 1 or e = expansion * d), and which
 * models have it. This list alone drives the struct, allocation, release and
 * the memory plan. */
#define LAYER_ACTS(X)                                                                              \
    X(h_in, D, ALL)       /* the block's input */                                                  \
    X(mean1, ONE, ALL)    /* LayerNorm 1 statistics */                                             \
    X(rstd1, ONE, ALL)                                                                             \
    X(x1, D, ALL)         /* LN1(h) */                                                             \
    X(f1, E, ALL)         /* W1 x1 + b1 */                                                         \
    X(z, E, ALL)          /* silu(f1) */                                                           \
    X(h_mid, D, ALL)      /* h after the MLP */                                                    \
    X(mean2, ONE, ALL)    /* LayerNorm 2 statistics */                                             \
    X(rstd2, ONE, ALL)                                                                             \
    X(x2, D, ALL)         /* LN2(h_mid): the mixer's input */                                      \
    X(v, D, HEADS)        /* x2 Winᵀ + bin */                                                      \
    X(y1, D, ALL)         /* the (first) Toeplitz output */                                        \
    X(q, D, EXPANDED)     /* silu(y1) */                                                           \
    X(y2, D, EXPANDED)    /* the second Toeplitz output */

typedef struct layer_acts {
#define DECLARE_ACT(name, size, who) tmm_buffer *name;
    LAYER_ACTS(DECLARE_ACT)
#undef DECLARE_ACT
} layer_acts;

enum { MEM_ACT, MEM_WORK };

struct tmm_model {
    tmm_device *device;
    tmm_param_table table;
    uint32_t batch, rows;
    tmm_mixer_impl impl;
    tmm_toeplitz_fft *fft;  /* the FFT plan, when impl is FFT */
    bool profile;          /* wrap every op in a timestamp region */

    /* dry run: only count the bytes each buffer would take */
    bool dry;
    tmm_model_memory plan;

    tmm_buffer *params, *grads;
    layer_acts *layers;
    tmm_buffer *h_out, *logits, *row_loss;
    /* host-visible inputs and outputs, one set per slot (double buffering) */
    tmm_buffer *tokens[TMM_MODEL_SLOTS], *targets[TMM_MODEL_SLOTS], *index[TMM_MODEL_SLOTS];
    tmm_buffer *loss[TMM_MODEL_SLOTS], *argmax[TMM_MODEL_SLOTS];
    uint32_t n_scored[TMM_MODEL_SLOTS];
    uint32_t loss_denominator[TMM_MODEL_SLOTS];
    bool have_batch[TMM_MODEL_SLOTS];
    uint32_t slot;
    tmm_buffer *dh, *g1, *g2, *ge, *zeros_d, *dummy_d, *scratch;

    tmm_recorder *recorder;
    int recorded;          /* -1 none, 0 forward, 1 forward + backward */
    uint32_t recorded_scored, recorded_slot;
    int last_run;          /* like recorded, for what the buffers hold */
};

static tmm_status alloc(tmm_model *m, tmm_buffer **slot, uint64_t count, int category, tmm_memory_kind kind)
{
    uint64_t bytes = (count ? count : 1) * 4;
    if (m->dry) {
        *(category == MEM_ACT ? &m->plan.activations : &m->plan.workspace) += bytes;
        return TMM_OK;
    }
    return tmm_buffer_create(m->device, bytes, kind, slot);
}

static tmm_toeplitz_desc toeplitz_desc(const tmm_model *m)
{
    const tmm_model_config *c = &m->table.config;
    tmm_toeplitz_desc d = { m->batch, c->n_ctx, c->d_model, c->heads ? c->heads : 1, c->kernel, m->impl };
    return d;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static uint64_t scratch_floats(const tmm_model *m)
{
    const tmm_model_config *c = &m->table.config;
    const uint32_t N = m->rows, d = c->d_model, e = c->expansion * d, V = c->vocab;
    tmm_toeplitz_desc td = toeplitz_desc(m);
    uint64_t s = tmm_op_layernorm_forward_scratch(N, d);
    s = max_u64(s, tmm_op_layernorm_backward_scratch(N, d));
    s = max_u64(s, tmm_op_bias_silu_backward_scratch(N, e));
    s = max_u64(s, tmm_op_bias_silu_backward_scratch(N, d));
    s = max_u64(s, tmm_op_sum_cols_scratch(N, d));
    s = max_u64(s, tmm_op_sum_cols_scratch(N, e));
    s = max_u64(s, tmm_op_xent_scratch(N, V));
    s = max_u64(s, tmm_op_xent_mean_scratch(N));
    s = max_u64(s, tmm_op_embedding_backward_scratch(N, d));
    s = max_u64(s, tmm_op_toeplitz_backward_scratch(m->device, &td, c->frozen ? TMM_TOEPLITZ_SKIP_PARAMS : 0));
    return s;
}

/* Every buffer of the model, through alloc (so the dry run counts the same). */
static tmm_status allocate(tmm_model *m)
{
    const tmm_model_config *c = &m->table.config;
    const uint64_t N = m->rows, d = c->d_model, e = (uint64_t)c->expansion * d, V = c->vocab;
    if (m->dry) {
        m->plan.params = m->plan.grads = m->table.arena_floats * 4;
    } else {
        TMM_TRY(tmm_buffer_create(m->device, m->table.arena_floats * 4, TMM_MEMORY_DEVICE, &m->params));
        TMM_TRY(tmm_buffer_create(m->device, m->table.arena_floats * 4, TMM_MEMORY_DEVICE, &m->grads));
    }
    const uint64_t D = d, ONE = 1, E = e;
    const bool ALL = true, HEADS = c->heads != 0, EXPANDED = c->expanded;
    for (uint32_t l = 0; l < c->n_layers; l++) {
        layer_acts *a = &m->layers[l];
#define ALLOC_ACT(name, size, who) \
        if (who)                   \
            TMM_TRY(alloc(m, &a->name, N * size, MEM_ACT, TMM_MEMORY_DEVICE));
        LAYER_ACTS(ALLOC_ACT)
#undef ALLOC_ACT
    }
    TMM_TRY(alloc(m, &m->h_out, N * d, MEM_ACT, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->logits, N * V, MEM_WORK, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->row_loss, N, MEM_WORK, TMM_MEMORY_DEVICE));
    for (uint32_t k = 0; k < TMM_MODEL_SLOTS; k++) {
        TMM_TRY(alloc(m, &m->loss[k], 1, MEM_WORK, TMM_MEMORY_HOST));
        TMM_TRY(alloc(m, &m->argmax[k], N, MEM_WORK, TMM_MEMORY_HOST));
        TMM_TRY(alloc(m, &m->tokens[k], N, MEM_WORK, TMM_MEMORY_HOST));
        TMM_TRY(alloc(m, &m->targets[k], N, MEM_WORK, TMM_MEMORY_HOST));
        TMM_TRY(alloc(m, &m->index[k], tmm_nn_embedding_index_words((uint32_t)N), MEM_WORK, TMM_MEMORY_HOST));
    }
    TMM_TRY(alloc(m, &m->dh, N * d, MEM_WORK, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->g1, N * d, MEM_WORK, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->g2, N * d, MEM_WORK, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->ge, N * e, MEM_WORK, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->zeros_d, d, MEM_WORK, TMM_MEMORY_DEVICE));
    TMM_TRY(alloc(m, &m->dummy_d, d, MEM_WORK, TMM_MEMORY_DEVICE));
    return alloc(m, &m->scratch, scratch_floats(m), MEM_WORK, TMM_MEMORY_DEVICE);
}

static tmm_status check_size(const tmm_model_config *config, uint32_t batch)
{
    TMM_TRY(tmm_model_config_check(config));
    if (batch == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the batch size must be at least 1");
    uint64_t rows = (uint64_t)batch * config->n_ctx;
    if (rows * config->vocab > UINT32_MAX || rows * config->expansion * config->d_model > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "batch %u x context %u is too large for one step; use a smaller batch",
                        batch, config->n_ctx);
    return TMM_OK;
}

tmm_status tmm_model_memory_plan(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 tmm_mixer_impl impl, tmm_model_memory *out)
{
    memset(out, 0, sizeof *out);
    TMM_TRY(check_size(config, batch));
    if (impl == TMM_MIXER_FFT && !device)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the FFT path's memory depends on the device: pass one");
    if (impl == TMM_MIXER_AUTO && device)
        TMM_TRY(tmm_mixer_resolve(device, impl, config->n_ctx, (uint64_t)batch * config->d_model, &impl));
    tmm_model m = { .batch = batch, .rows = batch * config->n_ctx, .dry = true };
    TMM_TRY(tmm_param_table_build(config, &m.table));
    m.layers = calloc(config->n_layers, sizeof *m.layers);
    tmm_status s = m.layers ? allocate(&m) : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK && impl == TMM_MIXER_FFT) {
        tmm_toeplitz_desc td = toeplitz_desc(&m);
        m.plan.mixer = tmm_toeplitz_fft_planned_bytes(device, &td);
    }
    free(m.layers);
    tmm_param_table_free(&m.table);
    m.plan.total = m.plan.params + m.plan.grads + m.plan.activations + m.plan.workspace + m.plan.mixer;
    *out = m.plan;
    return s;
}

void tmm_model_destroy(tmm_model *m)
{
    if (!m)
        return;
    tmm_recorder_destroy(m->recorder);
    tmm_toeplitz_fft_destroy(m->fft);
    if (m->layers)
        for (uint32_t l = 0; l < m->table.config.n_layers; l++) {
            layer_acts *a = &m->layers[l];
#define FREE_ACT(name, size, who) tmm_buffer_destroy(a->name);
            LAYER_ACTS(FREE_ACT)
#undef FREE_ACT
        }
    for (uint32_t k = 0; k < TMM_MODEL_SLOTS; k++) {
        tmm_buffer *io[] = { m->loss[k], m->argmax[k], m->tokens[k], m->targets[k], m->index[k] };
        for (size_t i = 0; i < sizeof io / sizeof io[0]; i++)
            tmm_buffer_destroy(io[i]);
    }
    tmm_buffer *all[] = { m->params, m->grads, m->h_out, m->logits, m->row_loss, m->dh, m->g1, m->g2, m->ge,
                          m->zeros_d, m->dummy_d, m->scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(m->layers);
    tmm_param_table_free(&m->table);
    free(m);
}

/* Resolves the implementation and makes or frees the FFT plan to match. */
static tmm_status set_plan(tmm_model *m)
{
    tmm_mixer_impl impl;
    const tmm_model_config *c = &m->table.config;
    TMM_TRY(tmm_mixer_resolve(m->device, m->impl, c->n_ctx, (uint64_t)m->batch * c->d_model, &impl));
    if (impl == TMM_MIXER_FFT && !m->fft) {
        tmm_toeplitz_desc td = toeplitz_desc(m);
        TMM_TRY(tmm_toeplitz_fft_create(m->device, &td, &m->fft));
    } else if (impl != TMM_MIXER_FFT && m->fft) {
        tmm_toeplitz_fft_destroy(m->fft);
        m->fft = NULL;
    }
    return TMM_OK;
}

tmm_status tmm_model_create(tmm_device *device, const tmm_model_config *config, uint32_t batch, tmm_model **out)
{
    return tmm_model_create_impl(device, config, batch, TMM_MIXER_AUTO, out);
}

tmm_status tmm_model_create_impl(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 tmm_mixer_impl impl, tmm_model **out)
{
    *out = NULL;
    TMM_TRY(check_size(config, batch));
    tmm_model *m = calloc(1, sizeof *m);
    if (!m)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    m->device = device;
    m->batch = batch;
    m->rows = batch * config->n_ctx;
    m->impl = impl;
    m->recorded = m->last_run = -1;
    tmm_status s = tmm_param_table_build(config, &m->table);
    if (s == TMM_OK && !(m->layers = calloc(config->n_layers, sizeof *m->layers)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        s = allocate(m);
    if (s == TMM_OK)
        s = tmm_recorder_create(device, &m->recorder);
    if (s == TMM_OK)
        s = set_plan(m);
    float *arena = NULL;
    if (s == TMM_OK && !(arena = malloc(m->table.arena_floats * sizeof *arena)))
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK) {
        tmm_param_init(&m->table, arena);
        s = tmm_buffer_write(m->params, 0, arena, m->table.arena_floats * 4);
    }
    if (s == TMM_OK) {
        memset(arena, 0, m->table.arena_floats * sizeof *arena); /* frozen gradients stay 0 */
        s = tmm_buffer_write(m->grads, 0, arena, m->table.arena_floats * 4);
    }
    if (s == TMM_OK) {
        const uint32_t d = config->d_model;
        s = tmm_buffer_write(m->zeros_d, 0, arena, d * 4);
    }
    free(arena);
    if (s != TMM_OK) {
        tmm_model_destroy(m);
        return s;
    }
    *out = m;
    return TMM_OK;
}

const tmm_param_table *tmm_model_table(const tmm_model *m) { return &m->table; }
uint32_t tmm_model_batch(const tmm_model *m) { return m->batch; }

void tmm_model_set_profile(tmm_model *m, bool profile)
{
    m->profile = profile;
    m->recorded = -1;
}

tmm_status tmm_model_set_toeplitz_impl(tmm_model *m, tmm_mixer_impl impl)
{
    m->impl = impl;
    m->recorded = -1;
    return set_plan(m);
}

tmm_status tmm_model_write_params(tmm_model *m, const float *arena)
{
    return tmm_buffer_write(m->params, 0, arena, m->table.arena_floats * 4);
}

tmm_status tmm_model_read_params(tmm_model *m, float *arena)
{
    return tmm_buffer_read(m->params, 0, arena, m->table.arena_floats * 4);
}

tmm_status tmm_model_read_grads(tmm_model *m, float *arena)
{
    return tmm_buffer_read(m->grads, 0, arena, m->table.arena_floats * 4);
}

tmm_status tmm_model_set_batch(tmm_model *m, const uint32_t *tokens, const int32_t *targets)
{
    const uint32_t N = m->rows, V = m->table.config.vocab;
    uint32_t scored;
    TMM_TRY(tmm_nn_count_scored(targets, N, V, &scored));
    uint64_t words = tmm_nn_embedding_index_words(N);
    uint32_t *index = malloc(words * sizeof *index);
    if (!index)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = tmm_nn_embedding_index(tokens, N, V, index);
    if (s == TMM_OK)
        s = tmm_buffer_write(m->index[m->slot], 0, index, words * 4);
    free(index);
    TMM_TRY(s);
    TMM_TRY(tmm_buffer_write(m->tokens[m->slot], 0, tokens, (uint64_t)N * 4));
    TMM_TRY(tmm_buffer_write(m->targets[m->slot], 0, targets, (uint64_t)N * 4));
    m->n_scored[m->slot] = scored;
    m->loss_denominator[m->slot] = scored;
    m->have_batch[m->slot] = true;
    return TMM_OK;
}

/* ---- recording ------------------------------------------------------------ */

static const tmm_view none = { NULL, 0, 0 };

/* Records one op, inside a timestamp region named after it when profiling. */
#define OP(label, call)                                              \
    do {                                                             \
        if (m->profile)                                              \
            TMM_TRY(tmm_record_region_begin(r, label));              \
        TMM_TRY(call);                                               \
        if (m->profile)                                              \
            TMM_TRY(tmm_record_region_end(r));                       \
    } while (0)

static tmm_view P(const tmm_model *m, int idx)
{
    const tmm_param *p = &m->table.params[idx];
    return tmm_sub(m->params, p->offset * 4, p->numel * 4);
}

static tmm_view G(const tmm_model *m, int idx)
{
    const tmm_param *p = &m->table.params[idx];
    return tmm_sub(m->grads, p->offset * 4, p->numel * 4);
}

static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }

/* y[rows, out] (+)= x[rows, in] · Wᵀ (+ bias) */
static tmm_status linear(tmm_recorder *r, tmm_view x, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                         tmm_view bias, tmm_view y, bool accumulate)
{
    tmm_matmul_desc d = { .m = rows, .n = out, .k = in, .trans_b = true, .batch = 1, .accumulate = accumulate };
    return tmm_op_matmul(r, &d, x, w, bias, y);
}

/* dx[rows, in] = dy[rows, out] · W */
static tmm_status linear_dx(tmm_recorder *r, tmm_view dy, uint32_t rows, uint32_t in, uint32_t out, tmm_view w,
                            tmm_view dx)
{
    tmm_matmul_desc d = { .m = rows, .n = in, .k = out, .batch = 1 };
    return tmm_op_matmul(r, &d, dy, w, none, dx);
}

/* dW[out, in] = dyᵀ · x */
static tmm_status linear_dw(tmm_recorder *r, tmm_view dy, tmm_view x, uint32_t rows, uint32_t in, uint32_t out,
                            tmm_view dw)
{
    tmm_matmul_desc d = { .m = out, .n = in, .k = rows, .trans_a = true, .batch = 1 };
    return tmm_op_matmul(r, &d, dy, x, none, dw);
}

/* The Toeplitz layer through the chosen implementation. */
static tmm_status toeplitz_fwd(tmm_model *m, tmm_recorder *r, const tmm_toeplitz_desc *td, tmm_view u, tmm_view w,
                               tmm_view beta, tmm_view y)
{
    if (m->fft)
        return tmm_toeplitz_fft_record_forward(r, m->fft, u, w, beta, y);
    return tmm_op_toeplitz_forward(r, td, u, w, beta, y);
}

static tmm_status toeplitz_bwd(tmm_model *m, tmm_recorder *r, const tmm_toeplitz_desc *td, uint32_t flags,
                               tmm_view u, tmm_view w, tmm_view gy, tmm_view scratch, tmm_view du, tmm_view dw,
                               tmm_view dbeta)
{
    if (m->fft)
        return tmm_toeplitz_fft_record_backward(r, m->fft, flags, u, w, gy, du, dw, dbeta);
    return tmm_op_toeplitz_backward(r, td, flags, u, w, gy, scratch, du, dw, dbeta);
}

static tmm_status record_forward(tmm_model *m, tmm_recorder *r, bool backward)
{
    const tmm_model_config *c = &m->table.config;
    const uint32_t N = m->rows, d = c->d_model, e = c->expansion * d, V = c->vocab;
    const tmm_toeplitz_desc td = toeplitz_desc(m);
    tmm_view scratch = A(m->scratch);

    OP("embedding", tmm_op_embedding_forward(r, A(m->tokens[m->slot]), P(m, m->table.embed), N, V, d, A(m->layers[0].h_in)));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        const tmm_block_params *bp = &m->table.blocks[l];
        layer_acts *a = &m->layers[l];
        OP("layernorm", tmm_op_layernorm_forward(r, A(a->h_in), P(m, bp->ln1_w), P(m, bp->ln1_b), N, d, TMM_NN_LAYERNORM_EPS,
                                         scratch, A(a->x1), A(a->mean1), A(a->rstd1)));
        OP("matmul", linear(r, A(a->x1), N, d, e, P(m, bp->fc1_w), none, A(a->f1), false));
        OP("silu", tmm_op_bias_silu_forward(r, A(a->f1), P(m, bp->fc1_b), N, e, A(a->z)));
        OP("residual", tmm_op_copy(r, A(a->h_in), A(a->h_mid), N * d));
        OP("matmul", linear(r, A(a->z), N, e, d, P(m, bp->fc2_w), P(m, bp->fc2_b), A(a->h_mid), true));

        OP("layernorm", tmm_op_layernorm_forward(r, A(a->h_mid), P(m, bp->ln2_w), P(m, bp->ln2_b), N, d,
                                         TMM_NN_LAYERNORM_EPS, scratch, A(a->x2), A(a->mean2), A(a->rstd2)));
        tmm_view u = A(a->x2);
        if (c->heads) {
            OP("matmul", linear(r, u, N, d, d, P(m, bp->in_w), P(m, bp->in_b), A(a->v), false));
            u = A(a->v);
        }
        OP("toeplitz", toeplitz_fwd(m, r, &td, u, P(m, bp->w), P(m, bp->beta), A(a->y1)));
        tmm_view mix = A(a->y1);
        if (c->expanded) {
            OP("silu", tmm_op_bias_silu_forward(r, A(a->y1), A(m->zeros_d), N, d, A(a->q)));
            OP("toeplitz", toeplitz_fwd(m, r, &td, A(a->q), P(m, bp->w2), P(m, bp->beta2), A(a->y2)));
            mix = A(a->y2);
        }
        tmm_view next = A(l + 1 < c->n_layers ? m->layers[l + 1].h_in : m->h_out);
        OP("residual", tmm_op_copy(r, A(a->h_mid), next, N * d));
        if (c->heads)
            OP("matmul", linear(r, mix, N, d, d, P(m, bp->out_w), P(m, bp->out_b), next, true));
        else
            OP("residual", tmm_op_axpy(r, 1.0f, mix, next, N * d));
    }
    OP("matmul", linear(r, A(m->h_out), N, d, V, P(m, m->table.head), none, A(m->logits), false));
    const uint32_t k = m->slot;
    /* with backward the same kernel also writes dlogits over the logits */
    OP(backward ? "xent fwd+bwd" : "xent", tmm_op_xent(r, A(m->logits), A(m->targets[k]), N, V, m->loss_denominator[k], backward,
                               scratch, A(m->row_loss), A(m->argmax[k])));
    OP("loss mean", tmm_op_xent_mean(r, A(m->row_loss), N, m->loss_denominator[k], scratch, A(m->loss[k])));
    return TMM_OK;
}

static tmm_status record_backward(tmm_model *m, tmm_recorder *r)
{
    const tmm_model_config *c = &m->table.config;
    const uint32_t N = m->rows, d = c->d_model, e = c->expansion * d, V = c->vocab;
    const tmm_toeplitz_desc td = toeplitz_desc(m);
    const uint32_t flags = c->frozen ? TMM_TOEPLITZ_SKIP_PARAMS : 0;
    tmm_view scratch = A(m->scratch), dh = A(m->dh), g1 = A(m->g1), g2 = A(m->g2), ge = A(m->ge);

    /* the logits now hold dL/dlogits */
    OP("matmul bwd", linear_dw(r, A(m->logits), A(m->h_out), N, d, V, G(m, m->table.head)));
    OP("matmul bwd", linear_dx(r, A(m->logits), N, d, V, P(m, m->table.head), dh));
    for (uint32_t l = c->n_layers; l-- > 0;) {
        const tmm_block_params *bp = &m->table.blocks[l];
        layer_acts *a = &m->layers[l];
        tmm_view mix = A(c->expanded ? a->y2 : a->y1);
        /* mixer branch: dh is dL/d(block output) and stays the residual gradient */
        tmm_view dmix = dh;
        if (c->heads) {
            OP("matmul bwd", linear_dx(r, dh, N, d, d, P(m, bp->out_w), g1));
            OP("matmul bwd", linear_dw(r, dh, mix, N, d, d, G(m, bp->out_w)));
            OP("bias grad bwd", tmm_op_sum_cols(r, dh, N, d, scratch, G(m, bp->out_b)));
            dmix = g1;
        }
        tmm_view dy1 = dmix;
        if (c->expanded) {
            OP("toeplitz bwd", toeplitz_bwd(m, r, &td, flags, A(a->q), P(m, bp->w2), dmix, scratch, g2,
                                             c->frozen ? none : G(m, bp->w2), c->frozen ? none : G(m, bp->beta2)));
            OP("silu bwd", tmm_op_bias_silu_backward(r, A(a->y1), A(m->zeros_d), g2, N, d, false, scratch, g2,
                                              A(m->dummy_d)));
            dy1 = g2;
        }
        tmm_view dv = dy1.buffer == m->g1 ? g2 : g1;
        tmm_view u = A(c->heads ? a->v : a->x2);
        OP("toeplitz bwd", toeplitz_bwd(m, r, &td, flags, u, P(m, bp->w), dy1, scratch, dv,
                                         c->frozen ? none : G(m, bp->w), c->frozen ? none : G(m, bp->beta)));
        tmm_view dx2 = dv;
        if (c->heads) {
            dx2 = dv.buffer == m->g1 ? g2 : g1;
            OP("matmul bwd", linear_dx(r, dv, N, d, d, P(m, bp->in_w), dx2));
            OP("matmul bwd", linear_dw(r, dv, A(a->x2), N, d, d, G(m, bp->in_w)));
            OP("bias grad bwd", tmm_op_sum_cols(r, dv, N, d, scratch, G(m, bp->in_b)));
        }
        OP("layernorm bwd", tmm_op_layernorm_backward(r, A(a->h_mid), P(m, bp->ln2_w), A(a->mean2), A(a->rstd2), dx2, N, d,
                                          false, scratch, dx2, G(m, bp->ln2_w), G(m, bp->ln2_b)));
        OP("residual", tmm_op_axpy(r, 1.0f, dx2, dh, N * d));
        /* MLP branch: dh is now dL/dh_mid */
        OP("matmul bwd", linear_dx(r, dh, N, e, d, P(m, bp->fc2_w), ge));
        OP("matmul bwd", linear_dw(r, dh, A(a->z), N, e, d, G(m, bp->fc2_w)));
        OP("bias grad bwd", tmm_op_sum_cols(r, dh, N, d, scratch, G(m, bp->fc2_b)));
        OP("silu bwd", tmm_op_bias_silu_backward(r, A(a->f1), P(m, bp->fc1_b), ge, N, e, false, scratch, ge,
                                          G(m, bp->fc1_b)));
        OP("matmul bwd", linear_dx(r, ge, N, d, e, P(m, bp->fc1_w), g1));
        OP("matmul bwd", linear_dw(r, ge, A(a->x1), N, d, e, G(m, bp->fc1_w)));
        OP("layernorm bwd", tmm_op_layernorm_backward(r, A(a->h_in), P(m, bp->ln1_w), A(a->mean1), A(a->rstd1), g1, N, d,
                                          false, scratch, g1, G(m, bp->ln1_w), G(m, bp->ln1_b)));
        OP("residual", tmm_op_axpy(r, 1.0f, g1, dh, N * d));
    }
    OP("embedding bwd", tmm_op_embedding_backward(r, A(m->index[m->slot]), dh, N, V, d, false, scratch, G(m, m->table.embed)));
    return TMM_OK;
}

tmm_status tmm_model_record(tmm_model *m, tmm_recorder *r, bool backward)
{
    TMM_TRY(record_forward(m, r, backward));
    return backward ? record_backward(m, r) : TMM_OK;
}

uint32_t tmm_model_scored(const tmm_model *m) { return m->n_scored[m->slot]; }
uint32_t tmm_model_loss_denominator(const tmm_model *m) { return m->loss_denominator[m->slot]; }
void tmm_model_set_loss_denominator(tmm_model *m, uint32_t count) { m->loss_denominator[m->slot] = count; }

void tmm_model_set_slot(tmm_model *m, uint32_t slot) { m->slot = slot % TMM_MODEL_SLOTS; }

tmm_buffer *tmm_model_param_buffer(tmm_model *m) { return m->params; }
tmm_buffer *tmm_model_grad_buffer(tmm_model *m) { return m->grads; }

void tmm_model_mark_run(tmm_model *m, bool backward) { m->last_run = backward ? 1 : 0; }

tmm_status tmm_model_run(tmm_model *m, bool backward)
{
    if (!m->have_batch[m->slot])
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "tmm_model_run before tmm_model_set_batch");
    int mode = backward ? 1 : 0;
    if (m->recorded != mode || m->recorded_scored != m->loss_denominator[m->slot] || m->recorded_slot != m->slot) {
        m->recorded = -1;
        TMM_TRY(tmm_recorder_begin(m->recorder));
        TMM_TRY(tmm_model_record(m, m->recorder, backward));
        TMM_TRY(tmm_recorder_end(m->recorder));
        m->recorded = mode;
        m->recorded_scored = m->loss_denominator[m->slot];
        m->recorded_slot = m->slot;
    }
    m->last_run = -1;
    TMM_TRY(tmm_recorder_run(m->recorder));
    m->last_run = mode;
    return TMM_OK;
}

tmm_status tmm_model_loss(tmm_model *m, float *loss)
{
    if (m->last_run < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no finished run to read a loss from");
    return tmm_buffer_read(m->loss[m->slot], 0, loss, 4);
}

tmm_status tmm_model_argmax(tmm_model *m, uint32_t *argmax)
{
    if (m->last_run < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no finished run to read predictions from");
    return tmm_buffer_read(m->argmax[m->slot], 0, argmax, (uint64_t)m->rows * 4);
}

tmm_status tmm_model_logits_rows(tmm_model *m, uint64_t row0, uint64_t count, float *logits)
{
    if (m->last_run != 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logits are kept only by a forward-only run");
    if (row0 > m->rows || count > m->rows - row0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logit rows [%llu, +%llu) are outside the %u rows",
                        (unsigned long long)row0, (unsigned long long)count, m->rows);
    const uint64_t V = m->table.config.vocab;
    return tmm_buffer_read(m->logits, row0 * V * 4, logits, count * V * 4);
}

tmm_status tmm_model_mixer_inputs(tmm_model *m, uint32_t layer, tmm_view *u1, tmm_view *u2)
{
    const tmm_model_config *c = &m->table.config;
    if (layer >= c->n_layers)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "layer %u of a %u-layer model", layer, c->n_layers);
    const layer_acts *a = &m->layers[layer];
    *u1 = tmm_whole(c->heads ? a->v : a->x2);
    *u2 = c->expanded ? tmm_whole(a->q) : none;
    return TMM_OK;
}

tmm_status tmm_model_logits(tmm_model *m, float *logits)
{
    if (m->last_run != 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logits are kept only by a forward-only run "
                                                  "(the backward replaces them by their gradient)");
    return tmm_buffer_read(m->logits, 0, logits, (uint64_t)m->rows * m->table.config.vocab * 4);
}
