/* Small file helpers: whole-file reads, atomic writes, directory creation. */
#ifndef TMM_RT_FILES_H
#define TMM_RT_FILES_H

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

/* An exclusive lock on a directory (DIR/.lock, flock): one process at a
 * time. The file holds the holder's pid and host, named in the error when the
 * lock is taken. Released by tmm_dir_unlock or when the process ends. */
typedef struct tmm_dir_lock tmm_dir_lock;
tmm_status tmm_dir_lock_take(const char *dir, const char *purpose, tmm_dir_lock **out);
void tmm_dir_unlock(tmm_dir_lock *lock);
/* mkdir -p */
tmm_status tmm_make_dirs(const char *path);
/* 64-bit FNV-1a, for detecting corrupt files. */
uint64_t tmm_fnv1a64(const void *data, size_t size);

#endif
