/* A minimal safetensors reader and writer (https://github.com/huggingface/safetensors):
 * an 8-byte little-endian header length, a JSON header mapping each tensor
 * name to {dtype, shape, data_offsets} plus optional "__metadata__" (string to
 * string), then the raw little-endian data. */
#ifndef TMM_SAFETENSORS_H
#define TMM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tmm/tmm.h"

typedef enum tmm_st_dtype { TMM_ST_F32, TMM_ST_F64, TMM_ST_I32, TMM_ST_U32 } tmm_st_dtype;

#define TMM_ST_MAX_DIMS 4

typedef struct tmm_st_tensor {
    const char *name;
    tmm_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[TMM_ST_MAX_DIMS];
    const void *data;  /* numel * element size bytes */
} tmm_st_tensor;

typedef struct tmm_st_meta {
    const char *key, *value;
} tmm_st_meta;

size_t tmm_st_dtype_size(tmm_st_dtype dtype);
uint64_t tmm_st_numel(const tmm_st_tensor *t);

/* Writes the file atomically (temporary file, fsync, rename). Tensors with
 * 8-byte elements come first in the data, so every tensor is aligned to its
 * element size. */
tmm_status tmm_safetensors_write(const char *path, const tmm_st_tensor *tensors, uint32_t count,
                                 const tmm_st_meta *meta, uint32_t meta_count);

/* Continues the FNV-1a 64 hash h over the tensor table that
 * tmm_safetensors_write lays out for these tensors: per tensor, in the byte
 * order of the names, "name\0dtype\0d0,d1,...\0begin,end\0" (shape and data
 * offsets in decimal; docs/formats.md). What checksums of the header cover,
 * so that no tensor can trade its bytes with another unnoticed. */
tmm_status tmm_st_table_hash(uint64_t h, const tmm_st_tensor *tensors, uint32_t count, uint64_t *out);

/* A file read into memory; tensors point into it. */
typedef struct tmm_safetensors tmm_safetensors;

/* A tensor's data points into the file in memory: aligned for files written
 * here; a file from elsewhere may place an F64 tensor at a 4-byte offset
 * (copy it out with memcpy before reading doubles from such a file).
 * Reads and validates a file: header size, JSON, dtypes, shapes and that every
 * tensor's bytes lie inside the file without overlap. */
tmm_status tmm_safetensors_read(const char *path, tmm_safetensors **out);
void tmm_safetensors_free(tmm_safetensors *st);
uint32_t tmm_safetensors_count(const tmm_safetensors *st);
const tmm_st_tensor *tmm_safetensors_at(const tmm_safetensors *st, uint32_t i);
/* The tensor of that name, or NULL. */
const tmm_st_tensor *tmm_safetensors_find(const tmm_safetensors *st, const char *name);
/* Metadata value, or NULL. */
const char *tmm_safetensors_meta(const tmm_safetensors *st, const char *key);
/* Every metadata pair, in the file's order. */
uint32_t tmm_safetensors_meta_count(const tmm_safetensors *st);
const tmm_st_meta *tmm_safetensors_meta_at(const tmm_safetensors *st, uint32_t i);
/* The data section: every byte after the header (what tmm_safetensors_write
 * lays out as the tensors' bytes back to back, in the order given), e.g. to
 * checksum it. */
const void *tmm_safetensors_data(const tmm_safetensors *st, size_t *size);
/* The same hash over the table of a file read (its offsets as the header gives them). */
tmm_status tmm_safetensors_table_hash(const tmm_safetensors *st, uint64_t h, uint64_t *out);

#endif
