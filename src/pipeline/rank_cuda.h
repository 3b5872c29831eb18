/* zbpp — the run's GPUs (rank_cuda.c) */
#ifndef ZBPP_PL_RANK_CUDA_H
#define ZBPP_PL_RANK_CUDA_H

#include "pipeline/pipeline_types.h"

/* The run's GPUs (pl_rank_cuda's run_open / run_close): pl_cuda_open (before the ranks) checks
 * the device, places global rank g on GPU g mod N and, where ranks share a GPU, makes their SM
 * partitions (rep->device says what was made); pl_cuda_close frees them after the ranks. */
zb_status_t pl_cuda_open(pl_t *pl, zb_pipeline_report_t *rep, zb_err_t *err);
/* How many of the run's ranks this process places on GPU d of ndev (threads: global rank g on
 * GPU g mod ndev; MPI: the process's one rank): the split of its SMs. */
int pl_cuda_ranks_on(const pl_t *pl, int ndev, int d);
void pl_cuda_close(pl_t *pl);

#endif
