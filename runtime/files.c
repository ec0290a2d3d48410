#define _POSIX_C_SOURCE 200809L /* fileno, fsync */
#include "files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(_WIN32)
#include <direct.h>
#include <io.h>
#define MKDIR(p) _mkdir(p)
#define FSYNC(fd) _commit(fd)
#define FILENO(f) _fileno(f)
#else
#include <unistd.h>
#define MKDIR(p) mkdir((p), 0755)
#define FSYNC(fd) fsync(fd)
#define FILENO(f) fileno(f)
#endif

tmm_status tmm_read_file(const char *path, void **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tmm_fail(TMM_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        unsigned char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool failed = ferror(f) != 0;
    fclose(f);
    if (!buf)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory reading %s", path);
    if (failed) {
        free(buf);
        return tmm_fail(TMM_ERR_IO, "error reading %s", path);
    }
    *data = buf;
    *size = n;
    return TMM_OK;
}

tmm_status tmm_write_file_atomic(const char *path, const void *data, size_t size)
{
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len);
    if (!tmp)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    snprintf(tmp, len, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return s;
    }
    bool ok = fwrite(data, 1, size, f) == size && fflush(f) == 0 && FSYNC(FILENO(f)) == 0;
    ok = (fclose(f) == 0) && ok;
#if defined(_WIN32)
    remove(path); /* rename does not replace on Windows */
#endif
    if (!ok || rename(tmp, path) != 0) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return s;
    }
    free(tmp);
    return TMM_OK;
}

tmm_status tmm_make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "bad directory path");
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\\' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (MKDIR(buf) != 0 && errno != EEXIST)
            return tmm_fail(TMM_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
        buf[i] = saved;
    }
    return TMM_OK;
}

uint64_t tmm_fnv1a64(const void *data, size_t size)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
