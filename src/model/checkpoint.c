#define _POSIX_C_SOURCE 200809L
#include "model/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(_WIN32)
#include <direct.h>
#define MKDIR(p) _mkdir(p)
#define RMDIR(p) _rmdir(p)
#ifndef S_ISDIR
#define S_ISDIR(m) (((m) & _S_IFMT) == _S_IFDIR)
#endif
#else
#include <unistd.h>
#define MKDIR(p) mkdir((p), 0755)
#define RMDIR(p) rmdir(p)
#endif

#include "files.h"
#include "io/limits.h"
#include "status.h"
#include "model/model_fields.h"


static const char *const MODEL_FORMAT = "tmm-model";
static const char *const STATE_FORMAT = "tmm-train-state";
static const char *const MODEL_FILE = "model.safetensors";
static const char *const STATE_FILE = "train_state.safetensors";

/* Keys of the model file besides the model config's, which are the rows of
 * model/model_fields.h: a field added there is written, read and compared
 * here without another edit. */
static const char *const file_keys[] = { "format", "format_version", "step", "data_fnv1a64", "meta_fnv1a64" };
#define N_FILE_KEYS (sizeof file_keys / sizeof file_keys[0])
/* Model fields added after format version 2, and the version that added
 * them: older files do not have them, and their zero is right there. */
static const struct { const char *key; uint64_t since; } newer_fields[] = {
    { "arch", 3 }, { "window", 3 }, { "state", 4 }, { "init", 5 },
};

/* A model field's value as metadata text (booleans as 0 or 1). */
static bool is_model_key(const char *key)
{
    for (size_t k = 0; k < N_FILE_KEYS; k++)
        if (strcmp(key, file_keys[k]) == 0)
            return true;
    for (const tmm_config_field *f = tmm_model_fields; f->section; f++)
        if (strcmp(key, f->key) == 0)
            return true;
    return false;
}

static void model_field_text(const tmm_model_config *c, const tmm_config_field *f, char *buf, size_t size)
{
    tmm_config_field_text(c, f, buf, size);
    if (f->type == TMM_CONFIG_BOOL)
        snprintf(buf, size, "%s", strcmp(buf, "true") == 0 ? "1" : "0");
}

/* ---- small helpers ---------------------------------------------------------- */

static bool is_checksum_key(const char *key)
{
    return strcmp(key, "data_fnv1a64") == 0 || strcmp(key, "meta_fnv1a64") == 0;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const tmm_st_meta *)a)->key, ((const tmm_st_meta *)b)->key);
}

/* FNV-1a 64 over the pairs other than the checksums, sorted by key, each as
 * key NUL value NUL. *dup names a key that occurs twice (then no hash). */
static tmm_status meta_hash(const tmm_st_meta *pairs, uint32_t n, uint64_t *hash, const char **dup)
{
    *dup = NULL;
    tmm_st_meta *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!is_checksum_key(pairs[i].key))
            sorted[m++] = pairs[i];
    qsort(sorted, m, sizeof *sorted, by_key);
    uint64_t h = TMM_FNV1A64_BASIS;
    for (uint32_t i = 0; i < m; i++) {
        if (i && strcmp(sorted[i].key, sorted[i - 1].key) == 0)
            *dup = sorted[i].key;
        h = tmm_fnv1a64_more(h, sorted[i].key, strlen(sorted[i].key) + 1);
        h = tmm_fnv1a64_more(h, sorted[i].value, strlen(sorted[i].value) + 1);
    }
    free(sorted);
    *hash = h;
    return TMM_OK;
}

static bool parse_u64(const char *s, uint64_t *v)
{
    if (!s || !*s || strlen(s) > 20)
        return false;
    uint64_t x = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *v = x;
    return true;
}

static bool parse_hex64(const char *s, uint64_t *v)
{
    if (!s || strlen(s) != 16)
        return false;
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                           : 16u;
        if (d > 15)
            return false;
        x = x << 4 | d;
    }
    *v = x;
    return true;
}

/* "step-" and digits: the step, or false. */
static bool parse_step_name(const char *name, uint64_t *step)
{
    return strncmp(name, "step-", 5) == 0 && parse_u64(name + 5, step);
}

/* A block holding a tmm_st_meta array and its strings; keys lose their first
 * strip characters. */
static tmm_status copy_pairs(const tmm_st_meta *const *src, uint32_t n, size_t strip, tmm_st_meta **out)
{
    *out = NULL;
    if (!n)
        return TMM_OK;
    size_t total = n * sizeof(tmm_st_meta);
    for (uint32_t i = 0; i < n; i++)
        total += strlen(src[i]->key) - strip + 1 + strlen(src[i]->value) + 1;
    tmm_st_meta *pairs = malloc(total);
    if (!pairs)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    char *p = (char *)(pairs + n);
    for (uint32_t i = 0; i < n; i++) {
        size_t k = strlen(src[i]->key) - strip + 1, v = strlen(src[i]->value) + 1;
        memcpy(p, src[i]->key + strip, k);
        pairs[i].key = p;
        p += k;
        memcpy(p, src[i]->value, v);
        pairs[i].value = p;
        p += v;
    }
    *out = pairs;
    return TMM_OK;
}

static void shape_text(char *buf, size_t size, uint32_t ndim, const uint64_t *shape)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %" PRIu64 : "%" PRIu64, shape[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

/* ---- directories ------------------------------------------------------------ */

typedef struct step_dir {
    uint64_t step;
    tmm_dir_entry name;
} step_dir;

static int by_step_desc(const void *a, const void *b)
{
    uint64_t x = ((const step_dir *)a)->step, y = ((const step_dir *)b)->step;
    return x > y ? -1 : x < y;
}

/* The step-N directories of a checkpoints directory, newest first. */
static tmm_status list_steps(const char *ckdir, step_dir **out, uint32_t *count)
{
    *out = NULL;
    *count = 0;
    tmm_dir_entry *names;
    uint32_t n;
    TMM_TRY(tmm_list_dir(ckdir, &names, &n));
    step_dir *steps = malloc((n ? n : 1) * sizeof *steps);
    if (!steps) {
        free(names);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        char p[TMM_PATH_MAX];
        if (parse_step_name(names[i], &steps[m].step) && tmm_path_join(p, TMM_PATH_MAX, ckdir, names[i]) == TMM_OK && tmm_is_real_dir(p))
            memcpy(steps[m++].name, names[i], TMM_NAME_MAX);
    }
    free(names);
    qsort(steps, m, sizeof *steps, by_step_desc);
    *out = steps;
    *count = m;
    return TMM_OK;
}

/* ---- writing ---------------------------------------------------------------- */

static void fill_tensor(tmm_st_tensor *t, const char *name, const tmm_param *p, const float *arena)
{
    *t = (tmm_st_tensor){ name, TMM_ST_F32, p->ndim, { 0 }, arena + p->offset };
    for (uint32_t k = 0; k < p->ndim; k++)
        t->shape[k] = p->shape[k];
}

/* Appends data_fnv1a64 and meta_fnv1a64 (meta has room for two more) and writes. */
static tmm_status write_with_checksums(const char *path, const tmm_st_tensor *ts, uint32_t n_ts, tmm_st_meta *meta,
                                       uint32_t n_meta, uint64_t data_hash)
{
    uint64_t mh;
    const char *dup;
    TMM_TRY(meta_hash(meta, n_meta, &mh, &dup));
    if (dup)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: metadata key '%s' given twice", path, dup);
    TMM_TRY(tmm_st_table_hash(mh, ts, n_ts, &mh)); /* the table too (version 6) */
    char dh_text[17], mh_text[17];
    snprintf(dh_text, sizeof dh_text, "%016" PRIx64, data_hash);
    snprintf(mh_text, sizeof mh_text, "%016" PRIx64, mh);
    meta[n_meta++] = (tmm_st_meta){ "data_fnv1a64", dh_text };
    meta[n_meta++] = (tmm_st_meta){ "meta_fnv1a64", mh_text };
    return tmm_safetensors_write(path, ts, n_ts, meta, n_meta);
}

static tmm_status write_model(const char *path, uint64_t step, const tmm_param_table *table, const float *params,
                              const tmm_st_meta *extra, uint32_t n_extra, uint64_t *data_hash)
{
    if (!path || !table || !params || (n_extra && !extra))
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: missing path, parameter table or parameters");
    for (uint32_t i = 0; i < n_extra; i++) {
        if (!extra[i].key || !*extra[i].key || !extra[i].value)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: extra metadata %u has no key or no value", i);
        if (is_model_key(extra[i].key))
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: extra metadata key '%s' is reserved", extra[i].key);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(extra[i].key, extra[j].key) == 0)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: extra metadata key '%s' given twice",
                                extra[i].key);
    }
    enum { MAX_FIXED = 40 };
    char version[24], step_text[24], values[MAX_FIXED][48];
    snprintf(version, sizeof version, "%d", TMM_CHECKPOINT_FORMAT_VERSION);
    snprintf(step_text, sizeof step_text, "%" PRIu64, step);
    tmm_st_meta fixed[MAX_FIXED] = { { "format", MODEL_FORMAT }, { "format_version", version }, { "step", step_text } };
    uint32_t n_fixed = 3;
    for (const tmm_config_field *f = tmm_model_fields; f->section; f++)
        if (n_fixed < MAX_FIXED) {
            model_field_text(&table->config, f, values[n_fixed], sizeof values[n_fixed]);
            fixed[n_fixed] = (tmm_st_meta){ f->key, values[n_fixed] };
            n_fixed++;
        }
    tmm_st_meta *meta = malloc((n_fixed + n_extra + 2) * sizeof *meta);
    tmm_st_tensor *ts = malloc(table->count * sizeof *ts);
    if (!meta || !ts) {
        free(meta);
        free(ts);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    memcpy(meta, fixed, n_fixed * sizeof *fixed);
    if (n_extra)
        memcpy(meta + n_fixed, extra, n_extra * sizeof *extra);
    uint64_t h = TMM_FNV1A64_BASIS;
    for (uint32_t i = 0; i < table->count; i++) {
        fill_tensor(&ts[i], table->params[i].name, &table->params[i], params);
        h = tmm_fnv1a64_more(h, ts[i].data, table->params[i].numel * sizeof(float));
    }
    tmm_status s = write_with_checksums(path, ts, table->count, meta, n_fixed + n_extra, h);
    free(meta);
    free(ts);
    if (s == TMM_OK && data_hash)
        *data_hash = h;
    return s;
}

tmm_status tmm_checkpoint_write_model(const char *path, uint64_t step, const tmm_param_table *table,
                                      const float *params, const tmm_st_meta *extra, uint32_t n_extra)
{
    return write_model(path, step, table, params, extra, n_extra, NULL);
}

static tmm_status write_state(const char *path, const tmm_param_table *table, const tmm_train_state *st,
                              uint64_t model_hash)
{
    if (!st->m || !st->v)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: the train state has no moments (m, v)");
    if (st->n_words > TMM_TRAIN_STATE_WORDS)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: the train state has %u words, at most %d fit",
                        st->n_words, TMM_TRAIN_STATE_WORDS);
    if (st->n_config && !st->config)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: the train state's config is NULL");
    size_t opt_chars = 0;
    for (uint32_t i = 0; i < st->n_config; i++) {
        if (!st->config[i].key || !*st->config[i].key || !st->config[i].value)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: train config entry %u has no key or no value", i);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(st->config[i].key, st->config[j].key) == 0)
                return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: train config key '%s' given twice",
                                st->config[i].key);
        opt_chars += strlen(st->config[i].key) + 5;
    }
    char words[TMM_TRAIN_STATE_WORDS * 21 + 1] = "";
    for (uint32_t i = 0, n = 0; i < st->n_words; i++)
        n += (uint32_t)snprintf(words + n, sizeof words - n, i ? ",%" PRIu64 : "%" PRIu64, st->words[i]);
    char step_text[24], mh_text[17], version[8];
    snprintf(step_text, sizeof step_text, "%" PRIu64, st->step);
    snprintf(mh_text, sizeof mh_text, "%016" PRIx64, model_hash);
    snprintf(version, sizeof version, "%d", TMM_CHECKPOINT_FORMAT_VERSION);

    const uint32_t n_meta_max = 6 + st->n_config + 2;
    tmm_st_meta *meta = malloc(n_meta_max * sizeof *meta);
    char *keys = malloc(opt_chars ? opt_chars : 1);
    tmm_st_tensor *ts = malloc(2 * table->count * sizeof *ts);
    char (*names)[TMM_PARAM_NAME_MAX + 2] = malloc(2 * table->count * sizeof *names);
    if (!meta || !keys || !ts || !names) {
        free(meta), free(keys), free(ts), free(names);
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    uint32_t n_meta = 0;
    meta[n_meta++] = (tmm_st_meta){ "format", STATE_FORMAT };
    meta[n_meta++] = (tmm_st_meta){ "format_version", version };
    meta[n_meta++] = (tmm_st_meta){ "step", step_text };
    meta[n_meta++] = (tmm_st_meta){ "model_fnv1a64", mh_text };
    meta[n_meta++] = (tmm_st_meta){ "words", words };
    if (st->blob)
        meta[n_meta++] = (tmm_st_meta){ "blob", st->blob };
    char *k = keys;
    for (uint32_t i = 0; i < st->n_config; i++) {
        size_t len = strlen(st->config[i].key) + 5;
        snprintf(k, len, "opt.%s", st->config[i].key);
        meta[n_meta++] = (tmm_st_meta){ k, st->config[i].value };
        k += len;
    }
    uint64_t h = TMM_FNV1A64_BASIS;
    for (uint32_t half = 0; half < 2; half++) {
        const float *arena = half ? st->v : st->m;
        for (uint32_t i = 0; i < table->count; i++) {
            uint32_t j = half * table->count + i;
            snprintf(names[j], sizeof names[j], "%s.%s", half ? "v" : "m", table->params[i].name);
            fill_tensor(&ts[j], names[j], &table->params[i], arena);
            h = tmm_fnv1a64_more(h, ts[j].data, table->params[i].numel * sizeof(float));
        }
    }
    tmm_status s = write_with_checksums(path, ts, 2 * table->count, meta, n_meta, h);
    free(meta), free(keys), free(ts), free(names);
    return s;
}

/* Keeps the keep newest step directories numbered up to step (step's own
 * among them) and removes leftover temporary directories. Failures are
 * warnings: the checkpoint itself is saved. */
static void prune(const char *ckdir, uint64_t step, uint32_t keep)
{
    tmm_dir_entry *names;
    uint32_t n;
    if (tmm_list_dir(ckdir, &names, &n) != TMM_OK) {
        tmm_warn("%s", tmm_last_error());
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        char p[TMM_PATH_MAX];
        bool leftover = strncmp(names[i], ".step-", 6) == 0 &&
                        ((len > 4 && strcmp(names[i] + len - 4, ".tmp") == 0) ||
                         (len > 4 && strcmp(names[i] + len - 4, ".old") == 0));
        if (leftover && tmm_path_join(p, TMM_PATH_MAX, ckdir, names[i]) == TMM_OK && tmm_is_real_dir(p) && tmm_remove_dir(p) != TMM_OK)
            tmm_warn("%s", tmm_last_error());
    }
    free(names);
    if (keep == 0)
        return;
    step_dir *steps;
    uint32_t count;
    if (list_steps(ckdir, &steps, &count) != TMM_OK) {
        tmm_warn("%s", tmm_last_error());
        return;
    }
    uint32_t kept = 1; /* step's own */
    for (uint32_t i = 0; i < count; i++) {
        if (steps[i].step >= step)
            continue;
        if (kept < keep) {
            kept++;
            continue;
        }
        char p[TMM_PATH_MAX];
        if (tmm_path_join(p, TMM_PATH_MAX, ckdir, steps[i].name) == TMM_OK && tmm_remove_dir(p) != TMM_OK)
            tmm_warn("%s", tmm_last_error());
    }
    free(steps);
}

tmm_status tmm_checkpoint_step_dir(const char *run_dir, uint64_t step, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/checkpoints/step-%06" PRIu64, run_dir, step);
    if (n < 0 || (size_t)n >= size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "path too long: %s/checkpoints/step-%06" PRIu64, run_dir, step);
    return TMM_OK;
}

tmm_status tmm_checkpoint_save(const char *run_dir, uint64_t step, const tmm_param_table *table,
                               const float *params, const tmm_train_state *state, const tmm_st_meta *extra,
                               uint32_t n_extra, uint32_t keep)
{
    if (!run_dir || !*run_dir || !table || !params)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: missing run directory, parameter table or parameters");
    if (state && state->step != step)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: saving step %" PRIu64 " with a train state of step %"
                        PRIu64, step, state->step);
    char ckdir[TMM_PATH_MAX], name[32], tmp_name[48], old_name[48];
    char tmp[TMM_PATH_MAX], final[TMM_PATH_MAX], old[TMM_PATH_MAX], file[TMM_PATH_MAX];
    snprintf(name, sizeof name, "step-%06" PRIu64, step);
    snprintf(tmp_name, sizeof tmp_name, ".%s.tmp", name);
    snprintf(old_name, sizeof old_name, ".%s.old", name);
    TMM_TRY(tmm_path_join(ckdir, TMM_PATH_MAX, run_dir, "checkpoints"));
    TMM_TRY(tmm_path_join(tmp, TMM_PATH_MAX, ckdir, tmp_name));
    TMM_TRY(tmm_path_join(final, TMM_PATH_MAX, ckdir, name));
    TMM_TRY(tmm_path_join(old, TMM_PATH_MAX, ckdir, old_name));
    TMM_TRY(tmm_make_dirs(ckdir));
    if (!tmm_is_real_dir(ckdir))
        return tmm_fail(TMM_ERR_IO, "%s is a symbolic link or not a directory: checkpoints are written only into a "
                        "real directory inside the run directory", ckdir);

    /* 1. everything into a temporary directory (a crashed save's is replaced) */
    if (tmm_is_real_dir(tmp))
        TMM_TRY(tmm_remove_dir(tmp));
    if (MKDIR(tmp) != 0)
        return tmm_fail(TMM_ERR_IO, "cannot create directory %s: %s", tmp, strerror(errno));
    uint64_t model_hash;
    tmm_status s = tmm_path_join(file, TMM_PATH_MAX, tmp, MODEL_FILE);
    if (s == TMM_OK)
        s = write_model(file, step, table, params, extra, n_extra, &model_hash);
    if (s == TMM_OK && state && (s = tmm_path_join(file, TMM_PATH_MAX, tmp, STATE_FILE)) == TMM_OK)
        s = write_state(file, table, state, model_hash);
    if (s == TMM_OK)
        s = tmm_sync_dir(tmp);
    if (s != TMM_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", tmm_last_error());
        tmm_remove_dir(tmp);
        return tmm_fail(s, "%s", msg);
    }

    /* 2. into place; an existing directory of the same step is set aside first */
    bool set_aside = tmm_path_exists(final);
    if (set_aside) {
        if (tmm_is_real_dir(old))
            TMM_TRY(tmm_remove_dir(old));
        if (rename(final, old) != 0)
            return tmm_fail(TMM_ERR_IO, "cannot rename %s to %s: %s", final, old, strerror(errno));
    }
    if (rename(tmp, final) != 0) {
        s = tmm_fail(TMM_ERR_IO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
        if (set_aside)
            rename(old, final);
        return s;
    }
    TMM_TRY(tmm_sync_dir(ckdir));

    /* 3. the pointer, last */
    char latest_text[TMM_NAME_MAX + 1];
    int len = snprintf(latest_text, sizeof latest_text, "%s\n", name);
    TMM_TRY(tmm_path_join(file, TMM_PATH_MAX, ckdir, "latest"));
    TMM_TRY(tmm_write_file_atomic(file, latest_text, (size_t)len));
    TMM_TRY(tmm_sync_dir(ckdir));

    /* 4. old checkpoints go */
    prune(ckdir, step, keep);
    return TMM_OK;
}

/* ---- reading ---------------------------------------------------------------- */

/* The checkpoint directory that "latest" in ckdir names, else the newest. */
static tmm_status resolve_latest(const char *ckdir, char *dir)
{
    char latest[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(latest, TMM_PATH_MAX, ckdir, "latest"));
    if (!tmm_path_exists(latest)) {
        step_dir *steps;
        uint32_t n;
        TMM_TRY(list_steps(ckdir, &steps, &n));
        if (n == 0) {
            free(steps);
            return tmm_fail(TMM_ERR_IO, "%s: no checkpoint in it (no 'latest' file and no step-* directory)", ckdir);
        }
        tmm_status s = tmm_path_join(dir, TMM_PATH_MAX, ckdir, steps[0].name);
        if (s == TMM_OK)
            tmm_warn("%s is missing; loading the newest checkpoint, %s", latest, steps[0].name);
        free(steps);
        return s;
    }
    void *data;
    size_t size;
    TMM_TRY(tmm_read_file(latest, "checkpoint pointer", TMM_LIMIT_POINTER, &data, &size));
    char name[TMM_NAME_MAX];
    size_t n = 0;
    const char *text = data;
    while (n < size && n < TMM_NAME_MAX - 1 && text[n] != '\n' && text[n] != '\r')
        name[n] = text[n], n++;
    name[n] = '\0';
    bool trailing_ok = true;
    for (size_t i = n; i < size; i++)
        trailing_ok = trailing_ok && (text[i] == '\n' || text[i] == '\r' || text[i] == ' ');
    free(data);
    uint64_t step;
    if (!trailing_ok)
        return tmm_fail(TMM_ERR_IO, "%s: holds more than one line: it must hold only the name of a checkpoint "
                        "directory (here '%.64s'); remove the other lines", latest, name);
    if (!parse_step_name(name, &step))
        return tmm_fail(TMM_ERR_IO, "%s: does not name a checkpoint directory (expected step-N, got '%.64s')", latest,
                        name);
    TMM_TRY(tmm_path_join(dir, TMM_PATH_MAX, ckdir, name));
    if (tmm_is_dir(dir))
        return TMM_OK;
    /* a save that replaced this step was interrupted between its two renames */
    char old_name[TMM_NAME_MAX + 8], old[TMM_PATH_MAX];
    snprintf(old_name, sizeof old_name, ".%s.old", name);
    TMM_TRY(tmm_path_join(old, TMM_PATH_MAX, ckdir, old_name));
    if (tmm_is_dir(old)) {
        tmm_warn("%s is missing (an interrupted save); loading %s", dir, old);
        snprintf(dir, TMM_PATH_MAX, "%s", old);
        return TMM_OK;
    }
    return tmm_fail(TMM_ERR_IO, "%s names %s, which does not exist", latest, dir);
}

/* The step directory and model file that path designates. */
static tmm_status resolve(const char *path, char *dir, char *model)
{
    struct stat st;
    if (!path || !*path)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "checkpoint: no path given");
    if (stat(path, &st) != 0)
        return tmm_fail(TMM_ERR_IO, "cannot open checkpoint %s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        if (strlen(path) >= TMM_PATH_MAX)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "path too long: %s", path);
        snprintf(model, TMM_PATH_MAX, "%s", path);
        snprintf(dir, TMM_PATH_MAX, "%s", path);
        char *slash = strrchr(dir, '/');
#if defined(_WIN32)
        char *bslash = strrchr(dir, '\\');
        if (bslash && (!slash || bslash > slash))
            slash = bslash;
#endif
        if (slash == dir)
            dir[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(dir, TMM_PATH_MAX, ".");
        return TMM_OK;
    }
    char p[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(p, TMM_PATH_MAX, path, MODEL_FILE));
    if (tmm_path_exists(p)) {
        snprintf(dir, TMM_PATH_MAX, "%s", path);
        snprintf(model, TMM_PATH_MAX, "%s", p);
        return TMM_OK;
    }
    TMM_TRY(tmm_path_join(p, TMM_PATH_MAX, path, "checkpoints"));
    if (tmm_is_dir(p)) {
        TMM_TRY(resolve_latest(p, dir));
    } else {
        TMM_TRY(tmm_path_join(p, TMM_PATH_MAX, path, "latest"));
        if (!tmm_path_exists(p)) {
            uint64_t step;
            const char *base = strrchr(path, '/');
            if (parse_step_name(base ? base + 1 : path, &step))
                return tmm_fail(TMM_ERR_IO, "%s/%s is missing", path, MODEL_FILE);
            return tmm_fail(TMM_ERR_IO, "%s: not a checkpoint (it holds no %s, checkpoints/ or latest)", path,
                            MODEL_FILE);
        }
        TMM_TRY(resolve_latest(path, dir));
    }
    return tmm_path_join(model, TMM_PATH_MAX, dir, MODEL_FILE);
}

/* Format, checksums and version of a file read: the common checks. */
static tmm_status check_file(const tmm_safetensors *st, const char *path, const char *format, uint64_t *data_hash,
                             uint64_t *version_out)
{
    const char *f = tmm_safetensors_meta(st, "format");
    if (!f)
        return tmm_fail(TMM_ERR_IO, "%s: not a tmm %s file (no 'format' in its metadata)", path,
                        strcmp(format, MODEL_FORMAT) == 0 ? "model" : "train state");
    uint64_t dh, mh;
    const char *dh_text = tmm_safetensors_meta(st, "data_fnv1a64"), *mh_text = tmm_safetensors_meta(st, "meta_fnv1a64");
    if (!parse_hex64(dh_text, &dh) || !parse_hex64(mh_text, &mh))
        return tmm_fail(TMM_ERR_IO, "%s: its checksums (data_fnv1a64, meta_fnv1a64) are missing or malformed", path);
    size_t size;
    const void *data = tmm_safetensors_data(st, &size);
    uint64_t got = tmm_fnv1a64(data, size);
    if (got != dh)
        return tmm_fail(TMM_ERR_IO, "%s: data checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64
                        "): the file is corrupt", path, dh, got);
    uint64_t version;
    const char *v = tmm_safetensors_meta(st, "format_version");
    if (!parse_u64(v, &version) || version == 0)
        return tmm_fail(TMM_ERR_IO, "%s: bad format_version '%.32s'", path, v ? v : "(missing)");
    if (version > TMM_CHECKPOINT_FORMAT_VERSION)
        return tmm_fail(TMM_ERR_IO, "%s: format version %" PRIu64 " is newer than this tmm reads (%d)", path, version,
                        TMM_CHECKPOINT_FORMAT_VERSION);
    uint32_t n = tmm_safetensors_meta_count(st);
    tmm_st_meta *pairs = malloc((n ? n : 1) * sizeof *pairs);
    if (!pairs)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; i < n; i++)
        pairs[i] = *tmm_safetensors_meta_at(st, i);
    const char *dup;
    tmm_status s = meta_hash(pairs, n, &got, &dup);
    free(pairs);
    if (s == TMM_OK && version >= TMM_CHECKPOINT_TABLE_VERSION)
        s = tmm_safetensors_table_hash(st, got, &got);
    TMM_TRY(s);
    if (dup)
        return tmm_fail(TMM_ERR_IO, "%s: metadata key '%s' occurs twice: the header is corrupt", path, dup);
    if (got != mh)
        return tmm_fail(TMM_ERR_IO, "%s: header checksum mismatch (meta_fnv1a64 stored %016" PRIx64 ", computed %016"
                        PRIx64 " over the metadata and the tensor table): the header is corrupt", path, mh, got);
    if (strcmp(f, format) != 0)
        return tmm_fail(TMM_ERR_IO, "%s: format is '%.64s', expected '%s'", path, f, format);
    *data_hash = dh;
    *version_out = version;
    return TMM_OK;
}

static tmm_status meta_u64(const tmm_safetensors *st, const char *path, const char *key, uint64_t max, uint64_t *out)
{
    const char *v = tmm_safetensors_meta(st, key);
    if (!parse_u64(v, out) || *out > max)
        return tmm_fail(TMM_ERR_IO, "%s: metadata '%s' is %s%.32s%s", path, key, v ? "not a valid number ('" : "missing",
                        v ? v : "", v ? "')" : "");
    return TMM_OK;
}

static tmm_status read_config(const tmm_safetensors *st, const char *path, uint64_t version, tmm_model_config *c,
                              uint64_t *step)
{
    tmm_model_config mc = { 0 };
    for (const tmm_config_field *f = tmm_model_fields; f->section; f++) {
        const char *v = tmm_safetensors_meta(st, f->key);
        bool absent_before = false;
        for (size_t i = 0; i < sizeof newer_fields / sizeof newer_fields[0]; i++)
            absent_before = absent_before || (strcmp(f->key, newer_fields[i].key) == 0 && version < newer_fields[i].since);
        if (!v && absent_before)
            continue;
        if (!v)
            return tmm_fail(TMM_ERR_IO, "%s: metadata '%s' is missing", path, f->key);
        TMM_TRY(tmm_config_field_parse(&mc, f, v, path));
    }
    TMM_TRY(meta_u64(st, path, "step", UINT64_MAX, step));
    *c = mc;
    if (tmm_model_config_check(c) != TMM_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tmm_last_error());
        return tmm_fail(TMM_ERR_IO, "%s: invalid model config: %s", path, msg);
    }
    return TMM_OK;
}

const char *tmm_checkpoint_config_diff(const tmm_model_config *a, const tmm_model_config *b)
{
    for (const tmm_config_field *f = tmm_model_fields; f->section; f++) {
        char va[48], vb[48];
        model_field_text(a, f, va, sizeof va);
        model_field_text(b, f, vb, sizeof vb);
        if (strcmp(va, vb) != 0)
            return f->key;
    }
    return NULL;
}

/* Copies the tensors named prefix + parameter name into a zeroed arena,
 * checking that exactly those tensors are present, as F32 of the right shape. */
static tmm_status read_arena(const tmm_safetensors *st, const char *path, const tmm_param_table *t,
                             const char *const *prefixes, uint32_t n_prefixes, bool nonfinite_ok, float **arenas)
{
    for (uint32_t k = 0; k < n_prefixes; k++)
        arenas[k] = NULL;
    if (tmm_safetensors_count(st) > n_prefixes * t->count) {
        /* name one tensor that does not belong */
        for (uint32_t i = 0; i < tmm_safetensors_count(st); i++) {
            const char *name = tmm_safetensors_at(st, i)->name;
            bool known = false;
            for (uint32_t k = 0; k < n_prefixes && !known; k++) {
                size_t pl = strlen(prefixes[k]);
                known = strncmp(name, prefixes[k], pl) == 0 && tmm_param_find(t, name + pl) >= 0;
            }
            if (!known)
                return tmm_fail(TMM_ERR_IO, "%s: unexpected tensor '%.80s' (not a parameter of this config)", path,
                                name);
        }
        return tmm_fail(TMM_ERR_IO, "%s: holds %u tensors, expected %u (a tensor occurs twice?)", path,
                        tmm_safetensors_count(st), n_prefixes * t->count);
    }
    for (uint32_t k = 0; k < n_prefixes; k++) {
        arenas[k] = calloc(t->arena_floats, sizeof(float));
        if (!arenas[k])
            return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory for %" PRIu64 " parameters",
                            t->arena_floats);
    }
    for (uint32_t k = 0; k < n_prefixes; k++) {
        for (uint32_t i = 0; i < t->count; i++) {
            const tmm_param *p = &t->params[i];
            char name[TMM_PARAM_NAME_MAX + 16];
            snprintf(name, sizeof name, "%s%s", prefixes[k], p->name);
            const tmm_st_tensor *x = tmm_safetensors_find(st, name);
            if (!x)
                return tmm_fail(TMM_ERR_IO, "%s: tensor '%s' is missing", path, name);
            if (x->dtype != TMM_ST_F32)
                return tmm_fail(TMM_ERR_IO, "%s: tensor '%s' is not F32", path, name);
            uint64_t want[TMM_ST_MAX_DIMS] = { 0 };
            bool same = x->ndim == p->ndim;
            for (uint32_t d = 0; d < p->ndim; d++) {
                want[d] = p->shape[d];
                same = same && x->shape[d] == want[d];
            }
            if (!same) {
                char got_text[96], want_text[96];
                shape_text(got_text, sizeof got_text, x->ndim, x->shape);
                shape_text(want_text, sizeof want_text, p->ndim, want);
                return tmm_fail(TMM_ERR_IO, "%s: tensor '%s' has shape %s, expected %s", path, name, got_text,
                                want_text);
            }
            float *dst = arenas[k] + p->offset;
            memcpy(dst, x->data, p->numel * sizeof(float));
            for (uint64_t j = 0; !nonfinite_ok && j < p->numel; j++)
                if (!isfinite(dst[j]))
                    return tmm_fail(TMM_ERR_IO, "%s: tensor '%s' holds %s at element %" PRIu64 " (a diverged run?); "
                                    "--allow-nonfinite loads it anyway", path, name,
                                    isnan(dst[j]) ? "NaN" : "an infinite value", j);
        }
    }
    return TMM_OK;
}

static tmm_status load_model(const char *path, const tmm_model_config *expect, bool nonfinite_ok,
                             tmm_checkpoint *out, uint64_t *data_hash)
{
    tmm_safetensors *st;
    TMM_TRY(tmm_safetensors_read(path, &st));
    tmm_model_config c;
    memset(&c, 0, sizeof c);
    uint64_t version = 0;
    tmm_status s = check_file(st, path, MODEL_FORMAT, data_hash, &version);
    if (s == TMM_OK)
        s = read_config(st, path, version, &c, &out->step);
    /* version 1 let a kernel-k window reach into the previous head: another function */
    if (s == TMM_OK && version < 2 && c.kernel > 1 && c.heads > 1)
        s = tmm_fail(TMM_ERR_IO, "%s: a kernel-%u model with %u heads from format version 1, when a channel's "
                     "window could reach into the previous head; kernel windows now stay inside their head, so "
                     "these weights compute another function: train it again", path, c.kernel, c.heads);
    const char *field = s == TMM_OK && expect ? tmm_checkpoint_config_diff(&c, expect) : NULL;
    if (field) {
        char got[48], want[48];
        for (const tmm_config_field *f = tmm_model_fields; f->section; f++)
            if (strcmp(f->key, field) == 0) {
                model_field_text(&c, f, got, sizeof got);
                model_field_text(expect, f, want, sizeof want);
            }
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: the checkpoint's %s is %s, expected %s", path, field, got, want);
    }
    if (s == TMM_OK)
        s = tmm_param_table_build(&c, &out->table);
    if (s == TMM_OK) {
        const char *prefix = "";
        s = read_arena(st, path, &out->table, &prefix, 1, nonfinite_ok, &out->params);
    }
    if (s == TMM_OK) {
        uint32_t n = tmm_safetensors_meta_count(st), m = 0;
        const tmm_st_meta **extras = malloc((n ? n : 1) * sizeof *extras);
        if (!extras)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t i = 0; s == TMM_OK && i < n; i++)
            if (!is_model_key(tmm_safetensors_meta_at(st, i)->key))
                extras[m++] = tmm_safetensors_meta_at(st, i);
        if (s == TMM_OK)
            s = copy_pairs(extras, m, 0, &out->meta);
        if (s == TMM_OK)
            out->n_meta = m;
        free(extras);
    }
    tmm_safetensors_free(st);
    return s;
}

static tmm_status load_state(const char *path, tmm_checkpoint *out, bool nonfinite_ok, uint64_t model_hash)
{
    tmm_safetensors *st;
    TMM_TRY(tmm_safetensors_read(path, &st));
    tmm_train_state *ts = &out->state;
    uint64_t dh, step = 0, mh = 0;
    uint64_t version = 0;
    tmm_status s = check_file(st, path, STATE_FORMAT, &dh, &version);
    if (s == TMM_OK)
        s = meta_u64(st, path, "step", UINT64_MAX, &step);
    if (s == TMM_OK && step != out->step)
        s = tmm_fail(TMM_ERR_IO, "%s: is of step %" PRIu64 " but the model beside it is of step %" PRIu64, path, step,
                     out->step);
    if (s == TMM_OK && !parse_hex64(tmm_safetensors_meta(st, "model_fnv1a64"), &mh))
        s = tmm_fail(TMM_ERR_IO, "%s: metadata 'model_fnv1a64' is missing or malformed", path);
    if (s == TMM_OK && mh != model_hash)
        s = tmm_fail(TMM_ERR_IO, "%s: belongs to another model file (model_fnv1a64 %016" PRIx64
                     ", the model file's data_fnv1a64 is %016" PRIx64 ")", path, mh, model_hash);
    ts->step = step;
    /* words */
    const char *w = s == TMM_OK ? tmm_safetensors_meta(st, "words") : "";
    if (!w)
        s = tmm_fail(TMM_ERR_IO, "%s: metadata 'words' is missing", path);
    while (s == TMM_OK && *w) {
        char num[24];
        size_t len = strcspn(w, ",");
        if (ts->n_words == TMM_TRAIN_STATE_WORDS || len == 0 || len >= sizeof num) {
            s = tmm_fail(TMM_ERR_IO, "%s: metadata 'words' is malformed", path);
            break;
        }
        memcpy(num, w, len);
        num[len] = '\0';
        if (!parse_u64(num, &ts->words[ts->n_words++]))
            s = tmm_fail(TMM_ERR_IO, "%s: metadata 'words' is malformed", path);
        w += len;
        if (*w == ',' && !*++w)
            s = tmm_fail(TMM_ERR_IO, "%s: metadata 'words' is malformed", path);
    }
    if (s == TMM_OK) {
        const char *blob = tmm_safetensors_meta(st, "blob");
        if (blob) {
            char *copy = malloc(strlen(blob) + 1);
            if (copy)
                memcpy(copy, blob, strlen(blob) + 1);
            else
                s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            ts->blob = copy;
        }
    }
    if (s == TMM_OK) {
        uint32_t n = tmm_safetensors_meta_count(st), m = 0;
        const tmm_st_meta **opts = malloc((n ? n : 1) * sizeof *opts);
        if (!opts)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
        for (uint32_t i = 0; s == TMM_OK && i < n; i++)
            if (strncmp(tmm_safetensors_meta_at(st, i)->key, "opt.", 4) == 0)
                opts[m++] = tmm_safetensors_meta_at(st, i);
        tmm_st_meta *config = NULL;
        if (s == TMM_OK)
            s = copy_pairs(opts, m, 4, &config);
        ts->config = config;
        ts->n_config = s == TMM_OK ? m : 0;
        free(opts);
    }
    if (s == TMM_OK) {
        const char *prefixes[2] = { "m.", "v." };
        float *arenas[2];
        s = read_arena(st, path, &out->table, prefixes, 2, nonfinite_ok, arenas);
        ts->m = arenas[0];
        ts->v = arenas[1];
    }
    tmm_safetensors_free(st);
    return s;
}

void tmm_checkpoint_free(tmm_checkpoint *c)
{
    if (!c)
        return;
    free(c->dir);
    free(c->model_path);
    if (c->table.params || c->table.blocks)
        tmm_param_table_free(&c->table);
    free(c->params);
    free(c->meta);
    free(c->state.m);
    free(c->state.v);
    free((void *)c->state.blob);
    free((void *)c->state.config);
    memset(c, 0, sizeof *c);
}

static char *dup_string(const char *s)
{
    char *d = malloc(strlen(s) + 1);
    if (d)
        memcpy(d, s, strlen(s) + 1);
    return d;
}

tmm_status tmm_checkpoint_load(const char *path, const tmm_model_config *expect, unsigned flags,
                               tmm_checkpoint *out)
{
    const bool with_state = flags & TMM_CHECKPOINT_STATE, nonfinite_ok = flags & TMM_CHECKPOINT_ALLOW_NONFINITE;
    memset(out, 0, sizeof *out);
    char dir[TMM_PATH_MAX], model[TMM_PATH_MAX], state[TMM_PATH_MAX];
    TMM_TRY(resolve(path, dir, model));
    uint64_t model_hash = 0;
    tmm_status s = load_model(model, expect, nonfinite_ok, out, &model_hash);
    if (s == TMM_OK && with_state) {
        s = tmm_path_join(state, TMM_PATH_MAX, dir, STATE_FILE);
        if (s == TMM_OK && !tmm_path_exists(state))
            s = tmm_fail(TMM_ERR_IO, "%s is missing: this checkpoint has no training state to resume from", state);
        if (s == TMM_OK)
            s = load_state(state, out, nonfinite_ok, model_hash);
        out->has_state = s == TMM_OK;
    }
    if (s == TMM_OK) {
        out->dir = dup_string(dir);
        out->model_path = dup_string(model);
        if (!out->dir || !out->model_path)
            s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    }
    if (s != TMM_OK)
        tmm_checkpoint_free(out);
    return s;
}

tmm_status tmm_checkpoint_load_model(const char *path, const tmm_model_config *expect, tmm_checkpoint *out)
{
    return tmm_checkpoint_load(path, expect, 0, out);
}

const char *tmm_checkpoint_meta(const tmm_checkpoint *c, const char *key)
{
    for (uint32_t i = 0; i < c->n_meta; i++)
        if (strcmp(c->meta[i].key, key) == 0)
            return c->meta[i].value;
    return NULL;
}

/* ---- run directories -------------------------------------------------------- */

/* Cuts the last component (and the slashes before it) off path in place;
 * false when nothing is left to cut. */
static bool cut_last(char *path, char *last, size_t last_size)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = '\0';
    char *slash = strrchr(path, '/');
    snprintf(last, last_size, "%s", slash ? slash + 1 : path);
    if (!slash)
        snprintf(path, TMM_PATH_MAX, ".");
    else if (slash == path)
        path[1] = '\0';
    else
        *slash = '\0';
    return *last != '\0';
}

tmm_status tmm_checkpoint_run_dir(const char *path, char *buf, size_t size)
{
    char dir[TMM_PATH_MAX], model[TMM_PATH_MAX], p[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(p, TMM_PATH_MAX, path, "checkpoints"));
    if (tmm_is_dir(p)) { /* a run directory */
        if (strlen(path) >= size)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "path too long: %s", path);
        snprintf(buf, size, "%s", path);
        return TMM_OK;
    }
    TMM_TRY(resolve(path, dir, model));
    char step[TMM_NAME_MAX], parent[TMM_NAME_MAX];
    if (cut_last(dir, step, sizeof step) && cut_last(dir, parent, sizeof parent) &&
        strcmp(parent, "checkpoints") == 0) {
        if (strlen(dir) >= size)
            return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "path too long: %s", dir);
        snprintf(buf, size, "%s", dir);
        return TMM_OK;
    }
    return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "cannot tell which run directory %s belongs to (it is not inside "
                    "RUN/checkpoints/): say where the run continues with --run-dir DIR", path);
}

static const char *const run_files[] = { "metrics.jsonl", "config.json", TMM_RUN_TOKENIZER };

bool tmm_run_dir_holds_run(const char *run_dir)
{
    char p[TMM_PATH_MAX];
    if (tmm_path_join(p, TMM_PATH_MAX, run_dir, "checkpoints") == TMM_OK && tmm_path_exists(p))
        return true;
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++)
        if (tmm_path_join(p, TMM_PATH_MAX, run_dir, run_files[i]) == TMM_OK && tmm_path_exists(p))
            return true;
    return false;
}

bool tmm_run_dir_has_checkpoint(const char *run_dir)
{
    char p[TMM_PATH_MAX];
    return tmm_path_join(p, TMM_PATH_MAX, run_dir, "checkpoints/latest") == TMM_OK && tmm_path_exists(p);
}

tmm_status tmm_run_dir_clear(const char *run_dir)
{
    char ckdir[TMM_PATH_MAX], p[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(ckdir, TMM_PATH_MAX, run_dir, "checkpoints"));
    if (tmm_path_exists(ckdir)) {
        if (!tmm_is_real_dir(ckdir))
            return tmm_fail(TMM_ERR_IO, "%s is not a directory tmm wrote: remove it by hand", ckdir);
        tmm_dir_entry *names;
        uint32_t n;
        TMM_TRY(tmm_list_dir(ckdir, &names, &n));
        tmm_status s = TMM_OK;
        for (uint32_t i = 0; i < n && s == TMM_OK; i++) {
            uint64_t step;
            s = tmm_path_join(p, TMM_PATH_MAX, ckdir, names[i]);
            if (s != TMM_OK)
                break;
            if (parse_step_name(names[i], &step) || strncmp(names[i], ".step-", 6) == 0)
                s = tmm_remove_dir(p);
            else if (strcmp(names[i], "latest") == 0 || strncmp(names[i], "latest.", 7) == 0)
                s = remove(p) == 0 ? TMM_OK : tmm_fail(TMM_ERR_IO, "cannot remove %s: %s", p, strerror(errno));
            else
                s = tmm_fail(TMM_ERR_IO, "%s was not written by tmm: remove it by hand or use another run directory",
                             p);
        }
        free(names);
        TMM_TRY(s);
        if (RMDIR(ckdir) != 0)
            return tmm_fail(TMM_ERR_IO, "cannot remove %s: %s", ckdir, strerror(errno));
    }
    for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++) {
        TMM_TRY(tmm_path_join(p, TMM_PATH_MAX, run_dir, run_files[i]));
        if (remove(p) != 0 && errno != ENOENT)
            return tmm_fail(TMM_ERR_IO, "cannot remove %s: %s", p, strerror(errno));
    }
    return tmm_sync_dir(run_dir);
}

tmm_status tmm_checkpoint_tokenizer(const char *checkpoint, const char *fingerprint, uint32_t vocab,
                                    tmm_tokenizer **out)
{
    *out = NULL;
    char dir[TMM_PATH_MAX], path[TMM_PATH_MAX + 32];
    TMM_TRY(tmm_checkpoint_run_dir(checkpoint, dir, sizeof dir));
    snprintf(path, sizeof path, "%s/%s", dir, TMM_RUN_TOKENIZER);
    tmm_tokenizer *tok;
    TMM_TRY(tmm_tokenizer_load(path, &tok));
    char fp[20];
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)tmm_tokenizer_fingerprint(tok));
    tmm_status s = TMM_OK;
    if (!fingerprint || strcmp(fingerprint, fp) != 0)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s is not the tokenizer the model was trained with (fingerprint %s, "
                     "the checkpoint's %s): restore the run's tokenizer.json", path, fp,
                     fingerprint ? fingerprint : "missing");
    else if (tmm_tokenizer_vocab(tok) > vocab)
        s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s has %u tokens, more than the model's vocabulary of %u", path,
                     tmm_tokenizer_vocab(tok), vocab);
    if (s != TMM_OK) {
        tmm_tokenizer_free(tok);
        return s;
    }
    *out = tok;
    return TMM_OK;
}
