/* Reference of one optimizer step (train/optim.h): global gradient-norm
 * clipping and AdamW over the parameter arena, in double. The arenas (params,
 * moments) stay float, rounded once per step like the device's. */
#ifndef TMM_REF_OPTIM_H
#define TMM_REF_OPTIM_H

#include "model/params.h"
#include "train/optim.h"

/* sqrt of the sum of squares of the gradients of the trainable tensors. */
double ref_grad_norm(const tmm_param_table *table, const float *grad);

typedef struct ref_optim_result {
    double grad_norm;
    double clip_scale;   /* 1 when clipping is off or not needed */
    bool skipped;        /* non-finite norm with config->skip_nonfinite: nothing changed */
} ref_optim_result;

/* Step t (>= 1) with learning rate lr, on gradients that carry the loss
 * scale S (1: none): grad_norm and clip_scale are those of grad / S; for
 * every float of a trainable tensor, g = clip_scale * grad / S, then
 * torch.optim.AdamW's update of param, m and v at the tensor's rate and
 * weight decay (tmm_optim_param_rate: lr times its recipe group's scale; its
 * group's decay where tmm_optim_param_decays). Everything else (frozen
 * tensors, padding) is left alone. */
ref_optim_result ref_adamw_step(const tmm_param_table *table, const tmm_optim_config *config, uint32_t step,
                                double lr, double loss_scale, float *param, const float *grad, float *m, float *v);

/* Dynamic loss scaling's rule after a step (train/optim.h): an overflow
 * halves the scale (not below TMM_LOSS_SCALE_MIN), restarts the good count
 * and counts the overflow; `window` good steps in a row double it (not above
 * TMM_LOSS_SCALE_MAX). */
void ref_loss_scale_update(tmm_loss_scale *state, uint32_t window, bool overflow);

#endif
