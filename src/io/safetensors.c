#define _POSIX_C_SOURCE 200809L /* strdup */
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/json.h"
#include "io/limits.h"

static const char *const dtype_names[] = { "F32", "F64", "I32", "U32" };

size_t tmm_st_dtype_size(tmm_st_dtype dtype) { return dtype == TMM_ST_F64 ? 8 : 4; }

uint64_t tmm_st_numel(const tmm_st_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* The order of the data: the format allows no holes between tensors, and
 * writing 8-byte elements before 4-byte ones keeps every tensor aligned to its
 * element size (the data section starts 8-byte aligned), so readers may use
 * it in place. order has count entries. */
static void data_order(const tmm_st_tensor *tensors, uint32_t count, uint32_t *order)
{
    uint32_t n = 0;
    for (size_t size = 8; size >= 4; size /= 2)
        for (uint32_t i = 0; i < count; i++)
            if (tmm_st_dtype_size(tensors[i].dtype) == size)
                order[n++] = i;
}

/* Each tensor's first byte in the data section, as tmm_safetensors_write lays them out. */
static tmm_status layout(const tmm_st_tensor *tensors, uint32_t count, uint64_t *begin)
{
    uint32_t *order = malloc((count ? count : 1) * sizeof *order);
    if (!order)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    data_order(tensors, count, order);
    uint64_t offset = 0;
    for (uint32_t k = 0; k < count; k++) {
        begin[order[k]] = offset;
        offset += tmm_st_numel(&tensors[order[k]]) * tmm_st_dtype_size(tensors[order[k]].dtype);
    }
    free(order);
    return TMM_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const tmm_st_tensor *const *)a)->name, (*(const tmm_st_tensor *const *)b)->name);
}

/* h continued over the table of tensors whose data start at begin[] (safetensors.h). */
static tmm_status table_hash(uint64_t h, const tmm_st_tensor *tensors, const uint64_t *begin, uint32_t count,
                             uint64_t *out)
{
    const tmm_st_tensor **sorted = malloc((count ? count : 1) * sizeof *sorted);
    if (!sorted)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < count; i++)
        sorted[i] = &tensors[i];
    qsort(sorted, count, sizeof *sorted, by_name);
    for (uint32_t k = 0; k < count; k++) {
        const tmm_st_tensor *t = sorted[k];
        char text[TMM_ST_MAX_DIMS * 21 + 64];
        int len = 0;
        for (uint32_t d = 0; d < t->ndim; d++)
            len += snprintf(text + len, sizeof text - (size_t)len, "%s%llu", d ? "," : "",
                            (unsigned long long)t->shape[d]);
        const uint64_t b = begin[t - tensors], e = b + tmm_st_numel(t) * tmm_st_dtype_size(t->dtype);
        len += 1 + snprintf(text + len + 1, sizeof text - (size_t)len - 1, "%llu,%llu", (unsigned long long)b,
                            (unsigned long long)e);
        h = tmm_fnv1a64_more(h, t->name, strlen(t->name) + 1);
        h = tmm_fnv1a64_more(h, dtype_names[t->dtype], strlen(dtype_names[t->dtype]) + 1);
        h = tmm_fnv1a64_more(h, text, (size_t)len + 1); /* "d0,d1\0begin,end\0" */
    }
    free(sorted);
    *out = h;
    return TMM_OK;
}

tmm_status tmm_st_table_hash(uint64_t h, const tmm_st_tensor *tensors, uint32_t count, uint64_t *out)
{
    uint64_t *begin = malloc((count ? count : 1) * sizeof *begin);
    if (!begin)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = layout(tensors, count, begin);
    if (s == TMM_OK)
        s = table_hash(h, tensors, begin, count, out);
    free(begin);
    return s;
}

tmm_status tmm_safetensors_write(const char *path, const tmm_st_tensor *tensors, uint32_t count,
                                 const tmm_st_meta *meta, uint32_t meta_count)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    tmm_status s = TMM_OK;
    if (meta_count) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (uint32_t i = 0; m && i < meta_count; i++)
            if (!cJSON_AddStringToObject(m, meta[i].key, meta[i].value))
                m = NULL;
        if (!m)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    uint32_t *order = malloc((count ? count : 1) * sizeof *order);
    if (!order)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    else
        data_order(tensors, count, order);
    uint64_t offset = 0;
    for (uint32_t k = 0; s == TMM_OK && k < count; k++) {
        const tmm_st_tensor *t = &tensors[order[k]];
        uint64_t bytes = tmm_st_numel(t) * tmm_st_dtype_size(t->dtype);
        cJSON *o = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = o ? cJSON_AddArrayToObject(o, "shape") : NULL;
        cJSON *offs = o ? cJSON_AddArrayToObject(o, "data_offsets") : NULL;
        if (!o || !shape || !offs || !cJSON_AddStringToObject(o, "dtype", dtype_names[t->dtype])) {
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            break;
        }
        for (uint32_t dim = 0; dim < t->ndim; dim++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[dim]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(offset + bytes)));
        offset += bytes;
    }
    char *json = s == TMM_OK ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (s == TMM_OK && !json)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    if (s != TMM_OK) {
        free(order);
        return s;
    }
    /* pad the header with spaces so the data starts 8-byte aligned */
    size_t hlen = strlen(json), padded = (hlen + 7) / 8 * 8;
    size_t total = 8 + padded + offset;
    unsigned char *buf = malloc(total);
    if (!buf) {
        free(json);
        free(order);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %s", path);
    }
    put_u64le(buf, padded);
    memcpy(buf + 8, json, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    free(json);
    unsigned char *data = buf + 8 + padded;
    for (uint32_t k = 0; k < count; k++) {
        const tmm_st_tensor *t = &tensors[order[k]];
        uint64_t bytes = tmm_st_numel(t) * tmm_st_dtype_size(t->dtype);
        memcpy(data, t->data, bytes);
        data += bytes;
    }
    free(order);
    s = tmm_write_file_atomic(path, buf, total);
    free(buf);
    return s;
}

struct tmm_safetensors {
    unsigned char *file;
    size_t size;
    size_t data_offset; /* 8 + header length */
    tmm_st_tensor *tensors;
    char **names;
    uint32_t count;
    tmm_st_meta *meta;
    char **meta_strings;
    uint32_t meta_count;
};

void tmm_safetensors_free(tmm_safetensors *st)
{
    if (!st)
        return;
    for (uint32_t i = 0; i < st->count; i++)
        free(st->names[i]);
    for (uint32_t i = 0; i < 2 * st->meta_count; i++)
        free(st->meta_strings[i]);
    free(st->names);
    free(st->tensors);
    free(st->meta);
    free(st->meta_strings);
    free(st->file);
    free(st);
}

static int by_offset(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* A JSON number that is a whole number in [0, 2^53): exact in a double. */
static bool get_index(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 9007199254740992.0) ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static tmm_status parse_meta(tmm_safetensors *st, const char *path, const cJSON *item)
{
    if (!cJSON_IsObject(item))
        return tmm_fail(TMM_ERR_IO, "%s: __metadata__ is not a JSON object of strings", path);
    const char *dup = tmm_json_duplicate_key(item);
    if (dup)
        return tmm_fail(TMM_ERR_IO, "%s: metadata key '%.64s' occurs twice", path, dup);
    uint32_t m = (uint32_t)cJSON_GetArraySize(item);
    st->meta = calloc(m ? m : 1, sizeof *st->meta);
    st->meta_strings = calloc(m ? 2 * m : 2, sizeof *st->meta_strings);
    if (!st->meta || !st->meta_strings)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    for (const cJSON *kv = item->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv))
            return tmm_fail(TMM_ERR_IO, "%s: metadata value of '%.64s' is not a string", path, kv->string);
        char *k = strdup(kv->string), *v = strdup(kv->valuestring);
        st->meta_strings[2 * st->meta_count] = k;
        st->meta_strings[2 * st->meta_count + 1] = v;
        st->meta[st->meta_count++] = (tmm_st_meta){ k, v };
        if (!k || !v)
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    }
    return TMM_OK;
}

static tmm_status parse(tmm_safetensors *st, const char *path)
{
    if (st->size < 8)
        return tmm_fail(TMM_ERR_IO, "%s: not a safetensors file (shorter than its 8-byte header size)", path);
    uint64_t hlen = get_u64le(st->file);
    if (hlen > st->size - 8 || hlen > (100u << 20))
        return tmm_fail(TMM_ERR_IO, "%s: header size %llu does not fit the file of %zu bytes (truncated?)", path,
                        (unsigned long long)hlen, st->size);
    cJSON *root = cJSON_ParseWithLength((const char *)st->file + 8, (size_t)hlen);
    if (!cJSON_IsObject(root)) {
        tmm_status s = tmm_fail(TMM_ERR_IO, root ? "%s: the header is not a JSON object" : "%s: the header is not "
                                "valid JSON", path);
        cJSON_Delete(root);
        return s;
    }
    const char *dup = tmm_json_duplicate_key(root);
    if (dup) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "%s: the header names '%.64s' twice", path, dup);
        cJSON_Delete(root);
        return s;
    }
    const unsigned char *data = st->file + 8 + hlen;
    st->data_offset = (size_t)(8 + hlen);
    uint64_t data_size = st->size - 8 - hlen;
    uint32_t n = (uint32_t)cJSON_GetArraySize(root);
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    st->names = calloc(n ? n : 1, sizeof *st->names);
    uint64_t *ranges = calloc(n ? 2 * n : 2, sizeof *ranges);
    tmm_status s = (st->tensors && st->names && ranges) ? TMM_OK : tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        if (s != TMM_OK)
            break;
        if (strcmp(item->string, "__metadata__") == 0) {
            s = parse_meta(st, path, item);
            continue;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
        tmm_st_tensor *t = &st->tensors[st->count];
        int dtype = -1;
        for (int i = 0; cJSON_IsString(dt) && i < 4; i++)
            if (strcmp(dt->valuestring, dtype_names[i]) == 0)
                dtype = i;
        if (dtype < 0 || !cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > TMM_ST_MAX_DIMS ||
            !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
            s = tmm_fail(TMM_ERR_IO, "%s: tensor '%s' has a bad or unsupported dtype, shape or data_offsets", path,
                         item->string);
            break;
        }
        t->dtype = (tmm_st_dtype)dtype;
        t->ndim = (uint32_t)cJSON_GetArraySize(shape);
        /* the byte count, without overflow: every factor is checked against what the file can hold */
        uint64_t bytes = tmm_st_dtype_size(t->dtype);
        for (uint32_t k = 0; k < t->ndim; k++) {
            uint64_t v;
            if (!get_index(cJSON_GetArrayItem(shape, (int)k), &v) || (v && bytes > data_size / v)) {
                s = tmm_fail(TMM_ERR_IO, "%s: tensor '%.64s' has a bad shape (dimensions must be whole numbers "
                             "whose product fits the file)", path, item->string);
                break;
            }
            t->shape[k] = v;
            bytes *= v;
        }
        uint64_t b = 0, e = 0;
        if (s == TMM_OK && !(get_index(cJSON_GetArrayItem(offs, 0), &b) && get_index(cJSON_GetArrayItem(offs, 1), &e) &&
                             e >= b && e <= data_size && e - b == bytes))
            s = tmm_fail(TMM_ERR_IO, "%s: tensor '%.64s' has data_offsets that do not match its shape or lie outside "
                         "the file (truncated or corrupt?)", path, item->string);
        if (s != TMM_OK)
            break;
        t->data = data + b;
        st->names[st->count] = strdup(item->string);
        t->name = st->names[st->count];
        if (!t->name) {
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
            break;
        }
        ranges[2 * st->count] = b;
        ranges[2 * st->count + 1] = e;
        st->count++;
    }
    cJSON_Delete(root);
    if (s == TMM_OK) {
        qsort(ranges, st->count, 2 * sizeof *ranges, by_offset);
        for (uint32_t i = 1; i < st->count; i++)
            if (ranges[2 * i] < ranges[2 * i - 1])
                s = tmm_fail(TMM_ERR_IO, "%s: two tensors overlap in the data", path);
    }
    free(ranges);
    return s;
}

tmm_status tmm_safetensors_read(const char *path, tmm_safetensors **out)
{
    *out = NULL;
    tmm_safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of memory");
    void *file;
    tmm_status s = tmm_read_file(path, "safetensors file", TMM_LIMIT_CHECKPOINT, &file, &st->size);
    st->file = file;
    if (s == TMM_OK)
        s = parse(st, path);
    if (s != TMM_OK) {
        tmm_safetensors_free(st);
        return s;
    }
    *out = st;
    return TMM_OK;
}

uint32_t tmm_safetensors_count(const tmm_safetensors *st) { return st->count; }
const tmm_st_tensor *tmm_safetensors_at(const tmm_safetensors *st, uint32_t i) { return &st->tensors[i]; }

const tmm_st_tensor *tmm_safetensors_find(const tmm_safetensors *st, const char *name)
{
    for (uint32_t i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

const char *tmm_safetensors_meta(const tmm_safetensors *st, const char *key)
{
    for (uint32_t i = 0; i < st->meta_count; i++)
        if (strcmp(st->meta[i].key, key) == 0)
            return st->meta[i].value;
    return NULL;
}

uint32_t tmm_safetensors_meta_count(const tmm_safetensors *st) { return st->meta_count; }
const tmm_st_meta *tmm_safetensors_meta_at(const tmm_safetensors *st, uint32_t i) { return &st->meta[i]; }

const void *tmm_safetensors_data(const tmm_safetensors *st, size_t *size)
{
    *size = st->size - st->data_offset;
    return st->file + st->data_offset;
}

tmm_status tmm_safetensors_table_hash(const tmm_safetensors *st, uint64_t h, uint64_t *out)
{
    uint64_t *begin = malloc((st->count ? st->count : 1) * sizeof *begin);
    if (!begin)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < st->count; i++)
        begin[i] = (uint64_t)((const unsigned char *)st->tensors[i].data - (st->file + st->data_offset));
    tmm_status s = table_hash(h, st->tensors, begin, st->count, out);
    free(begin);
    return s;
}
