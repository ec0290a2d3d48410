/* Small file helpers: whole-file reads, atomic writes, directory creation. */
#ifndef TMM_RT_FILES_H
#define TMM_RT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Reads a whole file into a malloc'ed buffer. TMM_ERR_IO if it cannot. */
tmm_status tmm_read_file(const char *path, void **data, size_t *size);
/* Writes path atomically: a temporary file beside it, fsync, rename. */
tmm_status tmm_write_file_atomic(const char *path, const void *data, size_t size);
/* mkdir -p */
tmm_status tmm_make_dirs(const char *path);
/* 64-bit FNV-1a, for detecting corrupt files. */
uint64_t tmm_fnv1a64(const void *data, size_t size);

#endif
