/* The architectures' frames (arch.h): one row each. */
#define _POSIX_C_SOURCE 200809L /* fnmatch */
#include "model/arch.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The config values, indexed by tmm_arch (NULL-terminated for the config table). */
const char *const tmm_arch_names[] = { "tmm", "transformer", "swa", "linear", "hyena", "mamba2", NULL };
const char *const tmm_recipe_names[] = { "uniform", "original", NULL };

/* The tmm, transformer, swa and linear rows have no groups: their originals
 * (the paper's runs) train every tensor at one rate and decay (docs/baselines.md
 * "Training recipes"). */

static const tmm_arch_desc archs[] = {
    { .arch = TMM_ARCH_TMM, .norm = TMM_NORM_LAYER, .norm_eps = 1e-5, .mlp = TMM_MLP_SILU, .mixer_first = false,
      .final_norm = false, .linear_init = TMM_INIT_KAIMING, .embed_init = TMM_INIT_NORMAL,
      .mlp_norm_name = "ln1", .mix_norm_name = "ln2", .default_lr = 5e-4, .heads = TMM_HEADS_AS_GIVEN, .toeplitz = true,
      .mixer = &tmm_toeplitz_mixer },
    { .arch = TMM_ARCH_TRANSFORMER, .norm = TMM_NORM_RMS, .norm_eps = 1e-6, .mlp = TMM_MLP_SWIGLU, .mixer_first = true,
      .final_norm = true, .linear_init = TMM_INIT_SMALL, .embed_init = TMM_INIT_SMALL,
      .mlp_norm_name = "mlp_norm", .mix_norm_name = "attn_norm", .default_lr = 2e-4, .heads = TMM_HEADS_OF_64,
      .mixer = &tmm_attention_mixer },
    { .arch = TMM_ARCH_SWA, .norm = TMM_NORM_RMS, .norm_eps = 1e-6, .mlp = TMM_MLP_SWIGLU, .mixer_first = true,
      .final_norm = true, .linear_init = TMM_INIT_SMALL, .embed_init = TMM_INIT_SMALL,
      .mlp_norm_name = "mlp_norm", .mix_norm_name = "attn_norm", .default_lr = 2e-4, .heads = TMM_HEADS_OF_64,
      .default_window = 128, .mixer = &tmm_attention_mixer },
    { .arch = TMM_ARCH_LINEAR, .norm = TMM_NORM_RMS, .norm_eps = 1e-6, .mlp = TMM_MLP_SWIGLU, .mixer_first = true,
      .final_norm = true, .linear_init = TMM_INIT_SMALL, .embed_init = TMM_INIT_SMALL,
      .mlp_norm_name = "mlp_norm", .mix_norm_name = "attn_norm", .default_lr = 2e-4, .heads = TMM_HEADS_OF_64,
      .mixer = &tmm_linear_mixer },
    /* Hyena: Kaiming normal Linear weights (the MLP's, the head's; the mixer's
     * projections too), the embedding N(0, 1) as PyTorch's and the TMM's */
    { .arch = TMM_ARCH_HYENA, .norm = TMM_NORM_LAYER, .norm_eps = 1e-5, .mlp = TMM_MLP_GELU, .mixer_first = true,
      .final_norm = false, .linear_init = TMM_INIT_KAIMING, .embed_init = TMM_INIT_NORMAL,
      .mlp_norm_name = "ln2", .mix_norm_name = "ln1", .default_lr = 2e-4, .heads = TMM_HEADS_NONE, .mixer = &tmm_hyena_mixer,
      /* the implicit filter (its MLP and Sin frequencies): lr 1e-3, no weight decay (safari's HyenaFilter) */
      .groups = { { .name = "filter", .match = "blocks.*.hyena.filter.*", .lr = 1e-3, .weight_decay = 0 } } },
    /* Mamba 2: the LM head a PyTorch-default Linear, the embedding N(0, 0.02²)
     * as mamba_ssm's */
    { .arch = TMM_ARCH_MAMBA2, .norm = TMM_NORM_RMS, .norm_eps = 1e-5, .mlp = TMM_MLP_NONE, .mixer_first = true,
      .final_norm = true, .linear_init = TMM_INIT_UNIFORM, .embed_init = TMM_INIT_SMALL,
      .mlp_norm_name = NULL, .mix_norm_name = "norm", .default_lr = 2e-4, .heads = TMM_HEADS_OF_64_INNER,
      .default_state = 64, .mixer = &tmm_mamba2_mixer,
      /* out_proj's PyTorch-default init divided by sqrt(n_layer) (mamba_ssm's _init_weights) */
      .groups = { { .name = "out_proj", .match = "blocks.*.mamba.out_proj.weight", .weight_decay = TMM_GROUP_RUN_DECAY,
                    .init_depth_power = 0.5 } } },
};

const tmm_arch_desc *tmm_arch_of(tmm_arch arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].arch == arch)
            return &archs[i];
    return NULL;
}

const char *tmm_arch_name(tmm_arch arch)
{
    return (unsigned)arch < sizeof tmm_arch_names / sizeof tmm_arch_names[0] - 1 ? tmm_arch_names[arch] : NULL;
}

const char *tmm_arch_label(const tmm_model_config *c, char *buf, size_t size)
{
    const tmm_arch_desc *d = tmm_arch_of(c->arch);
    if (d && d->default_window)
        snprintf(buf, size, "%s (W %u)", tmm_arch_name(c->arch), c->window);
    else
        snprintf(buf, size, "%s", tmm_arch_name(c->arch) ? tmm_arch_name(c->arch) : "?");
    return buf;
}

const char *tmm_arch_names_where(bool (*has)(const tmm_arch_desc *d), char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (has(&archs[i]) && len < size)
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", tmm_arch_name(archs[i].arch));
    return buf;
}

tmm_param_rate tmm_param_rate_of(const tmm_model_config *c, tmm_recipe r, const char *name, double peak_lr,
                                 double run_decay)
{
    tmm_param_rate rate = { .lr_scale = 1, .weight_decay = run_decay, .init_scale = 1, .group = NULL };
    const tmm_arch_desc *d = r == TMM_RECIPE_ORIGINAL ? tmm_arch_of(c->arch) : NULL;
    for (size_t i = 0; d && !rate.group && i < TMM_ARCH_MAX_GROUPS && d->groups[i].match; i++)
        if (fnmatch(d->groups[i].match, name, 0) == 0)
            rate.group = &d->groups[i];
    const tmm_param_group *g = rate.group;
    if (!g)
        return rate;
    if (g->lr > 0 && peak_lr > 0)
        rate.lr_scale = g->lr / peak_lr;
    else if (g->lr == 0 && g->lr_mult > 0)
        rate.lr_scale = g->lr_mult;
    if (g->weight_decay != TMM_GROUP_RUN_DECAY)
        rate.weight_decay = g->weight_decay;
    rate.init_scale = pow((double)c->n_layers, -g->init_depth_power);
    return rate;
}

void tmm_recipe_scale_init(const tmm_param_table *t, tmm_recipe r, float *arena)
{
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        const double scale = tmm_param_rate_of(&t->config, r, p->name, 0, 0).init_scale;
        for (uint64_t j = 0; scale != 1 && j < p->numel; j++)
            arena[p->offset + j] = (float)(arena[p->offset + j] * scale);
    }
}
