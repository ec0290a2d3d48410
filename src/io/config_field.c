#include "io/config_field.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *at(void *base, const tmm_config_field *f) { return (char *)base + f->offset; }
static const void *cat(const void *base, const tmm_config_field *f) { return (const char *)base + f->offset; }

tmm_status tmm_config_field_bad(const tmm_config_field *f, const char *source, const char *got)
{
    char want[160];
    switch (f->type) {
    case TMM_CONFIG_U32:
    case TMM_CONFIG_U64:
        snprintf(want, sizeof want, "a whole number from %" PRIu64 " to %" PRIu64, f->imin, f->imax);
        break;
    case TMM_CONFIG_F64: snprintf(want, sizeof want, "a number from %g to %g", f->lo, f->hi); break;
    case TMM_CONFIG_BOOL: snprintf(want, sizeof want, "true or false"); break;
    case TMM_CONFIG_ENUM: {
        size_t n = 0;
        for (int i = 0; f->names[i] && n < sizeof want; i++)
            n += (size_t)snprintf(want + n, sizeof want - n, "%s%s", i ? (f->names[i + 1] ? ", " : " or ") : "one of ",
                                  f->names[i]);
        break;
    }
    case TMM_CONFIG_PATH: snprintf(want, sizeof want, "a path shorter than %d bytes", TMM_CONFIG_PATH_MAX); break;
    case TMM_CONFIG_FILES:
        snprintf(want, sizeof want, "a list of at most %" PRIu64 " file names", f->imax);
        break;
    }
    if (f->flag && !source)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "--%s expects %s, got '%.64s'", f->flag, want, got);
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: \"%s.%s\" must be %s, got %.64s", source ? source : "config",
                    f->section, f->key, want, got);
}

static bool parse_decimal(const char *t, uint64_t *out)
{
    uint64_t x = 0;
    if (!*t || strlen(t) > 20)
        return false;
    for (; *t; t++) {
        if (*t < '0' || *t > '9' || x > (UINT64_MAX - (uint64_t)(*t - '0')) / 10)
            return false;
        x = x * 10 + (uint64_t)(*t - '0');
    }
    *out = x;
    return true;
}

tmm_status tmm_config_field_parse(void *base, const tmm_config_field *f, const char *text, const char *source)
{
    switch (f->type) {
    case TMM_CONFIG_U32:
    case TMM_CONFIG_U64: {
        uint64_t v;
        if (!parse_decimal(text, &v) || v < f->imin || v > f->imax)
            return tmm_config_field_bad(f, source, text);
        if (f->type == TMM_CONFIG_U32)
            *(uint32_t *)at(base, f) = (uint32_t)v;
        else
            *(uint64_t *)at(base, f) = v;
        return TMM_OK;
    }
    case TMM_CONFIG_F64: {
        char *end;
        double v = strtod(text, &end);
        if (end == text || *end || !isfinite(v) || v < f->lo || v > f->hi)
            return tmm_config_field_bad(f, source, text);
        *(double *)at(base, f) = v;
        return TMM_OK;
    }
    case TMM_CONFIG_BOOL:
        if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0)
            *(bool *)at(base, f) = true;
        else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0)
            *(bool *)at(base, f) = false;
        else
            return tmm_config_field_bad(f, source, text);
        return TMM_OK;
    case TMM_CONFIG_ENUM:
        for (int i = 0; f->names[i]; i++)
            if (strcmp(text, f->names[i]) == 0) {
                *(int *)at(base, f) = i;
                return TMM_OK;
            }
        return tmm_config_field_bad(f, source, text);
    case TMM_CONFIG_PATH:
        if (!*text || strlen(text) >= TMM_CONFIG_PATH_MAX)
            return tmm_config_field_bad(f, source, text);
        snprintf((char *)at(base, f), TMM_CONFIG_PATH_MAX, "%s", text);
        return TMM_OK;
    case TMM_CONFIG_FILES: break;
    }
    return tmm_config_field_bad(f, source, text);
}

void tmm_config_field_text(const void *base, const tmm_config_field *f, char *buf, size_t size)
{
    const void *p = cat(base, f);
    switch (f->type) {
    case TMM_CONFIG_U32: snprintf(buf, size, "%" PRIu32, *(const uint32_t *)p); break;
    case TMM_CONFIG_U64: snprintf(buf, size, "%" PRIu64, *(const uint64_t *)p); break;
    case TMM_CONFIG_F64: snprintf(buf, size, "%.9g", *(const double *)p); break;
    case TMM_CONFIG_BOOL: snprintf(buf, size, "%s", *(const bool *)p ? "true" : "false"); break;
    case TMM_CONFIG_ENUM: {
        int v = *(const int *)p, n = 0;
        while (f->names[n])
            n++;
        if (v >= 0 && v < n)
            snprintf(buf, size, "%s", f->names[v]);
        else
            snprintf(buf, size, "%d", v);
        break;
    }
    case TMM_CONFIG_PATH: snprintf(buf, size, "%s", (const char *)p); break;
    case TMM_CONFIG_FILES: snprintf(buf, size, "%s", ""); break;
    }
}

bool tmm_config_field_in_range(const void *base, const tmm_config_field *f)
{
    const void *p = cat(base, f);
    switch (f->type) {
    case TMM_CONFIG_U32: return *(const uint32_t *)p >= f->imin && *(const uint32_t *)p <= f->imax;
    case TMM_CONFIG_U64: return *(const uint64_t *)p >= f->imin && *(const uint64_t *)p <= f->imax;
    case TMM_CONFIG_F64: return isfinite(*(const double *)p) && *(const double *)p >= f->lo && *(const double *)p <= f->hi;
    case TMM_CONFIG_ENUM: {
        int v = *(const int *)p, n = 0;
        while (f->names[n])
            n++;
        return v >= 0 && v < n;
    }
    case TMM_CONFIG_PATH: return *(const char *)p != '\0';
    case TMM_CONFIG_BOOL:
    case TMM_CONFIG_FILES: break;
    }
    return true;
}
