/* Matching an architecture's parameter count to another model's: the
 * comparisons (tmm bench arch, tmm experiment) put every baseline at the
 * size of the TMM they are compared with. */
#ifndef TMM_MODEL_MATCH_H
#define TMM_MODEL_MATCH_H

#include "tmm/model.h"

#define TMM_MATCH_MAX_EXPANSION 16u   /* MLP expansions tried: 1 .. 16 */
#define TMM_MATCH_MAX_LAYERS_PER 4u   /* a model without an MLP: 1 .. 4L layers */

/* Sets what matches c's parameters to `target`: its MLP expansion (1..16),
 * or for an architecture without an MLP its number of layers (1..4L, L as
 * given), to the value whose parameter count is nearest (the smaller value on
 * a tie). c must pass tmm_model_config_check as given; *params gets its new
 * count. Returns the knob's name ("expansion" or "layers") for reports. */
const char *tmm_model_match_params(tmm_model_config *c, uint64_t target, uint64_t *params);

#endif
