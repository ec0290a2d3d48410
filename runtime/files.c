#define _DEFAULT_SOURCE /* flock, fchmod, gethostname, mkstemp, pread */
#include "files.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(_WIN32)
#include <direct.h>
#include <io.h>
#include <windows.h>
#define MKDIR(p) _mkdir(p)
#define RMDIR(p) _rmdir(p)
#define FSYNC(fd) _commit(fd)
#define FILENO(f) _fileno(f)
#else
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#define MKDIR(p) mkdir((p), 0755)
#define RMDIR(p) rmdir(p)
#define FSYNC(fd) fsync(fd)
#define FILENO(f) fileno(f)
#endif

static const char *file_type_name(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
#if !defined(_WIN32)
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    if (S_ISSOCK(mode))
        return "a socket";
#endif
    return "not a regular file";
}

tmm_status tmm_check_regular_file(const char *path, const char *kind)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tmm_fail(TMM_ERR_IO, "cannot open %s %s: %s", kind, path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tmm_fail(TMM_ERR_IO, "%s %s is %s; tmm reads regular files only", kind, path,
                        file_type_name(st.st_mode));
    return TMM_OK;
}

static void size_text(uint64_t bytes, char *buf, size_t size)
{
    if (bytes >= (1ull << 30))
        snprintf(buf, size, "%.1f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20))
        snprintf(buf, size, "%.1f MiB", (double)bytes / (double)(1ull << 20));
    else
        snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
}

tmm_status tmm_read_file(const char *path, const char *kind, uint64_t max_bytes, void **data, size_t *size)
{
    *data = NULL;
    *size = 0;
#if defined(_WIN32)
    TMM_TRY(tmm_check_regular_file(path, kind));
    FILE *f = fopen(path, "rb");
    if (!f)
        return tmm_fail(TMM_ERR_IO, "cannot open %s %s: %s", kind, path, strerror(errno));
#else
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; the type is
     * checked on the open file, so it cannot change in between */
    int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return tmm_fail(TMM_ERR_IO, "cannot open %s %s: %s", kind, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "%s %s is %s; tmm reads regular files only", kind, path,
                                fstat(fd, &st) != 0 ? "unreadable" : file_type_name(st.st_mode));
        close(fd);
        return s;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        char got[32], limit[32];
        size_text((uint64_t)st.st_size, got, sizeof got);
        size_text(max_bytes, limit, sizeof limit);
        close(fd);
        return tmm_fail(TMM_ERR_IO, "%s %s is %s, more than the %s tmm reads for one", kind, path, got, limit);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tmm_fail(TMM_ERR_IO, "cannot open %s %s: %s", kind, path, strerror(errno));
    }
#endif
    /* read up to max_bytes + 1: a file that grew past the limit is refused too */
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap + 1);
    while (buf) {
        size_t want = cap - n;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want || n > max_bytes)
            break;
        unsigned char *bigger = realloc(buf, cap * 2 + 1);
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
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory reading %s %s", kind, path);
    if (failed || n > max_bytes) {
        free(buf);
        return n > max_bytes ? tmm_fail(TMM_ERR_IO, "%s %s grew past the limit while being read", kind, path)
                             : tmm_fail(TMM_ERR_IO, "error reading %s %s", kind, path);
    }
    buf[n] = '\0';
    *data = buf;
    *size = n;
    return TMM_OK;
}

tmm_status tmm_write_file_atomic(const char *path, const void *data, size_t size)
{
    /* the rename would replace a device, FIFO or socket node itself (as root,
     * /dev/full became a file) and fails late on a directory */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return tmm_fail(TMM_ERR_IO, "cannot write %s: it is %s; tmm replaces regular files only", path,
                        file_type_name(st.st_mode));
    size_t len = strlen(path) + 16;
    char *tmp = malloc(len);
    if (!tmp)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    snprintf(tmp, len, "%s.XXXXXX", path);
#if defined(_WIN32)
    FILE *f = _mktemp_s(tmp, len) == 0 ? fopen(tmp, "wb") : NULL;
#else
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd), remove(tmp);
#endif
    if (!f) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        free(tmp);
        return s;
    }
    bool ok = fwrite(data, 1, size, f) == size && fflush(f) == 0 && FSYNC(FILENO(f)) == 0;
#if !defined(_WIN32)
    ok = ok && fchmod(fileno(f), 0644) == 0; /* mkstemp makes it 0600 */
#endif
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

tmm_status tmm_open_write(const char *path, const char *kind, bool append, FILE **out)
{
    *out = NULL;
#if defined(_WIN32)
    *out = fopen(path, append ? "ab" : "wb");
    return *out ? TMM_OK : tmm_fail(TMM_ERR_IO, "cannot write %s %s: %s", kind, path, strerror(errno));
#else
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* named before open, which fails on a FIFO without a reader */
        return tmm_fail(TMM_ERR_IO, "cannot write %s %s: it is %s", kind, path, file_type_name(st.st_mode));
    /* O_NONBLOCK: a FIFO must not wait for a reader; the type is checked on the open file too */
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0),
                  0644);
    if (fd < 0)
        return tmm_fail(TMM_ERR_IO, "cannot write %s %s: %s", kind, path,
                        errno == ELOOP ? "it is a symbolic link, which tmm does not write through" : strerror(errno));
    const bool known = fstat(fd, &st) == 0;
    if (!known || !S_ISREG(st.st_mode)) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "cannot write %s %s: it is %s", kind, path,
                                known ? file_type_name(st.st_mode) : "unreadable");
        close(fd);
        return s;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    if ((!append && ftruncate(fd, 0) != 0) || !(*out = fdopen(fd, append ? "ab" : "wb"))) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "cannot write %s %s: %s", kind, path, strerror(errno));
        close(fd);
        return s;
    }
    return TMM_OK;
#endif
}

struct tmm_lock {
    int fd;
};

tmm_status tmm_lock_take(const char *lock_path, const char *what, const char *purpose, bool wait, tmm_lock **out)
{
    *out = NULL;
    tmm_lock *lock = calloc(1, sizeof *lock);
    if (!lock)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
#if defined(_WIN32)
    (void)lock_path, (void)what, (void)purpose, (void)wait; /* no locking on Windows (untested platform) */
    lock->fd = -1;
#else
    lock->fd = open(lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (lock->fd < 0) {
        tmm_status s = tmm_fail(TMM_ERR_IO, "cannot create the lock file %s: %s", lock_path, strerror(errno));
        free(lock);
        return s;
    }
    int r;
    while ((r = flock(lock->fd, LOCK_EX | (wait ? 0 : LOCK_NB))) != 0 && errno == EINTR)
        ;
    if (r != 0) {
        char holder[256] = "";
        ssize_t n = pread(lock->fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        close(lock->fd);
        free(lock);
        return tmm_fail(TMM_ERR_IO, "%s is in use by another process (%s): wait for it to finish, or use another "
                        "one", what, *holder ? holder : "holder unknown");
    }
    char host[128] = "unknown", text[512];
    gethostname(host, sizeof host - 1);
    int len = snprintf(text, sizeof text, "pid %ld on %s: %s\n", (long)getpid(), host, purpose);
    if (ftruncate(lock->fd, 0) != 0 || pwrite(lock->fd, text, (size_t)len, 0) != len)
        tmm_warn("cannot write the holder into %s", lock_path);
#endif
    *out = lock;
    return TMM_OK;
}

void tmm_lock_release(tmm_lock *lock)
{
    if (!lock)
        return;
#if !defined(_WIN32)
    if (lock->fd >= 0)
        close(lock->fd); /* releases the flock; the file stays, naming the last holder */
#endif
    free(lock);
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

uint64_t tmm_fnv1a64_more(uint64_t h, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t tmm_fnv1a64(const void *data, size_t size) { return tmm_fnv1a64_more(TMM_FNV1A64_BASIS, data, size); }

tmm_status tmm_path_join(char *buf, size_t size, const char *a, const char *b)
{
    int n = snprintf(buf, size, "%s/%s", a, b);
    if (n < 0 || (size_t)n >= size)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "path too long: %s/%s", a, b);
    return TMM_OK;
}

bool tmm_path_exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0;
}

bool tmm_is_dir(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

bool tmm_is_real_dir(const char *p)
{
    struct stat s;
#if defined(_WIN32)
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
#else
    return lstat(p, &s) == 0 && S_ISDIR(s.st_mode);
#endif
}

bool tmm_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

typedef struct file_id {
    dev_t dev;
    ino_t ino;
    size_t index;
} file_id;

static int by_id(const void *a, const void *b)
{
    const file_id *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

tmm_status tmm_distinct_files(const char *const *paths, size_t n)
{
    file_id *ids = n ? malloc(n * sizeof *ids) : NULL;
    if (n && !ids)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    size_t m = 0;
    struct stat st;
    for (size_t i = 0; i < n; i++)
        if (stat(paths[i], &st) == 0)
            ids[m++] = (file_id){ st.st_dev, st.st_ino, i };
    qsort(ids, m, sizeof *ids, by_id);
    tmm_status s = TMM_OK;
    for (size_t i = 1; i < m && s == TMM_OK; i++)
        if (ids[i].dev == ids[i - 1].dev && ids[i].ino == ids[i - 1].ino)
            s = tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s and %s are the same file: name each input once (its text "
                         "would be read twice, and could be held out for validation while trained on)",
                         paths[ids[i - 1].index], paths[ids[i].index]);
    free(ids);
    return s;
}

/* The names in dir, without . and .. (malloc'ed). */
tmm_status tmm_list_dir(const char *dir, tmm_dir_entry **names, uint32_t *count)
{
    *names = NULL;
    *count = 0;
    uint32_t cap = 0;
#if defined(_WIN32)
    char pattern[TMM_PATH_MAX];
    TMM_TRY(tmm_path_join(pattern, TMM_PATH_MAX, dir, "*"));
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pattern, &fd);
    if (h == INVALID_HANDLE_VALUE)
        return GetLastError() == ERROR_FILE_NOT_FOUND ? TMM_OK
                                                       : tmm_fail(TMM_ERR_IO, "cannot list directory %s", dir);
    do {
        const char *name = fd.cFileName;
#else
    DIR *d = opendir(dir);
    if (!d)
        return tmm_fail(TMM_ERR_IO, "cannot list directory %s: %s", dir, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
#endif
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strlen(name) >= TMM_NAME_MAX)
            continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            tmm_dir_entry *bigger = realloc(*names, cap * sizeof **names);
            if (!bigger) {
                free(*names);
                *names = NULL;
                *count = 0;
#if defined(_WIN32)
                FindClose(h);
#else
                closedir(d);
#endif
                return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
            }
            *names = bigger;
        }
        snprintf((*names)[(*count)++], TMM_NAME_MAX, "%s", name);
#if defined(_WIN32)
    } while (FindNextFileA(h, &fd));
    FindClose(h);
#else
    }
    closedir(d);
#endif
    return TMM_OK;
}

static int by_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static tmm_status walk_dir(const char *dir, int depth, tmm_walk_fn fn, void *user)
{
    if (depth > TMM_WALK_MAX_DEPTH)
        return tmm_fail(TMM_ERR_INVALID_ARGUMENT, "%s: directories nested more than %d deep", dir,
                        TMM_WALK_MAX_DEPTH);
    tmm_dir_entry *names;
    uint32_t n;
    TMM_TRY(tmm_list_dir(dir, &names, &n));
    qsort(names, n, sizeof *names, by_name);
    tmm_status s = TMM_OK;
    char *path = malloc(TMM_PATH_MAX);
    if (!path)
        s = tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    for (uint32_t i = 0; s == TMM_OK && i < n; i++) {
        struct stat st;
        if (names[i][0] == '.' || (s = tmm_path_join(path, TMM_PATH_MAX, dir, names[i])) != TMM_OK)
            continue;
#if defined(_WIN32)
        if (stat(path, &st) != 0)
#else
        if (lstat(path, &st) != 0)
#endif
            continue; /* gone since the listing */
        if (S_ISDIR(st.st_mode))
            s = walk_dir(path, depth + 1, fn, user);
        else if (S_ISREG(st.st_mode))
            s = fn(path, user);
    }
    free(path);
    free(names);
    return s;
}

tmm_status tmm_walk_files(const char *path, tmm_walk_fn fn, void *user)
{
    return tmm_is_dir(path) ? walk_dir(path, 0, fn, user) : fn(path, user);
}

/* Removes a directory of files: the files in it, then it. A symbolic link
 * is never followed: not the directory's own (refused), nor its entries'
 * (the link is removed, not what it points to). */
tmm_status tmm_remove_dir(const char *dir)
{
    if (!tmm_is_real_dir(dir))
        return tmm_fail(TMM_ERR_IO, "%s is a symbolic link or not a directory: not removed", dir);
    tmm_dir_entry *names;
    uint32_t n;
    TMM_TRY(tmm_list_dir(dir, &names, &n));
    tmm_status s = TMM_OK;
    for (uint32_t i = 0; i < n && s == TMM_OK; i++) {
        char p[TMM_PATH_MAX];
        s = tmm_path_join(p, TMM_PATH_MAX, dir, names[i]);
        if (s == TMM_OK && remove(p) != 0)
            s = tmm_fail(TMM_ERR_IO, "cannot remove %s: %s", p, strerror(errno));
    }
    free(names);
    if (s == TMM_OK && RMDIR(dir) != 0)
        s = tmm_fail(TMM_ERR_IO, "cannot remove directory %s: %s", dir, strerror(errno));
    return s;
}

/* Makes the directory's entries (creations, renames) durable. */
tmm_status tmm_sync_dir(const char *dir)
{
#if defined(_WIN32)
    (void)dir;
    return TMM_OK;
#else
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return tmm_fail(TMM_ERR_IO, "cannot open directory %s: %s", dir, strerror(errno));
    int r = fsync(fd);
    int err = errno;
    close(fd);
    /* some file systems cannot fsync a directory; that is not a failure */
    if (r != 0 && err != EINVAL && err != ENOTSUP)
        return tmm_fail(TMM_ERR_IO, "cannot sync directory %s: %s", dir, strerror(err));
    return TMM_OK;
#endif
}

