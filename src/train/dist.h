/* Data-parallel communication: the few collectives the trainer needs, behind
 * tmm's own functions, so that the trainer holds no MPI and no #ifdef.
 *
 * A tmm_dist is a group of `size` processes (ranks) that each run the same
 * training loop on their own device. Its collectives are implemented by a
 * table of functions (tmm_dist_ops): the CLI's MPI implementation
 * (src/cli/dist_mpi.c, built with TMM_MPI) fills one in; NULL, or a tmm_dist
 * without ops, is the single process: rank 0 of 1, and every collective
 * leaves its data as it is. libtmm itself never links MPI.
 *
 * Every collective is called by every rank in the same order (a rank that
 * skips one makes the others wait). An implementation must not wait forever:
 * when the other ranks do not answer within `timeout_s` seconds (a rank died
 * or hangs) it fails with TMM_ERR_IO and a message that says so; the caller
 * then stops the whole group (tmm_dist_abort). A rank's failure that the
 * others must hear of goes through tmm_dist_agree.
 *
 * Sums of floats are done by the implementation in an order that is fixed for
 * a given rank count and buffer size and yields the same bits on every rank
 * (MPI's reductions do for + on floats); the trainer checks the weights'
 * checksum across ranks anyway (train.check_every). */
#ifndef TMM_TRAIN_DIST_H
#define TMM_TRAIN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct tmm_dist tmm_dist;

typedef struct tmm_dist_ops {
    /* x[i] = the sum over ranks of x[i], in place on every rank. The buffer
     * may be reduced in buckets of `bucket` floats that are in flight
     * together; `what` names the data in a timeout's message. */
    tmm_status (*sum_f32)(tmm_dist *d, float *x, size_t n, size_t bucket, const char *what);
    /* x[i] = the sum over ranks of x[i] (doubles), in place. */
    tmm_status (*sum_f64)(tmm_dist *d, double *x, size_t n, const char *what);
    /* x[i] = the maximum over ranks of x[i], in place. */
    tmm_status (*max_u64)(tmm_dist *d, uint64_t *x, size_t n, const char *what);
    /* Ends the whole group at once (every rank's process), exit status `code`. */
    void (*abort)(tmm_dist *d, int code);
} tmm_dist_ops;

struct tmm_dist {
    const tmm_dist_ops *ops;  /* NULL: one process */
    int rank, size;           /* this process's rank, of size (>= 1) */
    int local_rank, local_size; /* among the ranks on this machine (for the device choice) */
    double timeout_s;         /* how long a collective waits for the other ranks */
    double comm_s;            /* seconds spent in sum_f32 so far (the gradient allreduce share) */
    void *impl;               /* the implementation's state */
};

/* Rank and size; NULL is rank 0 of 1. */
int tmm_dist_rank(const tmm_dist *d);
int tmm_dist_size(const tmm_dist *d);
/* Whether this process is rank 0 (the one that writes files and prints). */
static inline bool tmm_dist_leader(const tmm_dist *d) { return tmm_dist_rank(d) == 0; }

/* The collectives above; with one process they return TMM_OK and change nothing. */
tmm_status tmm_dist_sum_f32(tmm_dist *d, float *x, size_t n, size_t bucket, const char *what);
tmm_status tmm_dist_sum_f64(tmm_dist *d, double *x, size_t n, const char *what);
tmm_status tmm_dist_max_u64(tmm_dist *d, uint64_t *x, size_t n, const char *what);

/* Every rank passes its own status of a step that may fail on some ranks
 * only (rank 0's checkpoint, a setup check): returns it when it failed here;
 * otherwise, when another rank failed, TMM_ERR_IO saying that rank `first`
 * (the lowest that failed) could not `what` (its own message is on its
 * error output). A collective, so every rank must call it. */
tmm_status tmm_dist_agree(tmm_dist *d, tmm_status mine, const char *what);

/* *same: whether every rank passed the same value (e.g. a checksum). */
tmm_status tmm_dist_same_u64(tmm_dist *d, uint64_t value, bool *same);

/* Stops every rank of the group with exit status code (MPI_Abort); with one
 * process, does nothing (the caller returns its error as usual). */
void tmm_dist_abort(tmm_dist *d, int code);

/* The 64-bit FNV-1a hash of n bytes: the weights' checksum. */
uint64_t tmm_dist_checksum(const void *data, size_t n);

#endif
