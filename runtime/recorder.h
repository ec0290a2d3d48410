/* Command recording: dispatches with their push constants, copies and fills,
 * recorded once into a command buffer and submitted once or replayed.
 *
 * Barriers are automatic: each dispatch declares which views it reads and
 * writes; when one touches a range written (or reads a range that it then
 * writes) since the last barrier, the recorder inserts a memory barrier.
 * Regions can be wrapped in timestamp queries for per-op device time. */
#ifndef TMM_RT_RECORDER_H
#define TMM_RT_RECORDER_H

#include "buffer.h"
#include "pipeline.h"

typedef enum tmm_access {
    TMM_READ = 1,
    TMM_WRITE = 2,
    TMM_READ_WRITE = 3,
} tmm_access;

/* A view bound to a kernel, with how the kernel uses it. */
typedef struct tmm_arg {
    tmm_view view;
    tmm_access access;
} tmm_arg;

static inline tmm_arg tmm_in(tmm_view v) { tmm_arg a = { v, TMM_READ }; return a; }
static inline tmm_arg tmm_out(tmm_view v) { tmm_arg a = { v, TMM_WRITE }; return a; }
static inline tmm_arg tmm_inout(tmm_view v) { tmm_arg a = { v, TMM_READ_WRITE }; return a; }

typedef struct tmm_recorder tmm_recorder;

tmm_status tmm_recorder_create(tmm_device *device, tmm_recorder **out);
void tmm_recorder_destroy(tmm_recorder *recorder);
tmm_device *tmm_recorder_device(const tmm_recorder *recorder);

/* Starts a new recording (dropping the previous one; waits if it is running). */
tmm_status tmm_recorder_begin(tmm_recorder *recorder);
/* Binds args[i] at binding i, pushes push_size bytes (the kernel's) and
 * dispatches groups[0..2] workgroups, split to respect the device limits. */
tmm_status tmm_record_dispatch(tmm_recorder *recorder, tmm_pipeline *pipeline,
                               const tmm_arg *args, uint32_t n_args, const void *push,
                               uint32_t gx, uint32_t gy, uint32_t gz);
tmm_status tmm_record_copy(tmm_recorder *recorder, tmm_view src, tmm_view dst);
/* Fills a view with a repeated 32-bit pattern (size a multiple of 4). */
tmm_status tmm_record_fill_u32(tmm_recorder *recorder, tmm_view dst, uint32_t value);
/* An explicit full barrier (normally not needed: barriers are automatic). */
tmm_status tmm_record_barrier(tmm_recorder *recorder);
/* Direct access for code that records its own commands (VkFFT): the recorder
 * first orders them after all earlier work, and orders all later work after
 * them. */
tmm_status tmm_record_external(tmm_recorder *recorder, VkCommandBuffer *cmd);

/* Timestamp regions; label must outlive the recorder. Not nestable. */
tmm_status tmm_record_region_begin(tmm_recorder *recorder, const char *label);
tmm_status tmm_record_region_end(tmm_recorder *recorder);

tmm_status tmm_recorder_end(tmm_recorder *recorder);
/* Submits the recording; it may be submitted again after it finished. */
tmm_status tmm_recorder_submit(tmm_recorder *recorder);
tmm_status tmm_recorder_wait(tmm_recorder *recorder);
/* submit + wait */
tmm_status tmm_recorder_run(tmm_recorder *recorder);
/* Work run once: a fresh recorder, begun, filled by record(recorder, arg),
 * ended, run to completion and destroyed; the first failure is returned. */
tmm_status tmm_record_once(tmm_device *device, tmm_status (*record)(tmm_recorder *recorder, void *arg), void *arg);

uint32_t tmm_recorder_dispatches(const tmm_recorder *recorder);
/* Dispatches (each vkCmdDispatch of a split one), copies and fills recorded. */
uint32_t tmm_recorder_commands(const tmm_recorder *recorder);
uint32_t tmm_recorder_barriers(const tmm_recorder *recorder);
uint32_t tmm_recorder_regions(const tmm_recorder *recorder);
/* Device time of region i of the last finished run. TMM_ERR_UNSUPPORTED when
 * the queue has no timestamps. */
tmm_status tmm_recorder_region_time(const tmm_recorder *recorder, uint32_t i,
                                    const char **label, double *ms);

/* What region i recorded, for a roofline: its commands (each vkCmdDispatch of
 * a split dispatch, each copy and fill), the bytes of the views they bind
 * (a view read or written counts its size once, read and written twice; a
 * copy its size twice, a fill once): an upper bound of the memory traffic;
 * the FLOPs its ops declared (tmm_record_flops; 0 for ops that declare none,
 * the memory-bound ones); and its external recordings (VkFFT: their work is
 * not counted). */
typedef struct tmm_region_work {
    const char *label;
    uint32_t commands, externals;
    uint64_t bytes;
    double flops;
} tmm_region_work;
tmm_status tmm_recorder_region_work(const tmm_recorder *recorder, uint32_t i, tmm_region_work *out);
/* An op declares the arithmetic of what it just recorded (counted in the open region, if any). */
void tmm_record_flops(tmm_recorder *recorder, double flops);

static inline uint32_t tmm_div_up(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

#endif
