/* Learning-rate schedules (schedule.h). */
#include "train/schedule.h"

#include <math.h>
#include <string.h>

#include "status.h"

tmm_lr_schedule tmm_lr_schedule_default(void)
{
    tmm_lr_schedule s = { .kind = TMM_LR_LINEAR, .peak_lr = TMM_PAPER_PEAK_LR,
                          .warmup_steps = TMM_PAPER_WARMUP_STEPS, .min_lr = 0.0 };
    return s;
}

uint64_t tmm_lr_scaled_warmup(uint64_t total_steps)
{
    if (total_steps == 0)
        return 0;
    double w = floor((double)total_steps * TMM_PAPER_WARMUP_STEPS / TMM_PAPER_TOTAL_STEPS + 0.5);
    return w < 1 ? 1 : (uint64_t)w;
}

tmm_status tmm_lr_schedule_check(const tmm_lr_schedule *s, uint64_t total_steps)
{
    if (s->kind != TMM_LR_LINEAR && s->kind != TMM_LR_COSINE && s->kind != TMM_LR_CONSTANT)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unknown learning-rate schedule %d", (int)s->kind);
    if (!(s->peak_lr >= 0 && isfinite(s->peak_lr)))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "peak learning rate must be finite and >= 0 (got %g)", s->peak_lr);
    if (!(s->min_lr >= 0 && s->min_lr <= s->peak_lr))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "minimum learning rate must be in [0, peak %g] (got %g)",
                        s->peak_lr, s->min_lr);
    if (s->kind != TMM_LR_CONSTANT && total_steps == 0)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "a %s schedule needs the number of steps",
                        tmm_lr_kind_name(s->kind));
    return TMM_OK;
}

double tmm_lr_at(const tmm_lr_schedule *s, uint64_t step, uint64_t total_steps)
{
    const double pi = 3.14159265358979323846;
    uint64_t w = s->warmup_steps;
    bool decays = s->kind != TMM_LR_CONSTANT;
    if (decays && step >= total_steps)
        return s->min_lr;
    if (step < w)
        return s->peak_lr * (double)(step + 1) / (double)w;
    if (!decays)
        return s->peak_lr;
    /* here w <= step < total_steps, so total_steps - w >= 1 */
    double f = (double)(step - w) / (double)(total_steps - w);
    double span = s->peak_lr - s->min_lr;
    if (s->kind == TMM_LR_LINEAR)
        return s->min_lr + span * (1.0 - f);
    return s->min_lr + span * 0.5 * (1.0 + cos(pi * f));
}

const char *tmm_lr_kind_name(tmm_lr_kind kind)
{
    switch (kind) {
    case TMM_LR_LINEAR: return "linear";
    case TMM_LR_COSINE: return "cosine";
    case TMM_LR_CONSTANT: return "constant";
    }
    return "unknown";
}

tmm_status tmm_lr_kind_parse(const char *name, tmm_lr_kind *out)
{
    static const tmm_lr_kind kinds[] = { TMM_LR_LINEAR, TMM_LR_COSINE, TMM_LR_CONSTANT };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (name && strcmp(name, tmm_lr_kind_name(kinds[i])) == 0) {
            *out = kinds[i];
            return TMM_OK;
        }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "unknown learning-rate schedule '%s' (linear, cosine, constant)",
                    name ? name : "");
}
