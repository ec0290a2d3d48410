/* Independent work items on a few threads (tmm index, tmm distill). */
#ifndef TMM_ANALYSIS_PARALLEL_H
#define TMM_ANALYSIS_PARALLEL_H

#include <stdint.h>

#include "status.h"

/* Calls fn(ctx, i) once for every i < count, on `jobs` threads (0: one per
 * online CPU; never more than count), the calling thread among them; items
 * are handed out in order from a shared counter, so results that fn stores
 * per item do not depend on the thread count. After the first failure no
 * new item starts; that failure is returned with its message. */
tmm_status tmm_parallel_for(uint32_t count, uint32_t jobs, tmm_status (*fn)(void *ctx, uint32_t i), void *ctx);

#endif
