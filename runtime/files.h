/* Small file helpers: whole-file reads, atomic writes, directory creation. */
#ifndef TMM_RT_FILES_H
#define TMM_RT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

/* Reads a whole regular file into a malloc'ed buffer (one extra NUL byte
 * after the data, not counted in *size). FIFOs, devices, sockets and
 * directories are refused without blocking, and so is a file larger than
 * max_bytes; `kind` names what the file is for in the message ("config
 * file", ...). TMM_ERR_IO if it cannot. */
tmm_status tmm_read_file(const char *path, const char *kind, uint64_t max_bytes, void **data, size_t *size);
/* TMM_OK when path is a regular file (following symbolic links); else
 * TMM_ERR_IO naming what it is instead. */
tmm_status tmm_check_regular_file(const char *path, const char *kind);
/* Writes path atomically: a temporary file of a unique name beside it (so
 * concurrent writers never share one), fsync, rename over path. An existing
 * path that is not a regular file (a directory, device, FIFO or socket, or a
 * link to one) is refused, never replaced. */
tmm_status tmm_write_file_atomic(const char *path, const void *data, size_t size);
/* Opens path for writing as a stream (append: at its end; else emptied),
 * never through a symbolic link and only onto a regular file (or a new
 * one): a link or another node there is refused, so a file of a run
 * directory is written inside it. `kind` names it in the message. */
tmm_status tmm_open_write(const char *path, const char *kind, bool append, FILE **out);

/* An exclusive lock (flock) on the file lock_path (created if needed): one
 * process at a time. The file holds the holder's pid, host and purpose. With
 * wait, blocks until the lock is free; without, fails at once with an error
 * that names `what` and the holder. Released by tmm_lock_release or when the
 * process ends, however it ends. */
typedef struct tmm_lock tmm_lock;
tmm_status tmm_lock_take(const char *lock_path, const char *what, const char *purpose, bool wait, tmm_lock **out);
void tmm_lock_release(tmm_lock *lock);
/* mkdir -p */
tmm_status tmm_make_dirs(const char *path);
/* 64-bit FNV-1a, for detecting corrupt files; _more continues a hash. */
#define TMM_FNV1A64_BASIS 0xcbf29ce484222325ull
uint64_t tmm_fnv1a64(const void *data, size_t size);
uint64_t tmm_fnv1a64_more(uint64_t hash, const void *data, size_t size);

/* Paths and directories (the file-system helpers of the whole program). */
#define TMM_PATH_MAX 4096
#define TMM_NAME_MAX 256
/* a "/" b into buf; TMM_ERR_INVALID_ARGUMENT if it does not fit. */
tmm_status tmm_path_join(char *buf, size_t size, const char *a, const char *b);
bool tmm_path_exists(const char *path);
bool tmm_is_dir(const char *path);
/* A directory itself, not a symbolic link to one: what may be written into
 * or deleted from without leaving the tree one means. */
bool tmm_is_real_dir(const char *path);
/* The same file or directory (device and inode). */
bool tmm_same_file(const char *a, const char *b);
typedef char tmm_dir_entry[TMM_NAME_MAX];
/* TMM_ERR_INVALID_ARGUMENT naming the first two of paths that are the same
 * file (device and inode: a link or another spelling too); paths that do not
 * exist are left to their readers. O(n log n). A corpus that read a file
 * twice would hold its documents twice, and could hold out one copy for
 * validation while it trains on the other. */
tmm_status tmm_distinct_files(const char *const *paths, size_t n);
/* The names in dir, without . and .. (*names malloc'ed; longer names skipped). */
tmm_status tmm_list_dir(const char *dir, tmm_dir_entry **names, uint32_t *count);
/* The input files named by path, for the corpus readers (tmm prepare, tmm
 * tokenizer train, tmm train --data): path itself when it is not a directory
 * (fn then says what is wrong with it), else the regular files under it in
 * byte order of their names at every level. Inside a directory, names that
 * begin with '.' and symbolic links are skipped (a link to a directory could
 * make the walk unbounded: a fan-out of links with no loop), as are devices and
 * pipes; more than TMM_WALK_MAX_DEPTH levels is an error. A link named as path
 * itself is followed. fn's first error stops the walk. */
#define TMM_WALK_MAX_DEPTH 32
typedef tmm_status (*tmm_walk_fn)(const char *file, void *user);
tmm_status tmm_walk_files(const char *path, tmm_walk_fn fn, void *user);
/* Removes a directory of files: the files, then it. A symbolic link is never
 * followed: not the directory's own (refused), nor its entries' (the link is
 * removed, not what it points to); a subdirectory stops it with an error. */
tmm_status tmm_remove_dir(const char *dir);
/* Makes the directory's entries (creations, renames) durable. */
tmm_status tmm_sync_dir(const char *dir);

#endif
