/* Reference AdamW step with global gradient-norm clipping (ref_optim.h). */
#include "ref/ref_optim.h"

#include <math.h>

double ref_grad_norm(const tmm_param_table *t, const float *grad)
{
    double s = 0;
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        if (!p->trainable)
            continue;
        for (uint64_t j = 0; j < p->numel; j++) {
            double g = grad[p->offset + j];
            s += g * g;
        }
    }
    return sqrt(s);
}

ref_optim_result ref_adamw_step(const tmm_param_table *t, const tmm_optim_config *c, uint32_t step, double lr,
                                double loss_scale, float *param, const float *grad, float *m, float *v)
{
    ref_optim_result res = { .grad_norm = ref_grad_norm(t, grad) / loss_scale, .clip_scale = 1.0, .skipped = false };
    if (c->max_grad_norm > 0) {
        double coef = c->max_grad_norm / (res.grad_norm + 1e-6);
        res.clip_scale = coef < 1.0 ? coef : 1.0;
    }
    if (c->skip_nonfinite && !isfinite(res.grad_norm)) {
        res.skipped = true;
        return res;
    }
    const double bc1 = 1.0 - pow(c->beta1, step), bc2 = 1.0 - pow(c->beta2, step);
    for (uint32_t i = 0; i < t->count; i++) {
        const tmm_param *p = &t->params[i];
        if (!p->trainable)
            continue;
        double lr_scale, wd;
        tmm_optim_param_rate(t, c, p, &lr_scale, &wd);
        const double lr_p = lr * lr_scale;
        for (uint64_t j = p->offset; j < p->offset + p->numel; j++) {
            double g = res.clip_scale * grad[j] / loss_scale;
            double mj = c->beta1 * m[j] + (1.0 - c->beta1) * g;
            double vj = c->beta2 * v[j] + (1.0 - c->beta2) * g * g;
            double pj = param[j] * (1.0 - lr_p * wd);
            pj -= lr_p / bc1 * mj / (sqrt(vj / bc2) + c->eps);
            param[j] = (float)pj;
            m[j] = (float)mj;
            v[j] = (float)vj;
        }
    }
    return res;
}

void ref_loss_scale_update(tmm_loss_scale *s, uint32_t window, bool overflow)
{
    if (overflow) {
        s->scale = fmaxf(s->scale / 2, (float)TMM_LOSS_SCALE_MIN);
        s->good = 0;
        s->overflows++;
    } else if (++s->good >= window) {
        s->scale = fminf(s->scale * 2, (float)TMM_LOSS_SCALE_MAX);
        s->good = 0;
    }
}
