/* zbpp — a rank's worker group: N threads (the calling thread plus N-1 helpers), each pinned to
 * its own core, that share the work of one kernel call through a parallel-for over chunks.
 *
 * The group a thread uses is "current" for that thread (thread-local), so the kernels of nn.h and
 * optim.h find it without a parameter: a rank thread calls zb_workers_enter(group) once when it
 * starts and every kernel it calls afterwards splits its work over the group. Helper threads have
 * no current group, so a parallel-for reached from inside a chunk simply runs inline.
 *
 * Determinism: zb_parallel_for runs chunks 0..n-1 once each, on whichever thread; the kernels cut
 * their work into chunks that depend only on the problem's shape and never let two chunks write
 * the same output element, so the bits do not depend on the number of threads (docs/threads.md).
 *
 * Idle helpers spin for a few microseconds, then sleep on a futex: an idle group uses no CPU. The
 * hot path (zb_parallel_for) never allocates. */
#ifndef ZBPP_WORKERS_H
#define ZBPP_WORKERS_H

#include <stdbool.h>
#include <stddef.h>

#include "zbpp/error.h"

typedef struct zb_workers zb_workers_t;

/* Most threads of one group. */
#define ZB_WORKERS_MAX 256

/* One chunk of work: `chunk` in [0, n_chunks), `worker` in [0, zb_workers_count) says which
 * thread runs it (0 = the caller), for per-thread scratch (zb_workers_scratch). */
typedef void (*zb_chunk_fn)(void *ctx, size_t chunk, int worker);

/* Start a group of n threads (1 <= n <= ZB_WORKERS_MAX): n-1 helpers are created now. cores[i]
 * (i < n) is the CPU thread i is pinned to, cores[0] being the CPU of whoever enters the group;
 * cores == NULL pins nothing. ZB_EINVAL for a bad n or CPU number, ZB_ENOMEM when threads
 * cannot start (e.g. a CPU outside the process's affinity mask). */
zb_status_t zb_workers_new(int n, const int *cores, zb_workers_t **out, zb_err_t *err);
/* Stop the helpers and free the group (NULL is fine). No thread may have it current any more. */
void zb_workers_free(zb_workers_t *w);
/* Threads in the group (1 for NULL). */
int zb_workers_count(const zb_workers_t *w);

/* The default thread count for one of `ranks` ranks sharing this process: the cores its affinity
 * mask allows (under mpirun, the cores its binding gives it) divided evenly, at least 1. */
int zb_workers_default_threads(int ranks);
/* `requested` when > 0, else zb_workers_default_threads(ranks): the one rule for --threads. */
int zb_workers_resolve(int requested, int ranks);
/* A group of n threads for the rank_index-th of the ranks of this process, pinned (when pin and the
 * affinity mask holds at least (rank_index+1)·n cores) to the mask's cores rank_index·n ..
 * rank_index·n + n-1, so ranks and their groups get disjoint cores. */
zb_status_t zb_workers_new_for_rank(int rank_index, int n, bool pin, zb_workers_t **out,
                                    zb_err_t *err);

/* Make w the calling thread's current group (NULL: none) and pin the thread to the group's
 * cores[0] when it was given cores; entering NULL or an unpinned group gives the thread back the
 * affinity it had before the first pinned one. Returns the group that was current before. */
zb_workers_t *zb_workers_enter(zb_workers_t *w);
/* The calling thread's current group, or NULL. */
zb_workers_t *zb_workers_current(void);
/* Threads of the current group (1 when there is none). */
int zb_workers_current_count(void);

/* Run fn(ctx, c, worker) for every c in [0, n_chunks) over the calling thread's current group and
 * return when all are done. Inline (worker 0) when there is no current group, when n_chunks is 1,
 * or when called from inside a chunk. Chunks are claimed in order by whichever thread is free. */
void zb_parallel_for(size_t n_chunks, zb_chunk_fn fn, void *ctx);

/* Per-thread scratch for the helpers of the current group. zb_workers_reserve (from the caller,
 * outside a parallel-for) makes every helper's scratch at least `bytes` (64-byte aligned) and
 * returns false when there is no group or memory runs out (the kernel then runs on the caller
 * alone). zb_workers_scratch(w, worker) is helper `worker`'s buffer, valid until the next
 * reserve; NULL for worker 0 (the caller uses its own) or a NULL group. */
bool zb_workers_reserve(size_t bytes);
void *zb_workers_scratch(const zb_workers_t *w, int worker);

#endif
