#include "model/match.h"

#include "model/arch.h"

const char *tmm_model_match_params(tmm_model_config *c, uint64_t target, uint64_t *params)
{
    const bool layers = tmm_arch_of(c->arch)->mlp == TMM_MLP_NONE;
    const uint32_t max = layers ? c->n_layers * TMM_MATCH_MAX_LAYERS_PER : TMM_MATCH_MAX_EXPANSION;
    tmm_model_config best = *c, t = *c;
    uint64_t best_diff = UINT64_MAX;
    *params = tmm_model_param_count(c);
    for (uint32_t v = 1; v <= max; v++) {
        *(layers ? &t.n_layers : &t.expansion) = v;
        if (tmm_model_config_check(&t) != TMM_OK)
            break; /* past a limit: so is every larger value */
        const uint64_t p = tmm_model_param_count(&t), diff = p > target ? p - target : target - p;
        if (diff < best_diff) {
            best_diff = diff;
            best = t;
            *params = p;
        }
    }
    *c = best;
    return layers ? "layers" : "expansion";
}
