/* The CLI's communication layer (train/dist.h) over MPI, when tmm is built
 * with it (CMake option TMM_MPI; TMM_HAVE_MPI here). Only this file includes
 * mpi.h: libtmm never links MPI.
 *
 * A process joins MPI only when a launcher started it (mpirun, mpiexec,
 * srun: their environment names a rank count); a plain `tmm train` stays a
 * single process and never initializes MPI.
 *
 * Collectives are non-blocking (MPI_Iallreduce) and waited for with
 * MPI_Testall and short sleeps, growing from 10 us to 1 ms (a rank that
 * spins would take the CPU from the device work of the others on a shared
 * machine), up to the timeout: a rank that died or hangs cannot make the
 * others wait forever. MPI errors are returned (MPI_ERRORS_RETURN), not fatal. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_dist.h"

/* The rank count the launcher's environment gives, or 0 when none started us. */
static long launcher_size(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                                        "SLURM_NTASKS" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        /* SLURM_NTASKS is set for every step of an allocation: only with a rank of srun's own */
        if (v && *v && (strcmp(vars[i], "SLURM_NTASKS") != 0 || getenv("SLURM_PROCID")))
            return strtol(v, NULL, 10);
    }
    if (getenv("PMIX_RANK") || getenv("PMI_RANK"))
        return 1;
    return 0;
}

/* Several ranks without --device or TMM_DEVICE: the local rank's device among
 * those of the preferred device's type (so a machine's GPUs are shared out
 * and a CPU device is not picked beside them). */
int cli_dist_device(const tmm_dist *d, int device)
{
    int env = -1;
    if (device >= 0 || tmm_dist_size(d) == 1 || tmm_env_device_index(&env) != TMM_OK || env >= 0)
        return device;
    tmm_device_info *infos = NULL;
    uint32_t count = 0, preferred = 0, same = 0;
    if (tmm_device_list(&infos, &count, &preferred) != TMM_OK || count == 0) {
        free(infos);
        return device; /* opening the device says what is wrong */
    }
    for (uint32_t i = 0; i < count; i++)
        same += infos[i].type == infos[preferred].type;
    uint32_t want = (uint32_t)d->local_rank % same, k = 0;
    for (uint32_t i = 0; i < count; i++)
        if (infos[i].type == infos[preferred].type && k++ == want)
            device = (int)i;
    free(infos);
    return device;
}

#ifdef TMM_HAVE_MPI
#include <mpi.h>

typedef struct mpi_impl {
    MPI_Comm comm;
} mpi_impl;

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static tmm_status mpi_fail(tmm_dist *d, int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return tmm_fail(TMM_ERR_IO, "rank %d: exchanging %s with the other ranks failed: %s (a rank died?)", d->rank,
                    what, text);
}

/* Waits for n requests until d->timeout_s. */
static tmm_status wait_all(tmm_dist *d, int n, MPI_Request *req, const char *what)
{
    const double t0 = wall_s();
    long nap_ns = 10000;
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(d, rc, what);
        if (done)
            return TMM_OK;
        if (wall_s() - t0 > d->timeout_s)
            return tmm_fail(TMM_ERR_IO, "rank %d of %d: the other ranks did not answer within %g s while exchanging "
                            "%s: a rank died or hangs (the limit is train.dist_timeout, --dist-timeout); stopping "
                            "every rank", d->rank, d->size, d->timeout_s, what);
        struct timespec nap = { 0, nap_ns };
        nanosleep(&nap, NULL);
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

static tmm_status reduce(tmm_dist *d, void *x, size_t n, size_t bucket, MPI_Datatype type, size_t elem, MPI_Op op,
                         const char *what)
{
    mpi_impl *m = d->impl;
    if (bucket > (size_t)1 << 30)
        bucket = (size_t)1 << 30; /* an MPI count is an int */
    const size_t count = (n + bucket - 1) / bucket;
    MPI_Request *req = malloc(count * sizeof *req);
    if (!req)
        return tmm_fail(TMM_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    int rc = MPI_SUCCESS;
    size_t posted = 0;
    for (; posted < count && rc == MPI_SUCCESS; posted++) {
        size_t off = posted * bucket, len = n - off < bucket ? n - off : bucket;
        rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)x + off * elem, (int)len, type, op, m->comm, &req[posted]);
    }
    tmm_status s = rc == MPI_SUCCESS ? wait_all(d, (int)posted, req, what) : mpi_fail(d, rc, what);
    free(req);
    return s;
}

static tmm_status mpi_sum_f32(tmm_dist *d, float *x, size_t n, size_t bucket, const char *what)
{
    const double t0 = wall_s();
    tmm_status s = reduce(d, x, n, bucket, MPI_FLOAT, sizeof *x, MPI_SUM, what);
    d->comm_s += wall_s() - t0;
    return s;
}

static tmm_status mpi_sum_f64(tmm_dist *d, double *x, size_t n, const char *what)
{
    return reduce(d, x, n, n, MPI_DOUBLE, sizeof *x, MPI_SUM, what);
}

static tmm_status mpi_max_u64(tmm_dist *d, uint64_t *x, size_t n, const char *what)
{
    return reduce(d, x, n, n, MPI_UINT64_T, sizeof *x, MPI_MAX, what);
}

static void mpi_abort(tmm_dist *d, int code)
{
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(((mpi_impl *)d->impl)->comm, code);
}

static const tmm_dist_ops mpi_ops = { mpi_sum_f32, mpi_sum_f64, mpi_max_u64, mpi_abort };

int cli_dist_open(tmm_dist **out)
{
    *out = NULL;
    if (launcher_size() == 0)
        return 0;
    int provided, initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        cli_fail("MPI_Init failed\n");
        return 1;
    }
    tmm_dist *d = calloc(1, sizeof *d);
    mpi_impl *m = calloc(1, sizeof *m);
    MPI_Comm local = MPI_COMM_NULL;
    int ok = d && m && MPI_Comm_dup(MPI_COMM_WORLD, &m->comm) == MPI_SUCCESS;
    if (ok) {
        MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
        MPI_Comm_rank(m->comm, &d->rank);
        MPI_Comm_size(m->comm, &d->size);
        ok = MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &local) == MPI_SUCCESS;
    }
    if (ok) {
        MPI_Comm_rank(local, &d->local_rank);
        MPI_Comm_size(local, &d->local_size);
        MPI_Comm_free(&local);
        d->ops = &mpi_ops;
        d->impl = m;
        d->timeout_s = 300;
        *out = d;
        return 0;
    }
    free(d), free(m);
    cli_fail("cannot set up MPI's communicator\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

void cli_dist_close(tmm_dist *d)
{
    if (!d)
        return;
    mpi_impl *m = d->impl;
    MPI_Comm_free(&m->comm);
    free(m);
    free(d);
    MPI_Finalize();
}

bool cli_dist_built(void) { return true; }

#else

int cli_dist_open(tmm_dist **out)
{
    *out = NULL;
    long n = launcher_size();
    if (n > 1) {
        cli_fail("this tmm was built without MPI (CMake found none, or -DTMM_MPI=OFF), so it cannot be one of %ld "
                 "ranks: install MPI (tools/setup.sh) and build again\n", n);
        return 2;
    }
    return 0;
}

void cli_dist_close(tmm_dist *d) { (void)d; }

bool cli_dist_built(void) { return false; }

#endif
