/* manifest.json of a prepared directory (manifest.h). */
#include "train/manifest.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "io/json.h"
#include "io/limits.h"
#include "status.h"

#define MANIFEST_FORMAT "tmm-shards"
#define MANIFEST_VERSION 1

void tmm_manifest_free(tmm_manifest *m)
{
    free(m->shards);
    m->shards = NULL;
    m->count = 0;
}

static bool get_u64(const cJSON *obj, const char *key, uint64_t max, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > (double)max ||
        v->valuedouble != floor(v->valuedouble))
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static bool get_hex(const cJSON *obj, const char *key, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 16 || strspn(v->valuestring, "0123456789abcdef") != 16)
        return false;
    *out = strtoull(v->valuestring, NULL, 16);
    return true;
}

/* Only the given keys, each once. */
static bool only_keys(const cJSON *obj, const char *const *keys)
{
    if (!cJSON_IsObject(obj) || tmm_json_duplicate_key(obj))
        return false;
    for (const cJSON *c = obj->child; c; c = c->next) {
        bool known = false;
        for (const char *const *k = keys; *k && !known; k++)
            known = c->string && strcmp(c->string, *k) == 0;
        if (!known)
            return false;
    }
    return true;
}

static tmm_status parse_shard(const cJSON *e, uint32_t next[2], tmm_manifest_shard *out, const char *path, uint32_t i)
{
    static const char *const keys[] = { "file", "split", "tokens", "documents", "fnv1a64", NULL };
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(e, "file");
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(e, "split");
    bool ok = only_keys(e, keys) && cJSON_IsString(file) && cJSON_IsString(split) &&
              get_u64(e, "tokens", TMM_SHARD_MAX_TOKENS, &out->tokens) &&
              get_u64(e, "documents", TMM_SHARD_MAX_TOKENS, &out->documents) && get_hex(e, "fnv1a64", &out->checksum);
    if (ok && strcmp(split->valuestring, "train") == 0)
        out->split = TMM_SHARD_TRAIN;
    else if (ok && strcmp(split->valuestring, "val") == 0)
        out->split = TMM_SHARD_VAL;
    else
        return tmm_fail(TMM_ERR_IO, "%s: shard %u is not {file, split (\"train\" or \"val\"), tokens, documents, "
                        "fnv1a64 (16 hex digits)}", path, i);
    tmm_shard_name((tmm_shard_split)out->split, next[out->split], out->file, sizeof out->file);
    if (strcmp(file->valuestring, out->file) != 0)
        return tmm_fail(TMM_ERR_IO, "%s: shard %u is named \"%.64s\", expected \"%s\" (the split's shards in order)",
                        path, i, file->valuestring, out->file);
    next[out->split]++;
    return TMM_OK;
}

static tmm_status parse(const cJSON *root, const char *path, tmm_manifest *m)
{
    static const char *const keys[] = { "format", "version", "tokenizer", "tokenizer_kind", "fingerprint", "vocab",
                                        "eot", "token_bytes", "val_fraction", "documents", "skipped", "input_bytes",
                                        "shards", NULL };
    if (!only_keys(root, keys))
        return tmm_fail(TMM_ERR_IO, "%s is not a tmm manifest: an object with the keys of docs/formats.md, each "
                        "once, and no others", path);
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *tokenizer = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "tokenizer_kind");
    const cJSON *vf = cJSON_GetObjectItemCaseSensitive(root, "val_fraction");
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(root, "shards");
    uint64_t version, vocab, eot, width;
    if (!cJSON_IsString(format) || strcmp(format->valuestring, MANIFEST_FORMAT) != 0)
        return tmm_fail(TMM_ERR_IO, "%s: \"format\" is not \"%s\"", path, MANIFEST_FORMAT);
    if (!get_u64(root, "version", UINT32_MAX, &version) || version != MANIFEST_VERSION)
        return tmm_fail(TMM_ERR_IO, "%s: version is not %d (this tmm reads version %d)", path, MANIFEST_VERSION,
                        MANIFEST_VERSION);
    if (!cJSON_IsString(tokenizer) || strcmp(tokenizer->valuestring, TMM_SHARD_TOKENIZER) != 0)
        return tmm_fail(TMM_ERR_IO, "%s: \"tokenizer\" is not \"%s\"", path, TMM_SHARD_TOKENIZER);
    if (!cJSON_IsString(kind) || strlen(kind->valuestring) >= sizeof m->tokenizer_kind)
        return tmm_fail(TMM_ERR_IO, "%s: \"tokenizer_kind\" is not a short string", path);
    strcpy(m->tokenizer_kind, kind->valuestring);
    if (!get_hex(root, "fingerprint", &m->fingerprint))
        return tmm_fail(TMM_ERR_IO, "%s: \"fingerprint\" is not 16 hex digits", path);
    if (!get_u64(root, "vocab", UINT32_MAX, &vocab) || vocab == 0 || !get_u64(root, "eot", vocab - 1, &eot) ||
        !get_u64(root, "token_bytes", 4, &width) || width != tmm_shard_width((uint32_t)vocab))
        return tmm_fail(TMM_ERR_IO, "%s: vocab, eot or token_bytes is out of range", path);
    m->vocab = (uint32_t)vocab;
    m->eot = (uint32_t)eot;
    if (!cJSON_IsNumber(vf) || !(vf->valuedouble >= 0 && vf->valuedouble < 1))
        return tmm_fail(TMM_ERR_IO, "%s: \"val_fraction\" is not in [0, 1)", path);
    m->val_fraction = vf->valuedouble;
    if (!get_u64(root, "documents", 1ull << 53, &m->documents) || !get_u64(root, "skipped", 1ull << 53, &m->skipped) ||
        !get_u64(root, "input_bytes", 1ull << 53, &m->input_bytes))
        return tmm_fail(TMM_ERR_IO, "%s: documents, skipped or input_bytes is not a whole number", path);
    int n = cJSON_IsArray(shards) ? cJSON_GetArraySize(shards) : -1;
    if (n < 1 || (uint32_t)n > TMM_SHARD_MAX_FILES)
        return tmm_fail(TMM_ERR_IO, "%s: \"shards\" is not a list of 1 to %u shards", path, TMM_SHARD_MAX_FILES);
    m->shards = calloc((size_t)n, sizeof *m->shards);
    if (!m->shards)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t next[2] = { 0, 0 };
    uint64_t docs = 0;
    for (const cJSON *e = shards->child; e; e = e->next) {
        TMM_TRY(parse_shard(e, next, &m->shards[m->count], path, m->count));
        docs += m->shards[m->count++].documents;
    }
    if (docs != m->documents)
        return tmm_fail(TMM_ERR_IO, "%s: its shards hold %llu documents, it says %llu", path,
                        (unsigned long long)docs, (unsigned long long)m->documents);
    return TMM_OK;
}

tmm_status tmm_manifest_read(const char *dir, tmm_manifest *out)
{
    memset(out, 0, sizeof *out);
    char path[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(path, sizeof path, dir, TMM_SHARD_MANIFEST));
    if (!tmm_path_exists(path))
        return tmm_fail(TMM_ERR_IO, "%s has no %s: not a directory written by tmm prepare, or one whose prepare did "
                        "not finish; run tmm prepare again", dir, TMM_SHARD_MANIFEST);
    void *text;
    size_t size;
    TMM_TRY(tmm_read_file(path, "shard manifest", TMM_LIMIT_MANIFEST, &text, &size));
    cJSON *root = cJSON_ParseWithLength(text, size);
    free(text);
    tmm_status s = root ? parse(root, path, out) : tmm_fail(TMM_ERR_IO, "%s is not valid JSON", path);
    cJSON_Delete(root);
    if (s != TMM_OK)
        tmm_manifest_free(out);
    return s;
}

tmm_status tmm_manifest_write(const char *dir, const tmm_manifest *m)
{
    char path[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(path, sizeof path, dir, TMM_SHARD_MANIFEST));
    size_t cap = 1024 + (size_t)m->count * 160;
    char *buf = malloc(cap);
    if (!buf)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    size_t len = (size_t)snprintf(
        buf, cap,
        "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"tokenizer\": \"%s\",\n  \"tokenizer_kind\": \"%s\",\n"
        "  \"fingerprint\": \"%016" PRIx64 "\",\n  \"vocab\": %u,\n  \"eot\": %u,\n  \"token_bytes\": %u,\n"
        "  \"val_fraction\": %.9g,\n  \"documents\": %" PRIu64 ",\n  \"skipped\": %" PRIu64 ",\n"
        "  \"input_bytes\": %" PRIu64 ",\n  \"shards\": [",
        MANIFEST_FORMAT, MANIFEST_VERSION, TMM_SHARD_TOKENIZER, m->tokenizer_kind, m->fingerprint, m->vocab, m->eot,
        tmm_shard_width(m->vocab), m->val_fraction, m->documents, m->skipped, m->input_bytes);
    for (uint32_t i = 0; i < m->count; i++) {
        const tmm_manifest_shard *e = &m->shards[i];
        len += (size_t)snprintf(buf + len, cap - len,
                                "%s\n    {\"file\": \"%s\", \"split\": \"%s\", \"tokens\": %" PRIu64
                                ", \"documents\": %" PRIu64 ", \"fnv1a64\": \"%016" PRIx64 "\"}",
                                i ? "," : "", e->file, e->split == TMM_SHARD_VAL ? "val" : "train", e->tokens,
                                e->documents, e->checksum);
    }
    len += (size_t)snprintf(buf + len, cap - len, "\n  ]\n}\n");
    tmm_status s = tmm_write_file_atomic(path, buf, len);
    free(buf);
    return s;
}
