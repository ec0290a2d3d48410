/* The CLI's side of data-parallel training (dist_mpi.c): joining the MPI job
 * that launched this process, if any. */
#ifndef TMM_CLI_DIST_H
#define TMM_CLI_DIST_H

#include "train/dist.h"

/* Under an MPI launcher (mpirun -np N): initializes MPI and returns the group
 * (*out; rank, size, local rank). Otherwise *out = NULL: one process, MPI
 * untouched. Returns 0, or an exit status after a one-line error (e.g. a
 * build without MPI started by mpirun with several ranks). */
int cli_dist_open(tmm_dist **out);
/* Leaves MPI (collective: every rank calls it after its last collective). NULL is fine. */
void cli_dist_close(tmm_dist *d);
/* The device index a rank opens: `device` when given (>= 0), TMM_DEVICE when
 * set, or with several ranks the local rank's device among those of the
 * preferred device's type (modulo their count: a machine's GPUs are shared
 * out, and a CPU device is not picked beside them); -1: the default. */
int cli_dist_device(const tmm_dist *d, int device);
/* Whether this build has MPI. */
bool cli_dist_built(void);

#endif
