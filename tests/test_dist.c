/* The communication layer (train/dist.h): the single process that every
 * build has, and what is built on an implementation's collectives (agree,
 * same value), checked against a fake second rank. The MPI implementation
 * itself runs in tests/mpi_test.sh. */
#include <string.h>

#include "harness.h"
#include "train/dist.h"

Test(dist, single_process_changes_nothing)
{
    tmm_dist lone = { .ops = NULL, .rank = 3, .size = 4 }; /* no implementation: one process */
    tmm_dist *groups[] = { NULL, &lone };
    for (int g = 0; g < 2; g++) {
        tmm_dist *d = groups[g];
        cr_assert_eq(tmm_dist_rank(d), 0);
        cr_assert_eq(tmm_dist_size(d), 1);
        cr_assert(tmm_dist_leader(d));
        float f[3] = { 1.5f, -2, 3 };
        double x[2] = { 0.25, 7 };
        uint64_t u[2] = { 5, 9 };
        cr_assert_eq(tmm_dist_sum_f32(d, f, 3, 2, "f"), TMM_OK);
        cr_assert_eq(tmm_dist_sum_f64(d, x, 2, "x"), TMM_OK);
        cr_assert_eq(tmm_dist_max_u64(d, u, 2, "u"), TMM_OK);
        cr_assert(f[0] == 1.5f && f[1] == -2 && f[2] == 3 && x[0] == 0.25 && x[1] == 7 && u[0] == 5 && u[1] == 9);
        bool same = false;
        cr_assert_eq(tmm_dist_same_u64(d, 42, &same), TMM_OK);
        cr_assert(same);
        cr_assert_eq(tmm_dist_agree(d, TMM_OK, "work"), TMM_OK);
        tmm_fail(TMM_ERR_IO, "disk full");
        cr_assert_eq(tmm_dist_agree(d, TMM_ERR_IO, "work"), TMM_ERR_IO);
        cr_assert_str_eq(tmm_last_error(), "disk full");
        tmm_dist_abort(d, 1); /* one process: returns */
    }
}

/* A fake group of 2: this is rank 0, the peer's values are below. */
typedef struct peer {
    float f[8];
    double x[4];
    uint64_t u[4];
    size_t bucket;      /* the last bucket size asked for */
    bool dead;          /* the peer does not answer */
} peer;

static tmm_status fake_sum_f32(tmm_dist *d, float *x, size_t n, size_t bucket, const char *what)
{
    peer *p = d->impl;
    if (p->dead)
        return tmm_fail(TMM_ERR_IO, "no answer while exchanging %s", what);
    p->bucket = bucket;
    for (size_t i = 0; i < n; i++)
        x[i] += p->f[i];
    return TMM_OK;
}

static tmm_status fake_sum_f64(tmm_dist *d, double *x, size_t n, const char *what)
{
    peer *p = d->impl;
    if (p->dead)
        return tmm_fail(TMM_ERR_IO, "no answer while exchanging %s", what);
    for (size_t i = 0; i < n; i++)
        x[i] += p->x[i];
    return TMM_OK;
}

static tmm_status fake_max_u64(tmm_dist *d, uint64_t *x, size_t n, const char *what)
{
    peer *p = d->impl;
    if (p->dead)
        return tmm_fail(TMM_ERR_IO, "no answer while exchanging %s", what);
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] > p->u[i] ? x[i] : p->u[i];
    return TMM_OK;
}

static const tmm_dist_ops fake_ops = { fake_sum_f32, fake_sum_f64, fake_max_u64, NULL };

Test(dist, collectives_of_two_ranks)
{
    peer p = { .f = { 1, 2, 3 }, .x = { 0.5 } };
    tmm_dist d = { .ops = &fake_ops, .rank = 0, .size = 2, .impl = &p };
    cr_assert_eq(tmm_dist_size(&d), 2);
    float f[3] = { 10, 20, 30 };
    cr_assert_eq(tmm_dist_sum_f32(&d, f, 3, 0, "grads"), TMM_OK);
    cr_assert(f[0] == 11 && f[1] == 22 && f[2] == 33);
    cr_assert_eq(p.bucket, 3, "bucket 0 is the whole buffer");
    cr_assert_eq(tmm_dist_sum_f32(&d, f, 3, 2, "grads"), TMM_OK);
    cr_assert_eq(p.bucket, 2);
    double x = 1;
    cr_assert_eq(tmm_dist_sum_f64(&d, &x, 1, "loss"), TMM_OK);
    cr_assert_eq(x, 1.5);

    /* same value: the peer's checksum is given as value and complement */
    bool same = false;
    p.u[0] = 77, p.u[1] = ~(uint64_t)77;
    cr_assert_eq(tmm_dist_same_u64(&d, 77, &same), TMM_OK);
    cr_assert(same);
    cr_assert_eq(tmm_dist_same_u64(&d, 78, &same), TMM_OK);
    cr_assert(!same);
    cr_assert_eq(tmm_dist_same_u64(&d, 76, &same), TMM_OK);
    cr_assert(!same);

    /* agree: both fine; the peer (rank 1) failed; this rank failed; no answer */
    p.u[0] = 0;
    cr_assert_eq(tmm_dist_agree(&d, TMM_OK, "write the checkpoint"), TMM_OK);
    p.u[0] = UINT64_MAX - 1;
    cr_assert_eq(tmm_dist_agree(&d, TMM_OK, "write the checkpoint"), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "rank 1 could not write the checkpoint"), "%s", tmm_last_error());
    tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    cr_assert_eq(tmm_dist_agree(&d, TMM_ERR_OUT_OF_HOST_MEMORY, "set up"), TMM_ERR_OUT_OF_HOST_MEMORY);
    cr_assert_str_eq(tmm_last_error(), "out of host memory", "a rank's own failure keeps its message");
    p.dead = true;
    cr_assert_eq(tmm_dist_agree(&d, TMM_OK, "set up"), TMM_ERR_IO);
    cr_assert(strstr(tmm_last_error(), "no answer"), "%s", tmm_last_error());
    cr_assert_eq(tmm_dist_sum_f32(&d, f, 3, 0, "the gradients"), TMM_ERR_IO);
}

Test(dist, checksum_is_fnv1a_64)
{
    cr_assert_eq(tmm_dist_checksum("", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(tmm_dist_checksum("a", 1), 0xaf63dc4c8601ec8cull);
    float w[2] = { 1, 2 }, v[2] = { 1, 2.0000002f };
    cr_assert_neq(tmm_dist_checksum(w, sizeof w), tmm_dist_checksum(v, sizeof v));
}
