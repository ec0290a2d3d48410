/* Small file helpers: whole-file reads, atomic writes, directory creation. */
#ifndef TMM_RT_FILES_H
#define TMM_RT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * concurrent writers never share one), fsync, rename over path. */
tmm_status tmm_write_file_atomic(const char *path, const void *data, size_t size);

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
/* 64-bit FNV-1a, for detecting corrupt files. */
uint64_t tmm_fnv1a64(const void *data, size_t size);

#endif
