/* zbpp — the ranks this process runs (pipeline_local.c) */
#ifndef ZBPP_PL_LOCAL_H
#define ZBPP_PL_LOCAL_H

#include "pipeline/pipeline_types.h"

/* pipeline_local.c: the ranks this process runs — every rank of every replica as a thread
 * (a thread world of mailbox_capacity per rank), or with opts->transport the process's one rank.
 * pl_local_run runs fn on each of them with `in` (pl_rank_t.in) and returns the first failure.
 * pl_local_reporter: the rank whose figures this process reports (global rank 0 with threads). */
typedef struct {
    pl_t *pl;
    zb_transport_t *net;      /* MPI: the process's rank; NULL = threads */
    zb_thread_world_t *world; /* threads */
    int first, n;             /* global ranks first .. first + n - 1 run here */
    void **args;              /* [n] their pl_rank_t */
} pl_local_t;
zb_status_t pl_local_open(pl_local_t *L, pl_t *pl, int mailbox_capacity, zb_err_t *err);
void pl_local_close(pl_local_t *L);
zb_status_t pl_local_run(pl_local_t *L, zb_rank_fn fn, const pl_step_in_t *in, zb_err_t *err);
pl_rank_t *pl_local_rank(const pl_local_t *L, int i);
pl_rank_t *pl_local_reporter(const pl_local_t *L);

#endif
