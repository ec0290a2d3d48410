/* Host-side helpers shared by the nn ops (nn_*.c): binding whole rows of
 * row-major tensors in chunks that respect maxStorageBufferRange, and the
 * finishing of deterministic column sums. */
#ifndef TMM_NN_UTIL_H
#define TMM_NN_UTIL_H

#include "nn_ops.h"
#include "op_util.h"

#define NN_ALIGN_FLOATS 64u /* scratch regions start at multiples of 256 bytes */
#define NN_WG_LOOP 64u      /* workgroup size of kernels that loop */
/* Norms of at most this many rows (a decode step's) run in one dispatch, one
 * invocation per row (layernorm_row, rmsnorm_row), where the row is short
 * enough; more rows are faster in the phases, which spread a row's elements. */
#define NN_ROW_NORM_ROWS 64u

/* Records norm_stats_sg (kind 0 LayerNorm: mean and rstd; 1 RMSNorm: rstd)
 * over rows of d columns; false (nothing recorded) when a row is too long
 * for one workgroup's loops. */
tmm_status nn_norm_stats_sg(tmm_recorder *r, const char *op, uint32_t kind, tmm_view x, uint32_t rows, uint32_t d,
                            float eps, tmm_view mean, tmm_view rstd, bool *done);

static inline uint64_t nn_aligned(uint64_t n) { return (n + NN_ALIGN_FLOATS - 1) / NN_ALIGN_FLOATS * NN_ALIGN_FLOATS; }

/* A binding and the element offset (in its own units) of the first wanted
 * element inside it. */
typedef struct nn_bind {
    tmm_view view;
    uint32_t base;
} nn_bind;

/* Rows [r0, r0 + n) of a tensor whose rows are len 4-byte elements, bound
 * from the largest aligned offset at or before row r0. */
nn_bind nn_rows(const tmm_device *d, tmm_view v, uint64_t r0, uint64_t n, uint64_t len);

/* Lowers *rows_per_bind so that nn_rows of that many rows of length len fits
 * one binding wherever it starts. TMM_ERR_UNSUPPORTED when one row does not. */
tmm_status nn_fit_rows(const tmm_device *d, const char *op, const char *name, uint64_t len, uint64_t *rows_per_bind);


/* Deterministic column sums of partial results: n_planes planes of [nseg, d]
 * partial sums laid out in a scratch region (plane p at nn_colsum_plane),
 * then summed over segments in order into outs[p] (written, or added with
 * accumulate). nn_colsum_scratch gives the region's size in floats. */
uint64_t nn_colsum_scratch(uint64_t nseg, uint32_t d, uint32_t n_planes);
tmm_view nn_colsum_plane(tmm_view region, uint32_t p, uint64_t nseg, uint32_t d);
tmm_status nn_colsum_finish(tmm_recorder *r, tmm_view region, uint32_t n_planes, uint32_t nseg, uint32_t d,
                            bool accumulate, const tmm_view *outs);

/* Segments of TMM_NN_COL_SEG rows for column sums over rows split in binding
 * chunks of `chunk` rows (a multiple of TMM_NN_COL_SEG or all rows). */
uint64_t nn_col_segments(uint64_t rows, uint64_t chunk);

/* Rounds a binding chunk of rows down to a multiple of TMM_NN_COL_SEG when it
 * is at least that, so column segments are the same however rows are bound. */
static inline uint64_t nn_round_chunk(uint64_t chunk)
{
    return chunk >= TMM_NN_COL_SEG ? chunk / TMM_NN_COL_SEG * TMM_NN_COL_SEG : chunk;
}

#endif
