/* A sequence mixer: the token-mixing half of a block. Every architecture's
 * mixer implements this interface (one file each in src/mixer/); the model
 * frame (src/model/model.c), the generator (src/gen/generator.c) and the
 * memory plan use nothing else, so none of them knows which mixer it holds.
 *
 * Training shapes: rows = batch * n_ctx, position-major [batch, n, d].
 * A mixer's forward ADDS its output to the residual stream:
 *     h += Mix_l(x)        x: the block's normed input [rows, d]
 * and its backward, given dh = dL/dh, writes dL/dx and the gradients of its
 * own tensors. The frame keeps x until the backward; the mixer keeps what else
 * it needs (its activations) itself.
 *
 * Decoding: a decoder holds, per layer, what the mixer needs of the positions
 * so far (a cache of inputs, keys and values, or a constant-size state) for
 * `batch` sequences, each at its own position. */
#ifndef TMM_MIXER_MIXER_H
#define TMM_MIXER_MIXER_H

#include "model/distilled.h"
#include "model/memory.h"
#include "model/params.h"
#include "ops/toeplitz.h"
#include "recorder.h"

typedef struct tmm_mixer tmm_mixer;
typedef struct tmm_mixer_decoder tmm_mixer_decoder;
typedef struct tmm_mixer_class tmm_mixer_class;

/* Where a buffer's bytes are counted in the memory plan. */
typedef enum tmm_mem_category { TMM_MEM_ACTIVATIONS, TMM_MEM_WORKSPACE } tmm_mem_category;

/* The activation buffers of one set (tmm_alloc_act), so that the frame can
 * keep a copy of them per layer in 16 bits and restore it (model.c). */
typedef struct tmm_act_entry {
    tmm_buffer **buffer;
    uint64_t floats;
} tmm_act_entry;
typedef struct tmm_act_list {
    tmm_act_entry *e;
    uint32_t n, cap;
} tmm_act_list;

/* Allocates every buffer of a model: counts it instead when the model is a
 * dry run (tmm_model_memory_plan), so the plan and the model cannot differ. */
typedef struct tmm_allocation {
    tmm_device *device;          /* NULL only for a dry run without a device */
    tmm_model_memory *dry;       /* non-NULL: count into it, allocate nothing */
    tmm_act_list *acts;          /* where tmm_alloc_act lists set 0's buffers */
} tmm_allocation;
tmm_status tmm_alloc(const tmm_allocation *a, tmm_buffer **out, uint64_t floats, tmm_mem_category category,
                     tmm_memory_kind kind);
/* An activation of set `set` (a device buffer of `floats`, counted as
 * activations); set 0's are listed in a->acts. */
tmm_status tmm_alloc_act(const tmm_allocation *a, uint32_t set, tmm_buffer **out, uint64_t floats);

/* A recording in progress: ops wrapped in timestamp regions when profiling. */
typedef struct tmm_rec {
    tmm_recorder *r;
    bool profile;
    tmm_view scratch;            /* shared scratch of at least scratch_floats */
    tmm_elem half_dw;            /* fp16 or bf16 training (F16, BF16; else F32): the weight gradients'
                                    products may round their inputs to that format (tmm_op_linear_dw's half;
                                    the tensor-core kernel where there is one) */
} tmm_rec;

/* Records `call` (a tmm_status expression), in a region named `label` when profiling. */
#define TMM_REC_OP(rec, label, call)                                    \
    do {                                                                \
        if ((rec)->profile)                                             \
            TMM_TRY(tmm_record_region_begin((rec)->r, label));          \
        TMM_TRY(call);                                                  \
        if ((rec)->profile)                                             \
            TMM_TRY(tmm_record_region_end((rec)->r));                   \
    } while (0)

/* What a model gives its mixer. */
typedef struct tmm_mixer_setup {
    const tmm_allocation *alloc;
    const tmm_param_table *table;   /* the config, and blocks[l].mix: the mixer's tensors */
    uint32_t batch;
    tmm_toeplitz_impl impl;            /* how Toeplitz layers are computed (others ignore it) */
    tmm_buffer *params, *grads;     /* the arenas (NULL in a dry run) */
    tmm_buffer *weights16;          /* the 16-bit copy of params that the frame packs at the start of every
                                       forward (--precision fp16/bf16), or NULL: what tmm_mixer_weight gives */
    tmm_elem weights16_elem;
    uint32_t act_sets;              /* sets of per-layer activations (tmm_alloc_act): n_layers, or 1 when
                                       the frame recomputes or restores them before each layer's backward;
                                       layer l uses set tmm_mixer_set(m, l). Decoding needs n_layers. */
} tmm_mixer_setup;

/* Tensor p of an arena: fp32, or its 16-bit copy (elem F16 or BF16), in
 * which value i of the arena is 16-bit value i. */
static inline tmm_view tmm_param_view(tmm_buffer *arena, const tmm_param *p, tmm_elem elem)
{
    const uint64_t es = tmm_elem_size(elem);
    return (tmm_view){ .buffer = arena, .offset = p->offset * es, .size = p->numel * es, .elem = elem };
}

/* The part every mixer begins with. */
struct tmm_mixer {
    const tmm_mixer_class *cls;
    tmm_mixer_setup s;
    uint32_t rows;
};

/* A mixer tensor of layer l (mix[which]); its gradient (an empty view for a
 * frozen tensor: its gradient stays 0); and a weight matrix as the training
 * matmuls read it (their B): the 16-bit copy under --precision fp16/bf16,
 * else the fp32 tensor. */
tmm_view tmm_mixer_param(const tmm_mixer *m, uint32_t l, int which);
tmm_view tmm_mixer_grad(const tmm_mixer *m, uint32_t l, int which);
tmm_view tmm_mixer_weight(const tmm_mixer *m, uint32_t l, int which);

/* The activation set of layer l. */
static inline uint32_t tmm_mixer_set(const tmm_mixer *m, uint32_t layer) { return layer % m->s.act_sets; }

/* A part of a decoder's state: `per` bytes per sequence, sequence b's at
 * view.offset + b * per. A cache keeps position t's values at a place that
 * depends on t alone (so a shorter context's part is a prefix of a longer
 * one's) and the step reads only the positions before its own; a running
 * state (running: Mamba 2's SSM state, linear attention's sums, distilled
 * states) is read at every step, so a sequence restarting at position 0
 * needs it zeroed. */
typedef struct tmm_decoder_part {
    tmm_view view;
    uint64_t per;
    bool running;
} tmm_decoder_part;

/* Appends a part to parts[0 .. max) (counting it in *n even past max). */
static inline void tmm_decoder_part_add(tmm_decoder_part *parts, uint32_t max, uint32_t *n, tmm_view view,
                                        uint64_t per, bool running)
{
    if (*n < max)
        parts[*n] = (tmm_decoder_part){ view, per, running };
    (*n)++;
}

struct tmm_mixer_class {
    /* The config's rules that are this mixer's (the frame checked the rest). */
    tmm_status (*check)(const tmm_model_config *c);
    /* Forward FLOPs of one layer's mixing per token that its weights' 2 per
     * parameter do not count (attention's scores, the Toeplitz products, the
     * SSD's state), averaged over the positions 0..n-1; *per_step: how many of
     * its parameters are applied once per step, not per token (Hyena's filter
     * MLP), which a count of 2 per parameter and token must leave out. */
    double (*flops)(const tmm_model_config *c, uint64_t *per_step);
    /* The mixing's shape in words, for reports ("heads 4, window 64"). */
    void (*describe)(const tmm_model_config *c, char *buf, size_t size);
    /* Declares block `layer`'s tensors, storing their indices in idx (at most
     * TMM_MIXER_MAX_PARAMS). `prefix` names them: blocks.<layer>.<prefix>.* */
    void (*declare)(tmm_param_builder *b, const tmm_model_config *c, uint32_t layer, int *idx);
    /* The mixer of a model: its activations (s->act_sets sets, through
     * tmm_alloc_act; the forward of a layer may depend on nothing else that
     * it writes, so that running it again recomputes them), its workspace
     * (and for a dry run, their bytes and any plan's in dry->fft_plans). */
    tmm_status (*create)(const tmm_mixer_setup *s, tmm_mixer **out);
    void (*destroy)(tmm_mixer *m);
    /* Floats of the model's shared scratch that forward and backward use. */
    uint64_t (*scratch_floats)(const tmm_mixer *m);
    /* h [rows, d] += Mix_l(x [rows, d]). */
    tmm_status (*forward)(tmm_mixer *m, const tmm_rec *rec, uint32_t layer, tmm_view x, tmm_view h);
    /* dx = dL/dx given dh = dL/dh (dh is not changed), in one of tmp[0..1]
     * ([rows, d] each, free to use) or in the mixer's own workspace; the
     * gradients of the layer's tensors are written (frozen ones: untouched). */
    tmm_status (*backward)(tmm_mixer *m, const tmm_rec *rec, uint32_t layer, tmm_view x, tmm_view dh,
                           const tmm_view tmp[2], tmm_view *dx);
    /* How its Toeplitz products are computed, direct or by FFT (NULL: it has
     * none: the TMM's and Hyena's mixers do). */
    tmm_status (*set_toeplitz_impl)(tmm_mixer *m, tmm_toeplitz_impl impl);
    /* Positions as in a context of n_pos >= n_ctx (NULL: the mixer computes
     * the same function at every context length). A model of a shorter
     * context that prefills for a longer one with the same weights then
     * computes the longer one's first n_ctx positions: Hyena's filter is a
     * function of t/(n-1). The generator calls it on its shorter models. */
    tmm_status (*set_positions)(tmm_mixer *m, uint32_t n_pos);

    /* Decoding state for the model `m` is made for (its batch), `x` the
     * mixer inputs of every layer as m's forward leaves them ([batch, n, d]). */
    tmm_status (*decoder_create)(tmm_mixer *m, const tmm_view *x, tmm_mixer_decoder **out);
    void (*decoder_destroy)(tmm_mixer_decoder *d);
    /* Records what makes the state hold positions < len[b] of sequence b after
     * a forward of `src` over the prompts: src is m itself or a model of a
     * shorter context (the same weights), src_x its mixer inputs. */
    tmm_status (*record_prefill)(tmm_mixer_decoder *d, tmm_recorder *r, tmm_mixer *src, const tmm_view *src_x,
                                 tmm_view len);
    /* One position of every sequence: h [batch, d] += Mix_l(x [batch, d]) at
     * position pos[b] (uint32 [batch]), the state updated with it. */
    tmm_status (*record_step)(tmm_mixer_decoder *d, const tmm_rec *rec, uint32_t layer, tmm_view pos,
                              tmm_view x, tmm_view h);
    /* The parts of its state, every byte that its prefill sets per sequence
     * (at most max into parts; returns how many it has): what moves one
     * sequence's state between two decoders of the class (the generator's
     * one-sequence prefill) and what a restart zeroes (the running ones).
     * Two decoders of one config but for n and batch list the same parts
     * in the same order. */
    uint32_t (*state_parts)(tmm_mixer_decoder *d, tmm_decoder_part *parts, uint32_t max);
};

extern const tmm_mixer_class tmm_toeplitz_mixer;
extern const tmm_mixer_class tmm_attention_mixer;
extern const tmm_mixer_class tmm_linear_mixer;
extern const tmm_mixer_class tmm_hyena_mixer;   /* hyena_mixer.h */
extern const tmm_mixer_class tmm_mamba2_mixer;  /* mamba2_mixer.h */

#endif
