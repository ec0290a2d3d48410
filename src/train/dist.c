/* The communication layer's generic part (dist.h): the single process, and
 * what is built on an implementation's three collectives. */
#include "train/dist.h"

#include <stdio.h>

static bool many(const tmm_dist *d) { return d && d->ops && d->size > 1; }

int tmm_dist_rank(const tmm_dist *d) { return many(d) ? d->rank : 0; }

int tmm_dist_size(const tmm_dist *d) { return many(d) ? d->size : 1; }

tmm_status tmm_dist_sum_f32(tmm_dist *d, float *x, size_t n, size_t bucket, const char *what)
{
    if (!many(d) || n == 0)
        return TMM_OK;
    return d->ops->sum_f32(d, x, n, bucket ? bucket : n, what);
}

tmm_status tmm_dist_sum_f64(tmm_dist *d, double *x, size_t n, const char *what)
{
    return many(d) && n ? d->ops->sum_f64(d, x, n, what) : TMM_OK;
}

tmm_status tmm_dist_max_u64(tmm_dist *d, uint64_t *x, size_t n, const char *what)
{
    return many(d) && n ? d->ops->max_u64(d, x, n, what) : TMM_OK;
}

tmm_status tmm_dist_agree(tmm_dist *d, tmm_status mine, const char *what)
{
    if (!many(d))
        return mine;
    char saved[512];
    snprintf(saved, sizeof saved, "%s", tmm_last_error()); /* the collective may overwrite it */
    /* the lowest rank that failed wins the maximum */
    uint64_t failed = mine != TMM_OK ? UINT64_MAX - (uint64_t)d->rank : 0;
    tmm_status s = tmm_dist_max_u64(d, &failed, 1, what);
    if (mine != TMM_OK)
        return tmm_fail(mine, "%s", saved);
    if (s != TMM_OK)
        return s;
    if (failed)
        return tmm_fail(TMM_ERR_IO, "rank %llu could not %s (its message is on its error output)",
                        (unsigned long long)(UINT64_MAX - failed), what);
    return TMM_OK;
}

tmm_status tmm_dist_same_u64(tmm_dist *d, uint64_t value, bool *same)
{
    uint64_t x[2] = { value, ~value }; /* max of the value and of its complement: max and min */
    TMM_TRY(tmm_dist_max_u64(d, x, 2, "the weights' checksum"));
    *same = x[0] == ~x[1];
    return TMM_OK;
}

void tmm_dist_abort(tmm_dist *d, int code)
{
    if (many(d) && d->ops->abort)
        d->ops->abort(d, code);
}

uint64_t tmm_dist_checksum(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
