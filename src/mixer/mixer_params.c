/* A mixer's views of its tensors in the model's arenas (mixer.h). */
#include "mixer/mixer.h"

static const tmm_param *param_of(const tmm_mixer *m, uint32_t l, int which)
{
    const tmm_param_table *t = m->s.table;
    return &t->params[t->blocks[l].mix[which]];
}

tmm_view tmm_mixer_param(const tmm_mixer *m, uint32_t l, int which)
{
    return tmm_param_view(m->s.params, param_of(m, l, which), TMM_ELEM_F32);
}

tmm_view tmm_mixer_grad(const tmm_mixer *m, uint32_t l, int which)
{
    const tmm_param *p = param_of(m, l, which);
    return p->trainable ? tmm_param_view(m->s.grads, p, TMM_ELEM_F32) : (tmm_view){ 0 };
}

tmm_view tmm_mixer_weight(const tmm_mixer *m, uint32_t l, int which)
{
    const tmm_param *p = param_of(m, l, which);
    return m->s.weights16 ? tmm_param_view(m->s.weights16, p, m->s.weights16_elem)
                          : tmm_param_view(m->s.params, p, TMM_ELEM_F32);
}
