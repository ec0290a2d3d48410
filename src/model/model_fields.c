#include "model/model_fields.h"

#include <stddef.h>

const char *const tmm_init_names[] = { "arch", "torch", NULL };
_Static_assert(sizeof(tmm_arch) == sizeof(int) && sizeof(tmm_init_scheme) == sizeof(int),
               "enum fields are stored as int");

#define MODEL_AT(member) offsetof(tmm_model_config, member)
const tmm_config_field tmm_model_fields[] = {
    TMM_MODEL_FIELD_ROWS(MODEL_AT),
    { NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL },
};
