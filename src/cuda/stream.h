/* zbpp — the CUDA layer's streams, events and page-locked host memory, for the pipeline's GPU
 * ranks (src/pipeline/rank_cuda.c) and the GPU profiler: a stage's streams and device messages,
 * messages staged through pinned host buffers, SM partitions (green contexts, each with a
 * stream) and action timing with events. Internal: the public API (zbpp/cuda.h) has devices,
 * stages and their F/B/W. Every function returns ZB_OK or fills err, as in zbpp/cuda.h; in a
 * build without CUDA they report ZB_EUNSUPPORTED (src/cuda/none.c, none_green.c). */
#ifndef ZBPP_CUDA_STREAM_H
#define ZBPP_CUDA_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "zbpp/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; /* a cudaStream_t / CUstream is a struct CUstream_st * */

/* ---- a stage's streams and device messages (stage_transfer.c) ---- */

/* Run the stage's work on `stream` from now on (e.g. an SM partition's,
 * zb_cuda_partition_stream) instead of its own, which is destroyed; the stage does not destroy
 * a stream given here (free the stage before its owner). `sms`: the SMs that stream runs on
 * (zb_cuda_partition_sms), which cuBLASLt's algorithm choice then targets; 0 = the device's.
 * With sms > 0 the stage keeps its own stream instead, for zb_cuda_stage_widen. */
zb_status_t zb_cuda_stage_use_stream(zb_cuda_stage_t *s, struct CUstream_st *stream, int sms,
                                     zb_err_t *err);
/* wide: queue the stage's next work on the whole GPU (its own stream) after what the
 * partition's stream holds; !wide: back to the partition's stream, after that work. For work
 * that no other rank's compute overlaps (the update after the step's norm barrier): on a
 * partition of 32 SMs the AdamW pass is bound by the partition's bandwidth. No-op for a stage
 * that runs on the whole GPU already; the results do not depend on it (elementwise kernels). */
zb_status_t zb_cuda_stage_widen(zb_cuda_stage_t *s, bool wide, zb_err_t *err);
/* Device messages between stages (thread ranks, no host round trip): an event (cudaEvent_t,
 * timing off) on the stage's device; record it on the stage's stream after the work that
 * produces a buffer; zb_cuda_copy_after queues on s's stream a wait for `after` (NULL: none)
 * and a copy of n floats from src_dev (on device src_device: a peer copy when it is not s's)
 * into dst_dev. zb_cuda_stage_device: the stage's device (-1 for NULL). */
struct CUevent_st; /* a cudaEvent_t / CUevent is a struct CUevent_st * */
zb_status_t zb_cuda_event_new(zb_cuda_stage_t *s, struct CUevent_st **out, zb_err_t *err);
void zb_cuda_event_free(struct CUevent_st *ev);
zb_status_t zb_cuda_event_record(zb_cuda_stage_t *s, struct CUevent_st *ev, zb_err_t *err);
zb_status_t zb_cuda_copy_after(zb_cuda_stage_t *s, float *dst_dev, const float *src_dev,
                               int src_device, size_t n, struct CUevent_st *after, zb_err_t *err);
int zb_cuda_stage_device(const zb_cuda_stage_t *s);
/* The tied WTE's gradient between two stages of one device, no host round trip: *grad = the
 * stage's WTE gradient (NULL when it holds no WTE), *acc = a head stage's accumulator of its
 * WTE gradient (NULL when none), *n = the WTE's floats; zb_cuda_grad_wte_add queues on s's
 * stream a wait for `after` (NULL: none) and its WTE gradient += acc_dev (n floats on s's
 * device: another stage's accumulator). */
void zb_cuda_stage_wte_grads(const zb_cuda_stage_t *s, float **grad, const float **acc,
                             size_t *n);
zb_status_t zb_cuda_grad_wte_add(zb_cuda_stage_t *s, const float *acc_dev,
                                 struct CUevent_st *after, zb_err_t *err);
/* Messages staged through the host (MPI ranks on GPUs). zb_cuda_host_alloc: a
 * page-locked host buffer of n floats (cudaHostAlloc), freed with zb_cuda_host_free (NULL is
 * fine). The stage's two COPY STREAMS (non-blocking, made on first use, freed with the stage;
 * one for downloads, one for uploads, so neither direction queues behind the other) move
 * message bytes beside the compute stream, ordered by events (timing off, zb_cuda_event_new):
 * zb_cuda_stage_download records `produced` on the compute stream (after the work queued so
 * far), makes the download stream wait for it, queues src_dev -> dst_host there and records
 * `done` after it; zb_cuda_stage_upload queues src_host -> dst_dev on the upload stream, after
 * the event `after` when not NULL (the slot's last reader), and records `done`; zb_cuda_stage_wait queues a wait for ev on the compute stream (no host wait);
 * zb_cuda_event_sync waits on the host until ev has happened; zb_cuda_event_query only asks
 * (*done = it has; never blocks). zb_cuda_sync waits for all three streams. */
zb_status_t zb_cuda_host_alloc(size_t n, float **out, zb_err_t *err);
void zb_cuda_host_free(float *host);
zb_status_t zb_cuda_stage_download(zb_cuda_stage_t *s, float *dst_host, const float *src_dev,
                                   size_t n, struct CUevent_st *produced, struct CUevent_st *done,
                                   zb_err_t *err);
zb_status_t zb_cuda_stage_upload(zb_cuda_stage_t *s, float *dst_dev, const float *src_host,
                                 size_t n, struct CUevent_st *after, struct CUevent_st *done,
                                 zb_err_t *err);
zb_status_t zb_cuda_stage_wait(zb_cuda_stage_t *s, struct CUevent_st *ev, zb_err_t *err);
/* Offload's copies (src/pipeline/rank_cuda_stash.c) on the stage's two STASH STREAMS (one per
 * direction, made on first use, freed with the stage, waited for by zb_cuda_sync), apart from
 * the message copy streams so that a long stash copy and a message never queue behind each
 * other: zb_cuda_stash_wait queues a wait for ev on the upload (host -> device) or download
 * stream; zb_cuda_stash_copy queues n floats src -> dst there and records done after them. */
zb_status_t zb_cuda_stash_wait(zb_cuda_stage_t *s, bool upload, struct CUevent_st *ev,
                               zb_err_t *err);
zb_status_t zb_cuda_stash_copy(zb_cuda_stage_t *s, bool upload, float *dst, const float *src,
                               size_t n, struct CUevent_st *done, zb_err_t *err);
zb_status_t zb_cuda_event_sync(struct CUevent_st *ev, zb_err_t *err);
zb_status_t zb_cuda_event_query(struct CUevent_st *ev, bool *done, zb_err_t *err);
/* Plan the stage's matrix products for `sms` SMs (0: the SMs of its stream, as set by
 * zb_cuda_stage_use_stream, or the device's) without changing where they run. */
zb_status_t zb_cuda_stage_plan_sms(zb_cuda_stage_t *s, int sms, zb_err_t *err);
/* The stream the stage's work is queued on (its own or one given by zb_cuda_stage_use_stream). */
struct CUstream_st *zb_cuda_stage_stream(const zb_cuda_stage_t *s);
/* Make the stage's device the calling thread's current one (each rank thread, before its
 * first call on the stage). */
zb_status_t zb_cuda_stage_bind(zb_cuda_stage_t *s, zb_err_t *err);

/* ---- SM partitions (green.c) ---- */

typedef struct zb_cuda_partitions zb_cuda_partitions_t;
struct CUstream_st; /* a cudaStream_t / CUstream is a struct CUstream_st * */

/* Split device `device` into `ranks` disjoint SM partitions (plan as zb_cuda_sm_plan with the
 * driver's granularity), each a green context with one non-blocking stream:
 * cuDeviceGetDevResource -> cuDevSmResourceSplitByCount -> cuDevResourceGenerateDesc ->
 * cuGreenCtxCreate -> cuGreenCtxStreamCreate. Work queued on a partition's stream through the
 * runtime API (kernels, copies, events) runs on that partition's SMs; device memory is shared
 * with the device's primary context. Fails (nothing left allocated) with ZB_EINVAL for a plan
 * that cannot be made (also when the driver offers fewer groups of that size than ranks),
 * ZB_EUNSUPPORTED as zb_cuda_sm_query, ZB_EIO for a driver failure. Free with
 * zb_cuda_partitions_free, after every stream's work is done. */
zb_status_t zb_cuda_partitions_new(int device, int ranks, int sm_per_rank,
                                   zb_cuda_partitions_t **out, zb_err_t *err);
void zb_cuda_partitions_free(zb_cuda_partitions_t *p);
/* The plan the partitions were made from. */
const zb_cuda_sm_plan_t *zb_cuda_partitions_plan(const zb_cuda_partitions_t *p);
/* Rank r's stream (0 <= r < ranks; NULL otherwise). */
struct CUstream_st *zb_cuda_partition_stream(const zb_cuda_partitions_t *p, int r);
/* SMs the driver reports for rank r's green context (cuGreenCtxGetDevResource); -1 for a bad r. */
int zb_cuda_partition_sms(const zb_cuda_partitions_t *p, int r);

/* ---- action timing with CUDA events, for --trace ----
 * One timer per rank: an event pair around every action of the rank's program on the rank's
 * stream, and a step-start event; after the step zb_cuda_timer_resolve turns them into start and
 * end seconds of every action, which the pipeline puts in its executor's timeline, so the GPU
 * trace has the CPU executor's shape. Recording only queues events (no host synchronisation on the
 * data path); resolve waits for the step's last event. One host thread drives a timer. */
typedef struct zb_cuda_timer zb_cuda_timer_t;

/* A timer for programs of n actions on `stream` (created on the current device; n >= 1).
 * ZB_EUNSUPPORTED without CUDA, ZB_EIO when events cannot be created. */
zb_status_t zb_cuda_timer_new(struct CUstream_st *stream, int n, zb_cuda_timer_t **out,
                              zb_err_t *err);
void zb_cuda_timer_free(zb_cuda_timer_t *t);
/* Start a step: records the step-start event and forgets the previous step's actions. */
zb_status_t zb_cuda_timer_step_begin(zb_cuda_timer_t *t, zb_err_t *err);
/* Record the event before / after action i. Within a step actions are timed in program order:
 * begin(i) needs step_begin, no open action and i above every action timed so far; end(i)
 * needs begin(i) open. ZB_EINVAL naming the action otherwise (nothing recorded). */
zb_status_t zb_cuda_timer_begin(zb_cuda_timer_t *t, int i, zb_err_t *err);
zb_status_t zb_cuda_timer_end(zb_cuda_timer_t *t, int i, zb_err_t *err);
/* After the step: wait for its events, then start[i] / end[i] = origin_s + seconds from the
 * step-start event of `origin` (NULL: t itself; another rank's timer on the same device puts
 * all ranks on one clock) to action i's events. Every action of the timer's program must have
 * been timed, n must be its length, and origin must have begun a step (ZB_EINVAL otherwise). */
zb_status_t zb_cuda_timer_resolve(zb_cuda_timer_t *t, const zb_cuda_timer_t *origin,
                                  double origin_s, double *start, double *end, int n,
                                  zb_err_t *err);

#ifdef __cplusplus
}
#endif

#endif
