/* One row of a config table: a value's JSON section and key, its flag, its
 * type, its accepted range and its help, and where it lives in the struct the
 * table describes. The table of a training run (train/train_config.c) and the
 * model's rows it begins with (model/model_fields.h, also what a checkpoint
 * stores) are made of these rows; the functions below read and write one
 * value as text with the row's checks, so a value is checked the same way
 * wherever it comes from. */
#ifndef TMM_CONFIG_FIELD_H
#define TMM_CONFIG_FIELD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define TMM_CONFIG_PATH_MAX 1024

typedef enum tmm_config_type {
    TMM_CONFIG_U32, TMM_CONFIG_U64, TMM_CONFIG_F64, TMM_CONFIG_BOOL,
    TMM_CONFIG_ENUM,  /* an int-sized enum; names[i] is value i */
    TMM_CONFIG_PATH,  /* char[TMM_CONFIG_PATH_MAX] */
    TMM_CONFIG_FILES, /* a list of file names (at most imax), kept by the table's owner; the flag appends */
} tmm_config_type;

typedef struct tmm_config_field {
    const char *section, *key;  /* JSON: {"section": {"key": ...}} */
    const char *flag;           /* the command's --flag (without the dashes); NULL: JSON only */
    const char *arg;            /* the flag's argument in help, e.g. "N" */
    tmm_config_type type;
    size_t offset;              /* in the struct the table describes */
    uint64_t imin, imax;        /* U32, U64: accepted range; FILES: imax is the most files */
    double lo, hi;              /* F64: accepted range (finite) */
    const char *const *names;   /* ENUM: NULL-terminated */
    const char *help;
    const char *old_key, *old_flag; /* its old names, still read until version 0.2 (deprecated), or NULL */
} tmm_config_field;

/* Rows; `at` is the value's offset in the struct. */
#define TMM_FIELD_U32(sec, key, flag, at, lo, hi, help) \
    { sec, key, flag, "N", TMM_CONFIG_U32, at, lo, hi, 0, 0, NULL, help, NULL, NULL }
#define TMM_FIELD_U64(sec, key, flag, at, lo, hi, help) \
    { sec, key, flag, "N", TMM_CONFIG_U64, at, lo, hi, 0, 0, NULL, help, NULL, NULL }
#define TMM_FIELD_F64(sec, key, flag, at, lo, hi, help) \
    { sec, key, flag, "X", TMM_CONFIG_F64, at, 0, 0, lo, hi, NULL, help, NULL, NULL }
#define TMM_FIELD_BOOL(sec, key, flag, at, help) \
    { sec, key, flag, NULL, TMM_CONFIG_BOOL, at, 0, 0, 0, 0, NULL, help, NULL, NULL }
#define TMM_FIELD_ENUM(sec, key, flag, arg, at, names, help) \
    { sec, key, flag, arg, TMM_CONFIG_ENUM, at, 0, 0, 0, 0, names, help, NULL, NULL }

/* Sets the value of field f in the struct at base from text (a flag's
 * argument, a JSON value as text, a checkpoint's metadata), with the row's
 * checks. source: the file it came from, or NULL for a flag (the error then
 * names the flag). FILES rows are their owner's: an error here. */
tmm_status tmm_config_field_parse(void *base, const tmm_config_field *f, const char *text, const char *source);
/* The value of field f as the text the flag takes (FILES rows: empty). */
void tmm_config_field_text(const void *base, const tmm_config_field *f, char *buf, size_t size);
/* Whether the value of field f is within the row's range (FILES: always). */
bool tmm_config_field_in_range(const void *base, const tmm_config_field *f);
/* The one error line for a value field f does not accept. */
tmm_status tmm_config_field_bad(const tmm_config_field *f, const char *source, const char *got);

#endif
