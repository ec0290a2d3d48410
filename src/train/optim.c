/* AdamW with global gradient-norm clipping: the host side (see optim.h).
 *
 * Mask: the arena is cut into blocks of B = 2^shift floats, B the largest
 * power of two <= 64 that divides every tensor's offset (64 with the
 * TMM_PARAM_ALIGN layout). No block then holds floats of two tensors, so one
 * word per block says how many of its floats, from the block's start, belong
 * to a trainable tensor (the rest is padding; bits 0-15), and that tensor's
 * slot (bits 16-23): its (rate, decay) pair, whose step size and decay
 * factor the step reads from the host-written slot table. Frozen tensors and
 * padding-only blocks get 0.
 *
 * Chunks: ops bind at most maxStorageBufferRange bytes. Chunk starts are
 * multiples of CHUNK_GRAIN floats (and of B * alignment / 4), so every bound
 * slice of the arenas, the mask and the partial sums starts at an offset
 * that is a multiple of minStorageBufferOffsetAlignment. */
#include "train/optim.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ops/nn_ops.h"
#include "ops/op_util.h"

#define MASK_BLOCK_MAX 64u
#define SUMSQ_LANES 64u                       /* invocations per workgroup of sumsq_partial */
#define SUMSQ_TERMS 64u                       /* floats per invocation (<= TMM_MAX_LOOP) */
#define SUMSQ_TILE (SUMSQ_LANES * SUMSQ_TERMS) /* floats per workgroup */
#define CHUNK_GRAIN SUMSQ_TILE
#define SMALL_ALIGN 256u                      /* bytes between the blocks of the small buffers */

struct tmm_optim {
    tmm_device *device;
    tmm_optim_config config;
    uint64_t arena_floats;
    uint32_t shift;                 /* mask block = 2^shift floats */
    uint64_t n_blocks;
    uint64_t n_partials;
    uint64_t sum_scratch;           /* floats */
    uint64_t small_stride;          /* bytes between the blocks of host/dev_small */
    uint32_t scale_window;          /* loss scaling: tmm_optim_hyper.scale_window (0: off) */

    tmm_buffer *m, *v;
    tmm_buffer *mask;               /* n_blocks uint32 */
    tmm_buffer *partials;           /* n_partials floats */
    tmm_buffer *scratch;            /* tmm_op_sum's scratch (at least 1 float) */
    tmm_buffer *dev_small;          /* [0]: coefficients of the step, [stride]: sum of squares,
                                       [2 stride]: tmm_loss_scale */
    tmm_buffer *host;               /* [0]: tmm_optim_hyper, [stride]: tmm_optim_stats, [2 stride]: the slots'
                                       (step size, decay factor) float pairs */
    uint32_t n_slots;
    struct { double lr_scale, weight_decay; } slot[TMM_OPTIM_MAX_SLOTS];
};

tmm_optim_config tmm_optim_config_default(void)
{
    tmm_optim_config c = { .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0,
                           .max_grad_norm = 1.0, .decay_all = false, .skip_nonfinite = true };
    return c;
}

tmm_status tmm_optim_config_check(const tmm_optim_config *c)
{
    if (!(c->beta1 >= 0 && c->beta1 < 1))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "AdamW beta1 must be in [0, 1) (got %g)", c->beta1);
    if (!(c->beta2 >= 0 && c->beta2 < 1))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "AdamW beta2 must be in [0, 1) (got %g)", c->beta2);
    if (!(c->eps > 0 && isfinite(c->eps)))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "AdamW eps must be positive (got %g)", c->eps);
    if (!(c->weight_decay >= 0 && isfinite(c->weight_decay)))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "weight decay must be >= 0 (got %g)", c->weight_decay);
    if (isnan(c->max_grad_norm) || isinf(c->max_grad_norm))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "max gradient norm must be finite (<= 0 disables clipping)");
    if ((unsigned)c->recipe >= TMM_RECIPE_COUNT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "recipe must be original or uniform (got %d)", (int)c->recipe);
    if (!(c->peak_lr >= 0 && isfinite(c->peak_lr)))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the peak learning rate must be finite and >= 0 (got %g)",
                        c->peak_lr);
    return TMM_OK;
}

bool tmm_optim_param_decays(const tmm_param *p, bool decay_all)
{
    if (!p->trainable)
        return false;
    if (decay_all)
        return true;
    switch (p->kind) {
    case TMM_PARAM_LINEAR_WEIGHT:
    case TMM_PARAM_TOEPLITZ_W:
    case TMM_PARAM_HEAD:
        return true;
    case TMM_PARAM_EMBED:
    case TMM_PARAM_LN_WEIGHT:
    case TMM_PARAM_LN_BIAS:
    case TMM_PARAM_LINEAR_BIAS:
    case TMM_PARAM_TOEPLITZ_BETA:
        return false;
    }
    return false;
}

void tmm_optim_param_rate(const tmm_param_table *t, const tmm_optim_config *c, const tmm_param *p,
                          double *lr_scale, double *weight_decay)
{
    const tmm_param_rate r = tmm_param_rate_of(&t->config, c->recipe, p->name, c->peak_lr, c->weight_decay);
    *lr_scale = r.lr_scale;
    *weight_decay = tmm_optim_param_decays(p, c->decay_all) ? r.weight_decay : 0.0;
}

/* The slot of a tensor's (rate, decay) pair, added when new. */
static tmm_status slot_of(tmm_optim *o, const tmm_param_table *t, const tmm_param *p, uint32_t *slot)
{
    double lr_scale, wd;
    tmm_optim_param_rate(t, &o->config, p, &lr_scale, &wd);
    for (*slot = 0; *slot < o->n_slots; ++*slot)
        if (o->slot[*slot].lr_scale == lr_scale && o->slot[*slot].weight_decay == wd)
            return TMM_OK;
    if (o->n_slots == TMM_OPTIM_MAX_SLOTS)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "optimizer: more than %d (rate, weight decay) pairs", TMM_OPTIM_MAX_SLOTS);
    o->slot[o->n_slots].lr_scale = lr_scale;
    o->slot[o->n_slots].weight_decay = wd;
    *slot = o->n_slots++;
    return TMM_OK;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Mask block size: the largest power of two <= MASK_BLOCK_MAX dividing every offset. */
static uint32_t mask_shift(const tmm_param_table *t)
{
    uint32_t shift = 0;
    while ((1u << (shift + 1)) <= MASK_BLOCK_MAX)
        shift++;
    for (uint32_t i = 0; i < t->count; i++)
        while (shift > 0 && t->params[i].numel > 0 && t->params[i].offset % (1ull << shift))
            shift--;
    return shift;
}

static uint64_t partial_count(uint64_t arena_floats)
{
    return (arena_floats + SUMSQ_TILE - 1) / SUMSQ_TILE * SUMSQ_LANES;
}

/* Builds the mask words and the slots; fails when tensors overlap or overrun the arena. */
static tmm_status build_mask(tmm_optim *o, const tmm_param_table *t, uint32_t shift, uint64_t n_blocks,
                             uint32_t *words)
{
    const uint64_t b = 1ull << shift;
    uint8_t *owned = calloc(n_blocks ? n_blocks : 1, 1);
    if (!owned)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    memset(words, 0, n_blocks * sizeof *words);
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        if (p->numel == 0)
            continue;
        if (p->offset > t->arena_floats || p->numel > t->arena_floats - p->offset) {
            free(owned);
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "optimizer: parameter %s [%llu, +%llu) overruns the arena "
                            "of %llu floats", p->name, (unsigned long long)p->offset,
                            (unsigned long long)p->numel, (unsigned long long)t->arena_floats);
        }
        uint32_t slot = 0;
        tmm_status s = p->trainable ? slot_of(o, t, p, &slot) : TMM_OK;
        if (s != TMM_OK) {
            free(owned);
            return s;
        }
        uint64_t end = p->offset + p->numel;
        for (uint64_t k = p->offset >> shift; k * b < end; k++) {
            if (owned[k]) {
                free(owned);
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "optimizer: parameter %s overlaps another tensor",
                                p->name);
            }
            owned[k] = 1;
            uint64_t count = end - k * b < b ? end - k * b : b;
            words[k] = p->trainable ? (uint32_t)count | slot << 16 : 0u;
        }
    }
    free(owned);
    return TMM_OK;
}

static tmm_status make_buffer(tmm_device *d, uint64_t bytes, tmm_memory_kind kind, tmm_buffer **out)
{
    return tmm_buffer_create(d, bytes ? bytes : 4, kind, out);
}

uint64_t tmm_optim_memory(const tmm_param_table *t)
{
    uint32_t shift = mask_shift(t);
    uint64_t n_blocks = (t->arena_floats + (1ull << shift) - 1) >> shift;
    uint64_t n_part = partial_count(t->arena_floats);
    uint64_t scratch = max_u64(1, tmm_op_sum_scratch((uint32_t)n_part));
    /* dev_small three blocks (coefficients, sum of squares, loss scaler) and host
     * three (hyperparameters, stats, slots); small_stride is SMALL_ALIGN unless
     * the device's offset alignment is larger */
    return 4 * (2 * t->arena_floats + n_blocks + n_part + scratch) + (3 + 3) * SMALL_ALIGN;
}

tmm_status tmm_optim_create(tmm_device *device, const tmm_param_table *table, const tmm_optim_config *config,
                            tmm_optim **out)
{
    *out = NULL;
    TMM_TRY(tmm_optim_config_check(config));
    uint64_t align = device->info.min_storage_buffer_offset_alignment;
    if (align == 0 || (align & (align - 1)) || align > 4096)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "optimizer: minStorageBufferOffsetAlignment %llu is not supported",
                        (unsigned long long)align);
    uint64_t n_part = partial_count(table->arena_floats);
    if (n_part > UINT32_MAX)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "optimizer: an arena of %llu floats is too large",
                        (unsigned long long)table->arena_floats);
    tmm_optim *o = calloc(1, sizeof *o);
    if (!o)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    o->device = device;
    o->config = *config;
    o->arena_floats = table->arena_floats;
    o->shift = mask_shift(table);
    o->n_blocks = (table->arena_floats + (1ull << o->shift) - 1) >> o->shift;
    o->n_partials = n_part;
    o->sum_scratch = max_u64(1, tmm_op_sum_scratch((uint32_t)n_part));
    o->small_stride = max_u64(SMALL_ALIGN, align);

    uint32_t *words = malloc((o->n_blocks ? o->n_blocks : 1) * sizeof *words);
    tmm_status s = words ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s == TMM_OK)
        s = build_mask(o, table, o->shift, o->n_blocks, words);
    const uint64_t arena_bytes = table->arena_floats * sizeof(float);
    if (s == TMM_OK)
        s = make_buffer(device, arena_bytes, TMM_MEMORY_DEVICE, &o->m);
    if (s == TMM_OK)
        s = make_buffer(device, arena_bytes, TMM_MEMORY_DEVICE, &o->v);
    if (s == TMM_OK)
        s = make_buffer(device, o->n_blocks * 4, TMM_MEMORY_DEVICE, &o->mask);
    if (s == TMM_OK)
        s = make_buffer(device, o->n_partials * 4, TMM_MEMORY_DEVICE, &o->partials);
    if (s == TMM_OK)
        s = make_buffer(device, o->sum_scratch * 4, TMM_MEMORY_DEVICE, &o->scratch);
    if (s == TMM_OK)
        s = make_buffer(device, 3 * o->small_stride, TMM_MEMORY_DEVICE, &o->dev_small);
    if (s == TMM_OK)
        s = make_buffer(device, 3 * o->small_stride, TMM_MEMORY_HOST, &o->host);
    if (s == TMM_OK && o->n_blocks)
        s = tmm_buffer_write(o->mask, 0, words, o->n_blocks * 4);
    free(words);
    if (s == TMM_OK && !tmm_buffer_mapped(o->host))
        s = tmm_fail(TMM_ERR_VULKAN, "optimizer: the host-visible buffer is not mapped");
    if (s == TMM_OK) {
        /* step 0: the device skips the update until tmm_optim_set_step */
        memset(tmm_buffer_mapped(o->host), 0, 3 * o->small_stride);
        s = tmm_optim_reset(o);
    }
    if (s != TMM_OK) {
        tmm_optim_destroy(o);
        return s;
    }
    *out = o;
    return TMM_OK;
}

void tmm_optim_destroy(tmm_optim *o)
{
    if (!o)
        return;
    tmm_buffer_destroy(o->m);
    tmm_buffer_destroy(o->v);
    tmm_buffer_destroy(o->mask);
    tmm_buffer_destroy(o->partials);
    tmm_buffer_destroy(o->scratch);
    tmm_buffer_destroy(o->dev_small);
    tmm_buffer_destroy(o->host);
    free(o);
}

const tmm_optim_config *tmm_optim_get_config(const tmm_optim *o) { return &o->config; }
tmm_view tmm_optim_m(const tmm_optim *o) { return tmm_sub(o->m, 0, o->arena_floats * sizeof(float)); }
tmm_view tmm_optim_v(const tmm_optim *o) { return tmm_sub(o->v, 0, o->arena_floats * sizeof(float)); }

static tmm_view scaler_view(const tmm_optim *o)
{
    return tmm_sub(o->dev_small, 2 * o->small_stride, sizeof(tmm_loss_scale));
}
tmm_view tmm_optim_loss_scale_view(const tmm_optim *o)
{
    tmm_view v = scaler_view(o);
    v.size = sizeof(float); /* the scale, its first field */
    return v;
}

/* The window in the host's block too, in case tmm_optim_set_step came first. */
static void set_window(tmm_optim *o, uint32_t window)
{
    o->scale_window = window;
    memcpy((char *)tmm_buffer_mapped(o->host) + offsetof(tmm_optim_hyper, scale_window), &window, sizeof window);
}

/* Zeroes the moments and the small block, then sets the loss scale S = 1 (fixed). */
static tmm_status record_reset(tmm_recorder *r, void *arg)
{
    const tmm_optim *o = arg;
    if (o->arena_floats) {
        TMM_TRY(tmm_record_fill_u32(r, tmm_optim_m(o), 0));
        TMM_TRY(tmm_record_fill_u32(r, tmm_optim_v(o), 0));
    }
    TMM_TRY(tmm_record_fill_u32(r, tmm_whole(o->dev_small), 0));
    return tmm_record_fill_u32(r, tmm_optim_loss_scale_view(o), 0x3f800000u); /* 1.0f */
}

tmm_status tmm_optim_reset(tmm_optim *o)
{
    TMM_TRY(tmm_record_once(o->device, record_reset, o));
    memset((char *)tmm_buffer_mapped(o->host) + o->small_stride, 0, sizeof(tmm_optim_stats));
    set_window(o, 0);
    return TMM_OK;
}

tmm_status tmm_optim_set_loss_scale(tmm_optim *o, uint32_t window, const tmm_loss_scale *state)
{
    int e;
    if (!(state->scale >= TMM_LOSS_SCALE_MIN && state->scale <= TMM_LOSS_SCALE_MAX) ||
        frexpf(state->scale, &e) != 0.5f)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the loss scale must be a power of two from 2^-24 to 2^24 "
                        "(got %g)", (double)state->scale);
    if (window == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "the loss scale window must be at least 1 step");
    tmm_view v = scaler_view(o);
    TMM_TRY(tmm_buffer_write(v.buffer, v.offset, state, sizeof *state));
    set_window(o, window);
    return TMM_OK;
}

tmm_status tmm_optim_read_loss_scale(const tmm_optim *o, tmm_loss_scale *state)
{
    tmm_view v = scaler_view(o);
    return tmm_buffer_read(v.buffer, v.offset, state, sizeof *state);
}

tmm_status tmm_optim_set_step(tmm_optim *o, uint32_t step, double lr)
{
    if (step == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "optimizer: steps count from 1");
    if (!(lr >= 0 && isfinite(lr)))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "optimizer: learning rate must be finite and >= 0 (got %g)", lr);
    const tmm_optim_config *c = &o->config;
    double bc1 = 1.0 - pow(c->beta1, step), bc2 = 1.0 - pow(c->beta2, step);
    tmm_optim_hyper h = {
        .step = step,
        .lr = (float)lr,
        .beta1 = (float)c->beta1,
        .beta2 = (float)c->beta2,
        .one_minus_beta1 = (float)(1.0 - c->beta1),
        .one_minus_beta2 = (float)(1.0 - c->beta2),
        .eps = (float)c->eps,
        .max_norm = c->max_grad_norm > 0 ? (float)c->max_grad_norm : 0.0f,
        .bc2_rsqrt = (float)(1.0 / sqrt(bc2)),
        .skip_nonfinite = c->skip_nonfinite ? 1u : 0u,
        .scale_window = o->scale_window,
    };
    /* beta2 = 0 gives bc2 = 1; beta2 in (0, 1) keeps bc2 > 0 for t >= 1 */
    memcpy(tmm_buffer_mapped(o->host), &h, sizeof h);
    float slots[2 * TMM_OPTIM_MAX_SLOTS];
    for (uint32_t k = 0; k < o->n_slots; k++) {
        const double lr_k = lr * o->slot[k].lr_scale;
        slots[2 * k] = (float)(lr_k / bc1); /* beta1 = 0: bc1 = 1; beta^t underflowing to 0 gives 1 too */
        slots[2 * k + 1] = (float)(1.0 - lr_k * o->slot[k].weight_decay);
    }
    memcpy((char *)tmm_buffer_mapped(o->host) + 2 * o->small_stride, slots, o->n_slots * 2 * sizeof(float));
    return TMM_OK;
}

tmm_optim_hyper tmm_optim_get_hyper(const tmm_optim *o)
{
    tmm_optim_hyper h;
    memcpy(&h, tmm_buffer_mapped(o->host), sizeof h);
    return h;
}

tmm_optim_stats tmm_optim_get_stats(const tmm_optim *o)
{
    tmm_optim_stats st;
    memcpy(&st, (const char *)tmm_buffer_mapped(o->host) + o->small_stride, sizeof st);
    return st;
}

/* ---- recording ----------------------------------------------------------- */

static tmm_status check_arena(const tmm_optim *o, const char *name, tmm_view v)
{
    return tmm_op_need("optimizer", name, v, o->arena_floats);
}

/* Floats per chunk: within maxStorageBufferRange, a multiple of CHUNK_GRAIN
 * and of the floats whose mask words fill one alignment unit. */
static tmm_status chunk_floats(const tmm_optim *o, uint64_t *out)
{
    const tmm_device *d = o->device;
    uint64_t align = d->info.min_storage_buffer_offset_alignment;
    /* arenas: align / 4 floats; mask: (align / 4) << shift; partials (64
     * floats per 4096): 16 * align */
    uint64_t grain = max_u64(max_u64(CHUNK_GRAIN, 16 * align), (align / 4) << o->shift);
    uint64_t chunk = tmm_op_chunk_elems(d) / grain * grain;
    if (chunk > (1ull << 31))
        chunk = (1ull << 31) / grain * grain;
    if (chunk == 0)
        return tmm_fail(TMM_ERR_UNSUPPORTED, "optimizer: maxStorageBufferRange (%llu bytes) is below the %llu "
                        "bytes it binds at a time", (unsigned long long)d->info.max_storage_buffer_range,
                        (unsigned long long)grain * 4);
    *out = chunk;
    return TMM_OK;
}


static tmm_view small_view(tmm_buffer *b, uint32_t index, uint64_t stride, uint64_t size)
{
    return tmm_sub(b, index * stride, size);
}

static tmm_status record_norm(tmm_optim *o, tmm_recorder *r, tmm_view grads)
{
    uint64_t chunk = 0;
    TMM_TRY(chunk_floats(o, &chunk));
    tmm_pipeline *p;
    static const uint32_t local[3] = { SUMSQ_LANES, 1, 1 };
    const uint32_t terms = SUMSQ_TERMS;
    const tmm_spirv *spv = tmm_op_rows_use_subgroups(o->device) ? &tmm_spv_sumsq_partial_sg : &tmm_spv_sumsq_partial;
    TMM_TRY(tmm_op_pipeline(r, spv, 3, 8, local, &terms, 1, &p));
    tmm_view mask = tmm_whole(o->mask), part = tmm_whole(o->partials);
    for (uint64_t i = 0; i < o->arena_floats; i += chunk) {
        uint64_t n = o->arena_floats - i < chunk ? o->arena_floats - i : chunk;
        uint64_t groups = (n + SUMSQ_TILE - 1) / SUMSQ_TILE;
        uint64_t blocks = (n + (1ull << o->shift) - 1) >> o->shift;
        struct { uint32_t n, shift; } push = { .n = (uint32_t)n, .shift = o->shift };
        tmm_arg args[3] = { tmm_in(tmm_op_sub(grads, i, n)), tmm_in(tmm_op_sub(mask, i >> o->shift, blocks)),
                            tmm_out(tmm_op_sub(part, i / SUMSQ_TILE * SUMSQ_LANES, groups * SUMSQ_LANES)) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 3, &push, (uint32_t)groups, 1, 1));
    }
    tmm_view sumsq = small_view(o->dev_small, 1, o->small_stride, 4);
    if (o->n_partials)
        TMM_TRY(tmm_op_sum(r, part, (uint32_t)o->n_partials, tmm_whole(o->scratch), sumsq));
    else
        TMM_TRY(tmm_op_fill(r, sumsq, 1, 0.0f));

    static const uint32_t one[3] = { 1, 1, 1 };
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_clip_finish, 5, 0, one, NULL, 0, &p));
    tmm_arg args[5] = { tmm_in(sumsq), tmm_in(small_view(o->host, 0, o->small_stride, sizeof(tmm_optim_hyper))),
                        tmm_out(small_view(o->host, 1, o->small_stride, sizeof(tmm_optim_stats))),
                        tmm_out(small_view(o->dev_small, 0, o->small_stride, 64)), tmm_inout(scaler_view(o)) };
    return tmm_record_dispatch(r, p, args, 5, NULL, 1, 1, 1);
}

tmm_status tmm_optim_record_grad_norm(tmm_optim *o, tmm_recorder *r, tmm_view grads)
{
    TMM_TRY(check_arena(o, "grads", grads));
    return record_norm(o, r, grads);
}

tmm_status tmm_optim_record(tmm_optim *o, tmm_recorder *r, tmm_view params, tmm_view grads)
{
    TMM_TRY(check_arena(o, "params", params));
    TMM_TRY(check_arena(o, "grads", grads));
    if (params.buffer == grads.buffer && params.offset < grads.offset + o->arena_floats * 4 &&
        grads.offset < params.offset + o->arena_floats * 4)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "optimizer: params and grads overlap");
    TMM_TRY(record_norm(o, r, grads));

    uint64_t chunk = 0;
    TMM_TRY(chunk_floats(o, &chunk));
    tmm_pipeline *p;
    static const uint32_t local[3] = { TMM_WG_1D, 1, 1 };
    TMM_TRY(tmm_op_pipeline(r, &tmm_spv_adamw, 7, 8, local, NULL, 0, &p));
    tmm_view mask = tmm_whole(o->mask), m = tmm_optim_m(o), v = tmm_optim_v(o);
    tmm_view coef = small_view(o->dev_small, 0, o->small_stride, 64);
    tmm_view slots = small_view(o->host, 2, o->small_stride, TMM_OPTIM_MAX_SLOTS * 2 * sizeof(float));
    for (uint64_t i = 0; i < o->arena_floats; i += chunk) {
        uint64_t n = o->arena_floats - i < chunk ? o->arena_floats - i : chunk;
        uint64_t blocks = (n + (1ull << o->shift) - 1) >> o->shift;
        struct { uint32_t n, shift; } push = { .n = (uint32_t)n, .shift = o->shift };
        tmm_arg args[7] = { tmm_inout(tmm_op_sub(params, i, n)), tmm_in(tmm_op_sub(grads, i, n)),
                            tmm_inout(tmm_op_sub(m, i, n)), tmm_inout(tmm_op_sub(v, i, n)),
                            tmm_in(tmm_op_sub(mask, i >> o->shift, blocks)), tmm_in(coef), tmm_in(slots) };
        TMM_TRY(tmm_record_dispatch(r, p, args, 7, &push, tmm_div_up(n, TMM_WG_1D), 1, 1));
    }
    return TMM_OK;
}
