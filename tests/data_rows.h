/* Batches of a tmm_data for the data tests (test_data.c, test_mqar.c):
 * tokens and targets of `batch` rows, fetched, compared and freed. */
#ifndef TMM_TESTS_DATA_ROWS_H
#define TMM_TESTS_DATA_ROWS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "train/data.h"

typedef struct rows {
    uint32_t *tok;
    int32_t *tgt;
} rows;

static rows get(const tmm_data *d, tmm_data_split split, uint64_t index, uint32_t batch, uint32_t n)
{
    rows r = { calloc((size_t)batch * n, sizeof(uint32_t)), calloc((size_t)batch * n, sizeof(int32_t)) };
    cr_assert(r.tok && r.tgt);
    H_OK(tmm_data_batch(d, split, index, batch, n, r.tok, r.tgt));
    return r;
}

static void drop(rows r)
{
    free(r.tok);
    free(r.tgt);
}

static bool same_rows(rows a, rows b, size_t count)
{
    return !memcmp(a.tok, b.tok, count * sizeof(uint32_t)) && !memcmp(a.tgt, b.tgt, count * sizeof(int32_t));
}

#endif
