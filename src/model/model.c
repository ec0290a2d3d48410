/* The model frame on a device (arch.h): buffers, the recorded forward and
 * backward passes, batches. The mixer is a class (src/mixer/mixer.h). */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/frame.h"
#include "ops/llama_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "ops/ssm_ops.h"

/* What the frame keeps of each block for the backward, one line each: name,
 * floats per row of the batch (D = d, ONE = 1, E = e·d, EA = the MLP's
 * pre-activation width: e·d, or 2e·d for SwiGLU's gate and up), and which
 * models have it. The halves of a block are "1" (first) and "2" (second);
 * which of them is the mixer's depends on the architecture. This list alone
 * drives the struct, allocation, release and the memory plan. The mixer keeps
 * its own (src/mixer/). The blocks' inputs are the residual stream (hb).
 *
 * Precision and recomputation (docs/model.md): with fp32 and no
 * recomputation every layer has its own set of activations. Otherwise the
 * layers share one set (the frame's, and the mixer's where it recomputes or
 * restores them), and before the backward of layer l < L-1 (the last layer's
 * are still in the set) the frame restores the set: it unpacks the 16-bit
 * copies the forward kept of layer l, and recomputes what was not kept (the
 * mixer's forward, or the whole block from its input). Recomputing runs the
 * same kernels on the same inputs, so fp32 gradients are bit-identical. */
#define LAYER_ACTS(X)                                                                              \
    X(mean1, ONE, LN)     /* norm 1 statistics (mean: LayerNorm only) */                           \
    X(rstd1, ONE, ALL)                                                                             \
    X(x1, D, ALL)         /* Norm1(h_in): the first half's input */                                \
    X(h_mid, D, TWO)      /* h after the first half */                                             \
    X(mean2, ONE, LN2)                                                                             \
    X(rstd2, ONE, TWO)                                                                             \
    X(x2, D, TWO)         /* Norm2(h_mid): the second half's input */                              \
    X(mlp_a, EA, TWO)     /* the MLP's pre-activation: x W1ᵀ, or [x Wgateᵀ, x Wupᵀ] */             \
    X(mlp_z, E, TWO)      /* act(a + b1), or silu(gate) ⊙ up */

typedef struct layer_acts {
#define DECLARE_ACT(name, size, who) tmm_buffer *name;
    LAYER_ACTS(DECLARE_ACT)
#undef DECLARE_ACT
} layer_acts;

struct tmm_model {
    tmm_device *device;
    tmm_param_table table;
    const tmm_arch_desc *arch;
    uint32_t batch, rows;
    tmm_model_options opts;
    tmm_mixer *mixer;
    bool profile;          /* wrap every op in a timestamp region */
    tmm_allocation alloc;  /* alloc.dry: only count the bytes each buffer would take */

    tmm_buffer *params, *grads;
    tmm_buffer *weights16; /* 16-bit precision: the parameters in 16 bits, packed at the start of every
                              forward, which the matmuls read (tmm_mixer_weight) */
    layer_acts *layers;    /* frame_sets sets: layer l uses set l % frame_sets */
    uint32_t frame_sets;
    /* The residual stream at block boundaries: block l reads hb(l) and writes
     * hb(l + 1); hb(L) is the last block's output. One buffer per boundary
     * (n_hbuf = L + 1) in fp32, two alternating ones (2) in 16 bits. */
    tmm_buffer **hbuf;
    uint32_t n_hbuf;
    /* 16-bit copies of layer l < L-1's activations, kept[l * n_keep + k]: k 0
     * its input hb(l), then the entries of keep (set 0's frame and mixer
     * activations where they are restored rather than recomputed). */
    tmm_act_list frame_acts, mixer_acts, keep;
    tmm_buffer **kept;
    uint32_t n_keep;
    tmm_buffer *hf, *fmean, *frstd;   /* the final norm's output and statistics */
    tmm_buffer *logits, *row_loss;
    /* host-visible inputs and outputs, one set per slot (double buffering) */
    tmm_buffer *tokens[TMM_MODEL_SLOTS], *targets[TMM_MODEL_SLOTS], *index[TMM_MODEL_SLOTS];
    tmm_buffer *loss[TMM_MODEL_SLOTS], *argmax[TMM_MODEL_SLOTS];
    uint32_t n_scored[TMM_MODEL_SLOTS];
    uint32_t loss_denominator[TMM_MODEL_SLOTS];
    bool have_batch[TMM_MODEL_SLOTS];
    uint32_t slot;
    tmm_buffer *dh, *g1, *g2, *ge, *scratch;

    /* the autoencoder's modes (tmm_model_set_input, tmm_model_set_encoder) */
    tmm_view input, d_input;   /* input.buffer: the first block reads input instead of the embedding */
    bool encoder;              /* no LM head: the backward starts from d_hidden */
    tmm_view d_hidden;
    tmm_view loss_scale;       /* the xent's dlogits are multiplied by this float (empty: 1) */

    tmm_recorder *recorder;
    int recorded;          /* -1 none, 0 forward, 1 forward + backward */
    uint32_t recorded_scored, recorded_slot;
    int last_run;          /* like recorded, for what the buffers hold */
};

tmm_status tmm_alloc(const tmm_allocation *a, tmm_buffer **out, uint64_t floats, tmm_mem_category category,
                     tmm_memory_kind kind)
{
    uint64_t bytes = (floats ? floats : 1) * 4;
    if (a->dry) {
        *(category == TMM_MEM_ACTIVATIONS ? &a->dry->activations : &a->dry->workspace) += bytes;
        return TMM_OK;
    }
    return tmm_buffer_create(a->device, bytes, kind, out);
}

static tmm_status list_add(tmm_act_list *list, tmm_buffer **buffer, uint64_t floats)
{
    if (list->n == list->cap) {
        uint32_t cap = list->cap ? 2 * list->cap : 16;
        tmm_act_entry *e = realloc(list->e, cap * sizeof *e);
        if (!e)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        list->e = e, list->cap = cap;
    }
    list->e[list->n++] = (tmm_act_entry){ buffer, floats };
    return TMM_OK;
}

tmm_status tmm_alloc_act(const tmm_allocation *a, uint32_t set, tmm_buffer **out, uint64_t floats)
{
    TMM_TRY(tmm_alloc(a, out, floats, TMM_MEM_ACTIVATIONS, TMM_MEMORY_DEVICE));
    return set == 0 && a->acts ? list_add(a->acts, out, floats) : TMM_OK;
}

static tmm_buffer *hb(const tmm_model *m, uint32_t i) { return m->hbuf[i % m->n_hbuf]; }
static bool half_precision(const tmm_model *m) { return m->opts.precision != TMM_PRECISION_FP32; }
static tmm_elem elem_of(tmm_precision p)
{
    return p == TMM_PRECISION_FP16 ? TMM_ELEM_F16 : p == TMM_PRECISION_BF16 ? TMM_ELEM_BF16 : TMM_ELEM_F32;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static uint64_t mlp_width(const tmm_model *m) { return (uint64_t)m->table.config.expansion * m->table.config.d_model; }

/* Halves per block: the mixer's and the MLP's, or the mixer's alone (no MLP). */
static int n_halves(const tmm_model *m)
{
    bool mixer_half[2];
    return (int)tmm_frame_halves(m->arch, mixer_half);
}

static uint64_t scratch_floats(const tmm_model *m)
{
    const tmm_model_config *c = &m->table.config;
    const uint32_t N = m->rows, d = c->d_model, e = (uint32_t)mlp_width(m), V = c->vocab;
    uint64_t s = tmm_op_layernorm_forward_scratch(N, d);
    s = max_u64(s, tmm_op_layernorm_backward_scratch(N, d));
    s = max_u64(s, tmm_op_bias_silu_backward_scratch(N, e));
    s = max_u64(s, tmm_op_gelu_backward_scratch(N, e));
    s = max_u64(s, tmm_op_sum_cols_scratch(N, d));
    s = max_u64(s, tmm_op_sum_cols_scratch(N, e));
    s = max_u64(s, tmm_op_xent_scratch(N, V));
    s = max_u64(s, tmm_op_xent_mean_scratch(N));
    s = max_u64(s, tmm_op_embedding_backward_scratch(N, d));
    s = max_u64(s, tmm_op_rmsnorm_forward_scratch(N, d));
    s = max_u64(s, tmm_op_rmsnorm_backward_scratch(N, d));
    return max_u64(s, m->mixer->cls->scratch_floats(m->mixer));
}

/* Every buffer of the model, through tmm_alloc (so the dry run counts the same). */
static tmm_status allocate(tmm_model *m)
{
    const tmm_model_config *c = &m->table.config;
    const tmm_allocation *al = &m->alloc;
    const uint64_t N = m->rows, d = c->d_model, e = mlp_width(m), V = c->vocab;
    const uint64_t words16 = half_precision(m) ? tmm_pack16_words(m->table.arena_floats) * 4 : 0;
    if (al->dry) {
        al->dry->params = m->table.arena_floats * 4 + words16;
        al->dry->grads = m->table.arena_floats * 4;
    } else {
        TMM_TRY(tmm_buffer_create(m->device, m->table.arena_floats * 4, TMM_MEMORY_DEVICE, &m->params));
        TMM_TRY(tmm_buffer_create(m->device, m->table.arena_floats * 4, TMM_MEMORY_DEVICE, &m->grads));
        if (words16)
            TMM_TRY(tmm_buffer_create(m->device, words16, TMM_MEMORY_DEVICE, &m->weights16));
    }
    const uint64_t D = d, ONE = 1, E = e, EA = m->arch->mlp == TMM_MLP_SWIGLU ? 2 * e : e;
    const bool ALL = true, LN = m->arch->norm == TMM_NORM_LAYER, TWO = n_halves(m) == 2, LN2 = LN && TWO;
    for (uint32_t i = 0; i < m->n_hbuf; i++)
        TMM_TRY(tmm_alloc(al, &m->hbuf[i], N * d, TMM_MEM_ACTIVATIONS, TMM_MEMORY_DEVICE));
    m->alloc.acts = &m->frame_acts;
    for (uint32_t l = 0; l < m->frame_sets; l++) {
        layer_acts *a = &m->layers[l];
#define ALLOC_ACT(name, size, who) \
        if (who)                   \
            TMM_TRY(tmm_alloc_act(al, l, &a->name, N * size));
        LAYER_ACTS(ALLOC_ACT)
#undef ALLOC_ACT
    }
    m->alloc.acts = NULL;
    if (m->arch->final_norm) {
        TMM_TRY(tmm_alloc(al, &m->hf, N * d, TMM_MEM_ACTIVATIONS, TMM_MEMORY_DEVICE));
        if (LN)
            TMM_TRY(tmm_alloc(al, &m->fmean, N, TMM_MEM_ACTIVATIONS, TMM_MEMORY_DEVICE));
        TMM_TRY(tmm_alloc(al, &m->frstd, N, TMM_MEM_ACTIVATIONS, TMM_MEMORY_DEVICE));
    }
    TMM_TRY(tmm_alloc(al, &m->logits, N * V, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->row_loss, N, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    for (uint32_t k = 0; k < TMM_MODEL_SLOTS; k++) {
        TMM_TRY(tmm_alloc(al, &m->loss[k], 1, TMM_MEM_WORKSPACE, TMM_MEMORY_HOST));
        TMM_TRY(tmm_alloc(al, &m->argmax[k], N, TMM_MEM_WORKSPACE, TMM_MEMORY_HOST));
        TMM_TRY(tmm_alloc(al, &m->tokens[k], N, TMM_MEM_WORKSPACE, TMM_MEMORY_HOST));
        TMM_TRY(tmm_alloc(al, &m->targets[k], N, TMM_MEM_WORKSPACE, TMM_MEMORY_HOST));
        TMM_TRY(tmm_alloc(al, &m->index[k], tmm_nn_embedding_index_words((uint32_t)N), TMM_MEM_WORKSPACE,
                          TMM_MEMORY_HOST));
    }
    TMM_TRY(tmm_alloc(al, &m->dh, N * d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->g1, N * d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->g2, N * d, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    TMM_TRY(tmm_alloc(al, &m->ge, N * EA, TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE));
    return TMM_OK;
}

static tmm_status check_options(const tmm_model_options *o)
{
    if ((unsigned)o->impl > TMM_TOEPLITZ_FFT || (unsigned)o->precision >= TMM_PRECISION_COUNT ||
        (unsigned)o->recompute >= TMM_RECOMPUTE_COUNT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model options out of range (impl %d, precision %d, recompute %d)",
                        (int)o->impl, (int)o->precision, (int)o->recompute);
    return TMM_OK;
}

static tmm_status check_size(const tmm_model_config *config, uint32_t batch)
{
    TMM_TRY(tmm_model_config_check(config));
    if (batch == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the batch size must be at least 1");
    uint64_t rows = (uint64_t)batch * config->n_ctx;
    if (rows * config->vocab > UINT32_MAX || rows * 2 * config->expansion * config->d_model > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "batch %u x context %u is too large for one step; use a smaller batch",
                        batch, config->n_ctx);
    return TMM_OK;
}

/* Builds everything but the parameter values: the table, the buffers (or in
 * a dry run their bytes), the mixer. */
/* The 16-bit copies of what layers 0 .. L-2 restore (see kept). */
static tmm_status allocate_kept(tmm_model *m)
{
    const uint32_t L = m->table.config.n_layers;
    if (!half_precision(m) || L < 2)
        return TMM_OK;
    if (m->opts.recompute != TMM_RECOMPUTE_BLOCK)
        for (uint32_t i = 0; i < m->frame_acts.n; i++)
            TMM_TRY(list_add(&m->keep, m->frame_acts.e[i].buffer, m->frame_acts.e[i].floats));
    if (m->opts.recompute == TMM_RECOMPUTE_NONE)
        for (uint32_t i = 0; i < m->mixer_acts.n; i++)
            TMM_TRY(list_add(&m->keep, m->mixer_acts.e[i].buffer, m->mixer_acts.e[i].floats));
    m->n_keep = 1 + m->keep.n;
    if (!(m->kept = calloc((size_t)(L - 1) * m->n_keep, sizeof *m->kept)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    const uint64_t hb_floats = (uint64_t)m->rows * m->table.config.d_model;
    for (uint32_t l = 0; l + 1 < L; l++)
        for (uint32_t k = 0; k < m->n_keep; k++)
            TMM_TRY(tmm_alloc(&m->alloc, &m->kept[l * m->n_keep + k],
                              tmm_pack16_words(k ? m->keep.e[k - 1].floats : hb_floats), TMM_MEM_ACTIVATIONS,
                              TMM_MEMORY_DEVICE));
    return TMM_OK;
}

static tmm_status build(tmm_model *m, const tmm_model_config *config, const tmm_model_options *opts)
{
    TMM_TRY(tmm_param_table_build(config, &m->table));
    m->arch = tmm_arch_of(config->arch);
    m->opts = *opts;
    const uint32_t L = config->n_layers;
    const bool fp32 = !half_precision(m);
    m->frame_sets = fp32 && opts->recompute != TMM_RECOMPUTE_BLOCK ? L : 1;
    m->n_hbuf = fp32 ? L + 1 : 2;
    if (!(m->layers = calloc(m->frame_sets, sizeof *m->layers)) || !(m->hbuf = calloc(m->n_hbuf, sizeof *m->hbuf)))
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    TMM_TRY(allocate(m));
    tmm_mixer_setup ms = { .alloc = &m->alloc, .table = &m->table, .batch = m->batch, .impl = opts->impl,
                           .params = m->params, .grads = m->grads, .weights16 = m->weights16,
                           .weights16_elem = elem_of(opts->precision),
                           .act_sets = fp32 && opts->recompute == TMM_RECOMPUTE_NONE ? L : 1 };
    m->alloc.acts = &m->mixer_acts;
    tmm_status s = m->arch->mixer->create(&ms, &m->mixer);
    m->alloc.acts = NULL;
    TMM_TRY(s);
    TMM_TRY(allocate_kept(m));
    return tmm_alloc(&m->alloc, &m->scratch, scratch_floats(m), TMM_MEM_WORKSPACE, TMM_MEMORY_DEVICE);
}

static void release(tmm_model *m)
{
    tmm_recorder_destroy(m->recorder);
    if (m->mixer)
        m->mixer->cls->destroy(m->mixer);
    if (m->layers)
        for (uint32_t l = 0; l < m->frame_sets; l++) {
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
    for (uint32_t i = 0; m->hbuf && i < m->n_hbuf; i++)
        tmm_buffer_destroy(m->hbuf[i]);
    const uint32_t L = m->table.config.n_layers;
    for (size_t i = 0; m->kept && i < (size_t)(L - 1) * m->n_keep; i++)
        tmm_buffer_destroy(m->kept[i]);
    free(m->hbuf), free(m->kept);
    free(m->frame_acts.e), free(m->mixer_acts.e), free(m->keep.e);
    tmm_buffer *all[] = { m->params, m->grads, m->weights16, m->hf, m->fmean, m->frstd, m->logits, m->row_loss,
                          m->dh, m->g1, m->g2, m->ge, m->scratch };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tmm_buffer_destroy(all[i]);
    free(m->layers);
    tmm_param_table_free(&m->table);
}

tmm_status tmm_model_memory_plan(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 const tmm_model_options *options, tmm_model_memory *out)
{
    const tmm_model_options opts = options ? *options : (tmm_model_options){ 0 };
    const tmm_toeplitz_impl impl = opts.impl;
    memset(out, 0, sizeof *out);
    TMM_TRY(check_options(&opts));
    TMM_TRY(check_size(config, batch));
    if (impl == TMM_TOEPLITZ_FFT && !device)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the FFT path's memory depends on the device: pass one");
    tmm_model m = { .batch = batch, .rows = batch * config->n_ctx, .alloc = { .device = device, .dry = out } };
    tmm_status s = build(&m, config, &opts);
    release(&m);
    out->total = out->params + out->grads + out->activations + out->workspace + out->fft_plans;
    return s;
}

void tmm_model_destroy(tmm_model *m)
{
    if (!m)
        return;
    release(m);
    free(m);
}

tmm_status tmm_model_create(tmm_device *device, const tmm_model_config *config, uint32_t batch, tmm_model **out)
{
    return tmm_model_create_opts(device, config, batch, NULL, out);
}

tmm_status tmm_model_create_impl(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 tmm_toeplitz_impl impl, tmm_model **out)
{
    return tmm_model_create_opts(device, config, batch, &(tmm_model_options){ .impl = impl }, out);
}

tmm_status tmm_model_create_opts(tmm_device *device, const tmm_model_config *config, uint32_t batch,
                                 const tmm_model_options *options, tmm_model **out)
{
    const tmm_model_options opts = options ? *options : (tmm_model_options){ 0 };
    *out = NULL;
    TMM_TRY(check_options(&opts));
    TMM_TRY(check_size(config, batch));
    tmm_model *m = calloc(1, sizeof *m);
    if (!m)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    m->device = device;
    m->batch = batch;
    m->rows = batch * config->n_ctx;
    m->alloc.device = device;
    m->recorded = m->last_run = -1;
    tmm_status s = build(m, config, &opts);
    if (s == TMM_OK)
        s = tmm_recorder_create(device, &m->recorder);
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
tmm_mixer *tmm_model_mixer(tmm_model *m) { return m->mixer; }

tmm_view tmm_model_mixer_input(const tmm_model *m, uint32_t layer)
{
    const layer_acts *a = &m->layers[layer % m->frame_sets];
    return tmm_whole(m->arch->mixer_first ? a->x1 : a->x2);
}

void tmm_model_set_profile(tmm_model *m, bool profile)
{
    m->profile = profile;
    m->recorded = -1;
}

tmm_status tmm_model_set_toeplitz_impl(tmm_model *m, tmm_toeplitz_impl impl)
{
    m->recorded = -1;
    return m->mixer->cls->set_toeplitz_impl ? m->mixer->cls->set_toeplitz_impl(m->mixer, impl) : TMM_OK;
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

static const tmm_view none = { 0 };

static tmm_view P(const tmm_model *m, int idx)
{
    return idx < 0 ? none : tmm_param_view(m->params, &m->table.params[idx], TMM_ELEM_F32);
}

static tmm_view G(const tmm_model *m, int idx)
{
    return idx < 0 ? none : tmm_param_view(m->grads, &m->table.params[idx], TMM_ELEM_F32);
}

/* A weight matrix as the matmuls read it (their B): see tmm_mixer_weight. */
static tmm_view W(const tmm_model *m, int idx)
{
    return m->weights16 ? tmm_param_view(m->weights16, &m->table.params[idx], elem_of(m->opts.precision)) : P(m, idx);
}

static tmm_view A(tmm_buffer *b) { return tmm_whole(b); }

/* A norm's parameters and saved statistics. */
typedef struct norm_io {
    int w, b;
    tmm_buffer *mean, *rstd;
} norm_io;

/* y = Norm(h) over d, statistics saved for the backward. */
static tmm_status norm_forward(const tmm_model *m, const tmm_rec *rec, const norm_io *n, tmm_view h, tmm_view y)
{
    return tmm_frame_norm(rec, m->arch, m->rows, m->table.config.d_model, h, P(m, n->w), P(m, n->b), y,
                          n->mean ? A(n->mean) : none, A(n->rstd));
}

/* dx (in place: it holds dL/dNorm(h) on entry) = dL/dh, and the norm's gradients. */
/* dx: the gradient of the norm's output, replaced by that of its input; or
 * with a residual's gradient dh (a view, else empty), that is added to dh in
 * the same pass and dx is left as scratch. */
static tmm_status norm_backward(const tmm_model *m, const tmm_rec *rec, const norm_io *n, tmm_view h, tmm_view dx,
                                tmm_view dh)
{
    const uint32_t N = m->rows, d = m->table.config.d_model;
    if (m->arch->norm == TMM_NORM_RMS && dh.buffer)
        TMM_REC_OP(rec, "rmsnorm bwd", tmm_op_rmsnorm_backward_residual(rec->r, h, P(m, n->w), A(n->rstd), dx, N, d,
                                                                        false, rec->scratch, dh, G(m, n->w)));
    else if (m->arch->norm == TMM_NORM_RMS)
        TMM_REC_OP(rec, "rmsnorm bwd", tmm_op_rmsnorm_backward(rec->r, h, P(m, n->w), A(n->rstd), dx, N, d, false,
                                                               rec->scratch, dx, G(m, n->w)));
    else if (dh.buffer)
        TMM_REC_OP(rec, "layernorm bwd", tmm_op_layernorm_backward_residual(rec->r, h, P(m, n->w), A(n->mean),
                                                                            A(n->rstd), dx, N, d, false, rec->scratch,
                                                                            dh, G(m, n->w), G(m, n->b)));
    else
        TMM_REC_OP(rec, "layernorm bwd", tmm_op_layernorm_backward(rec->r, h, P(m, n->w), A(n->mean), A(n->rstd),
                                                                   dx, N, d, false, rec->scratch, dx, G(m, n->w),
                                                                   G(m, n->b)));
    return TMM_OK;
}

/* h += MLP(x), its activations into layer l's set. */
static tmm_status mlp_forward(const tmm_model *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view h)
{
    const tmm_block_params *bp = &m->table.blocks[l];
    const layer_acts *a = &m->layers[l % m->frame_sets];
    const tmm_frame_mlp mlp = { W(m, bp->mlp_in_w), P(m, bp->mlp_in_b), W(m, bp->mlp_out_w), P(m, bp->mlp_out_b),
                                A(a->mlp_a), A(a->mlp_z) };
    return tmm_frame_mlp_forward(rec, m->arch, m->rows, m->table.config.d_model, (uint32_t)mlp_width(m), false, x,
                                 &mlp, h);
}

/* dx = dL/dx of the MLP given dh, into g1; the MLP's gradients. */
static tmm_status mlp_backward(const tmm_model *m, const tmm_rec *rec, uint32_t l, tmm_view x, tmm_view dh,
                               tmm_view *dx)
{
    const tmm_block_params *bp = &m->table.blocks[l];
    const layer_acts *a = &m->layers[l % m->frame_sets];
    const uint32_t N = m->rows, d = m->table.config.d_model, e = (uint32_t)mlp_width(m);
    const bool swiglu = m->arch->mlp == TMM_MLP_SWIGLU;
    const uint32_t ea = swiglu ? 2 * e : e;
    tmm_recorder *r = rec->r;
    tmm_view ge = A(m->ge);
    /* SiLU and GELU in the product's epilogue when it takes one pass: da over
     * the pre-activation (not needed again), the bias gradient its column sums */
    const bool fused = !swiglu && tmm_op_linear_dx_act_fits(tmm_recorder_device(r), N, e, d);
    if (fused) {
        const tmm_matmul_epilogue act =
            m->arch->mlp == TMM_MLP_GELU ? TMM_MATMUL_EPI_GELU_GRAD : TMM_MATMUL_EPI_SILU_GRAD;
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx_act(r, dh, N, e, d, W(m, bp->mlp_out_w),
                                                           P(m, bp->mlp_in_b), act, A(a->mlp_a)));
    } else {
        TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, dh, N, e, d, W(m, bp->mlp_out_w), ge, false));
    }
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, dh, A(a->mlp_z), N, e, d, G(m, bp->mlp_out_w), rec->half_dw));
    if (bp->mlp_out_b >= 0)
        TMM_REC_OP(rec, "bias grad bwd", tmm_op_sum_cols(r, dh, N, d, rec->scratch, G(m, bp->mlp_out_b)));
    /* da: the gradient of the pre-activation (SwiGLU's over its own input, which is not needed again) */
    tmm_view da = ge;
    if (fused) {
        da = A(a->mlp_a);
        TMM_REC_OP(rec, "bias grad bwd", tmm_op_sum_cols(r, da, N, e, rec->scratch, G(m, bp->mlp_in_b)));
    } else if (swiglu) {
        da = A(a->mlp_a);
        TMM_REC_OP(rec, "swiglu bwd", tmm_op_swiglu_backward(r, A(a->mlp_a), ge, N, e, da));
    } else if (m->arch->mlp == TMM_MLP_GELU) {
        TMM_REC_OP(rec, "gelu bwd", tmm_op_gelu_backward(r, A(a->mlp_a), P(m, bp->mlp_in_b), ge, N, e, false,
                                                         rec->scratch, ge, G(m, bp->mlp_in_b)));
    } else {
        TMM_REC_OP(rec, "silu bwd", tmm_op_bias_silu_backward(r, A(a->mlp_a), P(m, bp->mlp_in_b), ge, N, e, false,
                                                              rec->scratch, ge, G(m, bp->mlp_in_b)));
    }
    *dx = A(m->g1);
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dx(r, da, N, d, ea, W(m, bp->mlp_in_w), *dx, false));
    TMM_REC_OP(rec, "matmul bwd", tmm_op_linear_dw(r, da, x, N, d, ea, G(m, bp->mlp_in_w), rec->half_dw));
    return TMM_OK;
}

/* A block's halves in order (n_halves: without an MLP the mixer's alone, which
 * the architecture then puts first): whether half i is the mixer, its norm,
 * its input x and the residual h it reads. */
typedef struct half {
    bool mixer;
    norm_io norm;
    tmm_buffer *h, *x;
} half;

static void halves(const tmm_model *m, uint32_t l, half out[2])
{
    const tmm_block_params *bp = &m->table.blocks[l];
    layer_acts *a = &m->layers[l % m->frame_sets];
    const norm_io mix = { bp->mix_norm_w, bp->mix_norm_b, NULL, NULL }, mlp = { bp->mlp_norm_w, bp->mlp_norm_b, NULL, NULL };
    bool mixer_half[2];
    tmm_frame_halves(m->arch, mixer_half);
    out[0] = (half){ mixer_half[0], mixer_half[0] ? mix : mlp, hb(m, l), a->x1 };
    out[1] = (half){ mixer_half[1], mixer_half[1] ? mix : mlp, a->h_mid, a->x2 };
    out[0].norm.mean = a->mean1, out[0].norm.rstd = a->rstd1;
    out[1].norm.mean = a->mean2, out[1].norm.rstd = a->rstd2;
}

/* Block l: hb(l + 1) = hb(l) + its halves, its activations into its set. */
static tmm_status block_forward(const tmm_model *m, const tmm_rec *rec, uint32_t l)
{
    const uint32_t N = m->rows, d = m->table.config.d_model;
    half hv[2];
    halves(m, l, hv);
    tmm_buffer *out = hb(m, l + 1);
    tmm_buffer *next[2] = { n_halves(m) == 2 ? m->layers[l % m->frame_sets].h_mid : out, out };
    for (int i = 0; i < n_halves(m); i++) {
        TMM_TRY(norm_forward(m, rec, &hv[i].norm, A(hv[i].h), A(hv[i].x)));
        TMM_REC_OP(rec, "residual", tmm_op_copy(rec->r, A(hv[i].h), A(next[i]), (uint64_t)N * d));
        if (hv[i].mixer)
            TMM_TRY(m->mixer->cls->forward(m->mixer, rec, l, A(hv[i].x), A(next[i])));
        else
            TMM_TRY(mlp_forward(m, rec, l, A(hv[i].x), A(next[i])));
    }
    return TMM_OK;
}

/* pack: layer l's 16-bit copies (kept) from its input and its set's
 * activations; or unpack them back. */
static tmm_status keep_layer(const tmm_model *m, const tmm_rec *rec, uint32_t l, bool pack)
{
    const tmm_precision f = m->opts.precision;
    for (uint32_t k = 0; k < m->n_keep; k++) {
        tmm_view full = A(k ? *m->keep.e[k - 1].buffer : hb(m, l)), copy = A(m->kept[l * m->n_keep + k]);
        const uint64_t n = k ? m->keep.e[k - 1].floats : (uint64_t)m->rows * m->table.config.d_model;
        if (pack)
            TMM_REC_OP(rec, "pack16", tmm_op_pack16(rec->r, full, n, f, copy));
        else
            TMM_REC_OP(rec, "unpack16", tmm_op_unpack16(rec->r, copy, n, f, full));
    }
    return TMM_OK;
}

/* Before layer l's backward (l < L-1): its set holds its activations again. */
static tmm_status restore_layer(const tmm_model *m, const tmm_rec *rec, uint32_t l)
{
    if (m->kept)
        TMM_TRY(keep_layer(m, rec, l, false));
    return m->opts.recompute == TMM_RECOMPUTE_BLOCK ? block_forward(m, rec, l) : TMM_OK;
}

static tmm_status record_forward(tmm_model *m, tmm_recorder *r, bool backward)
{
    const tmm_model_config *c = &m->table.config;
    const uint32_t N = m->rows, d = c->d_model, V = c->vocab;
    const tmm_rec rec = { r, m->profile, A(m->scratch), TMM_ELEM_F32 };

    if (m->weights16)
        TMM_REC_OP(&rec, "weights16", tmm_op_pack16(r, A(m->params), m->table.arena_floats, m->opts.precision,
                                                    A(m->weights16)));
    if (m->input.buffer)
        TMM_REC_OP(&rec, "input", tmm_op_copy(r, m->input, A(hb(m, 0)), N * d));
    else
        TMM_REC_OP(&rec, "embedding", tmm_op_embedding_forward(r, A(m->tokens[m->slot]), P(m, m->table.embed), N, V,
                                                               d, A(hb(m, 0))));
    for (uint32_t l = 0; l < c->n_layers; l++) {
        TMM_TRY(block_forward(m, &rec, l));
        /* an encoder's backward is recorded separately (tmm_model_record_backward) */
        if ((backward || m->encoder) && m->kept && l + 1 < c->n_layers)
            TMM_TRY(keep_layer(m, &rec, l, true));
    }
    tmm_view head_in = A(hb(m, c->n_layers));
    if (m->arch->final_norm) {
        const norm_io fn = { m->table.final_norm_w, -1, m->fmean, m->frstd };
        TMM_TRY(norm_forward(m, &rec, &fn, head_in, A(m->hf)));
        head_in = A(m->hf);
    }
    if (m->encoder)
        return TMM_OK; /* no LM head: tmm_model_hidden is the output */
    TMM_REC_OP(&rec, "matmul", tmm_op_linear(r, head_in, N, d, V, W(m, m->table.head), none, A(m->logits), false));
    const uint32_t k = m->slot;
    /* with backward the same kernel also writes dlogits over the logits */
    TMM_REC_OP(&rec, backward ? "xent fwd+bwd" : "xent",
               tmm_op_xent(r, A(m->logits), A(m->targets[k]), N, V, m->loss_denominator[k], backward, m->loss_scale,
                           rec.scratch, A(m->row_loss), A(m->argmax[k])));
    TMM_REC_OP(&rec, "loss mean", tmm_op_xent_mean(r, A(m->row_loss), N, m->loss_denominator[k], rec.scratch,
                                                   A(m->loss[k])));
    return TMM_OK;
}

static tmm_status record_backward(tmm_model *m, tmm_recorder *r)
{
    const tmm_model_config *c = &m->table.config;
    const uint32_t N = m->rows, d = c->d_model, V = c->vocab;
    const tmm_elem half_dw = m->opts.precision == TMM_PRECISION_FP16   ? TMM_ELEM_F16
                             : m->opts.precision == TMM_PRECISION_BF16 ? TMM_ELEM_BF16
                                                                        : TMM_ELEM_F32;
    const tmm_rec rec = { r, m->profile, A(m->scratch), half_dw };
    tmm_view dh = A(m->dh);
    const tmm_view tmp[2] = { A(m->g1), A(m->g2) };

    if (m->encoder) {
        /* the caller's gradient of the hidden state replaces the LM head's */
        TMM_REC_OP(&rec, "hidden grad", tmm_op_copy(r, m->d_hidden, dh, N * d));
        if (m->arch->final_norm) {
            const norm_io fn = { m->table.final_norm_w, -1, m->fmean, m->frstd };
            TMM_TRY(norm_backward(m, &rec, &fn, A(hb(m, c->n_layers)), dh, (tmm_view){ 0 }));
        }
    } else if (m->arch->final_norm) {
        /* the logits now hold dL/dlogits */
        const norm_io fn = { m->table.final_norm_w, -1, m->fmean, m->frstd };
        TMM_REC_OP(&rec, "matmul bwd",
                   tmm_op_linear_dw(r, A(m->logits), A(m->hf), N, d, V, G(m, m->table.head), rec.half_dw));
        TMM_REC_OP(&rec, "matmul bwd", tmm_op_linear_dx(r, A(m->logits), N, d, V, W(m, m->table.head), dh, false));
        TMM_TRY(norm_backward(m, &rec, &fn, A(hb(m, c->n_layers)), dh, (tmm_view){ 0 }));
    } else {
        TMM_REC_OP(&rec, "matmul bwd", tmm_op_linear_dw(r, A(m->logits), A(hb(m, c->n_layers)), N, d, V,
                                                        G(m, m->table.head), rec.half_dw));
        TMM_REC_OP(&rec, "matmul bwd", tmm_op_linear_dx(r, A(m->logits), N, d, V, W(m, m->table.head), dh, false));
    }
    for (uint32_t l = c->n_layers; l-- > 0;) {
        const bool last = l + 1 == c->n_layers; /* its activations are still in the set */
        if (!last)
            TMM_TRY(restore_layer(m, &rec, l));
        half hv[2];
        halves(m, l, hv);
        /* dh is dL/d(the half's output) and stays the residual's gradient */
        for (int i = n_halves(m) - 1; i >= 0; i--) {
            tmm_view dx;
            if (hv[i].mixer && !last && m->opts.recompute == TMM_RECOMPUTE_MIXER) /* output unused: into g2 */
                TMM_TRY(m->mixer->cls->forward(m->mixer, &rec, l, A(hv[i].x), tmp[1]));
            if (hv[i].mixer)
                TMM_TRY(m->mixer->cls->backward(m->mixer, &rec, l, A(hv[i].x), dh, tmp, &dx));
            else
                TMM_TRY(mlp_backward(m, &rec, l, A(hv[i].x), dh, &dx));
            TMM_TRY(norm_backward(m, &rec, &hv[i].norm, A(hv[i].h), dx, dh)); /* dh += the norm's dx */
        }
    }
    if (m->input.buffer) {
        if (m->d_input.buffer)
            TMM_REC_OP(&rec, "input grad", tmm_op_copy(r, dh, m->d_input, N * d));
        return TMM_OK;
    }
    TMM_REC_OP(&rec, "embedding bwd", tmm_op_embedding_backward(r, A(m->index[m->slot]), dh, N, V, d, false,
                                                                rec.scratch, G(m, m->table.embed)));
    return TMM_OK;
}

tmm_status tmm_model_record(tmm_model *m, tmm_recorder *r, bool backward)
{
    if (backward && m->encoder && !m->d_hidden.buffer)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "an encoder's backward needs the hidden state's gradient "
                        "(tmm_model_set_encoder)");
    TMM_TRY(record_forward(m, r, backward));
    return backward ? record_backward(m, r) : TMM_OK;
}

tmm_status tmm_model_record_backward(tmm_model *m, tmm_recorder *r)
{
    if (m->encoder && !m->d_hidden.buffer)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "an encoder's backward needs the hidden state's gradient "
                        "(tmm_model_set_encoder)");
    return record_backward(m, r);
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

tmm_status tmm_model_set_input(tmm_model *m, tmm_view x, tmm_view dx)
{
    const uint64_t bytes = (uint64_t)m->rows * m->table.config.d_model * 4;
    if (x.buffer && x.size < bytes)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model input: the view holds %llu bytes, the input [%u, %u] needs "
                        "%llu", (unsigned long long)x.size, m->rows, m->table.config.d_model,
                        (unsigned long long)bytes);
    if (x.buffer && dx.buffer && dx.size < bytes)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "model input gradient: the view holds %llu bytes, [%u, %u] needs "
                        "%llu", (unsigned long long)dx.size, m->rows, m->table.config.d_model,
                        (unsigned long long)bytes);
    m->input = x;
    m->d_input = x.buffer ? dx : none;
    m->recorded = -1;
    return TMM_OK;
}

tmm_status tmm_model_set_encoder(tmm_model *m, bool encoder, tmm_view d_hidden)
{
    const uint64_t bytes = (uint64_t)m->rows * m->table.config.d_model * 4;
    if (encoder && d_hidden.buffer && d_hidden.size < bytes)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "hidden state gradient: the view holds %llu bytes, [%u, %u] needs "
                        "%llu", (unsigned long long)d_hidden.size, m->rows, m->table.config.d_model,
                        (unsigned long long)bytes);
    m->encoder = encoder;
    m->d_hidden = encoder ? d_hidden : none;
    m->recorded = -1;
    return TMM_OK;
}

tmm_status tmm_model_set_loss_scale(tmm_model *m, tmm_view scale)
{
    m->loss_scale = scale; /* checked by tmm_op_xent when recorded */
    m->recorded = -1;
    return TMM_OK;
}

tmm_view tmm_model_hidden(const tmm_model *m)
{
    return A(m->arch->final_norm ? m->hf : hb(m, m->table.config.n_layers));
}

tmm_status tmm_model_loss(tmm_model *m, float *loss)
{
    if (m->encoder)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a model used as an encoder has no LM loss");
    if (m->last_run < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no finished run to read a loss from");
    return tmm_buffer_read(m->loss[m->slot], 0, loss, 4);
}

tmm_status tmm_model_argmax(tmm_model *m, uint32_t *argmax)
{
    if (m->encoder)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a model used as an encoder has no predictions");
    if (m->last_run < 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "no finished run to read predictions from");
    return tmm_buffer_read(m->argmax[m->slot], 0, argmax, (uint64_t)m->rows * 4);
}

tmm_status tmm_model_logits_rows(tmm_model *m, uint64_t row0, uint64_t count, float *logits)
{
    if (m->last_run != 0 || m->encoder)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logits are kept only by a forward-only run");
    if (row0 > m->rows || count > m->rows - row0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logit rows [%llu, +%llu) are outside the %u rows",
                        (unsigned long long)row0, (unsigned long long)count, m->rows);
    const uint64_t V = m->table.config.vocab;
    return tmm_buffer_read(m->logits, row0 * V * 4, logits, count * V * 4);
}

tmm_status tmm_model_logits(tmm_model *m, float *logits)
{
    if (m->last_run != 0 || m->encoder)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "logits are kept only by a forward-only run "
                                                  "(the backward replaces them by their gradient)");
    return tmm_buffer_read(m->logits, 0, logits, (uint64_t)m->rows * m->table.config.vocab * 4);
}
